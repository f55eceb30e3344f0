package controlplane_test

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/keyheat/keyheat/controlplane"
	"github.com/keyheat/keyheat/controlplane/chsource"
	"github.com/keyheat/keyheat/internal/testenv"
	"github.com/keyheat/keyheat/schemas"
	sinkch "github.com/keyheat/keyheat/sink/clickhouse"
)

// brokenSource is a ClickHouse source whose database does not exist:
// every query fails.
func brokenSource(t *testing.T) *chsource.Source {
	t.Helper()
	src, err := chsource.New(chsource.Config{Conn: testenv.ClickHouseConn(t), Database: testenv.UniqueName(t, "missing")})
	require.NoError(t, err)
	return src
}

// clickHouseStore is a fresh database on the real ClickHouse, its tables
// made by the real sink's migrations, a writer into it, and a Source
// reading it.
type clickHouseStore struct {
	t   *testing.T
	w   *sinkch.Writer
	src *chsource.Source
}

func newClickHouseStore(t *testing.T) *clickHouseStore {
	t.Helper()
	conn := testenv.ClickHouseConn(t)
	db := testenv.ClickHouseDatabase(t, conn)
	opts := sinkch.DefaultOptions()
	opts.Addr, opts.Database, opts.FlushInterval = []string{testenv.ClickHouseAddr(t)}, db, 10*time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	w, err := sinkch.Open(ctx, opts, sinkch.Deps{})
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
		defer cancel()
		require.NoError(t, w.Close(ctx))
	})
	src, err := chsource.New(chsource.Config{Conn: conn, Database: db, QueryTimeout: hangGuard})
	require.NoError(t, err)
	return &clickHouseStore{t: t, w: w, src: src}
}

// write writes reports and events through the sink and returns once
// ClickHouse holds them all.
func (s *clickHouseStore) write(reports []*schemas.WindowReport, events []*schemas.HotKeyEvent) {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, len(reports)+len(events))
	ack := func(err error) { errs <- err; wg.Done() }
	for _, r := range reports {
		wg.Add(1)
		require.NoError(s.t, s.w.WriteReport(ctx, r, ack))
	}
	for _, e := range events {
		wg.Add(1)
		require.NoError(s.t, s.w.WriteHotKey(ctx, e, ack))
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(s.t, err)
	}
}

// TestRoutesWithClickHouse: windows older than memory's come from
// ClickHouse, memory's own from memory; a window in both is answered
// once, from memory; alerts top up from ClickHouse. The ClickHouse rows
// are written by the real sink.
func TestRoutesWithClickHouse(t *testing.T) {
	s := newClickHouseStore(t)
	h := newHistory(t, controlplane.HistoryConfig{})
	a := historyServer(t, h, s.src, nil)

	var stored []*schemas.WindowReport
	for w := range 6 { // windows 0 to 5 in ClickHouse
		stored = append(stored, windowReport(schemas.ScopeCluster, "", w, "k"), windowReport(schemas.ScopeApp, "shop", w, "k"))
	}
	s.write(stored, []*schemas.HotKeyEvent{hotEvent(schemas.HotKeyHot, "shop", "k", baseMs+10),
		hotEvent(schemas.HotKeyCooled, "shop", "k", baseMs+20), hotEvent(schemas.HotKeyHot, "cart", "z", baseMs+5)})
	for w := 4; w < 9; w++ { // windows 4 to 8 in memory
		h.AddReport(windowReport(schemas.ScopeCluster, "", w, "k"))
		r := windowReport(schemas.ScopeApp, "shop", w, "k")
		r.Top[0].Count = 1000 + uint64(w) // tells memory's from ClickHouse's
		h.AddReport(r)
	}
	h.AddAlert(hotEvent(schemas.HotKeyCooled, "shop", "k", baseMs+20)) // also in ClickHouse
	h.AddAlert(hotEvent(schemas.HotKeyHot, "shop", "k", baseMs+40))

	page := decode[controlplane.ReportPage](t, a.get("/api/reports", http.StatusOK).body)
	require.Equal(t, []int64{0, 1000, 2000, 3000, 4000, 5000, 6000, 7000, 8000}, reportStarts(page.Reports))
	require.Equal(t, int64(baseMs+4000), page.HistoryFromMs)
	require.Empty(t, page.SourceError)
	require.Equal(t, uint64(0), page.Reports[3].Floor, "from ClickHouse")
	require.Equal(t, stored[0].Top, page.Reports[0].Top)

	// The limit keeps the latest, from memory and ClickHouse together.
	page = decode[controlplane.ReportPage](t, a.get("/api/reports?limit=7", http.StatusOK).body)
	require.Equal(t, []int64{2000, 3000, 4000, 5000, 6000, 7000, 8000}, reportStarts(page.Reports))
	require.True(t, page.More)
	page = decode[controlplane.ReportPage](t, a.get("/api/reports?limit=7&to=1767225602000", http.StatusOK).body)
	require.Equal(t, []int64{0, 1000}, reportStarts(page.Reports))
	require.False(t, page.More)

	st := decode[controlplane.KeyStats](t, a.get("/api/hotkeys/k/stats?app=shop", http.StatusOK).body)
	require.Len(t, st.Windows, 9)
	for i, w := range st.Windows {
		if w.StartMs >= baseMs+4000 {
			require.Equal(t, controlplane.SourceMemory, w.Source, "window %d", i)
			require.Equal(t, uint64(1000)+uint64(w.StartMs-baseMs)/1000, w.Count, "window %d", i)
		} else {
			require.Equal(t, controlplane.SourceClickHouse, w.Source, "window %d", i)
			require.Equal(t, uint64(300), w.Count, "window %d", i)
			require.Equal(t, controlplane.KeyRanks{Top: 1}, w.Ranks)
		}
	}
	require.Equal(t, []string{"shop/k/hot", "shop/k/cooled", "shop/k/hot"}, eventIDs(st.Alerts), "memory's, then ClickHouse's older ones, once each")
	require.Equal(t, 2, st.Episodes)

	alerts := decode[controlplane.AlertPage](t, a.get("/api/alerts", http.StatusOK).body)
	require.Equal(t, []string{"shop/k/hot", "shop/k/cooled", "shop/k/hot", "cart/z/hot"}, eventIDs(alerts.Alerts))
	alerts = decode[controlplane.AlertPage](t, a.get("/api/alerts?limit=3", http.StatusOK).body)
	require.Equal(t, []string{"shop/k/hot", "shop/k/cooled", "shop/k/hot"}, eventIDs(alerts.Alerts))
}

// TestRoutesSourceFails: when ClickHouse cannot be read, the routes answer
// what memory holds and say why the rest is missing.
func TestRoutesSourceFails(t *testing.T) {
	h := newHistory(t, controlplane.HistoryConfig{})
	a := historyServer(t, h, brokenSource(t), nil)
	h.AddReport(windowReport(schemas.ScopeCluster, "", 5))
	h.AddReport(windowReport(schemas.ScopeApp, "shop", 5, "k"))
	h.AddAlert(hotEvent(schemas.HotKeyHot, "shop", "k", baseMs))

	page := decode[controlplane.ReportPage](t, a.get("/api/reports", http.StatusOK).body)
	require.Equal(t, []int64{5000}, reportStarts(page.Reports))
	require.Contains(t, page.SourceError, "could not be read")
	st := decode[controlplane.KeyStats](t, a.get("/api/hotkeys/k/stats", http.StatusOK).body)
	require.Len(t, st.Windows, 1)
	require.Len(t, st.Alerts, 1)
	require.NotEmpty(t, st.SourceError)
	alerts := decode[controlplane.AlertPage](t, a.get("/api/alerts", http.StatusOK).body)
	require.Len(t, alerts.Alerts, 1)
	require.NotEmpty(t, alerts.SourceError)
	// Memory alone answers what it covers without asking ClickHouse.
	page = decode[controlplane.ReportPage](t, a.get("/api/reports?from=1767225605000", http.StatusOK).body)
	require.Empty(t, page.SourceError)
}
