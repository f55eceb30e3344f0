package controlplane

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/keyheat/keyheat/schemas"
)

// Sizes of the report and alert answers.
const (
	// DefaultReportsLimit is how many reports GET /api/reports returns
	// when the request gives no limit.
	DefaultReportsLimit = 60
	// MaxReportsLimit is the largest limit GET /api/reports and the key
	// stats take: a report is up to some tens of kilobytes of JSON.
	MaxReportsLimit = 600
	// DefaultAlertsLimit is how many events GET /api/alerts returns when
	// the request gives no limit.
	DefaultAlertsLimit = 100
	// MaxAlertsLimit is the largest limit GET /api/alerts takes.
	MaxAlertsLimit = 1000
)

// ReportSource reads the reports and hot-key events History does not
// hold (older ones, or ones from before the process started) from a store
// that keeps them longer; controlplane/chsource reads ClickHouse. A Server
// calls it from its handlers, concurrently, with the request's context.
type ReportSource interface {
	// Reports returns, in time order, the reports of a scope whose
	// windows start in [FromMs, ToMs): the Limit latest of them when more
	// match.
	Reports(ctx context.Context, q ReportQuery) ([]*schemas.WindowReport, error)
	// KeyWindows returns a key's figures in the app reports whose windows
	// start in [FromMs, ToMs) and list it: the Limit latest windows,
	// newest first.
	KeyWindows(ctx context.Context, q KeyQuery) ([]KeyWindow, error)
	// Alerts returns hot-key events detected (DetectedMs) before
	// BeforeMs, newest first, at most Limit.
	Alerts(ctx context.Context, q AlertQuery) ([]*schemas.HotKeyEvent, error)
}

// ReportQuery selects reports for ReportSource.Reports.
type ReportQuery struct {
	// Scope is schemas.ScopeCluster or schemas.ScopeApp; App is the app
	// of ScopeApp, "" for the cluster.
	Scope string
	App   string
	// FromMs and ToMs bound the windows' starts, [FromMs, ToMs), in Unix
	// milliseconds.
	FromMs int64
	ToMs   int64
	// Limit is the most reports returned, at least 1.
	Limit int
}

// KeyQuery selects a key's windows for ReportSource.KeyWindows.
type KeyQuery struct {
	// App is the key's app; "" finds the key in every app.
	App string
	Key string
	// FromMs and ToMs bound the windows' starts, [FromMs, ToMs).
	FromMs int64
	ToMs   int64
	// Limit is the most windows returned, at least 1.
	Limit int
}

// AlertQuery selects hot-key events for ReportSource.Alerts; an empty App
// or Key matches every app or key.
type AlertQuery struct {
	App string
	Key string
	// BeforeMs bounds the events' DetectedMs: only earlier ones; 0 means
	// no bound.
	BeforeMs int64
	// Limit is the most events returned, at least 1.
	Limit int
}

// ReportPage is the answer of GET /api/reports.
type ReportPage struct {
	// Reports are in time order (StartMs ascending): the latest windows
	// of the range, at most the request's limit.
	Reports []*schemas.WindowReport `json:"reports"`
	// More reports that earlier windows of the range were left out: ask
	// again with to set to the first report's start_ms.
	More bool `json:"more,omitempty"`
	// HistoryFromMs is the start of the oldest window the server holds
	// in memory for the scope; reports of earlier windows came from the
	// report source (ClickHouse), which stores only part of a report
	// (see the package documentation). Absent when memory holds none.
	HistoryFromMs int64 `json:"history_from_ms,omitempty"`
	// SourceError, when set, says why the report source could not be
	// read: the answer holds what memory has.
	SourceError string `json:"source_error,omitempty"`
}

// AlertPage is the answer of GET /api/alerts.
type AlertPage struct {
	// Alerts are hot-key events (hot, update, cooled), newest first:
	// those the server holds in memory in the order it received them,
	// then older ones from the report source by DetectedMs.
	Alerts []*schemas.HotKeyEvent `json:"alerts"`
	// SourceError, when set, says why the report source could not be
	// read: the answer holds what memory has.
	SourceError string `json:"source_error,omitempty"`
}

// noHistory answers a history route on a server without Config.History.
func noHistory(w http.ResponseWriter) {
	writeError(w, http.StatusNotFound, "this server keeps no report history: detect serves it when the control plane is given its History (Config.History)")
}

var latestParams = []string{"scope", "app"}

// reportsLatest answers GET /api/reports/latest.
func (s *Server) reportsLatest(w http.ResponseWriter, r *http.Request) {
	q, err := singleParams(r, latestParams...)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	scope, app, err := parseScope(q)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	if s.cfg.History == nil {
		noHistory(w)
		return
	}
	b, ok, err := s.cfg.History.latestJSON(scope, app)
	switch {
	case err != nil:
		s.log.Error("controlplane: encode a window report", "err", err)
		writeError(w, http.StatusInternalServerError, "encode the report")
	case !ok:
		writeError(w, http.StatusNotFound, fmt.Sprintf("no report yet for %s", scopeName(scope, app)))
	default:
		writeRawJSON(w, http.StatusOK, b)
	}
}

var reportsParams = []string{"scope", "app", "from", "to", "limit"}

// reports answers GET /api/reports.
func (s *Server) reports(w http.ResponseWriter, r *http.Request) {
	q, err := singleParams(r, reportsParams...)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	scope, app, err := parseScope(q)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	fromMs, toMs, err := parseRange(q)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	limit, err := parseLimit(q, DefaultReportsLimit, MaxReportsLimit)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	h := s.cfg.History
	if h == nil {
		noHistory(w)
		return
	}
	page := ReportPage{}
	// Memory first: it holds every window of the scope from its oldest
	// kept on, so the source is asked only for what lies before that.
	oldest, inMemory := h.oldestStart(scope, app)
	page.Reports, page.More = h.Reports(scope, app, fromMs, toMs, limit)
	if inMemory {
		page.HistoryFromMs = oldest
	}
	srcTo := toMs
	if inMemory {
		srcTo = min(toMs, oldest)
	}
	if s.cfg.ReportSource != nil && !page.More && len(page.Reports) < limit && fromMs < srcTo {
		older, err := s.cfg.ReportSource.Reports(r.Context(), ReportQuery{Scope: scope, App: app,
			FromMs: fromMs, ToMs: srcTo, Limit: limit - len(page.Reports) + 1})
		if err != nil {
			page.SourceError = s.sourceFailed(r, err)
		} else {
			if n := limit - len(page.Reports); len(older) > n {
				older, page.More = older[len(older)-n:], true
			}
			page.Reports = append(older, page.Reports...)
		}
	}
	if page.Reports == nil {
		page.Reports = []*schemas.WindowReport{}
	}
	writeJSON(w, http.StatusOK, page)
}

var alertsParams = []string{"app", "limit"}

// alerts answers GET /api/alerts.
func (s *Server) alerts(w http.ResponseWriter, r *http.Request) {
	q, err := singleParams(r, alertsParams...)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	limit, err := parseLimit(q, DefaultAlertsLimit, MaxAlertsLimit)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	if err := checkApp(q["app"]); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	if s.cfg.History == nil {
		noHistory(w)
		return
	}
	app := q["app"]
	page := AlertPage{Alerts: s.cfg.History.Alerts(app, limit)}
	if s.cfg.ReportSource != nil && len(page.Alerts) < limit {
		page.Alerts, page.SourceError = s.olderAlerts(r, page.Alerts, AlertQuery{App: app, Limit: limit})
	}
	if page.Alerts == nil {
		page.Alerts = []*schemas.HotKeyEvent{}
	}
	writeJSON(w, http.StatusOK, page)
}

// olderAlerts appends to held (newest first, from memory) the source's
// events detected before the oldest of them, up to q.Limit in all,
// leaving out those memory holds (same ID). It returns the source's
// error as sourceFailed words it.
func (s *Server) olderAlerts(r *http.Request, held []*schemas.HotKeyEvent, q AlertQuery) ([]*schemas.HotKeyEvent, string) {
	if len(held) > 0 {
		// Events detected in the same millisecond as the oldest held
		// may be older still: ask up to it, included, and drop the
		// ones memory holds. Asking for Limit is enough: at most
		// len(held) of them are held already.
		q.BeforeMs = held[len(held)-1].DetectedMs + 1
	}
	older, err := s.cfg.ReportSource.Alerts(r.Context(), q)
	if err != nil {
		return held, s.sourceFailed(r, err)
	}
	ids := make(map[string]struct{}, len(held))
	for _, e := range held {
		ids[e.ID] = struct{}{}
	}
	for _, e := range older {
		if len(held) >= q.Limit {
			break
		}
		if _, ok := ids[e.ID]; !ok {
			held = append(held, e)
		}
	}
	return held, ""
}

// sourceFailed logs a report source's failure and returns what the
// answer says of it.
func (s *Server) sourceFailed(r *http.Request, err error) string {
	s.log.Warn("controlplane: report source failed; answering from memory", "route", routeLabel(r.Pattern), "err", err)
	if r.Context().Err() != nil {
		return "the request ended before the report source answered; the answer holds what memory has"
	}
	// The error itself goes to the log only: it names the database and
	// servers, which a reader of an open API need not learn.
	return "the report source (ClickHouse) could not be read (the server's log says why); the answer holds what memory has"
}

// parseScope reads scope and app: scope cluster (the default without an
// app) or app (the default with one), which needs an app.
func parseScope(q map[string]string) (scope, app string, err error) {
	scope, app = q["scope"], q["app"]
	if err := checkApp(app); err != nil {
		return "", "", err
	}
	if scope == "" {
		scope = schemas.ScopeCluster
		if app != "" {
			scope = schemas.ScopeApp
		}
	}
	switch scope {
	case schemas.ScopeCluster:
		if app != "" {
			return "", "", fmt.Errorf("scope cluster takes no app; for app %q's reports give scope=app (or leave scope out)", app)
		}
	case schemas.ScopeApp:
		if app == "" {
			return "", "", fmt.Errorf("scope app needs an app")
		}
	default:
		return "", "", fmt.Errorf("scope %q: want cluster or app", scope)
	}
	return scope, app, nil
}

func checkApp(app string) error {
	if len(app) > maxAppBytes {
		return fmt.Errorf("app is %d bytes, at most %d", len(app), maxAppBytes)
	}
	return nil
}

func scopeName(scope, app string) string {
	if scope == schemas.ScopeCluster {
		return "the cluster"
	}
	return fmt.Sprintf("app %q", app)
}

// parseRange reads from and to, each RFC 3339 or Unix milliseconds; from
// defaults to the beginning of time, to to its end.
func parseRange(q map[string]string) (fromMs, toMs int64, err error) {
	fromMs, toMs = 0, math.MaxInt64
	if v, ok := q["from"]; ok {
		if fromMs, err = parseTimeMs("from", v); err != nil {
			return 0, 0, err
		}
	}
	if v, ok := q["to"]; ok {
		if toMs, err = parseTimeMs("to", v); err != nil {
			return 0, 0, err
		}
	}
	if fromMs >= toMs {
		return 0, 0, fmt.Errorf("from (%d) must be before to (%d)", fromMs, toMs)
	}
	return fromMs, toMs, nil
}

func parseTimeMs(name, v string) (int64, error) {
	if v != "" && v[0] >= '0' && v[0] <= '9' && !slices.ContainsFunc([]byte(v), func(c byte) bool { return c < '0' || c > '9' }) {
		ms, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%s %q: Unix milliseconds out of range", name, v)
		}
		return ms, nil
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return 0, fmt.Errorf("%s %q: want RFC 3339 (2026-01-02T15:04:05Z) or Unix milliseconds", name, v)
	}
	if ms := t.UnixMilli(); ms >= 0 {
		return ms, nil
	}
	return 0, fmt.Errorf("%s %q is before 1970", name, v)
}

// parseLimit reads limit, from 1 to maxLimit, def when absent.
func parseLimit(q map[string]string, def, maxLimit int) (int, error) {
	l, ok := q["limit"]
	if !ok {
		return def, nil
	}
	n, err := strconv.Atoi(l)
	if err != nil || n < 1 || n > maxLimit {
		return 0, fmt.Errorf("limit %q: want a number from 1 to %d", l, maxLimit)
	}
	return n, nil
}

// writeRawJSON writes b, JSON already, with writeJSON's headers, without
// encoding (and so validating and copying) it again.
func writeRawJSON(w http.ResponseWriter, code int, b []byte) {
	h := w.Header()
	h.Set("Content-Type", "application/json; charset=utf-8")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_, _ = w.Write(b)
	_, _ = w.Write([]byte{'\n'})
}
