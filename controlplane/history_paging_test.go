package controlplane_test

import (
	"net/http"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/keyheat/keyheat/controlplane"
	"github.com/keyheat/keyheat/schemas"
)

// TestReportsMoreWhenMemoryFillsThePage: a page filled exactly by the
// windows memory holds still says "more" when the report source holds
// older windows of the range, so that paging back goes on from memory's
// edge into ClickHouse's. With detect's defaults (600 windows kept, pages
// of 60) the tenth page back is such a page.
func TestReportsMoreWhenMemoryFillsThePage(t *testing.T) {
	s := newClickHouseStore(t)
	h := newHistory(t, controlplane.HistoryConfig{})
	a := historyServer(t, h, s.src, nil)
	var stored []*schemas.WindowReport
	for w := range 4 { // windows 0 to 3 in ClickHouse only
		stored = append(stored, windowReport(schemas.ScopeCluster, "", w, "k"))
	}
	s.write(stored, nil)
	for w := 4; w < 9; w++ { // windows 4 to 8 in memory
		h.AddReport(windowReport(schemas.ScopeCluster, "", w, "k"))
	}

	page := decode[controlplane.ReportPage](t, a.get("/api/reports?limit=5", http.StatusOK).body)
	require.Equal(t, []int64{4000, 5000, 6000, 7000, 8000}, reportStarts(page.Reports))
	require.True(t, page.More, "windows 0 to 3 are in ClickHouse: the page must say more follow")

	// Paging back from a later page lands on the same edge.
	page = decode[controlplane.ReportPage](t, a.get("/api/reports?limit=2&to="+strconv.FormatInt(baseMs+6000, 10), http.StatusOK).body)
	require.Equal(t, []int64{4000, 5000}, reportStarts(page.Reports))
	require.True(t, page.More, "windows 0 to 3 are in ClickHouse: the page must say more follow")
}

// TestKeyStatsMoreWhenMemoryFillsThePage: the key stats' "more" is set
// the same way when memory's windows fill the limit and ClickHouse holds
// older windows listing the key.
func TestKeyStatsMoreWhenMemoryFillsThePage(t *testing.T) {
	s := newClickHouseStore(t)
	h := newHistory(t, controlplane.HistoryConfig{})
	a := historyServer(t, h, s.src, nil)
	var stored []*schemas.WindowReport
	for w := range 4 {
		stored = append(stored, windowReport(schemas.ScopeApp, "shop", w, "k"))
	}
	s.write(stored, nil)
	for w := 4; w < 9; w++ {
		h.AddReport(windowReport(schemas.ScopeApp, "shop", w, "k"))
	}
	st := decode[controlplane.KeyStats](t, a.get("/api/hotkeys/k/stats?app=shop&limit=5", http.StatusOK).body)
	require.Len(t, st.Windows, 5)
	require.True(t, st.More, "windows 0 to 3 list the key in ClickHouse: the answer must say more follow")
}

// TestKeyStatsAllAppsNoGap: without app, memory counts as complete only
// from the newest of the apps' oldest windows (a busy app's bound covers
// less time than a quiet one's), and ClickHouse answers what lies before:
// every window of every app is in the answer once, and history_from_ms
// is that newest start, as KeyStats documents.
func TestKeyStatsAllAppsNoGap(t *testing.T) {
	s := newClickHouseStore(t)
	h := newHistory(t, controlplane.HistoryConfig{Windows: 3})
	a := historyServer(t, h, s.src, nil)
	var stored []*schemas.WindowReport
	for w := range 9 {
		r := windowReport(schemas.ScopeApp, "shop", w, "k") // busy: every window
		h.AddReport(r)
		stored = append(stored, r)
		if w%4 == 0 { // quiet: windows 0, 4, 8
			r := windowReport(schemas.ScopeApp, "cart", w, "k")
			h.AddReport(r)
			stored = append(stored, r)
		}
	}
	s.write(stored, nil)

	st := decode[controlplane.KeyStats](t, a.get("/api/hotkeys/k/stats", http.StatusOK).body)
	require.Empty(t, st.SourceError)
	var shop []int64
	for _, w := range st.Windows {
		if w.App == "shop" {
			shop = append(shop, (w.StartMs-baseMs)/1000)
		}
	}
	require.Equal(t, []int64{8, 7, 6, 5, 4, 3, 2, 1, 0}, shop,
		"shop's windows 0 to 5 are in ClickHouse (memory holds 6 to 8); history_from_ms=%d", st.HistoryFromMs-baseMs)
	require.Equal(t, int64(baseMs+6000), st.HistoryFromMs, "the newest of the apps' oldest windows, as KeyStats documents")
}
