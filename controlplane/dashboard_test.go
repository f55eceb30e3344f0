package controlplane_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/stretchr/testify/require"

	"github.com/keyheat/keyheat/controlplane"
	"github.com/keyheat/keyheat/hotkeys"
	"github.com/keyheat/keyheat/schemas"
)

func TestDashboardConfig(t *testing.T) {
	for _, tc := range []struct {
		poll time.Duration
		ok   bool
	}{
		{0, true}, {time.Second, true}, {controlplane.MinPollInterval, true}, {controlplane.MaxPollInterval, true},
		{-time.Second, false}, {controlplane.MinPollInterval - 1, false}, {controlplane.MaxPollInterval + 1, false},
	} {
		cfg := controlplane.DashboardConfig{PollInterval: tc.poll}
		_, err := controlplane.NewDashboard(cfg)
		if tc.ok {
			require.NoError(t, err, "PollInterval %v", tc.poll)
		} else {
			require.ErrorContains(t, err, "PollInterval", "PollInterval %v", tc.poll)
		}
	}
}

// get asks h for path with the given request headers.
func get(t *testing.T, h http.Handler, method, path string, hdr map[string]string) *http.Response {
	t.Helper()
	r := httptest.NewRequest(method, path, nil)
	for k, v := range hdr {
		r.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w.Result()
}

func TestDashboardServes(t *testing.T) {
	d, err := controlplane.NewDashboard(controlplane.DashboardConfig{PollInterval: 250 * time.Millisecond})
	require.NoError(t, err)

	page := get(t, d, "GET", "/", nil)
	require.Equal(t, http.StatusOK, page.StatusCode)
	require.Equal(t, "text/html; charset=utf-8", page.Header.Get("Content-Type"))
	require.Equal(t, "no-cache", page.Header.Get("Cache-Control"))
	body, err := io.ReadAll(page.Body)
	require.NoError(t, err)
	html := string(body)
	require.Contains(t, html, `<meta name="keyheat-poll-ms" content="250">`)
	require.NotRegexp(t, `<script>|<script [^>]*>[^<]`, html, "no inline script")
	require.NotContains(t, html, "style=", "no inline style")
	require.NotContains(t, html, "//", "nothing from another origin")

	// Every asset the page names is served, by the version it names, and
	// may then be cached for good.
	assets := regexp.MustCompile(`(?:src|href)="([^"]+)"`).FindAllStringSubmatch(html, -1)
	require.Len(t, assets, 4, "favicon twice, app.css, app.js")
	types := map[string]string{".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8", ".svg": "image/svg+xml"}
	for _, m := range assets {
		u := m[1]
		require.Regexp(t, `^[a-z]+\.(js|css|svg)\?v=[0-9a-f]{16}$`, u)
		r := get(t, d, "GET", "/"+u, nil)
		require.Equal(t, http.StatusOK, r.StatusCode, u)
		require.Equal(t, "public, max-age=31536000, immutable", r.Header.Get("Cache-Control"), u)
		name, _, _ := strings.Cut(u, "?")
		require.Equal(t, types[name[strings.LastIndexByte(name, '.'):]], r.Header.Get("Content-Type"), u)
		// Another version, or none: revalidated, by its ETag.
		r = get(t, d, "GET", "/"+name+"?v=0", nil)
		require.Equal(t, "no-cache", r.Header.Get("Cache-Control"), name)
		etag := r.Header.Get("ETag")
		require.NotEmpty(t, etag)
		r = get(t, d, "GET", "/"+name, map[string]string{"If-None-Match": `"x", ` + etag})
		require.Equal(t, http.StatusNotModified, r.StatusCode, name)
		b, _ := io.ReadAll(r.Body)
		require.Empty(t, b)
	}

	head := get(t, d, "HEAD", "/", nil)
	require.Equal(t, http.StatusOK, head.StatusCode)
	b, _ := io.ReadAll(head.Body)
	require.Empty(t, b)

	for _, tc := range []struct {
		method, path string
		code         int
		msg          string
	}{
		{"GET", "/nope.js", 404, "no such page"},
		{"GET", "/index.html", 404, "no such page"},
		{"GET", "/web/app.js", 404, "no such page"},
		{"GET", "/api/hotkeys", 404, "no such page"},
		{"POST", "/", 405, "method POST is not allowed"},
		{"DELETE", "/app.js", 405, "method DELETE is not allowed"},
	} {
		r := get(t, d, tc.method, tc.path, nil)
		require.Equal(t, tc.code, r.StatusCode, "%s %s", tc.method, tc.path)
		require.Equal(t, "application/json; charset=utf-8", r.Header.Get("Content-Type"), "%s %s", tc.method, tc.path)
		var e struct{ Error string }
		require.NoError(t, json.NewDecoder(r.Body).Decode(&e), "%s %s", tc.method, tc.path)
		require.Contains(t, e.Error, tc.msg, "%s %s", tc.method, tc.path)
		checkSecurityHeaders(t, r)
	}
	checkSecurityHeaders(t, page)
}

func checkSecurityHeaders(t *testing.T, r *http.Response) {
	t.Helper()
	csp := r.Header.Get("Content-Security-Policy")
	for _, d := range []string{"default-src 'self'", "script-src 'self'", "style-src 'self'", "frame-ancestors 'none'",
		"object-src 'none'", "base-uri 'none'", "require-trusted-types-for 'script'"} {
		require.Contains(t, csp, d)
	}
	require.NotContains(t, csp, "unsafe-inline")
	require.NotContains(t, csp, "unsafe-eval")
	require.Equal(t, "nosniff", r.Header.Get("X-Content-Type-Options"))
	require.Equal(t, "no-referrer", r.Header.Get("Referrer-Policy"))
	require.Equal(t, "DENY", r.Header.Get("X-Frame-Options"))
}

// TestDashboardShowsRegistry: what the registry holds shows on the page and
// follows it as it changes, with the report and alert routes absent.
func TestDashboardShowsRegistry(t *testing.T) {
	s := newSite(t)
	s.reg.produce(detector(schemas.HotKeyHot, "shop", "product:42", 1234))
	s.api.promote("cart", "cart:7", controlplane.PromoteRequest{Mitigation: "coalesce", TTL: "10m", Reason: "flash sale"})
	s.reg.barrier(s.f)

	b := newTab(t, 1400, 900)
	b.open(s.url)
	b.WaitFor("the detector's key", hasRow("shop", "product:42", `r.source === 'detector' && r.mitigation === 'local_cache' && r.rate === '1.2K'`))
	b.WaitFor("the promoted key", hasRow("cart", "cart:7", `r.source === 'manual' && r.mitigation === 'coalesce'`))
	b.WaitFor("the status line", `document.getElementById('status').dataset.state === 'live'`)
	require.Contains(t, b.status(), "API reachable")
	require.Equal(t, "no reports yet", eval[string](b, `document.getElementById('report-empty').textContent`))
	require.False(t, eval[bool](b, `document.getElementById('report-empty').hidden`))
	require.Equal(t, "no alerts yet", eval[string](b, `document.getElementById('alerts-empty').textContent`))

	// The page polls: a key turning hot, and one cooling, show without a
	// reload.
	s.reg.produce(detector(schemas.HotKeyHot, "search", "q:shoes", 50))
	b.WaitFor("a key that turned hot while the page was open", hasRow("search", "q:shoes", ""))
	s.reg.produce(detector(schemas.HotKeyCooled, "shop", "product:42", 1))
	b.WaitFor("the cooled key gone", `!`+hasRow("shop", "product:42", ""))
	// The counts cover the whole registry (the barriers' keys too).
	var det, man int
	for _, h := range s.api.all(url.Values{}) {
		if h.Source == hotkeys.SourceManual {
			man++
		} else {
			det++
		}
	}
	require.Equal(t, 1, man)
	b.WaitFor("the counts", fmt.Sprintf(`document.getElementById('counts').textContent.startsWith('%d keys  %d detector  1 manual')`, det+man, det))

	// The app filter narrows the table to one app.
	b.Run(chromedp.SetValue(chromedp.ID("f-app"), "cart"))
	eval[chromedp.Void](b, `document.getElementById('f-app').dispatchEvent(new Event('change'))`)
	b.WaitFor("the filter", rowsJS+`.length === 1 && `+hasRow("cart", "cart:7", ""))

	b.NoProblems()
}

// TestDashboardUnreachable: the status line says when the API stops
// answering, and the page recovers by itself when it answers again.
func TestDashboardUnreachable(t *testing.T) {
	s := newSite(t)
	s.reg.produce(detector(schemas.HotKeyHot, "shop", "product:1", 10))
	s.reg.barrier(s.f)
	b := newTab(t, 1200, 800)
	b.open(s.url)
	b.WaitFor("live", `document.getElementById('status').dataset.state === 'live'`)
	s.down.Store(true)
	b.WaitFor("down", `document.getElementById('status').dataset.state === 'down'`)
	require.Contains(t, b.status(), "unreachable")
	require.Contains(t, b.status(), "last update")
	b.WaitFor("the table kept", hasRow("shop", "product:1", ""))
	s.down.Store(false)
	b.WaitFor("live again", `document.getElementById('status').dataset.state === 'live'`)
	b.NoProblems()
}

// TestDashboardPausesWhenHidden: a hidden tab stops reading the API and
// says so; shown again, it reads at once.
func TestDashboardPausesWhenHidden(t *testing.T) {
	s := newSiteWith(t, controlplane.DashboardConfig{PollInterval: controlplane.MinPollInterval})
	b := newTab(t, 1200, 800)
	b.open(s.url)
	setHidden := func(hidden bool) {
		eval[chromedp.Void](b, fmt.Sprintf(`(() => {
			Object.defineProperty(document, 'hidden', {value: %t, configurable: true});
			document.dispatchEvent(new Event('visibilitychange'));
		})()`, hidden))
	}
	setHidden(true)
	b.WaitFor("paused", `document.getElementById('status').dataset.state === 'paused'`)
	require.Contains(t, b.status(), "paused while the tab is hidden")
	// A read already under way when the tab hid may still end; none starts.
	before := s.lists.Load()
	s.reg.produce(detector(schemas.HotKeyHot, "shop", "while-hidden", 10))
	s.reg.barrier(s.f)
	require.LessOrEqual(t, s.lists.Load()-before, int64(1), "reads while hidden")
	setHidden(false)
	b.WaitFor("the key that turned hot meanwhile", hasRow("shop", "while-hidden", ""))
	b.WaitFor("live", `document.getElementById('status').dataset.state === 'live'`)
	b.NoProblems()
}

// A process serves the dashboard at / beside the API and /metrics.
func ExampleNewDashboard() {
	var api *controlplane.Server // controlplane.New(...), as in the package example
	reg := prometheus.NewRegistry()
	dash, err := controlplane.NewDashboard(controlplane.DashboardConfig{PollInterval: time.Second})
	if err != nil {
		panic(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/api/", api)
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.Handle("/", dash)
	_ = &http.Server{Addr: ":9400", Handler: mux}
}
