package controlplane_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/keyheat/keyheat/controlplane"
	"github.com/keyheat/keyheat/hotkeys"
	"github.com/keyheat/keyheat/internal/testenv/browser"
)

// site is what an operator's process serves: the API at /api/, the
// dashboard at /, over a registry on kfake.
type site struct {
	reg  *registry
	f    *hotkeys.Follower
	hist *controlplane.History
	api  *api
	url  string
	// down, while true, makes every API request fail as an unreachable
	// server does: the connection closes without an answer.
	down *atomic.Bool
	// lists counts the requests for GET /api/hotkeys.
	lists *atomic.Int64
}

// newSite serves the dashboard beside the API over a registry of its own,
// with a History the test fills (hist) for the report and alert routes.
func newSite(t testing.TB) *site {
	t.Helper()
	return newSiteWith(t, controlplane.DashboardConfig{})
}

// newSiteWith is newSite with the dashboard configured by cfg.
func newSiteWith(t testing.TB, cfg controlplane.DashboardConfig) *site {
	t.Helper()
	reg := newRegistry(t, 4)
	f := reg.follower()
	hist, err := controlplane.NewHistory(controlplane.HistoryConfig{})
	require.NoError(t, err)
	t.Cleanup(hist.Close)
	srv, err := controlplane.New(controlplane.Config{Follower: f, Producer: reg.cl, Token: token, History: hist})
	require.NoError(t, err)
	t.Cleanup(srv.Close)
	dash, err := controlplane.NewDashboard(cfg)
	require.NoError(t, err)
	down, lists := new(atomic.Bool), new(atomic.Int64)
	mux := http.NewServeMux()
	mux.Handle("/api/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && r.URL.Path == "/api/hotkeys" {
			lists.Add(1)
		}
		if down.Load() {
			if c, _, err := http.NewResponseController(w).Hijack(); err == nil {
				_ = c.Close()
			}
			return
		}
		srv.ServeHTTP(w, r)
	}))
	mux.Handle("/", dash)
	hs := httptest.NewServer(mux)
	t.Cleanup(hs.Close)
	return &site{reg: reg, f: f, hist: hist, api: &api{t: t, srv: srv, base: hs.URL, token: token}, url: hs.URL + "/", down: down, lists: lists}
}

// tab is a page in a headless Chromium of the test's own (see package
// browser), with what the dashboard's tests do on it.
type tab struct {
	*browser.Tab
	t testing.TB
}

// newTab starts a browser with one tab of width × height pixels. A wait
// that gives up says what the page's status line said.
func newTab(t testing.TB, width, height int) *tab {
	t.Helper()
	return &tab{Tab: browser.New(t, width, height,
		browser.Describe(func(b *browser.Tab) string { return "status line: " + statusLine(b) })), t: t}
}

// open navigates to url and waits for the page's first read of the
// registry.
func (b *tab) open(url string) {
	b.t.Helper()
	b.Run(chromedp.Navigate(url))
	b.WaitFor("the first read of the registry", `performance.getEntriesByName('keyheat:first-data').length > 0`)
}

// eval evaluates a JavaScript expression in the page.
func eval[T any](b *tab, expr string) T {
	b.t.Helper()
	return browser.Eval[T](b.Tab, expr)
}

// status is the page's status line.
func (b *tab) status() string { return statusLine(b.Tab) }

func statusLine(b *browser.Tab) string {
	ctx, cancel := context.WithTimeout(b.Context(), 10*time.Second)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById('status-text').textContent`))
	if err != nil {
		return "(unreadable: " + err.Error() + ")"
	}
	return s
}

// jsString is s as a JavaScript string literal.
func jsString(s string) string {
	var sb strings.Builder
	sb.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			sb.WriteByte('\\')
			sb.WriteRune(r)
		case r < 0x20 || r > 0x7e:
			if r > 0xffff {
				fmt.Fprintf(&sb, `\u{%x}`, r)
			} else {
				fmt.Fprintf(&sb, `\u%04x`, r)
			}
		default:
			sb.WriteRune(r)
		}
	}
	sb.WriteByte('"')
	return sb.String()
}

// rowsJS is a JavaScript expression: the table's rows in the DOM, as
// {app, key, source, mitigation, rate} objects of their text.
const rowsJS = `[...document.querySelectorAll('#hk-scroll .hk-row:not([hidden])')].map(r => ({
	app: r.querySelector('.app').textContent, key: r.querySelector('.key').textContent,
	source: r.querySelector('.badge').textContent, mitigation: r.querySelector('.mit').textContent,
	rate: r.querySelector('.rate').textContent}))`

// hasRow is a JavaScript expression true when the table shows key (as
// displayed) of app, and cond (a JavaScript expression of r, the row's
// text as rowsJS gives it) holds of it.
func hasRow(app, shown, cond string) string {
	if cond == "" {
		cond = "true"
	}
	return fmt.Sprintf(`%s.some(r => r.app === %s && r.key === %s && (%s))`, rowsJS, jsString(app), jsString(shown), cond)
}

// clickRow clicks (with the mouse, as a person would) the button of class
// button ("promote" or "demote") on the row showing key of app, and returns
// once the form it opens is open for that key. The table is live: between
// finding the row and the mouse's press, a poll can re-sort it and move
// another key, or nothing, under the pointer. A person would then see the
// wrong form, or none, and try again; so does clickRow, a bounded number of
// times.
func (b *tab) clickRow(app, shown, button string) {
	b.t.Helper()
	title := map[string]string{"promote": "Promote key", "demote": "Demote key"}[button]
	require.NotEmpty(b.t, title, "no form for button %q", button)
	openFor := fmt.Sprintf(`!document.getElementById('modal').hidden &&
		document.getElementById('act-title').textContent === %s &&
		document.getElementById('f-app-in').value === %s &&
		document.getElementById('f-key-shown').textContent === %s`, jsString(title), jsString(app), jsString(shown))
	for attempt := 1; attempt <= 20; attempt++ {
		if eval[bool](b, openFor) {
			return
		}
		if !eval[bool](b, `document.getElementById('modal').hidden`) {
			// The form of another row: close it as a person would.
			b.Run(chromedp.Click(chromedp.ID("act-cancel"), chromedp.NodeVisible))
		}
		b.WaitFor("row "+app+" "+shown, hasRow(app, shown, ""))
		found := eval[bool](b, fmt.Sprintf(`(() => {
			document.querySelectorAll('#target').forEach(n => n.removeAttribute('id'));
			const r = [...document.querySelectorAll('#hk-scroll .hk-row:not([hidden])')].find(r =>
				r.querySelector('.app').textContent === %s && r.querySelector('.key').textContent === %s);
			if (!r) return false;
			r.querySelector('button.%s').id = 'target';
			return true;
		})()`, jsString(app), jsString(shown), button))
		if !found {
			continue // re-sorted between the wait and the search
		}
		b.Run(chromedp.Click(chromedp.CSS("#target"), chromedp.NodeVisible))
		// The form opens in the click's own task; a wait here only spares a
		// second click while a starved browser catches up.
		ctx, cancel := context.WithTimeout(b.Context(), time.Duration(attempt)*time.Second)
		_ = b.Poll(ctx, `!document.getElementById('modal').hidden`)
		cancel()
	}
	b.t.Fatalf("the %s form for %s %q did not open in 20 clicks; status line: %s", button, app, shown, b.status())
}

// filterKeys types text into the page's key filter, replacing what it held.
func (b *tab) filterKeys(text string) {
	b.t.Helper()
	// chromedp.Clear resets the value attribute, not what was typed.
	eval[chromedp.Void](b, `(() => { const f = document.getElementById('f-text'); f.value = ''; f.dispatchEvent(new Event('input')); })()`)
	if text != "" {
		b.Run(chromedp.SendKeys(chromedp.ID("f-text"), text))
	}
	b.WaitFor("the filter "+text, `document.getElementById('f-text').value === `+jsString(text))
}
