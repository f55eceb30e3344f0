package controlplane

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/zeebo/xxh3"

	"github.com/keyheat/keyheat/schemas"
)

// DefaultKeyWindows is how many windows the key stats return when the
// request gives no limit.
const DefaultKeyWindows = 60

// DefaultKeyStatsSpan is the span of time the key stats cover when the
// request gives no from: the span before to, or else before the newest
// window memory holds of the app (of any app when none is named), or
// else before now. It bounds what ClickHouse scans for a key.
const DefaultKeyStatsSpan = 24 * time.Hour

// keyAlertsLimit bounds the events the key stats return.
const keyAlertsLimit = 100

// KeyWindow is one key in one window of its app's report: its figures as
// the report's top lists give them.
type KeyWindow struct {
	// StartMs and EndMs bound the window [StartMs, EndMs).
	StartMs int64 `json:"start_ms"`
	EndMs   int64 `json:"end_ms"`
	// App is the key's app.
	App string `json:"app"`
	// Count is the key's events in the window, an upper bound: the true
	// count is at least Count − Error. Rate is Count per second of the
	// window, Share Count over the app's events.
	Count uint64  `json:"count"`
	Error uint64  `json:"error,omitempty"`
	Rate  float64 `json:"rate"`
	Share float64 `json:"share,omitempty"`
	// Bytes, Reads, Writes and LatencyUs (summed latency) are exact when
	// Error is 0 and lower bounds otherwise; 0 when the log does not
	// carry them.
	Bytes     uint64 `json:"bytes"`
	Reads     uint64 `json:"reads"`
	Writes    uint64 `json:"writes"`
	LatencyUs uint64 `json:"latency_us"`
	// Partition is the events partition that saw all the key's events,
	// or -1 when several did (a topic not keyed by access key).
	Partition int32 `json:"partition"`
	// Ranks are the key's 1-based places in the report's lists, absent
	// where it is not listed.
	Ranks KeyRanks `json:"ranks"`
	// Shortened reports that the key is the shortened form of a longer
	// one (see schemas.KeyCount).
	Shortened bool `json:"shortened,omitempty"`
	// Source is "memory" (the server's History) or "clickhouse".
	Source string `json:"source"`
}

// KeyRanks are a key's places in a report's lists, 1 for the first; 0
// (absent in JSON) where the list does not hold it.
type KeyRanks struct {
	Top        int `json:"top,omitempty"`
	TopBytes   int `json:"top_bytes,omitempty"`
	TopReads   int `json:"top_reads,omitempty"`
	TopWrites  int `json:"top_writes,omitempty"`
	TopLatency int `json:"top_latency,omitempty"`
}

// Sources of a KeyWindow.
const (
	SourceMemory     = "memory"
	SourceClickHouse = "clickhouse"
)

// KeyStats is the answer of GET /api/hotkeys/{key}/stats.
type KeyStats struct {
	// App is the app asked for; absent when the request named none and
	// the key is looked up in every app.
	App string `json:"app,omitempty"`
	// Key is the key, with KeyB64 its exact bytes when it is not UTF-8,
	// and KeyHash its xxh3 hash as the registry's key_hash.
	Key     string `json:"key"`
	KeyB64  []byte `json:"key_b64,omitempty"`
	KeyHash string `json:"key_hash"`
	// Partition is the events partition that saw the key's events, from
	// the newest window or alert that names one; absent (null) when none
	// does.
	Partition *int32 `json:"partition"`
	// Windows are the windows whose app report lists the key, newest
	// first (and by app within a window), at most the request's limit.
	// A window where the key made none of its app's lists has no entry:
	// its events there were at most the lists' last ones.
	Windows []KeyWindow `json:"windows"`
	// More reports that older windows of the range list the key too: ask
	// again with to set to the last window's start_ms. Without from, the
	// range starts DefaultKeyStatsSpan before to (see there).
	More bool `json:"more,omitempty"`
	// HistoryFromMs is the start from which the server's memory holds
	// every window of the app (the newest of those starts over every app
	// when none is named), as ReportPage.HistoryFromMs; earlier windows
	// came from ClickHouse unless memory held them too (Source says).
	// Absent when memory holds none or the Feed has not read its backlog
	// yet.
	HistoryFromMs int64 `json:"history_from_ms,omitempty"`
	// Alerted reports whether any hot-key event of the key is known;
	// Episodes counts the "hot" ones (each starts an episode) among
	// Alerts, which are the key's events, newest first, at most 100.
	Alerted  bool                   `json:"alerted"`
	Episodes int                    `json:"episodes"`
	Alerts   []*schemas.HotKeyEvent `json:"alerts"`
	// Registry holds the key's registry entries (one per app) while it is
	// hot, as GET /api/hotkeys lists them; empty when it is not, null
	// while the registry is still being read.
	Registry []HotKey `json:"registry"`
	// Clients is what the applications' own caches and splitters did with
	// the key, summed over the live clients whose hotkeys.StatsPublisher
	// lists it (Config.Clients); null without Clients or without app.
	Clients *ClientKeyStats `json:"clients"`
	// SourceError, when set, says why ClickHouse could not be read: the
	// answer holds what memory has.
	SourceError string `json:"source_error,omitempty"`
}

var statsParams = []string{"app", "from", "to", "limit"}

// keyStats answers GET /api/hotkeys/{key}/stats and GET
// /api/hotkeys/stats?key_b64=.
func (s *Server) keyStats(w http.ResponseWriter, r *http.Request) {
	key, inPath, err := statsKey(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	q, err := singleParams(r, keyParams(inPath, statsParams...)...)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	app := q["app"]
	var errs []error
	if len(key) > s.cfg.MaxKeyBytes {
		errs = append(errs, fmt.Errorf("key is %d bytes, limit %d", len(key), s.cfg.MaxKeyBytes))
	}
	errs = append(errs, checkText("app", app, maxAppBytes))
	fromMs, toMs, err := parseRange(q)
	errs = append(errs, err)
	limit, err := parseLimit(q, DefaultKeyWindows, MaxReportsLimit)
	errs = append(errs, err)
	if err := errors.Join(errs...); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	h := s.cfg.History
	if h == nil {
		noHistory(w)
		return
	}
	st := KeyStats{App: app, Key: key, KeyHash: keyHashHex(xxh3.HashString(key))}
	if !utf8.ValidString(key) {
		st.KeyB64 = []byte(key)
	}
	reports, completeMs, newestMs, inMemory := h.appWindows(app, app == "")
	if _, ok := q["from"]; !ok {
		// Bound the source's scan: the span before to, or before the
		// newest window held, or before now.
		end := s.now().UnixMilli()
		if inMemory {
			end = newestMs + 1
		}
		fromMs = max(0, min(toMs, end)-DefaultKeyStatsSpan.Milliseconds())
	}
	st.Windows, st.More = keyWindows(reports, app, key, fromMs, toMs, limit)
	if completeMs != unknownMs {
		st.HistoryFromMs = completeMs
	}
	if src := s.cfg.ReportSource; src != nil && fromMs < min(toMs, completeMs) {
		st.Windows, st.More, st.SourceError = s.olderKeyWindows(r, st.Windows, st.More, completeMs, limit,
			KeyQuery{App: app, Key: key, FromMs: fromMs, ToMs: min(toMs, completeMs)})
	}
	if st.Windows == nil {
		st.Windows = []KeyWindow{}
	}
	var completeAlertsMs int64
	st.Alerts, completeAlertsMs = h.alertsMatching(keyAlertsLimit, func(e *schemas.HotKeyEvent) bool {
		return e.Key == key && (app == "" || e.App == app)
	})
	if s.cfg.ReportSource != nil && st.SourceError == "" {
		st.Alerts, st.SourceError = s.olderAlerts(r, st.Alerts, completeAlertsMs, AlertQuery{App: app, Key: key, Limit: keyAlertsLimit})
	}
	if st.Alerts == nil {
		st.Alerts = []*schemas.HotKeyEvent{}
	}
	for _, e := range st.Alerts {
		if e.Type == schemas.HotKeyHot {
			st.Episodes++
		}
	}
	st.Alerted = len(st.Alerts) > 0
	st.Partition = partitionOf(st.Windows, st.Alerts)
	if f := s.cfg.Follower; f.Ready() {
		st.Registry = []HotKey{}
		now := s.now()
		if app != "" {
			if e, ok := f.Get(app, key); ok {
				st.Registry = append(st.Registry, hotKeyOf(&e, now))
			}
		} else {
			for e := range f.All() {
				if e.Key == key {
					st.Registry = append(st.Registry, hotKeyOf(&e, now))
				}
			}
			slices.SortFunc(st.Registry, func(a, b HotKey) int { return strings.Compare(a.App, b.App) })
		}
	}
	if s.cfg.Clients != nil && app != "" {
		cs := s.cfg.Clients.Key(app, key)
		st.Clients = &cs
	}
	writeJSON(w, http.StatusOK, st)
}

// keyWindows returns, newest first, the windows of reports (app reports)
// in [fromMs, toMs) that list key of app (of any app when app is ""): the
// limit newest, and whether more matched.
func keyWindows(reports []*schemas.WindowReport, app, key string, fromMs, toMs int64, limit int) ([]KeyWindow, bool) {
	var out []KeyWindow
	for _, r := range reports {
		if r.StartMs < fromMs || r.StartMs >= toMs {
			continue
		}
		if kw, ok := keyWindowOf(r, app, key); ok {
			out = append(out, kw)
		}
	}
	slices.SortFunc(out, compareKeyWindows)
	if len(out) > limit {
		return out[:limit], true
	}
	return out, false
}

// compareKeyWindows orders windows newest first, then by app.
func compareKeyWindows(a, b KeyWindow) int {
	if c := cmpInt64(b.StartMs, a.StartMs); c != 0 {
		return c
	}
	return strings.Compare(a.App, b.App)
}

// olderKeyWindows completes mem, the key's windows in memory (newest
// first, at most limit; memMore when memory holds older ones of the range
// too), with the source's windows of q's range, which ends where memory
// starts being complete (completeMs): it returns the limit newest of
// both, memory's where both hold a window, and whether older ones match.
// The source's error comes back as sourceFailed words it, with mem.
//
// When memory's complete part fills the answer the source is asked for
// one window only, to know whether older ones follow.
func (s *Server) olderKeyWindows(r *http.Request, mem []KeyWindow, memMore bool, completeMs int64, limit int,
	q KeyQuery) ([]KeyWindow, bool, string) {
	complete := 0
	for complete < len(mem) && mem[complete].StartMs >= completeMs {
		complete++
	}
	if complete >= limit {
		if memMore {
			return mem, true, ""
		}
		q.Limit = 1
		older, err := s.cfg.ReportSource.KeyWindows(r.Context(), q)
		if err != nil {
			return mem, memMore, s.sourceFailed(r, err)
		}
		return mem, len(older) > 0, ""
	}
	q.Limit = limit - complete + 1
	older, err := s.cfg.ReportSource.KeyWindows(r.Context(), q)
	if err != nil {
		return mem, memMore, s.sourceFailed(r, err)
	}
	out, more := mergeKeyWindows(mem, older, limit)
	return out, more || memMore, ""
}

// mergeKeyWindows appends to mem (from memory, newest first) the source's
// windows that memory does not hold, and keeps the limit newest.
func mergeKeyWindows(mem, older []KeyWindow, limit int) ([]KeyWindow, bool) {
	type win struct {
		startMs int64
		app     string
	}
	held := make(map[win]struct{}, len(mem))
	for _, w := range mem {
		held[win{w.StartMs, w.App}] = struct{}{}
	}
	out := mem
	for _, w := range older {
		if _, ok := held[win{w.StartMs, w.App}]; !ok {
			out = append(out, w)
		}
	}
	slices.SortFunc(out, compareKeyWindows)
	if len(out) > limit {
		return out[:limit], true
	}
	return out, false
}

// keyWindowOf returns key's figures in report r when one of its lists
// holds the key of app (of any app when app is "").
func keyWindowOf(r *schemas.WindowReport, app, key string) (KeyWindow, bool) {
	kw := KeyWindow{StartMs: r.StartMs, EndMs: r.EndMs, Source: SourceMemory}
	found := false
	for _, l := range []struct {
		keys []schemas.KeyCount
		rank *int
	}{
		{r.Top, &kw.Ranks.Top}, {r.TopBytes, &kw.Ranks.TopBytes}, {r.TopReads, &kw.Ranks.TopReads},
		{r.TopWrites, &kw.Ranks.TopWrites}, {r.TopLatency, &kw.Ranks.TopLatency},
	} {
		for i := range l.keys {
			k := &l.keys[i]
			if k.Key != key || (app != "" && k.App != app) {
				continue
			}
			*l.rank = i + 1
			if !found {
				// Every list carries the key's same figures; Top's,
				// read first, alone carries its share.
				found = true
				kw.App, kw.Count, kw.Error, kw.Share = k.App, k.Count, k.Error, k.Share
				kw.Bytes, kw.Reads, kw.Writes, kw.LatencyUs = k.Bytes, k.Reads, k.Writes, k.LatencyUs
				kw.Partition, kw.Shortened = k.Partition, k.Shortened
			}
			break
		}
	}
	if !found {
		return KeyWindow{}, false
	}
	kw.Rate = RatePerSecond(kw.Count, kw.StartMs, kw.EndMs)
	return kw, true
}

// RatePerSecond is count events over the window [startMs, endMs), per
// second; 0 for an empty window.
func RatePerSecond(count uint64, startMs, endMs int64) float64 {
	if endMs <= startMs {
		return 0
	}
	return float64(count) * 1000 / float64(endMs-startMs)
}

// partitionOf is the partition the newest window, or else the newest
// alert, names.
func partitionOf(ws []KeyWindow, alerts []*schemas.HotKeyEvent) *int32 {
	for _, w := range ws {
		if w.Partition >= 0 {
			p := w.Partition
			return &p
		}
	}
	for _, e := range alerts {
		if e.Partition >= 0 {
			p := e.Partition
			return &p
		}
	}
	return nil
}

// statsKey returns the key the stats route names, and whether its path
// names it: /api/hotkeys/<key>/stats, the key percent-escaped as the
// mutations take it (see requestKey), or key_b64 on /api/hotkeys/stats.
func statsKey(r *http.Request) (key string, inPath bool, err error) {
	seg, inPath := statsSegment(r.URL.EscapedPath())
	if !inPath {
		b64 := r.URL.Query().Get("key_b64")
		if b64 == "" {
			return "", false, errors.New("no key: put it in the path (/api/hotkeys/<key>/stats, percent-escaped) or in key_b64")
		}
		if key, err = decodeKeyB64(b64); err != nil {
			return "", false, err
		}
	} else {
		if r.URL.Query().Has("key_b64") {
			return "", true, errors.New("the key is in the path; key_b64 is for GET /api/hotkeys/stats")
		}
		if key, err = url.PathUnescape(seg); err != nil {
			return "", true, errors.New("the key in the path is not percent-escaped properly")
		}
	}
	if key == "" {
		return "", inPath, errors.New("key is empty")
	}
	return key, inPath, nil
}

// statsSegment returns the escaped key segment of a stats path,
// /api/hotkeys/<key>/stats.
func statsSegment(escaped string) (string, bool) {
	rest, ok := strings.CutSuffix(escaped, "/stats")
	if !ok {
		return "", false
	}
	return keyOfPath(rest, false)
}

// statsPathOnly lets through the GETs of a stats path and answers the
// other paths as otherMethod does: a GET of /api/hotkeys/k is a 405.
func statsPathOnly(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, ok := statsSegment(r.URL.EscapedPath()); !ok {
			otherMethod(w, r)
			return
		}
		h.ServeHTTP(w, r)
	})
}
