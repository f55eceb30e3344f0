package controlplane_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/keyheat/keyheat/controlplane"
	"github.com/keyheat/keyheat/schemas"
)

// TestKeyStats: a key's windows from its app's reports in memory, newest
// first, with its ranks in each list; its alerts; its registry entry
// while hot, read from a follower of a kfake registry.
func TestKeyStats(t *testing.T) {
	reg := newRegistry(t, 1)
	reg.produce(detector(schemas.HotKeyHot, "shop", "k/1", 1500))
	f := reg.follower()
	reg.barrier(f)
	h := newHistory(t, controlplane.HistoryConfig{})
	a := reg.server(f, controlplane.Config{History: h})

	for w := range 4 {
		r := windowReport(schemas.ScopeApp, "shop", w, "x", "k/1")
		if w == 2 {
			// Window 2 lists the key by bytes only, and in first place.
			r = windowReport(schemas.ScopeApp, "shop", w, "x")
			r.TopBytes = []schemas.KeyCount{{App: "shop", Key: "k/1", Count: 40, Bytes: 1 << 20, Partition: 1}}
		}
		h.AddReport(r)
		h.AddReport(windowReport(schemas.ScopeApp, "cart", w, "k/1"))
		h.AddReport(windowReport(schemas.ScopeCluster, "", w, "k/1"))
	}
	h.AddAlert(hotEvent(schemas.HotKeyHot, "shop", "k/1", baseMs+100))
	h.AddAlert(hotEvent(schemas.HotKeyUpdate, "shop", "k/1", baseMs+200))
	h.AddAlert(hotEvent(schemas.HotKeyHot, "shop", "other", baseMs+300))

	r := a.get("/api/hotkeys/k%2F1/stats?app=shop", http.StatusOK)
	require.Equal(t, "null", string(jsonFields(t, r.body)["clients"]), "clients is there, null")
	st := decode[controlplane.KeyStats](t, r.body)
	require.Equal(t, "shop", st.App)
	require.Equal(t, "k/1", st.Key)
	require.Nil(t, st.KeyB64)
	require.Len(t, st.KeyHash, 16)
	require.Len(t, st.Windows, 4)
	require.Equal(t, controlplane.KeyWindow{StartMs: baseMs + 3000, EndMs: baseMs + 4000, App: "shop", Count: 290,
		Rate: 290, Share: 0.29, Bytes: 4096, Reads: 199, Writes: 99, LatencyUs: 777, Partition: 1,
		Ranks: controlplane.KeyRanks{Top: 2}, Source: controlplane.SourceMemory}, st.Windows[0])
	require.Equal(t, controlplane.KeyRanks{TopBytes: 1}, st.Windows[1].Ranks)
	require.Equal(t, uint64(40), st.Windows[1].Count)
	require.Equal(t, int64(baseMs), st.Windows[3].StartMs)
	require.False(t, st.More)
	require.Equal(t, int64(baseMs), st.HistoryFromMs)
	require.NotNil(t, st.Partition)
	require.Equal(t, int32(1), *st.Partition)
	require.True(t, st.Alerted)
	require.Equal(t, 1, st.Episodes)
	require.Equal(t, []string{"shop/k/1/update", "shop/k/1/hot"}, eventIDs(st.Alerts))
	require.Len(t, st.Registry, 1)
	require.Equal(t, 1500.0, st.Registry[0].Rate)

	// Every app: a window per app that lists the key, by app.
	st = decode[controlplane.KeyStats](t, a.get("/api/hotkeys/k%2F1/stats?limit=3", http.StatusOK).body)
	require.Equal(t, "", st.App)
	var seen []string
	for _, w := range st.Windows {
		seen = append(seen, w.App)
	}
	require.Equal(t, []string{"cart", "shop", "cart"}, seen)
	require.True(t, st.More)
	require.Len(t, st.Registry, 1)

	// The key_b64 form; a key never listed nor hot.
	st = decode[controlplane.KeyStats](t, a.get("/api/hotkeys/stats?app=cart&key_b64="+b64("k/1"), http.StatusOK).body)
	require.Len(t, st.Windows, 4)
	require.Empty(t, st.Registry)
	require.False(t, st.Alerted)
	st = decode[controlplane.KeyStats](t, a.get("/api/hotkeys/nope/stats?from=1767225601000&to=1767225603000", http.StatusOK).body)
	require.Empty(t, st.Windows)
	require.NotNil(t, st.Windows)
	require.Nil(t, st.Partition)
	require.Empty(t, st.Alerts)
	require.NotNil(t, st.Registry)
}

// TestKeyStatsKeys: keys in paths as the mutations take them: "/" alone
// (%2F), "." and "..", bytes that are not UTF-8; the range bounds the
// windows.
func TestKeyStatsKeys(t *testing.T) {
	h := newHistory(t, controlplane.HistoryConfig{})
	a := historyServer(t, h, nil, nil)
	keys := []string{"/", ".", "..", "stats", "promote", "a\xffb", "sp ace"}
	for w := range 3 {
		h.AddReport(windowReport(schemas.ScopeApp, "shop", w, keys...))
	}
	for _, k := range keys {
		st := decode[controlplane.KeyStats](t, a.get("/api/hotkeys/"+keyPath(k)+"/stats?app=shop", http.StatusOK).body)
		require.Equal(t, k, keyOfStats(st), "key %q", k)
		require.Len(t, st.Windows, 3, "key %q", k)
		st = decode[controlplane.KeyStats](t, a.get("/api/hotkeys/stats?app=shop&from=1767225601000&key_b64="+b64(k), http.StatusOK).body)
		require.Len(t, st.Windows, 2, "key %q", k)
	}
}

func keyOfStats(st controlplane.KeyStats) string {
	if st.KeyB64 != nil {
		return string(st.KeyB64)
	}
	return st.Key
}

func TestKeyStatsRefused(t *testing.T) {
	h := newHistory(t, controlplane.HistoryConfig{})
	a := historyServer(t, h, nil, nil)
	for _, p := range []string{
		"/api/hotkeys/stats",                                   // no key
		"/api/hotkeys/stats?key_b64=",                          // empty key
		"/api/hotkeys/stats?key_b64=%21%21",                    // not base64
		"/api/hotkeys/k/stats?key_b64=aw",                      // both
		"/api/hotkeys/k/stats?ttl=1m",                          // unknown
		"/api/hotkeys/k/stats?limit=0",                         // limit
		"/api/hotkeys/k/stats?from=9&to=1",                     // range
		"/api/hotkeys/k/stats?app=%FF",                         // app not UTF-8
		"/api/hotkeys/" + strings.Repeat("k", 2000) + "/stats", // too long
	} {
		a.get(p, http.StatusBadRequest).errorText(t)
	}
	for _, tc := range []struct{ method, path, allow string }{
		{"POST", "/api/hotkeys/k/stats", "GET, HEAD"},
		{"DELETE", "/api/hotkeys/%2F/stats", "GET, HEAD"},
		{"PUT", "/api/hotkeys/stats", "DELETE, GET, HEAD"},
		{"GET", "/api/hotkeys/k", "DELETE"},
		{"GET", "/api/hotkeys/k/promote", "POST"},
	} {
		r := a.doAuth(tc.method, tc.path, nil, token)
		require.Equal(t, http.StatusMethodNotAllowed, r.code, "%s %s: %s", tc.method, tc.path, r.body)
		require.Equal(t, tc.allow, r.header.Get("Allow"), "%s %s", tc.method, tc.path)
	}
	a.get("/api/hotkeys/k/stats/more", http.StatusNotFound)
}

// TestHistoryRouteMetrics: requests are counted by route pattern; a key
// never becomes a label value.
func TestHistoryRouteMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	h := newHistory(t, controlplane.HistoryConfig{})
	a := historyServer(t, h, nil, reg)
	a.get("/api/hotkeys/secret-key/stats", http.StatusOK)
	a.get("/api/hotkeys/%2F/stats", http.StatusOK)
	a.get("/api/hotkeys/stats?key_b64="+b64("secret-key"), http.StatusOK)
	a.get("/api/reports/latest", http.StatusNotFound)
	a.get("/api/alerts", http.StatusOK)
	mfs, err := reg.Gather()
	require.NoError(t, err)
	routes := map[string]bool{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				require.NotContains(t, l.GetValue(), "secret", "label %s", l.GetName())
				if l.GetName() == "route" {
					routes[l.GetValue()] = true
				}
			}
		}
	}
	for _, r := range []string{"/api/hotkeys/{key}/stats", "/api/hotkeys/{path...}", "/api/hotkeys/stats",
		"/api/reports/latest", "/api/alerts"} {
		require.True(t, routes[r], "route %s counted; have %v", r, routes)
	}
}
