package controlplane_test

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/keyheat/keyheat/controlplane"
	"github.com/keyheat/keyheat/hotkeys"
	"github.com/keyheat/keyheat/internal/testenv"
	"github.com/keyheat/keyheat/schemas"
)

// TestAlertsSourceOnlyForOlder: GET /api/alerts asks the report source
// only when memory's events after the time it is complete from do not
// fill the answer; a source that cannot be read shows which answers asked.
func TestAlertsSourceOnlyForOlder(t *testing.T) {
	h := newHistory(t, controlplane.HistoryConfig{})
	a := historyServer(t, h, brokenSource(t), nil)
	for i := 1; i <= 5; i++ {
		h.AddAlert(hotEvent(schemas.HotKeyHot, "shop", "k"+strconv.Itoa(i), baseMs+int64(i)))
	}
	// Memory is complete after its oldest event (another detected in the
	// same millisecond may have gone): four events surely hold the newest.
	page := decode[controlplane.AlertPage](t, a.get("/api/alerts?limit=4", http.StatusOK).body)
	require.Empty(t, page.SourceError, "memory fills the answer")
	require.Equal(t, []string{"shop/k5/hot", "shop/k4/hot", "shop/k3/hot", "shop/k2/hot"}, eventIDs(page.Alerts))
	page = decode[controlplane.AlertPage](t, a.get("/api/alerts?limit=5", http.StatusOK).body)
	require.NotEmpty(t, page.SourceError, "the fifth may be preceded by older events in ClickHouse")
	require.Len(t, page.Alerts, 5)
}

// TestAlertsSourceAnswerReused: the source's answer for events older
// than memory holds is reused for a few seconds of the server's clock,
// then asked again.
func TestAlertsSourceAnswerReused(t *testing.T) {
	s := newClickHouseStore(t)
	h := newHistory(t, controlplane.HistoryConfig{})
	h.AddAlert(hotEvent(schemas.HotKeyHot, "shop", "new", baseMs+1000))
	var nowNs atomic.Int64
	nowNs.Store(time.UnixMilli(baseMs + 2000).UnixNano())
	f, err := hotkeys.NewFollower(hotkeys.FollowerConfig{ClientOpts: []kgo.Opt{kgo.SeedBrokers(testenv.FreeAddr(t))}})
	require.NoError(t, err)
	t.Cleanup(f.Close)
	srv, err := controlplane.NewWithClock(controlplane.Config{Follower: f, Producer: unreachableProducer(t), History: h,
		ReportSource: s.src}, func() time.Time { return time.Unix(0, nowNs.Load()) })
	require.NoError(t, err)
	t.Cleanup(srv.Close)
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	a := &api{t: t, srv: srv, base: hs.URL}
	ids := func() []string {
		page := decode[controlplane.AlertPage](t, a.get("/api/alerts", http.StatusOK).body)
		require.Empty(t, page.SourceError)
		return eventIDs(page.Alerts)
	}

	s.write(nil, []*schemas.HotKeyEvent{hotEvent(schemas.HotKeyHot, "shop", "a", baseMs+10)})
	require.Equal(t, []string{"shop/new/hot", "shop/a/hot"}, ids())
	s.write(nil, []*schemas.HotKeyEvent{hotEvent(schemas.HotKeyHot, "shop", "b", baseMs+20)})
	require.Equal(t, []string{"shop/new/hot", "shop/a/hot"}, ids(), "the answer is reused")
	nowNs.Add(int64(10 * time.Second))
	require.Equal(t, []string{"shop/new/hot", "shop/b/hot", "shop/a/hot"}, ids(), "and asked again later")
}

// TestKeyStatsDefaultSpan: without from the key stats cover the day
// before the newest window memory holds, and ClickHouse is asked for no
// earlier window; from reaches further back.
func TestKeyStatsDefaultSpan(t *testing.T) {
	s := newClickHouseStore(t)
	h := newHistory(t, controlplane.HistoryConfig{})
	a := historyServer(t, h, s.src, nil)
	dayMs := controlplane.DefaultKeyStatsSpan.Milliseconds()
	old := windowReport(schemas.ScopeApp, "shop", -int(dayMs/1000)-2, "k") // a day and 2 s before window 0
	recent := windowReport(schemas.ScopeApp, "shop", -3, "k")
	s.write([]*schemas.WindowReport{old, recent}, nil)
	h.AddReport(windowReport(schemas.ScopeApp, "shop", 0, "k"))

	starts := func(st controlplane.KeyStats) []int64 {
		var out []int64
		for _, w := range st.Windows {
			out = append(out, w.StartMs-baseMs)
		}
		return out
	}
	st := decode[controlplane.KeyStats](t, a.get("/api/hotkeys/k/stats?app=shop", http.StatusOK).body)
	require.Equal(t, []int64{0, -3000}, starts(st))
	require.False(t, st.More)
	st = decode[controlplane.KeyStats](t, a.get("/api/hotkeys/k/stats?app=shop&from=0", http.StatusOK).body)
	require.Equal(t, []int64{0, -3000, old.StartMs - baseMs}, starts(st))
	// Paging back, to set to the oldest window seen: the day before it
	// holds the old window.
	st = decode[controlplane.KeyStats](t, a.get("/api/hotkeys/k/stats?app=shop&to="+strconv.FormatInt(recent.StartMs, 10), http.StatusOK).body)
	require.Equal(t, []int64{old.StartMs - baseMs}, starts(st))
}

// TestLatestJSONCounts: the cached JSON of a scope's latest report counts
// in the history's bytes until a newer report replaces it.
func TestLatestJSONCounts(t *testing.T) {
	reg := prometheus.NewRegistry()
	h := newHistory(t, controlplane.HistoryConfig{Registerer: reg})
	a := historyServer(t, h, nil, nil)
	bytes := func() int64 {
		return int64(testutil.ToFloat64(gatherGauge(t, reg, "keyheat_api_history_report_bytes")))
	}
	h.AddReport(windowReport(schemas.ScopeCluster, "", 0, "k"))
	before := bytes()
	body := a.get("/api/reports/latest", http.StatusOK).body
	require.Equal(t, before+int64(len(body)-1), bytes(), "the JSON, without the newline the answer ends with")
	a.get("/api/reports/latest", http.StatusOK)
	require.Equal(t, before+int64(len(body)-1), bytes(), "counted once")
	h.AddReport(windowReport(schemas.ScopeCluster, "", 1, "k"))
	require.Equal(t, 2*before, bytes(), "the cache of a report no longer latest is dropped")
}
