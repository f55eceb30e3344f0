package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"

	"github.com/keyheat/keyheat/hotkeys"
)

// maxRecordBytes bounds a product record a PUT may write.
const maxRecordBytes = 64 << 10

// shop serves the HTTP API. Every access to a Redis key is reported
// under the key's own name, the name the registry then lists it by and
// the cache and splitter look it up by.
type shop struct {
	app      string
	rdb      redis.UniversalClient
	cache    *hotkeys.Cache // nil with --local-cache=false
	split    *hotkeys.Splitter
	rep      *hotkeys.Reporter // nil with --events-topic=""
	follower *hotkeys.Follower
	log      *slog.Logger
}

func productKey(id string) string { return "product:" + id }
func viewsKey(id string) string   { return "views:product:" + id }

func (s *shop) routes(reg *prometheus.Registry) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /products/{id}", s.getProduct)
	mux.HandleFunc("PUT /products/{id}", s.putProduct)
	mux.HandleFunc("POST /products/{id}/view", s.addView)
	mux.HandleFunc("GET /products/{id}/views", s.getViews)
	mux.HandleFunc("GET /debug/hotkeys", s.debug)
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	return instrument(mux, reg)
}

// record reports one access to keyheat: every request, served from the
// cache or not, since keyheat must see the demand for a key, not only
// what reached Redis (a key served locally would otherwise look cold).
func (s *shop) record(key, op string, n int) {
	if s.rep != nil {
		s.rep.Record(s.app, key, op, int64(n))
	}
}

func (s *shop) getProduct(w http.ResponseWriter, r *http.Request) {
	id, ok := productID(w, r)
	if !ok {
		return
	}
	key := productKey(id)
	load := hotkeys.RedisGet(s.rdb, key)
	var (
		val []byte
		err error
	)
	if s.cache != nil {
		// A hot key is served from the process; any other goes to load.
		val, err = s.cache.Get(r.Context(), s.app, key, load)
	} else {
		val, err = load(r.Context())
	}
	s.record(key, "GET", len(val))
	switch {
	case errors.Is(err, hotkeys.ErrNotFound):
		http.Error(w, "no such product", http.StatusNotFound)
	case err != nil:
		s.fail(w, r, "read product", err)
	default:
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(val)
	}
}

func (s *shop) putProduct(w http.ResponseWriter, r *http.Request) {
	id, ok := productID(w, r)
	if !ok {
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxRecordBytes))
	if err != nil || !json.Valid(body) {
		http.Error(w, fmt.Sprintf("want a JSON document of at most %d bytes", maxRecordBytes), http.StatusBadRequest)
		return
	}
	key := productKey(id)
	s.record(key, "SET", len(body))
	if err := s.rdb.Set(r.Context(), key, body, 0).Err(); err != nil {
		s.fail(w, r, "write product", err)
		return
	}
	// After the write, never before: see Cache.Invalidate.
	if s.cache != nil {
		if err := s.cache.Invalidate(r.Context(), s.app, key); err != nil {
			// This process serves the new record already; others may
			// serve the old one for up to --local-ttl.
			s.log.Warn("invalidation not broadcast", "key", key, "err", err)
		}
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *shop) addView(w http.ResponseWriter, r *http.Request) {
	id, ok := productID(w, r)
	if !ok {
		return
	}
	key := viewsKey(id)
	s.record(key, "INCR", 0)
	// A hot counter is spread over several Redis keys by the splitter.
	if err := s.split.Incr(r.Context(), s.app, key, 1); err != nil {
		s.fail(w, r, "count view", err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *shop) getViews(w http.ResponseWriter, r *http.Request) {
	id, ok := productID(w, r)
	if !ok {
		return
	}
	key := viewsKey(id)
	s.record(key, "GET", 0)
	n, err := s.split.Get(r.Context(), s.app, key)
	if err != nil {
		s.fail(w, r, "read views", err)
		return
	}
	writeJSON(w, map[string]any{"id": id, "views": n})
}

// debugEntry is a registry entry as /debug/hotkeys shows it.
type debugEntry struct {
	Key         string             `json:"key"`
	Mitigation  hotkeys.Mitigation `json:"mitigation"`
	SplitFactor int                `json:"split_factor,omitempty"`
	Rate        float64            `json:"rate"`
	Source      hotkeys.Source     `json:"source"`
	Onset       time.Time          `json:"onset"`
}

// debug shows the shop's view of its hot keys: the registry's entries for
// its app (the splitter spreads those whose mitigation is split), what
// the cache holds and its counters, the splitter's counters and the keys
// it spreads, and the reporter's counts.
func (s *shop) debug(w http.ResponseWriter, _ *http.Request) {
	out := struct {
		Registry hotkeys.FollowerStats  `json:"registry"`
		Hot      []debugEntry           `json:"hot"`
		Cache    *hotkeys.CacheStats    `json:"cache"`
		Split    hotkeys.SplitStats     `json:"split"`
		Reporter *hotkeys.ReporterStats `json:"reporter"`
	}{Registry: s.follower.Stats(), Hot: []debugEntry{}, Split: s.split.Stats()}
	for e := range s.follower.All() {
		if e.App == s.app {
			out.Hot = append(out.Hot, debugEntry{Key: e.Key, Mitigation: e.Mitigation, SplitFactor: e.SplitFactor,
				Rate: e.Rate, Source: e.Source, Onset: e.Onset})
		}
	}
	if s.cache != nil {
		st := s.cache.Stats()
		out.Cache = &st
	}
	if s.rep != nil {
		st := s.rep.Stats()
		out.Reporter = &st
	}
	writeJSON(w, out)
}

func (s *shop) fail(w http.ResponseWriter, r *http.Request, what string, err error) {
	if errors.Is(err, context.Canceled) && r.Context().Err() != nil {
		return // the client went away
	}
	s.log.Error(what, "path", r.URL.Path, "err", err)
	http.Error(w, what+" failed", http.StatusBadGateway)
}

// productID returns the request's product id, or answers 400.
func productID(w http.ResponseWriter, r *http.Request) (string, bool) {
	id := r.PathValue("id")
	ok := len(id) > 0 && len(id) <= 64
	for i := 0; ok && i < len(id); i++ {
		c := id[i]
		ok = c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '-' || c == '_'
	}
	if !ok {
		http.Error(w, "a product id is 1 to 64 letters, digits, - or _", http.StatusBadRequest)
	}
	return id, ok
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// instrument counts requests by route and status code.
func instrument(next http.Handler, reg prometheus.Registerer) http.Handler {
	requests := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "shop_http_requests_total",
		Help: "HTTP requests served, by route pattern and status code.",
	}, []string{"route", "code"})
	seconds := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "shop_http_request_duration_seconds",
		Help:    "Time to serve an HTTP request, by route pattern.",
		Buckets: prometheus.ExponentialBuckets(0.0001, 4, 9), // 100µs to 6.5s
	}, []string{"route"})
	reg.MustRegister(requests, seconds)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w, code: http.StatusOK}
		next.ServeHTTP(sw, r)
		route := r.Pattern // set by the mux; empty for a 404 of no route
		if route == "" {
			route = "none"
		}
		requests.WithLabelValues(route, strconv.Itoa(sw.code)).Inc()
		seconds.WithLabelValues(route).Observe(time.Since(start).Seconds())
	})
}

type statusWriter struct {
	http.ResponseWriter
	code int
}

func (w *statusWriter) WriteHeader(code int) {
	w.code = code
	w.ResponseWriter.WriteHeader(code)
}
