package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/keyheat/keyheat/internal/testenv"
	"github.com/keyheat/keyheat/schemas"
)

// TestDashboardOfDemo: the dashboard that `detect demo` serves, driven in a
// headless Chromium as an operator uses it. The planted hot key shows in the
// table; a hostile key shows as text and runs nothing; a promote through the
// page's form reaches the registry; with 10,000 more entries the table
// scrolls to its last key while the DOM holds a screenful of rows; SIGTERM
// stops the demo cleanly. Timings are logged, never asserted.
func TestDashboardOfDemo(t *testing.T) {
	const hostile = `<img src=x onerror=alert(1)>`
	binary(t) // built before the clock starts
	started := time.Now()
	p := start(t, nil, "demo", "--port=0", "--rate=4000",
		"--hot=key=smoke:hot,start=0s,for=10m,share=40%",
		"--hot=key="+hostile+",start=0s,for=10m,share=30%")
	kafka := regexp.MustCompile(`^keyheat demo: Kafka on (127\.0\.0\.1:\d+)`).
		FindStringSubmatch(p.WaitStdout(`^keyheat demo: Kafka on `))
	require.Len(t, kafka, 2, "the header names the demo's broker")
	dash := regexp.MustCompile(`^Dashboard: (http://127\.0\.0\.1:\d+/) \(token for promote and demote, this run only: ([0-9a-f]{32})\)`).
		FindStringSubmatch(p.WaitStdout(`^Dashboard: `))
	require.Len(t, dash, 3, "the dashboard line names its URL and token")
	base, token := dash[1], dash[2]

	b := newDemoTab(t, 1400, 900)
	b.run(chromedp.Navigate(base))
	imgs := eval2[int](b, `document.querySelectorAll('img').length`)

	// 1. The planted key, timed from the navigation (performance.now()'s
	// origin) to the poll that first saw it, at 20 ms resolution.
	shownMs := b.waitAt("the planted key smoke:hot", demoHasRow("shop", "smoke:hot"))
	t.Logf("smoke:hot shown %.0f ms after the page's navigation started (first read of the registry at %.0f ms), %s after the demo started",
		shownMs, eval2[float64](b, `performance.getEntriesByName('keyheat:first-data')[0]?.startTime ?? -1`), time.Since(started).Round(time.Millisecond))

	// 2. The hostile key is text: no dialog, no element of its own.
	b.waitFor("the hostile key", demoHasRow("shop", hostile))
	require.Zero(t, eval2[int](b, fmt.Sprintf(`[...document.querySelectorAll('#hk-scroll .hk-row .key')].find(n => n.textContent === %s).querySelectorAll('*').length`,
		strconv.Quote(hostile))), "its cell holds text only")
	require.Equal(t, imgs, eval2[int](b, `document.querySelectorAll('img').length`), "no img element came from a key")
	require.Zero(t, eval2[int](b, `document.querySelectorAll('[onerror]').length`))
	b.noProblems()

	// 3. A promote through the page's form, token given when asked.
	b.run(chromedp.Click(chromedp.ID("promote-new"), chromedp.NodeVisible))
	b.waitFor("the form", `!document.getElementById('modal').hidden`)
	require.False(t, eval2[bool](b, `document.getElementById('row-token').hidden`), "the token is asked for")
	b.fill(map[string]string{"f-key": "product:7", "f-app-in": "shop", "f-ttl": "10m", "f-by": "test", "f-reason": "demo", "f-token": token})
	b.run(chromedp.Click(chromedp.ID("act-submit"), chromedp.NodeVisible))
	b.waitFor("the form closed", `document.getElementById('modal').hidden`)
	b.waitFor("product:7 as manual", demoHasRowWhere("shop", "product:7", `r.source === 'manual'`))
	testenv.Eventually(t, "product:7 listed by the API as manual", func() bool { return listed(t, base, "shop", "product:7") == "manual" })

	// 4. 10,000 detector entries written straight to the demo's registry.
	const n = 10_000
	cl, err := kgo.NewClient(kgo.SeedBrokers(kafka[1]), kgo.DefaultProduceTopic("keyheat.hotkeys"))
	require.NoError(t, err)
	defer cl.Close()
	recs := make([]*kgo.Record, 0, n)
	for i := range n {
		recs = append(recs, demoBulkHot("bulk", fmt.Sprintf("k%05d", i), float64(i+2), time.Now().UnixMilli()))
	}
	pctx, cancel := context.WithTimeout(context.Background(), demoHangGuard)
	defer cancel()
	require.NoError(t, cl.ProduceSync(pctx, recs...).FirstErr())
	b.waitFor("10,000 keys counted", fmt.Sprintf(`Number((document.querySelector('#counts b')?.textContent ?? '').replace(/\D/g, '')) >= %d`, n))
	t.Logf("counts: %s", eval2[string](b, `document.getElementById('counts').textContent`))
	// Only the bulk app, sorted by key: the last row is k09999.
	b.waitFor("the app bulk offered", `[...document.getElementById('f-app').options].some(o => o.value === 'bulk')`)
	b.run(chromedp.SetValue(chromedp.ID("f-app"), "bulk"))
	eval2[chromedp.Void](b, `document.getElementById('f-app').dispatchEvent(new Event('change'))`)
	b.run(chromedp.Click(chromedp.CSS(`.thead [data-sort="key"]`), chromedp.NodeVisible))
	b.waitFor("sorted by key", `document.querySelector('.thead [data-sort="key"]').dataset.dir === 'asc'`)
	b.waitFor("the first bulk key on top", demoHasRow("bulk", "k00000"))
	last := fmt.Sprintf("k%05d", n-1)
	scrollMs := eval2[float64](b, `(() => { const s = document.getElementById('hk-scroll'); s.scrollTop = s.scrollHeight; return performance.now(); })()`)
	lastMs := b.waitAt("the last key "+last, demoHasRow("bulk", last))
	rows := eval2[int](b, `document.querySelectorAll('#hk-scroll .hk-row').length`)
	t.Logf("scrolled to the end of %d rows: %s shown %.0f ms after the scroll; %d row elements in the DOM", n, last, lastMs-scrollMs, rows)
	require.Less(t, rows, 500, "the table is virtualised")
	b.noProblems()

	// 5. A picture of the whole page.
	dir := os.Getenv("KEYHEAT_TEST_OUT")
	if dir == "" {
		dir = t.TempDir()
	}
	require.NoError(t, os.MkdirAll(dir, 0o755))
	png := b.fullScreenshot()
	require.True(t, strings.HasPrefix(string(png), "\x89PNG"), "a PNG")
	path := filepath.Join(dir, "dashboard-demo.png")
	require.NoError(t, os.WriteFile(path, png, 0o644))
	t.Logf("screenshot: %s (%d bytes)", path, len(png))

	// 6. A clean stop.
	require.Equal(t, 0, p.Stop(), "a stop by SIGTERM is a clean exit")
	code, _ := apiCall(t, http.MethodGet, base+"api/hotkeys", "", nil)
	require.Zero(t, code, "the dashboard's server is gone")
}

// demoHangGuard bounds each browser step only so that a hung browser fails
// the test rather than the whole run; it is no timing requirement.
const demoHangGuard = 4 * time.Minute

// demoTab is a headless Chromium tab that records the JavaScript dialogs the
// page opens (dismissing them, so the page goes on) and the problems it
// reports: uncaught exceptions, console errors and warnings, the browser's
// own (a Content-Security-Policy violation is one), and every
// securitypolicyviolation event the page fires.
type demoTab struct {
	t   testing.TB
	ctx context.Context

	mu       sync.Mutex
	dialogs  []string
	problems []string
}

func newDemoTab(t testing.TB, width, height int) *demoTab {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(testenv.Chrome(t)), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.WindowSize(width, height))
	actx, acancel := chromedp.NewExecAllocator(context.Background(), opts...)
	bctx, cancel := chromedp.NewContext(actx)
	var wg sync.WaitGroup
	t.Cleanup(func() {
		cancel()
		acancel()
		wg.Wait()
	})
	// The first call starts the browser: it must have no deadline, which
	// would end the browser with it.
	require.NoError(t, chromedp.Do(bctx, chromedp.EmulateViewport(int64(width), int64(height))), "start chromium")
	b := &demoTab{t: t, ctx: bctx}
	dialogs := chromedp.Events(bctx, page.JavascriptDialogOpening)
	console := chromedp.Console(bctx)
	wg.Go(func() {
		for ev, err := range dialogs {
			if err != nil {
				return
			}
			b.mu.Lock()
			b.dialogs = append(b.dialogs, fmt.Sprintf("%s: %q", ev.Type, ev.Message))
			b.mu.Unlock()
			_, _ = chromedp.Call(bctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{})
		}
	})
	wg.Go(func() {
		for m, err := range console {
			if err != nil {
				return
			}
			// The browser logs every answer that is not 2xx as a network
			// error: the page reads routes that answer 404 on purpose.
			if m.Source == "network" {
				continue
			}
			if m.IsException() || m.Type == chromedp.ConsoleError || m.Type == chromedp.ConsoleWarning {
				b.mu.Lock()
				b.problems = append(b.problems, m.String())
				b.mu.Unlock()
			}
		}
	})
	// Scripts added through the DevTools protocol are not subject to the
	// page's CSP, so this listener runs before app.js on every load.
	ctx, cancel2 := context.WithTimeout(bctx, demoHangGuard)
	defer cancel2()
	_, err := chromedp.Call(ctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{
		Source: `window.__csp = []; document.addEventListener('securitypolicyviolation', e => window.__csp.push(e.violatedDirective + ' ' + e.blockedURI));`})
	require.NoError(t, err)
	return b
}

func (b *demoTab) run(steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, demoHangGuard)
	defer cancel()
	require.NoError(b.t, chromedp.Do(ctx, steps...))
}

// eval2 evaluates a JavaScript expression in the page.
func eval2[T any](b *demoTab, expr string) T {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, demoHangGuard)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	require.NoError(b.t, err, "evaluate %s", expr)
	return v
}

// waitFor waits until the JavaScript expression is true in the page.
func (b *demoTab) waitFor(what, expr string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, demoHangGuard)
	defer cancel()
	_, err := chromedp.Run(ctx, chromedp.Poll[chromedp.Void](expr,
		chromedp.WithPollingInterval(20*time.Millisecond), chromedp.WithPollingTimeout(0)))
	if err != nil {
		b.t.Fatalf("gave up waiting (hang guard) for %s (%s): %v", what, expr, err)
	}
}

// waitAt waits until expr is true and returns the page's performance.now()
// at the poll that first saw it.
func (b *demoTab) waitAt(what, expr string) float64 {
	b.t.Helper()
	b.waitFor(what, `(() => { if (!(`+expr+`)) return false; window.__at = performance.now(); return true; })()`)
	return eval2[float64](b, `window.__at`)
}

// fill types vals into the open form's inputs, by element id.
func (b *demoTab) fill(vals map[string]string) {
	b.t.Helper()
	for id, v := range vals {
		eval2[chromedp.Void](b, `document.getElementById('`+id+`').value = ''`)
		b.run(chromedp.SendKeys(chromedp.ID(id), v))
	}
}

// noProblems fails the test if the page opened a dialog, reported an error
// or had something refused by its CSP.
func (b *demoTab) noProblems() {
	b.t.Helper()
	require.Empty(b.t, eval2[[]string](b, `window.__csp ?? ['the CSP listener is missing']`), "CSP violations")
	b.mu.Lock()
	defer b.mu.Unlock()
	require.Empty(b.t, b.dialogs, "the page opened JavaScript dialogs")
	require.Empty(b.t, b.problems, "the page reported errors")
}

func (b *demoTab) fullScreenshot() []byte {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, demoHangGuard)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	require.NoError(b.t, err)
	return png
}

// demoHasRow is a JavaScript expression true when the hot-key table shows
// key (as text) of app.
func demoHasRow(app, key string) string { return demoHasRowWhere(app, key, "true") }

// demoHasRowWhere is demoHasRow where cond, a JavaScript expression of r
// ({app, key, source} of a row's text), also holds.
func demoHasRowWhere(app, key, cond string) string {
	return fmt.Sprintf(`[...document.querySelectorAll('#hk-scroll .hk-row:not([hidden])')].map(n => ({
		app: n.querySelector('.app').textContent, key: n.querySelector('.key').textContent,
		source: n.querySelector('.badge').textContent})).some(r => r.app === %s && r.key === %s && (%s))`,
		strconv.Quote(app), strconv.Quote(key), cond)
}

// demoBulkHot is a detector hot record for a plain ASCII key, written
// without reflection: the test writes 10,000 of them, under -race too.
func demoBulkHot(app, key string, rate float64, nowMs int64) *kgo.Record {
	v := make([]byte, 0, 300)
	v = append(v, `{"v":1,"id":"x","type":"hot","app":`...)
	v = strconv.AppendQuote(v, app)
	v = append(v, `,"key":`...)
	v = strconv.AppendQuote(v, key)
	v = append(v, `,"key_hash":"","rule":"r","rate":`...)
	v = strconv.AppendFloat(v, rate, 'g', -1, 64)
	v = append(v, `,"threshold":0,"count":0,"window_ms":0,"topic":"","partition":0,"onset_ms":`...)
	v = strconv.AppendInt(v, nowMs, 10)
	v = append(v, `,"detected_ms":`...)
	v = strconv.AppendInt(v, nowMs, 10)
	v = append(v, `,"reads":0,"writes":0,"bytes":0,"mitigation":{"kind":"local_cache"}}`...)
	return &kgo.Record{Key: schemas.HotKeyRecordKey(app, key), Value: v}
}
