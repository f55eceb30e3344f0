package controlplane

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/keyheat/keyheat/hotkeys"
	"github.com/keyheat/keyheat/schemas"
)

// Defaults of Config's zero fields.
const (
	// DefaultMaxTTL bounds the TTL of a promote or demote unless
	// Config.MaxTTL says otherwise: an override nobody renews ends within
	// a day.
	DefaultMaxTTL = 24 * time.Hour
	// DefaultPublishTimeout is how long a mutation waits for Kafka to
	// acknowledge its record, unless the request's context ends sooner or
	// Config.PublishTimeout says otherwise.
	DefaultPublishTimeout = 10 * time.Second
)

// MinTTL is the shortest TTL a promote or demote takes: a shorter override
// is over before most followers have read it.
const MinTTL = time.Second

// MaxBodyBytes is the largest request body the server reads; a larger one
// is answered 413.
const MaxBodyBytes = 64 << 10

// Config configures a Server. Follower and Producer are required; the zero
// value of every other field is usable.
type Config struct {
	// Follower is the registry as this process already follows it: the
	// server lists its set and never reads the topic itself.
	Follower *hotkeys.Follower
	// Producer publishes manual entries to Topic. It must not be
	// transactional. "Acknowledged" means what its RequiredAcks says;
	// franz-go's default (all in-sync replicas, idempotent) makes an
	// acknowledged entry durable.
	Producer *kgo.Client
	// Topic is the registry topic; "" means the one Follower reads, and
	// any other is refused.
	Topic string
	// Token is the bearer token mutations need (see LoadToken). Empty
	// refuses every mutation with 403.
	Token string
	// ProtectReads makes GET requests need the token too. It needs a
	// Token.
	ProtectReads bool
	// MaxTTL bounds a promote's or demote's TTL; 0 means DefaultMaxTTL.
	MaxTTL time.Duration
	// MaxKeyBytes is the longest key a mutation accepts, as detect's
	// events.limits.max_key_bytes; 0 means schemas.DefaultMaxKeyBytes.
	MaxKeyBytes int
	// PublishTimeout bounds the wait for Kafka's acknowledgement of a
	// mutation's record, within the request's own context; 0 means
	// DefaultPublishTimeout.
	PublishTimeout time.Duration
	// History holds the recent window reports and hot-key events that
	// the report, alert and key-stats routes answer from; nil answers
	// them 404.
	History *History
	// ReportSource, when set, reads the reports and events History does
	// not hold (older ones) for those routes; it needs History.
	ReportSource ReportSource
	// Clients, when set, adds the applications' client-side figures to a
	// key's stats (GET /api/hotkeys/{key}/stats?app=).
	Clients *Clients
	// Logger receives the server's logs; nil discards them. They name a
	// key by its key_hash, and the key itself too only with LogRawKeys
	// (see internal/keylog); they never carry the token.
	Logger *slog.Logger
	// LogRawKeys shows the keys themselves in the server's log lines,
	// beside their key_hash.
	LogRawKeys bool
	// Registerer receives the server's metrics (keyheat_api_*); nil
	// registers none. Close unregisters them.
	Registerer prometheus.Registerer
}

// Validate reports what makes c unusable, or nil.
func (c *Config) Validate() error {
	var errs []error
	if c.Follower == nil {
		errs = append(errs, errors.New("Follower is nil: give the process's hotkeys.Follower"))
	}
	if c.Producer == nil {
		errs = append(errs, errors.New("Producer is nil: give a Kafka client that can write the registry topic"))
	}
	if c.Producer != nil {
		if id, _ := c.Producer.OptValue(kgo.TransactionalID).(string); id != "" {
			errs = append(errs, fmt.Errorf("Producer is transactional (%q); give a client without kgo.TransactionalID", id))
		}
	}
	if c.ReportSource != nil && c.History == nil {
		errs = append(errs, errors.New("ReportSource needs a History: it serves only the windows History no longer holds"))
	}
	if c.ProtectReads && c.Token == "" {
		errs = append(errs, errors.New("ProtectReads needs a Token (api.token or api.token_file)"))
	}
	if c.Token != "" {
		if err := checkToken(c.Token); err != nil {
			errs = append(errs, fmt.Errorf("Token: %w", err))
		}
	}
	if c.MaxTTL < 0 || (c.MaxTTL > 0 && c.MaxTTL < MinTTL) {
		errs = append(errs, fmt.Errorf("MaxTTL is %v, want 0 (%v) or at least %v", c.MaxTTL, DefaultMaxTTL, MinTTL))
	}
	if c.MaxKeyBytes < 0 {
		errs = append(errs, fmt.Errorf("MaxKeyBytes is %d, want ≥ 0 (0: %d)", c.MaxKeyBytes, schemas.DefaultMaxKeyBytes))
	}
	if c.PublishTimeout < 0 {
		errs = append(errs, fmt.Errorf("PublishTimeout is %v, want ≥ 0 (0: %v)", c.PublishTimeout, DefaultPublishTimeout))
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("controlplane config: %w", errors.Join(errs...))
}

// Server is the control plane's HTTP API (see the package comment for its
// routes). It is an http.Handler for the caller to mount under "/api/" of
// its own mux or serve alone; it starts no goroutine and holds no
// listener. Its handlers are safe for concurrent use.
type Server struct {
	cfg       Config
	log       *slog.Logger
	m         *apiMetrics
	mux       *http.ServeMux
	now       func() time.Time
	closeOnce sync.Once
}

var _ http.Handler = (*Server)(nil)

// New validates cfg and builds the server; it registers its metrics on
// cfg.Registerer. Close it to unregister them.
func New(cfg Config) (*Server, error) {
	return newServer(cfg, time.Now)
}

func newServer(cfg Config, now func() time.Time) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	switch {
	case cfg.Topic == "":
		cfg.Topic = cfg.Follower.Topic()
	case cfg.Topic != cfg.Follower.Topic():
		return nil, fmt.Errorf("controlplane: Topic %q is not the registry topic the Follower reads (%q): changes would never show", cfg.Topic, cfg.Follower.Topic())
	}
	if cfg.MaxTTL == 0 {
		cfg.MaxTTL = DefaultMaxTTL
	}
	if cfg.MaxKeyBytes == 0 {
		cfg.MaxKeyBytes = schemas.DefaultMaxKeyBytes
	}
	if cfg.PublishTimeout == 0 {
		cfg.PublishTimeout = DefaultPublishTimeout
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	m, err := newAPIMetrics(cfg.Registerer)
	if err != nil {
		return nil, fmt.Errorf("controlplane: %w", err)
	}
	s := &Server{cfg: cfg, log: log, m: m, mux: http.NewServeMux(), now: now}
	s.routes()
	return s, nil
}

// Route patterns. The method-less ones answer the other methods with a
// JSON 405, and the paths no route knows with a JSON 404, so that every
// answer of the API is JSON.
const (
	routeList        = "/api/hotkeys"
	routeKey         = "/api/hotkeys/{key}"
	routePromote     = "/api/hotkeys/{key}/promote"
	routePromoteB64  = "/api/hotkeys/promote"
	routeUnknownPath = "/api/"
	// History routes (reports.go, keystats.go).
	routeReportsLatest = "/api/reports/latest"
	routeReports       = "/api/reports"
	routeAlerts        = "/api/alerts"
	routeKeyStats      = "/api/hotkeys/{key}/stats"
	routeKeyStatsB64   = "/api/hotkeys/stats"
	// routeKeyEscaped catches a key path the mux does not match as {key}:
	// one whose key segment is "%2F" alone (see requestKey).
	routeKeyEscaped = "/api/hotkeys/{path...}"
)

func (s *Server) routes() {
	s.mux.Handle("GET "+routeList, s.read(http.HandlerFunc(s.list)))
	s.mux.Handle("DELETE "+routeList, s.mutate(http.HandlerFunc(s.demote)))
	s.mux.Handle("DELETE "+routeKey, s.mutate(http.HandlerFunc(s.demote)))
	s.mux.Handle("POST "+routePromote, s.mutate(http.HandlerFunc(s.promote)))
	s.mux.Handle("POST "+routePromoteB64, s.mutate(http.HandlerFunc(s.promote)))
	s.mux.Handle("DELETE "+routeKeyEscaped, keyPathOnly(s.mutate(http.HandlerFunc(s.demote))))
	s.mux.Handle("POST "+routeKeyEscaped, keyPathOnly(s.mutate(http.HandlerFunc(s.promote))))
	s.mux.Handle("GET "+routeReportsLatest, s.read(http.HandlerFunc(s.reportsLatest)))
	s.mux.Handle("GET "+routeReports, s.read(http.HandlerFunc(s.reports)))
	s.mux.Handle("GET "+routeAlerts, s.read(http.HandlerFunc(s.alerts)))
	s.mux.Handle("GET "+routeKeyStats, s.read(http.HandlerFunc(s.keyStats)))
	s.mux.Handle("GET "+routeKeyStatsB64, s.read(http.HandlerFunc(s.keyStats)))
	s.mux.Handle("GET "+routeKeyEscaped, statsPathOnly(s.read(http.HandlerFunc(s.keyStats))))
	for _, p := range []string{routeReportsLatest, routeReports, routeAlerts} {
		s.mux.Handle(p, methodNotAllowed("GET, HEAD"))
	}
	s.mux.Handle(routeList, methodNotAllowed("GET, HEAD, DELETE"))
	s.mux.HandleFunc(routeKeyEscaped, otherMethod)
	s.mux.HandleFunc(routeUnknownPath, notFound)
	// Exact "/api" and everything outside /api/ (a server mounted at the
	// root): a JSON 404, not the mux's redirect to "/api/" or its text.
	s.mux.HandleFunc("/api", notFound)
	s.mux.HandleFunc("/", notFound)
}

// otherMethod answers a key path no route of which takes the request's
// method: 405 with the methods that would, or 404 when none would.
func otherMethod(w http.ResponseWriter, r *http.Request) {
	var allow []string
	if _, ok := keyOfPath(r.URL.EscapedPath(), false); ok {
		allow = append(allow, http.MethodDelete)
	}
	if _, ok := statsSegment(r.URL.EscapedPath()); ok || r.URL.EscapedPath() == routeKeyStatsB64 {
		allow = append(allow, http.MethodGet, http.MethodHead)
	}
	if _, ok := keyOfPath(r.URL.EscapedPath(), true); ok || r.URL.EscapedPath() == routePromoteB64 {
		allow = append(allow, http.MethodPost)
	}
	if len(allow) == 0 {
		notFound(w, r)
		return
	}
	methodNotAllowed(strings.Join(allow, ", ")).ServeHTTP(w, r)
}

func notFound(w http.ResponseWriter, _ *http.Request) {
	writeError(w, http.StatusNotFound, "no such API route; see the routes in the controlplane package documentation")
}

// ServeHTTP answers the API's routes and counts each request by the route
// pattern it matched, never by its path.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	rec := &statusRecorder{ResponseWriter: w}
	if p := r.URL.EscapedPath(); r.Method != http.MethodConnect && cleanPath(p) != p {
		// The mux would redirect to the cleaned path, which for a
		// mutation is another key: "/api/hotkeys/a/../b" is not b.
		writeError(rec, http.StatusBadRequest, "the path is not canonical (an empty, . or .. segment): escape a key's '/' as %2F, and send the keys . and .. as %2E and %2E%2E")
		s.m.observe(routeLabel(""), r.Method, rec.code(), time.Since(start))
		return
	}
	s.mux.ServeHTTP(rec, r)
	// The mux stored the pattern it matched in r (empty when none did).
	s.m.observe(routeLabel(r.Pattern), r.Method, rec.code(), time.Since(start))
}

// Close unregisters the server's metrics. The server keeps answering;
// calling Close again does nothing.
func (s *Server) Close() {
	s.closeOnce.Do(s.m.unregister)
}

// routeLabel is a pattern's path, the method cut off: "POST
// /api/hotkeys/{key}/promote" is "/api/hotkeys/{key}/promote".
func routeLabel(pattern string) string {
	if pattern == "" {
		return "unmatched"
	}
	if _, path, ok := strings.Cut(pattern, " "); ok {
		return path
	}
	return pattern
}

// keyPathOnly lets through the requests whose path names a key for
// their method, and answers the others as otherMethod does: a DELETE of
// /api/hotkeys/k/promote is a 405 (POST would take it), not a 404.
func keyPathOnly(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, ok := keySegment(r); !ok {
			otherMethod(w, r)
			return
		}
		h.ServeHTTP(w, r)
	})
}

func methodNotAllowed(allow string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Allow", allow)
		writeError(w, http.StatusMethodNotAllowed, fmt.Sprintf("method %s is not allowed here; allowed: %s", sanitizeMethod(r.Method), allow))
	})
}

// statusRecorder remembers the status code a handler wrote.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

func (r *statusRecorder) code() int {
	if r.status == 0 {
		return http.StatusOK
	}
	return r.status
}

// cleanPath is the path the standard library's mux routes p as (it
// redirects any other): p with "//", "." and ".." segments resolved, a
// trailing slash kept.
func cleanPath(p string) string {
	if p == "" {
		return "/"
	}
	if p[0] != '/' {
		p = "/" + p
	}
	np := path.Clean(p)
	if p[len(p)-1] == '/' && np != "/" {
		if len(p) == len(np)+1 && strings.HasPrefix(p, np) {
			return p
		}
		np += "/"
	}
	return np
}
