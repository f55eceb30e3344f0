package controlplane

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
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
	// report's structs and strings (keys, apps, topics); a report's lists
	// are bounded by detect's summary.top_keys and summary.big_keys and
	// its keys by pipeline.max_key_bytes, so a report's size does not
	// grow with the number of distinct keys.
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
// detect's merger feeds it (AddReport, AddAlert); a Server reads it
// (Config.History). It is safe for concurrent use.
//
// Memory is bounded by HistoryConfig: Windows reports per scope, MaxBytes
// of reports (estimated) in all, Alerts events.
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
	bytes   int64 // estimated bytes of every kept report
	reports int   // kept reports, all scopes
	alerts  alertRing

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
	// GET /api/reports/latest serves again and again.
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
	h := &History{cfg: cfg, scopes: map[scopeKey]*scopeWindows{}, alerts: newAlertRing(cfg.Alerts)}
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
		delete(h.scopes, k)
	}
}

// AddAlert keeps e as the newest hot-key event, dropping the oldest past
// HistoryConfig.Alerts. An event with the ID of one kept (published again
// after a restart) replaces it where it stands. A nil event is ignored.
func (h *History) AddAlert(e *schemas.HotKeyEvent) {
	if e == nil {
		return
	}
	h.mu.Lock()
	h.alerts.add(e)
	h.mu.Unlock()
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
// it once per report.
func (h *History) latestJSON(scope, app string) ([]byte, bool, error) {
	h.mu.RLock()
	sw := h.scopes[scopeKey{scope, app}]
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
	// Another request may have cached this report, or a later one,
	// meanwhile: either is fine, a cache miss costs one encoding.
	sw.latestJSON.Store(&encodedReport{r: r, json: b})
	return b, true, nil
}

// Reports returns, in time order, the kept reports of a scope whose
// windows start in [fromMs, toMs): the limit latest of them, and whether
// earlier ones matched too.
func (h *History) Reports(scope, app string, fromMs, toMs int64, limit int) (reports []*schemas.WindowReport, more bool) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	sw := h.scopes[scopeKey{scope, app}]
	if sw == nil || limit <= 0 {
		return nil, false
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
	return out, more
}

// oldestStart returns the start of the oldest window kept for a scope.
func (h *History) oldestStart(scope, app string) (int64, bool) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	sw := h.scopes[scopeKey{scope, app}]
	if sw == nil {
		return 0, false
	}
	return sw.windows[0].r.StartMs, true
}

// appWindows returns the kept reports of one app, or of every app when
// app is "", and the start of the oldest window kept of any of them.
func (h *History) appWindows(app string, all bool) (reports []*schemas.WindowReport, oldest int64, any bool) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	add := func(sw *scopeWindows) {
		if sw == nil {
			return
		}
		for _, w := range sw.windows {
			reports = append(reports, w.r)
		}
		if s := sw.windows[0].r.StartMs; !any || s < oldest {
			oldest, any = s, true
		}
	}
	if !all {
		add(h.scopes[scopeKey{schemas.ScopeApp, app}])
		return reports, oldest, any
	}
	for k, sw := range h.scopes {
		if k.scope == schemas.ScopeApp {
			add(sw)
		}
	}
	return reports, oldest, any
}

// Alerts returns the kept hot-key events of app (every app when app is
// ""), newest first, at most limit of them.
func (h *History) Alerts(app string, limit int) []*schemas.HotKeyEvent {
	return h.alertsMatching(limit, func(e *schemas.HotKeyEvent) bool { return app == "" || e.App == app })
}

// alertsMatching returns the kept events match accepts, newest first, at
// most limit of them.
func (h *History) alertsMatching(limit int, match func(*schemas.HotKeyEvent) bool) []*schemas.HotKeyEvent {
	h.mu.RLock()
	defer h.mu.RUnlock()
	var out []*schemas.HotKeyEvent
	for e := range h.alerts.newestFirst() {
		if len(out) >= limit {
			break
		}
		if match(e) {
			out = append(out, e)
		}
	}
	return out
}

// alertRing keeps the latest events in arrival order, and where each ID
// sits so that an event published again replaces its first copy.
type alertRing struct {
	buf  []*schemas.HotKeyEvent
	next int // where the next event goes
	n    int
	byID map[string]int
}

func newAlertRing(n int) alertRing {
	return alertRing{buf: make([]*schemas.HotKeyEvent, n), byID: make(map[string]int, n)}
}

func (a *alertRing) add(e *schemas.HotKeyEvent) {
	if i, ok := a.byID[e.ID]; ok && e.ID != "" {
		a.buf[i] = e
		return
	}
	if old := a.buf[a.next]; old != nil && a.byID[old.ID] == a.next {
		delete(a.byID, old.ID)
	}
	a.buf[a.next] = e
	if e.ID != "" {
		a.byID[e.ID] = a.next
	}
	a.next = (a.next + 1) % len(a.buf)
	a.n = min(a.n+1, len(a.buf))
}

func (a *alertRing) newestFirst() func(yield func(*schemas.HotKeyEvent) bool) {
	return func(yield func(*schemas.HotKeyEvent) bool) {
		for j := 1; j <= a.n; j++ {
			if !yield(a.buf[(a.next-j+len(a.buf))%len(a.buf)]) {
				return
			}
		}
	}
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
			Help: "Estimated memory of the window reports kept in the history."}, func() float64 {
			h.mu.RLock()
			defer h.mu.RUnlock()
			return float64(h.bytes)
		}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "keyheat_api_history_alerts",
			Help: "Hot-key events kept in the history."}, func() float64 {
			h.mu.RLock()
			defer h.mu.RUnlock()
			return float64(h.alerts.n)
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
