package controlplane_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/keyheat/keyheat/controlplane"
	"github.com/keyheat/keyheat/hotkeys"
	"github.com/keyheat/keyheat/internal/testenv"
	"github.com/keyheat/keyheat/schemas"
)

// historyServer serves a Server over h (and src, when not nil) whose
// follower and producer reach no broker: the history routes do not need
// Kafka.
func historyServer(t *testing.T, h *controlplane.History, src controlplane.ReportSource, reg prometheus.Registerer) *api {
	t.Helper()
	f, err := hotkeys.NewFollower(hotkeys.FollowerConfig{ClientOpts: []kgo.Opt{kgo.SeedBrokers(testenv.FreeAddr(t))}})
	require.NoError(t, err)
	t.Cleanup(f.Close)
	cfg := controlplane.Config{Follower: f, Producer: unreachableProducer(t), History: h, Registerer: reg}
	if src != nil {
		cfg.ReportSource = src
	}
	return serve(t, cfg)
}

// plainHistoryServer is a Server over h, not served over HTTP.
func plainHistoryServer(t testing.TB, h *controlplane.History) *controlplane.Server {
	t.Helper()
	f, err := hotkeys.NewFollower(hotkeys.FollowerConfig{ClientOpts: []kgo.Opt{kgo.SeedBrokers(testenv.FreeAddr(t))}})
	require.NoError(t, err)
	t.Cleanup(f.Close)
	s, err := controlplane.New(controlplane.Config{Follower: f, Producer: unreachableProducer(t), History: h})
	require.NoError(t, err)
	t.Cleanup(s.Close)
	return s
}

// get sends a GET and checks its status.
func (a *api) get(path string, code int) reply {
	a.t.Helper()
	r := a.do("GET", path, nil)
	require.Equal(a.t, code, r.code, "GET %s: %s", path, r.body)
	return r
}

func TestHistoryRoutesWithoutHistory(t *testing.T) {
	a := historyServer(t, nil, nil, nil)
	for _, p := range []string{"/api/reports/latest", "/api/reports", "/api/alerts", "/api/hotkeys/k/stats",
		"/api/hotkeys/stats?key_b64=" + b64("k")} {
		r := a.get(p, http.StatusNotFound)
		require.Contains(t, r.errorText(t), "Config.History", p)
	}
}

func TestReportSourceNeedsHistory(t *testing.T) {
	f, err := hotkeys.NewFollower(hotkeys.FollowerConfig{ClientOpts: []kgo.Opt{kgo.SeedBrokers(testenv.FreeAddr(t))}})
	require.NoError(t, err)
	t.Cleanup(f.Close)
	_, err = controlplane.New(controlplane.Config{Follower: f, Producer: unreachableProducer(t),
		ReportSource: brokenSource(t)})
	require.ErrorContains(t, err, "ReportSource needs a History")
}

func TestReportsLatest(t *testing.T) {
	h := newHistory(t, controlplane.HistoryConfig{})
	a := historyServer(t, h, nil, nil)
	require.Contains(t, a.get("/api/reports/latest", http.StatusNotFound).errorText(t), "no report yet for the cluster")

	first := windowReport(schemas.ScopeCluster, "", 1, "a", "b")
	h.AddReport(first)
	h.AddReport(windowReport(schemas.ScopeCluster, "", 0, "old"))
	shop := windowReport(schemas.ScopeApp, "shop", 1, "a")
	h.AddReport(shop)
	want := func(r *schemas.WindowReport) []byte {
		b, err := r.AppendJSON(nil)
		require.NoError(t, err)
		return append(b, '\n')
	}
	require.Equal(t, string(want(first)), string(a.get("/api/reports/latest", http.StatusOK).body))
	require.Equal(t, string(want(first)), string(a.get("/api/reports/latest?scope=cluster", http.StatusOK).body))
	require.Equal(t, string(want(shop)), string(a.get("/api/reports/latest?app=shop", http.StatusOK).body))
	require.Equal(t, string(want(shop)), string(a.get("/api/reports/latest?scope=app&app=shop", http.StatusOK).body))
	require.Contains(t, a.get("/api/reports/latest?app=cart", http.StatusNotFound).errorText(t), `app "cart"`)

	// A newer window, and then the same window again, are served at once
	// (the encoded answer is cached per report).
	second := windowReport(schemas.ScopeCluster, "", 2, "c")
	h.AddReport(second)
	require.Equal(t, string(want(second)), string(a.get("/api/reports/latest", http.StatusOK).body))
	replaced := windowReport(schemas.ScopeCluster, "", 2, "d")
	h.AddReport(replaced)
	require.Equal(t, string(want(replaced)), string(a.get("/api/reports/latest", http.StatusOK).body))

	for _, p := range []string{"?scope=cluster&app=shop", "?scope=app", "?scope=partition", "?window=1",
		"?app=a&app=b", "?app=" + strings.Repeat("x", 300), "?app=%zz"} {
		a.get("/api/reports/latest"+p, http.StatusBadRequest).errorText(t)
	}
	r := a.do("POST", "/api/reports/latest", nil)
	require.Equal(t, http.StatusMethodNotAllowed, r.code)
	require.Equal(t, "GET, HEAD", r.header.Get("Allow"))
}

func TestReportsRange(t *testing.T) {
	h := newHistory(t, controlplane.HistoryConfig{})
	a := historyServer(t, h, nil, nil)
	page := decode[controlplane.ReportPage](t, a.get("/api/reports", http.StatusOK).body)
	require.Equal(t, controlplane.ReportPage{Reports: []*schemas.WindowReport{}}, page)
	require.Contains(t, string(a.get("/api/reports", http.StatusOK).body), `"reports":[]`)

	for w := range 10 {
		h.AddReport(windowReport(schemas.ScopeCluster, "", w, "k"))
		h.AddReport(windowReport(schemas.ScopeApp, "shop", w, "k"))
	}
	page = decode[controlplane.ReportPage](t, a.get("/api/reports", http.StatusOK).body)
	require.Equal(t, []int64{0, 1000, 2000, 3000, 4000, 5000, 6000, 7000, 8000, 9000}, reportStarts(page.Reports))
	require.Equal(t, int64(baseMs), page.HistoryFromMs)
	require.False(t, page.More)
	require.Equal(t, windowReport(schemas.ScopeCluster, "", 3, "k"), page.Reports[3], "the reports' own JSON")

	// from and to, in milliseconds or RFC 3339; the limit keeps the
	// latest, and more says earlier ones were left out.
	from := strconv.FormatInt(baseMs+2000, 10)
	to := time.UnixMilli(baseMs + 7000).UTC().Format(time.RFC3339)
	page = decode[controlplane.ReportPage](t, a.get("/api/reports?"+url.Values{"from": {from}, "to": {to}, "limit": {"3"}}.Encode(), http.StatusOK).body)
	require.Equal(t, []int64{4000, 5000, 6000}, reportStarts(page.Reports))
	require.True(t, page.More)
	// Paging back: to is the first report's start.
	page = decode[controlplane.ReportPage](t, a.get("/api/reports?"+url.Values{"from": {from}, "to": {"1767225604000"}, "limit": {"3"}}.Encode(), http.StatusOK).body)
	require.Equal(t, []int64{2000, 3000}, reportStarts(page.Reports))
	require.False(t, page.More)

	page = decode[controlplane.ReportPage](t, a.get("/api/reports?app=shop&from=2026-01-01T00:00:08.5Z", http.StatusOK).body)
	require.Equal(t, []int64{9000}, reportStarts(page.Reports))
	require.Equal(t, "shop", page.Reports[0].App)

	for _, p := range []string{"?from=yesterday", "?to=-5", "?from=5&to=5", "?from=9&to=3", "?limit=0",
		"?limit=" + strconv.Itoa(controlplane.MaxReportsLimit+1), "?limit=x", "?scope=app", "?cursor=x",
		"?from=1969-12-31T23:59:59Z", "?from=99999999999999999999"} {
		a.get("/api/reports"+p, http.StatusBadRequest).errorText(t)
	}
}

func TestAlertsRoute(t *testing.T) {
	h := newHistory(t, controlplane.HistoryConfig{})
	a := historyServer(t, h, nil, nil)
	require.Equal(t, "{\"alerts\":[]}\n", string(a.get("/api/alerts", http.StatusOK).body))
	for i := range 5 {
		app := "shop"
		if i%2 == 1 {
			app = "cart"
		}
		h.AddAlert(hotEvent(schemas.HotKeyHot, app, "k"+strconv.Itoa(i), baseMs+int64(i)))
	}
	odd := hotEvent(schemas.HotKeyHot, "shop", "a\xffb", baseMs+10)
	h.AddAlert(odd)
	page := decode[controlplane.AlertPage](t, a.get("/api/alerts", http.StatusOK).body)
	require.Equal(t, []string{"shop/a\xffb/hot", "shop/k4/hot", "cart/k3/hot", "shop/k2/hot", "cart/k1/hot", "shop/k0/hot"}, eventIDs(page.Alerts))
	require.Equal(t, odd, page.Alerts[0], "a key that is not UTF-8 comes back whole (key_b64)")

	page = decode[controlplane.AlertPage](t, a.get("/api/alerts?app=cart&limit=1", http.StatusOK).body)
	require.Equal(t, []string{"cart/k3/hot"}, eventIDs(page.Alerts))

	for _, p := range []string{"?limit=0", "?limit=1001", "?key=k", "?app=" + strings.Repeat("x", 300)} {
		a.get("/api/alerts"+p, http.StatusBadRequest).errorText(t)
	}
}

// TestHistoryRoutesProtected: with ProtectReads the history routes need
// the token, as the list does.
func TestHistoryRoutesProtected(t *testing.T) {
	h := newHistory(t, controlplane.HistoryConfig{})
	h.AddReport(windowReport(schemas.ScopeCluster, "", 0))
	f, err := hotkeys.NewFollower(hotkeys.FollowerConfig{ClientOpts: []kgo.Opt{kgo.SeedBrokers(testenv.FreeAddr(t))}})
	require.NoError(t, err)
	t.Cleanup(f.Close)
	a := serve(t, controlplane.Config{Follower: f, Producer: unreachableProducer(t), History: h, Token: token, ProtectReads: true})
	for _, p := range []string{"/api/reports/latest", "/api/reports", "/api/alerts", "/api/hotkeys/k/stats"} {
		require.Equal(t, http.StatusUnauthorized, a.doAuth("GET", p, nil, "").code, p)
		require.NotEqual(t, http.StatusUnauthorized, a.doAuth("GET", p, nil, token).code, p)
	}
}

// jsonFields are the top-level fields of a JSON object.
func jsonFields(t *testing.T, b []byte) map[string]json.RawMessage {
	t.Helper()
	var m map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(b, &m), "%s", b)
	return m
}
