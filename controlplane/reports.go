package controlplane

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"slices"
	"sort"
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
	// HistoryFromMs is the start from which the server's memory holds
	// every window of the scope: its oldest window, or later when the
	// Feed's backlog missed some after it (see Feed.Run). Reports of
	// earlier windows came from the report source (ClickHouse), which
	// stores only part of a report (see the package documentation),
	// unless memory held them too. Absent when memory holds none or the
	// Feed has not read its backlog yet.
	HistoryFromMs int64 `json:"history_from_ms,omitempty"`
	// SourceError, when set, says why the report source could not be
	// read: the answer holds what memory has.
	SourceError string `json:"source_error,omitempty"`
}

// AlertPage is the answer of GET /api/alerts.
type AlertPage struct {
	// Alerts are hot-key events (hot, update, cooled), newest first by
	// DetectedMs, then ID: those the server holds in memory and, when
	// they do not fill the limit with events detected after the time from
	// which memory holds them all, older ones from the report source.
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
	mem, memMore, completeMs := h.reportsPage(scope, app, fromMs, toMs, limit)
	page.Reports, page.More = mem, memMore
	if completeMs != unknownMs {
		page.HistoryFromMs = completeMs
	}
	if s.cfg.ReportSource != nil && fromMs < min(toMs, completeMs) {
		page.Reports, page.More, page.SourceError = s.olderReports(r, mem, memMore, completeMs, limit,
			ReportQuery{Scope: scope, App: app, FromMs: fromMs, ToMs: min(toMs, completeMs)})
	}
	if page.Reports == nil {
		page.Reports = []*schemas.WindowReport{}
	}
	writeJSON(w, http.StatusOK, page)
}

// olderReports completes mem, memory's latest reports of the range (at
// most limit, in time order; memMore when it holds earlier ones too), with
// the source's reports of q's range, which ends where memory starts being
// complete (completeMs): it returns the limit latest of both, memory's
// where both hold a window, and whether earlier ones match. The source's
// error comes back as sourceFailed words it, with mem.
//
// When memory's complete part fills the page the source is asked for one
// report only, to know whether the page is the last one.
func (s *Server) olderReports(r *http.Request, mem []*schemas.WindowReport, memMore bool, completeMs int64, limit int,
	q ReportQuery) ([]*schemas.WindowReport, bool, string) {
	i := sort.Search(len(mem), func(i int) bool { return mem[i].StartMs >= completeMs })
	partial, complete := mem[:i], mem[i:]
	if len(complete) >= limit {
		if memMore {
			return mem, true, ""
		}
		q.Limit = 1
		older, err := s.cfg.ReportSource.Reports(r.Context(), q)
		if err != nil {
			return mem, memMore, s.sourceFailed(r, err)
		}
		return mem, len(older) > 0, ""
	}
	need := limit - len(complete)
	q.Limit = need + 1
	older, err := s.cfg.ReportSource.Reports(r.Context(), q)
	if err != nil {
		return mem, memMore, s.sourceFailed(r, err)
	}
	merged := mergeReports(partial, older)
	more := memMore
	if len(merged) > need {
		merged, more = merged[len(merged)-need:], true
	}
	return append(merged, complete...), more, ""
}

// mergeReports merges two lists of a scope's reports in time order into
// one, mem's report where both hold a window.
func mergeReports(mem, src []*schemas.WindowReport) []*schemas.WindowReport {
	out := make([]*schemas.WindowReport, 0, len(mem)+len(src))
	for len(mem) > 0 || len(src) > 0 {
		switch {
		case len(src) == 0 || (len(mem) > 0 && mem[0].StartMs < src[0].StartMs):
			out, mem = append(out, mem[0]), mem[1:]
		case len(mem) == 0 || src[0].StartMs < mem[0].StartMs:
			out, src = append(out, src[0]), src[1:]
		default:
			out, mem, src = append(out, mem[0]), mem[1:], src[1:]
		}
	}
	return out
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
	held, completeMs := s.cfg.History.alertsMatching(limit, func(e *schemas.HotKeyEvent) bool { return app == "" || e.App == app })
	page := AlertPage{Alerts: held}
	if s.cfg.ReportSource != nil {
		page.Alerts, page.SourceError = s.olderAlerts(r, held, completeMs, AlertQuery{App: app, Limit: limit})
	}
	if page.Alerts == nil {
		page.Alerts = []*schemas.HotKeyEvent{}
	}
	writeJSON(w, http.StatusOK, page)
}

// olderAlerts completes held, memory's events matching q (newest first,
// at most q.Limit), with the source's events detected at or before
// completeMs, memory holding every event detected after it: it returns
// the q.Limit newest of both, memory's where both hold an event (same
// ID). The source is not asked when memory's events after completeMs fill
// the answer, and its answers are reused for a few seconds (see
// sourceAlertsTTL): the dashboard polls this every second. The source's
// error comes back as sourceFailed words it, with held.
func (s *Server) olderAlerts(r *http.Request, held []*schemas.HotKeyEvent, completeMs int64, q AlertQuery) ([]*schemas.HotKeyEvent, string) {
	complete := 0
	for complete < len(held) && held[complete].DetectedMs > completeMs {
		complete++
	}
	if complete >= q.Limit {
		return held, ""
	}
	if completeMs != unknownMs {
		q.BeforeMs = completeMs + 1
	}
	nowMs := s.now().UnixMilli()
	older, ok := s.cfg.History.sourceAlerts(q, nowMs)
	if !ok {
		var err error
		if older, err = s.cfg.ReportSource.Alerts(r.Context(), q); err != nil {
			return held, s.sourceFailed(r, err)
		}
		s.cfg.History.cacheSourceAlerts(q, older, nowMs)
	}
	ids := make(map[string]struct{}, len(held))
	for _, e := range held {
		ids[e.ID] = struct{}{}
	}
	out := held
	for _, e := range older {
		if _, dup := ids[e.ID]; !dup {
			out = append(out, e)
		}
	}
	slices.SortStableFunc(out, func(a, b *schemas.HotKeyEvent) int { return compareEvents(b, a) })
	return out[:min(len(out), q.Limit)], ""
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

// parseRange reads from and to, each RFC 3339 (any fraction of a second)
// or Unix milliseconds; from defaults to the beginning of time, to to its
// end, and from must be before to. Both come back rounded up to the
// millisecond, so that [fromMs, toMs) holds the same whole milliseconds
// (the windows' starts) as [from, to): a range within one millisecond
// holds none and comes back empty, fromMs == toMs.
func parseRange(q map[string]string) (fromMs, toMs int64, err error) {
	from, to := instant{}, instant{ms: math.MaxInt64}
	if v, ok := q["from"]; ok {
		if from, err = parseTime("from", v); err != nil {
			return 0, 0, err
		}
	}
	if v, ok := q["to"]; ok {
		if to, err = parseTime("to", v); err != nil {
			return 0, 0, err
		}
	}
	if !from.before(to) {
		return 0, 0, fmt.Errorf("from (%s) must be before to (%s)", q["from"], q["to"])
	}
	return from.ceilMs(), to.ceilMs(), nil
}

// instant is a time as Unix milliseconds and the nanoseconds past them.
type instant struct {
	ms int64
	ns int32 // 0 to 999,999
}

func (t instant) before(u instant) bool { return t.ms < u.ms || (t.ms == u.ms && t.ns < u.ns) }

// ceilMs is t rounded up to the millisecond.
func (t instant) ceilMs() int64 {
	if t.ns > 0 {
		return t.ms + 1 // RFC 3339 times end in year 9999: no overflow
	}
	return t.ms
}

func parseTime(name, v string) (instant, error) {
	if v != "" && v[0] >= '0' && v[0] <= '9' && !slices.ContainsFunc([]byte(v), func(c byte) bool { return c < '0' || c > '9' }) {
		ms, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return instant{}, fmt.Errorf("%s %q: Unix milliseconds out of range", name, v)
		}
		return instant{ms: ms}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return instant{}, fmt.Errorf("%s %q: want RFC 3339 (2026-01-02T15:04:05Z) or Unix milliseconds", name, v)
	}
	if t.Unix() < 0 {
		return instant{}, fmt.Errorf("%s %q is before 1970", name, v)
	}
	return instant{ms: t.UnixMilli(), ns: int32(t.Nanosecond() % 1e6)}, nil
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
