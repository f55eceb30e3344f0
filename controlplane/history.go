package controlplane

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/keyheat/keyheat/schemas"
)

// Defaults of HistoryConfig's zero fields.
const (
	// DefaultHistoryWindows is how many windows History keeps per scope:
	// ten minutes of detect's default one-second report windows.
	DefaultHistoryWindows = 600
	// DefaultHistoryBytes bounds the estimated memory of the reports
	// History keeps, all scopes together.
	DefaultHistoryBytes = 128 << 20
	// DefaultHistoryAlerts is how many hot-key events History keeps.
	DefaultHistoryAlerts = 1000
)

// HistoryConfig configures a History. The zero value is usable.
type HistoryConfig struct {
	// Windows is how many windows History keeps per scope (the cluster,
	// and each app); 0 means DefaultHistoryWindows.
	Windows int
	// MaxBytes bounds the estimated memory of the reports kept, all
	// scopes together; 0 means DefaultHistoryBytes. Past it the oldest
	// windows go first, whichever scope they belong to, so every scope
	// keeps about the same span of time. The estimate counts each
	// report's structs and strings (keys, apps, topics), and the JSON of
	// each scope's latest report once GET /api/reports/latest cached it;
	// a report's lists are bounded by detect's summary.top_keys and
	// summary.big_keys and its keys by pipeline.max_key_bytes, so a
	// report's size does not grow with the number of distinct keys.
	MaxBytes int64
	// Alerts is how many hot-key events History keeps; 0 means
	// DefaultHistoryAlerts.
	Alerts int
	// Registerer receives History's metrics (keyheat_api_history_*); nil
	// registers none. Close unregisters them.
	Registerer prometheus.Registerer
}

// Validate reports what makes c unusable, or nil.
func (c *HistoryConfig) Validate() error {
	var errs []error
	if c.Windows < 0 {
		errs = append(errs, fmt.Errorf("Windows is %d, want ≥ 0 (0: %d)", c.Windows, DefaultHistoryWindows))
	}
	if c.MaxBytes < 0 {
		errs = append(errs, fmt.Errorf("MaxBytes is %d, want ≥ 0 (0: %d)", c.MaxBytes, DefaultHistoryBytes))
	}
	if c.Alerts < 0 {
		errs = append(errs, fmt.Errorf("Alerts is %d, want ≥ 0 (0: %d)", c.Alerts, DefaultHistoryAlerts))
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("controlplane history config: %w", errors.Join(errs...))
}

// History keeps the latest window reports of each scope and the latest
// hot-key events in memory, for the report, alert and key-stats routes.
// A Feed fills it (AddReport, AddAlert); a Server reads it
// (Config.History). It is safe for concurrent use.
//
// Memory is bounded by HistoryConfig: Windows reports per scope, MaxBytes
// of reports (estimated) in all, Alerts events; the oldest go first.
//
// The routes take memory as holding every window of a scope from its
// oldest on, and every event detected after its oldest, and ask the
// report source for what lies before. A Feed moves those times later
// when what it read back at start missed some (see Feed.Run); a History
// filled otherwise must be given every report and event from its first
// on.
//
// History keeps the reports and events it is given, not copies: they must
// not be modified once added, and what its methods return must not be
// modified either.
type History struct {
	cfg HistoryConfig
	m   *historyMetrics

	// mu guards what follows. Writers (AddReport, AddAlert) hold it for
	// a binary search, a slice insert of pointers and, over the byte
	// bound, a scan of the scopes; readers hold it to copy pointers only
	// and read the reports after unlocking (reports are never modified),
	// so the merger never waits for a request's encoding or I/O.
	mu      sync.RWMutex
	scopes  map[scopeKey]*scopeWindows
	bytes   int64 // estimated bytes of every kept report and cached JSON
	reports int   // kept reports, all scopes
	alerts  alertSet
	// reportsFromMs and alertsFromMs are the Feed's completeness marks
	// (setReportsFrom, setAlertsFrom); 0 when no Feed set them.
	reportsFromMs int64
	alertsFromMs  int64

	// srcAlerts caches the report source's answers for older events (see
	// sourceAlerts); srcMu guards it.
	srcMu     sync.Mutex
	srcAlerts map[AlertQuery]cachedAlerts

	closeOnce sync.Once
}

// scopeKey names a scope: the cluster (app "") or one app.
type scopeKey struct {
	scope string
	app   string
}

// scopeWindows are one scope's kept reports, ordered by StartMs, one per
// window.
type scopeWindows struct {
	windows []keptReport
	// latestJSON caches the JSON of the latest report, which
	// GET /api/reports/latest serves again and again; its bytes count in
	// History.bytes while it is set.
	latestJSON atomic.Pointer[encodedReport]
}

type keptReport struct {
	r     *schemas.WindowReport
	bytes int64
}

type encodedReport struct {
	r    *schemas.WindowReport
	json []byte
}

// NewHistory validates cfg and builds an empty History; it registers its
// metrics on cfg.Registerer.
func NewHistory(cfg HistoryConfig) (*History, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Windows == 0 {
		cfg.Windows = DefaultHistoryWindows
	}
	if cfg.MaxBytes == 0 {
		cfg.MaxBytes = DefaultHistoryBytes
	}
	if cfg.Alerts == 0 {
		cfg.Alerts = DefaultHistoryAlerts
	}
	h := &History{cfg: cfg, scopes: map[scopeKey]*scopeWindows{}, alerts: newAlertSet(cfg.Alerts)}
	m, err := newHistoryMetrics(cfg.Registerer, h)
	if err != nil {
		return nil, fmt.Errorf("controlplane history: %w", err)
	}
	h.m = m
	return h, nil
}

// Close unregisters History's metrics. It keeps its contents and keeps
// answering; calling Close again does nothing.
func (h *History) Close() {
	h.closeOnce.Do(h.m.unregister)
}

// keyOf is r's scope; ok is false for a scope History does not know.
func keyOf(r *schemas.WindowReport) (scopeKey, bool) {
	switch r.Scope {
	case schemas.ScopeCluster:
		return scopeKey{scope: schemas.ScopeCluster}, true
	case schemas.ScopeApp:
		return scopeKey{scope: schemas.ScopeApp, app: r.App}, true
	}
	return scopeKey{}, false
}

// AddReport keeps r as its scope's report of its window, replacing the
// one kept for the same scope, app and StartMs (a report published again
// after a restart, or complete after partial), and drops the oldest
// windows over the bounds. A nil report, or one of a scope other than
// cluster and app, is ignored. It does no I/O and allocates nothing but
// the scope's slice when it grows.
func (h *History) AddReport(r *schemas.WindowReport) {
	if r == nil {
		return
	}
	k, ok := keyOf(r)
	if !ok {
		h.m.ignored.Inc()
		return
	}
	size := reportBytes(r)
	h.mu.Lock()
	defer h.mu.Unlock()
	sw := h.scopes[k]
	if sw == nil {
		sw = &scopeWindows{}
		h.scopes[k] = sw
	}
	i, found := slices.BinarySearchFunc(sw.windows, r.StartMs, func(w keptReport, start int64) int {
		return cmpInt64(w.r.StartMs, start)
	})
	if found {
		h.bytes += size - sw.windows[i].bytes
		sw.windows[i] = keptReport{r: r, bytes: size}
		h.m.replaced.Inc()
	} else {
		sw.windows = slices.Insert(sw.windows, i, keptReport{r: r, bytes: size})
		h.bytes += size
		h.reports++
	}
	if c := sw.latestJSON.Load(); c != nil && c.r != sw.windows[len(sw.windows)-1].r {
		h.dropLatestJSONLocked(sw)
	}
	for len(sw.windows) > h.cfg.Windows {
		h.dropOldestLocked(k, sw)
		h.m.evicted.WithLabelValues("windows").Inc()
	}
	// Over the byte bound: drop the oldest window of all scopes, but
	// never r itself, so that the report just added is always kept.
	for h.bytes > h.cfg.MaxBytes && h.reports > 1 {
		ok2, osw := h.oldestLocked(k, r.StartMs)
		if osw == nil {
			break
		}
		h.dropOldestLocked(ok2, osw)
		h.m.evicted.WithLabelValues("bytes").Inc()
	}
}

// oldestLocked returns the scope whose oldest window is the oldest of
// all, leaving out the window (k, startMs) that was just added.
func (h *History) oldestLocked(k scopeKey, startMs int64) (scopeKey, *scopeWindows) {
	var best scopeKey
	var bestSW *scopeWindows
	for sk, sw := range h.scopes {
		if len(sw.windows) == 0 || (sk == k && sw.windows[0].r.StartMs == startMs) {
			continue
		}
		if bestSW == nil || sw.windows[0].r.StartMs < bestSW.windows[0].r.StartMs {
			best, bestSW = sk, sw
		}
	}
	return best, bestSW
}

// dropOldestLocked drops sw's oldest window, and sw itself once empty.
func (h *History) dropOldestLocked(k scopeKey, sw *scopeWindows) {
	h.bytes -= sw.windows[0].bytes
	h.reports--
	sw.windows[0] = keptReport{}
	sw.windows = sw.windows[1:]
	if len(sw.windows) == 0 {
		h.dropLatestJSONLocked(sw)
		delete(h.scopes, k)
	}
}

// AddAlert keeps e among the hot-key events, which History orders by
// DetectedMs (then ID), whatever order they come in, and drops the oldest
// past HistoryConfig.Alerts; an event older than every kept one is then
// not kept. An event with the ID of one kept (published again after a
// restart) replaces it. A nil event is ignored.
func (h *History) AddAlert(e *schemas.HotKeyEvent) {
	if e == nil {
		return
	}
	h.mu.Lock()
	h.alerts.add(e)
	h.mu.Unlock()
}

// unknownMs is a completeness mark that says memory is complete from no
// time at all: every answer asks the report source.
const unknownMs = math.MaxInt64

// setReportsFrom records that memory holds every window starting at or
// after ms that detect published (unknownMs: none known); a Feed calls
// it. A History nothing calls it for counts its memory of a scope as
// complete from the scope's oldest window on.
func (h *History) setReportsFrom(ms int64) {
	h.mu.Lock()
	h.reportsFromMs = ms
	h.mu.Unlock()
}

// setAlertsFrom records that memory holds every event detected after ms
// (unknownMs: none known); a Feed calls it. A History nothing calls it
// for counts its memory as complete from its oldest event on.
func (h *History) setAlertsFrom(ms int64) {
	h.mu.Lock()
	h.alertsFromMs = ms
	h.mu.Unlock()
}

// completeFromLocked returns the start from which sw holds every window
// of its scope: its oldest window, or the Feed's mark when later; unknownMs
// when it holds none (nothing says a scope without windows had none).
func (h *History) completeFromLocked(sw *scopeWindows) int64 {
	if sw == nil {
		return unknownMs
	}
	return max(h.reportsFromMs, sw.windows[0].r.StartMs)
}

// Latest returns the latest report kept for the cluster (scope
// schemas.ScopeCluster, app "") or for an app (schemas.ScopeApp).
func (h *History) Latest(scope, app string) (*schemas.WindowReport, bool) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	sw := h.scopes[scopeKey{scope, app}]
	if sw == nil {
		return nil, false
	}
	return sw.windows[len(sw.windows)-1].r, true
}

// latestJSON returns the latest report of a scope as its JSON, encoding
// it once per report. The cached JSON counts against MaxBytes.
func (h *History) latestJSON(scope, app string) ([]byte, bool, error) {
	k := scopeKey{scope, app}
	h.mu.RLock()
	sw := h.scopes[k]
	var r *schemas.WindowReport
	if sw != nil {
		r = sw.windows[len(sw.windows)-1].r
	}
	h.mu.RUnlock()
	if r == nil {
		return nil, false, nil
	}
	if c := sw.latestJSON.Load(); c != nil && c.r == r {
		return c.json, true, nil
	}
	b, err := r.AppendJSON(nil)
	if err != nil {
		return nil, true, err
	}
	// Cache it only if r is still the scope's latest: AddReport drops
	// (and uncounts) the cache of a report no longer latest, and a scope
	// dropped meanwhile would keep bytes nothing counts down. Another
	// request may have cached r meanwhile: then only its bytes count.
	h.mu.Lock()
	if h.scopes[k] == sw && sw.windows[len(sw.windows)-1].r == r {
		if old := sw.latestJSON.Load(); old == nil || old.r != r {
			h.dropLatestJSONLocked(sw)
			sw.latestJSON.Store(&encodedReport{r: r, json: b})
			h.bytes += int64(len(b))
		}
	}
	h.mu.Unlock()
	return b, true, nil
}

// dropLatestJSONLocked forgets sw's cached JSON and its bytes.
func (h *History) dropLatestJSONLocked(sw *scopeWindows) {
	if old := sw.latestJSON.Swap(nil); old != nil {
		h.bytes -= int64(len(old.json))
	}
}

// Reports returns, in time order, the kept reports of a scope whose
// windows start in [fromMs, toMs): the limit latest of them, and whether
// earlier ones matched too.
func (h *History) Reports(scope, app string, fromMs, toMs int64, limit int) (reports []*schemas.WindowReport, more bool) {
	reports, more, _ = h.reportsPage(scope, app, fromMs, toMs, limit)
	return reports, more
}

// reportsPage is Reports, and the start from which memory holds every
// window of the scope (see completeFromLocked).
func (h *History) reportsPage(scope, app string, fromMs, toMs int64, limit int) (reports []*schemas.WindowReport, more bool, completeMs int64) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	sw := h.scopes[scopeKey{scope, app}]
	completeMs = h.completeFromLocked(sw)
	if sw == nil || limit <= 0 || fromMs >= toMs {
		return nil, false, completeMs
	}
	lo, _ := slices.BinarySearchFunc(sw.windows, fromMs, func(w keptReport, t int64) int { return cmpInt64(w.r.StartMs, t) })
	hi, _ := slices.BinarySearchFunc(sw.windows, toMs, func(w keptReport, t int64) int { return cmpInt64(w.r.StartMs, t) })
	if hi-lo > limit {
		lo, more = hi-limit, true
	}
	out := make([]*schemas.WindowReport, 0, max(0, hi-lo))
	for _, w := range sw.windows[lo:hi] {
		out = append(out, w.r)
	}
	return out, more, completeMs
}

// appWindows returns the kept reports of one app, or of every app when
// all; the start from which memory holds every window of them (the
// newest of the apps' starts, see completeFromLocked); and the start of
// the newest window kept of any of them, if any.
func (h *History) appWindows(app string, all bool) (reports []*schemas.WindowReport, completeMs, newestMs int64, any bool) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	completeMs = math.MinInt64
	add := func(sw *scopeWindows) {
		completeMs = max(completeMs, h.completeFromLocked(sw))
		if sw == nil {
			return
		}
		for _, w := range sw.windows {
			reports = append(reports, w.r)
		}
		if s := sw.windows[len(sw.windows)-1].r.StartMs; !any || s > newestMs {
			newestMs, any = s, true
		}
	}
	if !all {
		add(h.scopes[scopeKey{schemas.ScopeApp, app}])
		return reports, completeMs, newestMs, any
	}
	for k, sw := range h.scopes {
		if k.scope == schemas.ScopeApp {
			add(sw)
		}
	}
	if !any {
		completeMs = unknownMs
	}
	return reports, completeMs, newestMs, any
}

// Alerts returns the kept hot-key events of app (every app when app is
// ""), newest first (by DetectedMs, then ID), at most limit of them.
func (h *History) Alerts(app string, limit int) []*schemas.HotKeyEvent {
	events, _ := h.alertsMatching(limit, func(e *schemas.HotKeyEvent) bool { return app == "" || e.App == app })
	return events
}

// alertsMatching returns the kept events match accepts, newest first, at
// most limit of them, and the DetectedMs after which memory holds every
// event: its oldest event's, or the Feed's mark when later; the Feed's
// mark alone when memory holds none; unknownMs without either.
func (h *History) alertsMatching(limit int, match func(*schemas.HotKeyEvent) bool) (events []*schemas.HotKeyEvent, completeMs int64) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	completeMs = unknownMs
	if oldest, ok := h.alerts.oldest(); ok {
		completeMs = max(oldest, h.alertsFromMs)
	} else if h.alertsFromMs > 0 {
		completeMs = h.alertsFromMs
	}
	for e := range h.alerts.newestFirst() {
		if len(events) >= limit {
			break
		}
		if match(e) {
			events = append(events, e)
		}
	}
	return events, completeMs
}

// alertSet keeps the latest events in (DetectedMs, ID) order, the order
// ClickHouse answers in, and each ID's event so that an event published
// again replaces its first copy.
type alertSet struct {
	max  int
	byTS []*schemas.HotKeyEvent // oldest first
	byID map[string]*schemas.HotKeyEvent
}

func newAlertSet(n int) alertSet {
	return alertSet{max: n, byTS: make([]*schemas.HotKeyEvent, 0, n), byID: make(map[string]*schemas.HotKeyEvent, n)}
}

// compareEvents orders events by DetectedMs, then ID.
func compareEvents(a, b *schemas.HotKeyEvent) int {
	if c := cmpInt64(a.DetectedMs, b.DetectedMs); c != 0 {
		return c
	}
	return strings.Compare(a.ID, b.ID)
}

func (a *alertSet) add(e *schemas.HotKeyEvent) {
	if old, ok := a.byID[e.ID]; ok && e.ID != "" {
		i, _ := slices.BinarySearchFunc(a.byTS, old, compareEvents)
		a.byTS = slices.Delete(a.byTS, i, i+1)
		delete(a.byID, e.ID)
	}
	// After any equal one: events without an ID keep their arrival order.
	i := sort.Search(len(a.byTS), func(i int) bool { return compareEvents(a.byTS[i], e) > 0 })
	if len(a.byTS) >= a.max && i == 0 {
		return // older than every kept one: it would go first
	}
	a.byTS = slices.Insert(a.byTS, i, e)
	if e.ID != "" {
		a.byID[e.ID] = e
	}
	if len(a.byTS) > a.max {
		if old := a.byTS[0]; a.byID[old.ID] == old {
			delete(a.byID, old.ID)
		}
		a.byTS = slices.Delete(a.byTS, 0, 1)
	}
}

func (a *alertSet) newestFirst() func(yield func(*schemas.HotKeyEvent) bool) {
	return func(yield func(*schemas.HotKeyEvent) bool) {
		for i := len(a.byTS) - 1; i >= 0; i-- {
			if !yield(a.byTS[i]) {
				return
			}
		}
	}
}

// oldest returns the oldest kept event's DetectedMs.
func (a *alertSet) oldest() (int64, bool) {
	if len(a.byTS) == 0 {
		return 0, false
	}
	return a.byTS[0].DetectedMs, true
}

// Sizes of what a report holds, for its estimate.
const (
	reportOverhead   = int64(unsafe.Sizeof(schemas.WindowReport{})) + 64
	keyCountSize     = int64(unsafe.Sizeof(schemas.KeyCount{}))
	partitionSize    = int64(unsafe.Sizeof(schemas.PartitionLoad{}))
	nodeSize         = int64(unsafe.Sizeof(schemas.NodeLoad{}))
	slotRangeSize    = int64(unsafe.Sizeof(schemas.SlotRange{}))
	slotSize         = int64(unsafe.Sizeof(schemas.SlotCount{}))
	adviceSize       = int64(unsafe.Sizeof(schemas.KeyAdvice{}))
	stringHeaderSize = int64(unsafe.Sizeof(""))
)

// reportBytes estimates the memory r holds: its structs and the bytes of
// its strings, counted as if none were shared.
func reportBytes(r *schemas.WindowReport) int64 {
	n := reportOverhead + int64(len(r.ID)+len(r.Scope)+len(r.App))
	for _, s := range [][]string{r.Topics, r.Missing} {
		for _, t := range s {
			n += stringHeaderSize + int64(len(t))
		}
	}
	for _, l := range [][]schemas.KeyCount{r.Top, r.TopBytes, r.TopReads, r.TopWrites, r.TopLatency} {
		for i := range l {
			n += keyCountSize + int64(len(l[i].App)+len(l[i].Key))
		}
	}
	for _, p := range r.Skew.Partitions {
		n += partitionSize + int64(len(p.Topic))
	}
	for _, nd := range r.Skew.Nodes {
		n += nodeSize + int64(len(nd.Node)) + int64(len(nd.Ranges))*slotRangeSize
	}
	n += int64(len(r.Skew.HotSlots)) * slotSize
	for _, a := range r.Advice {
		n += adviceSize + int64(len(a.App)+len(a.Key))
	}
	return n
}

func cmpInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// historyMetrics are History's Prometheus metrics; no label carries a key
// or an app.
type historyMetrics struct {
	reg      prometheus.Registerer
	all      []prometheus.Collector
	replaced prometheus.Counter
	evicted  *prometheus.CounterVec
	ignored  prometheus.Counter
}

func newHistoryMetrics(reg prometheus.Registerer, h *History) (*historyMetrics, error) {
	m := &historyMetrics{
		replaced: prometheus.NewCounter(prometheus.CounterOpts{Name: "keyheat_api_history_reports_replaced_total",
			Help: "Window reports that replaced the one kept for the same scope and window (published again)."}),
		evicted: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "keyheat_api_history_reports_evicted_total",
			Help: "Window reports dropped from the history, by the bound that dropped them: windows (per scope) or bytes (all scopes)."},
			[]string{"bound"}),
		ignored: prometheus.NewCounter(prometheus.CounterOpts{Name: "keyheat_api_history_reports_ignored_total",
			Help: "Window reports not kept because their scope is neither cluster nor app."}),
	}
	gauges := []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "keyheat_api_history_reports",
			Help: "Window reports kept in the history, all scopes."}, func() float64 {
			h.mu.RLock()
			defer h.mu.RUnlock()
			return float64(h.reports)
		}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "keyheat_api_history_report_bytes",
			Help: "Estimated memory of the window reports kept in the history, with the cached JSON of each scope's latest."}, func() float64 {
			h.mu.RLock()
			defer h.mu.RUnlock()
			return float64(h.bytes)
		}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "keyheat_api_history_alerts",
			Help: "Hot-key events kept in the history."}, func() float64 {
			h.mu.RLock()
			defer h.mu.RUnlock()
			return float64(len(h.alerts.byTS))
		}),
	}
	if reg == nil {
		return m, nil
	}
	m.reg = reg
	for _, c := range append([]prometheus.Collector{m.replaced, m.evicted, m.ignored}, gauges...) {
		if err := reg.Register(c); err != nil {
			m.unregister()
			return nil, fmt.Errorf("register history metrics: %w", err)
		}
		m.all = append(m.all, c)
	}
	return m, nil
}

func (m *historyMetrics) unregister() {
	for _, c := range m.all {
		m.reg.Unregister(c)
	}
	m.all = nil
}

// How long History reuses the report source's answer for events older
// than memory holds (see Server.olderAlerts): the dashboard polls
// GET /api/alerts every second, and each answer would otherwise cost a
// ClickHouse query.
const (
	// sourceAlertsTTL is an answer's life while its cutoff is recent:
	// the sink may still be writing events detected before it.
	sourceAlertsTTL = 5 * time.Second
	// settledAlertsTTL is an answer's life once its cutoff is older than
	// settledAlertsAfter; the sink then wrote what came before it, unless
	// it was behind (then the answer lags by up to this long).
	settledAlertsTTL   = time.Minute
	settledAlertsAfter = time.Minute
	// maxSourceAlerts bounds the answers kept (one per app and key asked
	// for and cutoff).
	maxSourceAlerts = 256
)

type cachedAlerts struct {
	events    []*schemas.HotKeyEvent
	expiresMs int64
}

// sourceAlerts returns the answer cached for q, if any is still fresh at
// nowMs.
func (h *History) sourceAlerts(q AlertQuery, nowMs int64) ([]*schemas.HotKeyEvent, bool) {
	h.srcMu.Lock()
	defer h.srcMu.Unlock()
	c, ok := h.srcAlerts[q]
	if !ok || nowMs >= c.expiresMs {
		return nil, false
	}
	return c.events, true
}

// cacheSourceAlerts keeps the source's answer to q, got at nowMs.
func (h *History) cacheSourceAlerts(q AlertQuery, events []*schemas.HotKeyEvent, nowMs int64) {
	ttl := sourceAlertsTTL
	if q.BeforeMs > 0 && q.BeforeMs < nowMs-settledAlertsAfter.Milliseconds() {
		ttl = settledAlertsTTL
	}
	h.srcMu.Lock()
	defer h.srcMu.Unlock()
	if h.srcAlerts == nil {
		h.srcAlerts = map[AlertQuery]cachedAlerts{}
	}
	if len(h.srcAlerts) >= maxSourceAlerts {
		for k, c := range h.srcAlerts {
			if nowMs >= c.expiresMs {
				delete(h.srcAlerts, k)
			}
		}
		if len(h.srcAlerts) >= maxSourceAlerts {
			clear(h.srcAlerts)
		}
	}
	h.srcAlerts[q] = cachedAlerts{events: events, expiresMs: nowMs + ttl.Milliseconds()}
}
