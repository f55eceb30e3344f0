package controlplane_test

import (
	"math"
	"strconv"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/keyheat/keyheat/controlplane"
	"github.com/keyheat/keyheat/schemas"
)

// baseMs is the first test window's start: 2026-01-01T00:00:00Z.
const baseMs = 1767225600000

func newHistory(t testing.TB, cfg controlplane.HistoryConfig) *controlplane.History {
	t.Helper()
	h, err := controlplane.NewHistory(cfg)
	require.NoError(t, err)
	t.Cleanup(h.Close)
	return h
}

// windowReport is a report of scope (app for ScopeApp) for the one-second
// window w, its Top listing keys of app (of "shop" in the cluster's) with
// counts falling from 300.
func windowReport(scope, app string, w int, keys ...string) *schemas.WindowReport {
	start := baseMs + int64(w)*1000
	r := &schemas.WindowReport{Version: schemas.ReportVersion, ID: schemas.WindowReportID(scope, app, start),
		Scope: scope, App: app, StartMs: start, EndMs: start + 1000, Topics: []string{"keyheat.events"},
		Events: 1000, Keyed: true, Top: []schemas.KeyCount{}}
	keyApp := app
	if scope == schemas.ScopeCluster {
		keyApp = "shop"
	}
	for i, k := range keys {
		r.Top = append(r.Top, schemas.KeyCount{App: keyApp, Key: k, Count: uint64(300 - 10*i), Partition: int32(i % 3),
			Reads: uint64(200 - i), Writes: uint64(100 - i), Bytes: 4096, LatencyUs: 777, Share: float64(300-10*i) / 1000})
	}
	return r
}

func reportStarts(rs []*schemas.WindowReport) []int64 {
	out := []int64{}
	for _, r := range rs {
		out = append(out, r.StartMs-baseMs)
	}
	return out
}

func TestHistoryConfigValidate(t *testing.T) {
	for name, cfg := range map[string]controlplane.HistoryConfig{
		"windows":   {Windows: -1},
		"max bytes": {MaxBytes: -1},
		"alerts":    {Alerts: -1},
	} {
		_, err := controlplane.NewHistory(cfg)
		require.Error(t, err, name)
	}
}

// TestHistoryWindowsBound: a scope keeps its Windows latest windows in
// time order, whatever order they came in, and one report per window.
func TestHistoryWindowsBound(t *testing.T) {
	h := newHistory(t, controlplane.HistoryConfig{Windows: 3})
	_, ok := h.Latest(schemas.ScopeCluster, "")
	require.False(t, ok)
	for _, w := range []int{2, 0, 1, 4, 3} {
		h.AddReport(windowReport(schemas.ScopeCluster, "", w))
	}
	got, more := h.Reports(schemas.ScopeCluster, "", 0, math.MaxInt64, 10)
	require.Equal(t, []int64{2000, 3000, 4000}, reportStarts(got))
	require.False(t, more)

	// An old window arriving late is dropped at once: it is the oldest.
	h.AddReport(windowReport(schemas.ScopeCluster, "", 1))
	got, _ = h.Reports(schemas.ScopeCluster, "", 0, math.MaxInt64, 10)
	require.Equal(t, []int64{2000, 3000, 4000}, reportStarts(got))

	// The same window again replaces the report kept.
	again := windowReport(schemas.ScopeCluster, "", 3)
	again.Events = 5
	h.AddReport(again)
	got, _ = h.Reports(schemas.ScopeCluster, "", 0, math.MaxInt64, 10)
	require.Equal(t, []int64{2000, 3000, 4000}, reportStarts(got))
	require.Same(t, again, got[1])

	latest, ok := h.Latest(schemas.ScopeCluster, "")
	require.True(t, ok)
	require.Equal(t, int64(baseMs+4000), latest.StartMs)

	// Range and limit: the limit latest of [from, to).
	got, more = h.Reports(schemas.ScopeCluster, "", baseMs+2000, baseMs+4000, 1)
	require.Equal(t, []int64{3000}, reportStarts(got))
	require.True(t, more)

	// Scopes are apart.
	h.AddReport(windowReport(schemas.ScopeApp, "shop", 9))
	got, _ = h.Reports(schemas.ScopeApp, "shop", 0, math.MaxInt64, 10)
	require.Equal(t, []int64{9000}, reportStarts(got))
	_, ok = h.Latest(schemas.ScopeApp, "cart")
	require.False(t, ok)

	// Nil and unknown scopes are ignored.
	h.AddReport(nil)
	h.AddReport(&schemas.WindowReport{Scope: "partition", StartMs: baseMs + 99_000})
	latest, _ = h.Latest(schemas.ScopeCluster, "")
	require.Equal(t, int64(baseMs+4000), latest.StartMs)
}

// TestHistoryBytesBound: past MaxBytes the oldest windows go, whatever
// their scope, and the report just added always stays; the estimate
// grows with the keys' bytes, so long keys mean fewer windows.
func TestHistoryBytesBound(t *testing.T) {
	one := func(key string) int64 {
		reg := prometheus.NewRegistry()
		h := newHistory(t, controlplane.HistoryConfig{Registerer: reg})
		h.AddReport(windowReport(schemas.ScopeApp, "a", 0, key))
		return int64(testutil.ToFloat64(gatherGauge(t, reg, "keyheat_api_history_report_bytes")))
	}
	small, big := one("k"), one(string(make([]byte, 10_000)))
	require.Equal(t, int64(9_999), big-small, "a key's bytes count")

	// Room for four reports of one key.
	h := newHistory(t, controlplane.HistoryConfig{MaxBytes: 4*small + small/2})
	for w := range 3 {
		h.AddReport(windowReport(schemas.ScopeApp, "a", w, "k"))
		h.AddReport(windowReport(schemas.ScopeApp, "b", w, "k"))
	}
	a, _ := h.Reports(schemas.ScopeApp, "a", 0, math.MaxInt64, 10)
	b, _ := h.Reports(schemas.ScopeApp, "b", 0, math.MaxInt64, 10)
	require.Equal(t, []int64{1000, 2000}, reportStarts(a))
	require.Equal(t, []int64{1000, 2000}, reportStarts(b))

	// One report over the whole bound is kept, alone.
	huge := windowReport(schemas.ScopeCluster, "", 5, string(make([]byte, 10*int(small))))
	h.AddReport(huge)
	got, ok := h.Latest(schemas.ScopeCluster, "")
	require.True(t, ok)
	require.Same(t, huge, got)
	_, ok = h.Latest(schemas.ScopeApp, "a")
	require.False(t, ok, "every older window went")
}

func gatherGauge(t testing.TB, reg *prometheus.Registry, name string) prometheus.Collector {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() == name {
			g := prometheus.NewGauge(prometheus.GaugeOpts{Name: name})
			g.Set(mf.GetMetric()[0].GetGauge().GetValue())
			return g
		}
	}
	t.Fatalf("no metric %s", name)
	return nil
}

func hotEvent(typ, app, key string, detectedMs int64) *schemas.HotKeyEvent {
	e := &schemas.HotKeyEvent{Version: schemas.HotKeyVersion, ID: schemas.HotKeyID("keyheat.events", 1, "r", typ, app, key, detectedMs),
		Type: typ, App: app, Key: key, Rule: "r", Rate: 1200, Threshold: 1000, Topic: "keyheat.events", Partition: 1,
		OnsetMs: detectedMs, DetectedMs: detectedMs}
	if typ != schemas.HotKeyCooled {
		e.Mitigation = &schemas.Mitigation{Kind: schemas.MitigationLocalCache}
	}
	return e
}

func eventIDs(es []*schemas.HotKeyEvent) []string {
	out := []string{}
	for _, e := range es {
		out = append(out, e.App+"/"+e.Key+"/"+e.Type)
	}
	return out
}

// TestHistoryAlerts: the latest Alerts events by detected time, newest
// first; one published again replaces its first copy.
func TestHistoryAlerts(t *testing.T) {
	h := newHistory(t, controlplane.HistoryConfig{Alerts: 3})
	require.Empty(t, h.Alerts("", 10))
	h.AddAlert(hotEvent(schemas.HotKeyHot, "shop", "a", baseMs))
	h.AddAlert(hotEvent(schemas.HotKeyHot, "cart", "b", baseMs+1))
	h.AddAlert(hotEvent(schemas.HotKeyCooled, "shop", "a", baseMs+2))
	h.AddAlert(nil)
	require.Equal(t, []string{"shop/a/cooled", "cart/b/hot", "shop/a/hot"}, eventIDs(h.Alerts("", 10)))

	again := hotEvent(schemas.HotKeyHot, "cart", "b", baseMs+1)
	again.Rate = 9999
	h.AddAlert(again)
	got := h.Alerts("", 10)
	require.Equal(t, []string{"shop/a/cooled", "cart/b/hot", "shop/a/hot"}, eventIDs(got))
	require.Same(t, again, got[1])

	h.AddAlert(hotEvent(schemas.HotKeyHot, "shop", "c", baseMs+3))
	require.Equal(t, []string{"shop/c/hot", "shop/a/cooled", "cart/b/hot"}, eventIDs(h.Alerts("", 10)))
	require.Equal(t, []string{"shop/c/hot", "shop/a/cooled"}, eventIDs(h.Alerts("shop", 10)))
	require.Equal(t, []string{"shop/c/hot"}, eventIDs(h.Alerts("", 1)))

	// Time order whatever the arrival order: an event detected before
	// newer ones goes in its place, and the oldest goes past the bound.
	h.AddAlert(hotEvent(schemas.HotKeyHot, "shop", "e", baseMs+5))
	h.AddAlert(hotEvent(schemas.HotKeyHot, "shop", "d", baseMs+4))
	require.Equal(t, []string{"shop/e/hot", "shop/d/hot", "shop/c/hot"}, eventIDs(h.Alerts("", 10)))
	// At the bound, an event older than every kept one is not kept: it
	// would be the first to go.
	h.AddAlert(hotEvent(schemas.HotKeyHot, "shop", "a", baseMs))
	require.Equal(t, []string{"shop/e/hot", "shop/d/hot", "shop/c/hot"}, eventIDs(h.Alerts("", 10)))
}

// TestHistoryConcurrent: writers and readers at once (run with -race);
// the bounds hold throughout.
func TestHistoryConcurrent(t *testing.T) {
	reg := prometheus.NewRegistry()
	h := newHistory(t, controlplane.HistoryConfig{Windows: 50, Alerts: 20, Registerer: reg})
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			app := "app" + strconv.Itoa(g)
			for w := range 300 {
				h.AddReport(windowReport(schemas.ScopeApp, app, w, "k"))
				h.AddReport(windowReport(schemas.ScopeCluster, "", w, "k"))
				h.AddAlert(hotEvent(schemas.HotKeyHot, app, strconv.Itoa(w), int64(w)))
			}
		})
		wg.Go(func() {
			for range 300 {
				rs, _ := h.Reports(schemas.ScopeCluster, "", 0, math.MaxInt64, 1000)
				require.LessOrEqual(t, len(rs), 50)
				for i := 1; i < len(rs); i++ {
					require.Less(t, rs[i-1].StartMs, rs[i].StartMs)
				}
				require.LessOrEqual(t, len(h.Alerts("", 1000)), 20)
				h.Latest(schemas.ScopeApp, "app0")
			}
		})
	}
	wg.Wait()
	for g := range 4 {
		rs, _ := h.Reports(schemas.ScopeApp, "app"+strconv.Itoa(g), 0, math.MaxInt64, 1000)
		require.Len(t, rs, 50)
		require.Equal(t, int64(baseMs+299_000), rs[49].StartMs)
	}
	require.Equal(t, 5*50.0, testutil.ToFloat64(gatherGauge(t, reg, "keyheat_api_history_reports")))
	require.Equal(t, 20.0, testutil.ToFloat64(gatherGauge(t, reg, "keyheat_api_history_alerts")))
}
