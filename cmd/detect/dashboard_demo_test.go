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
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/keyheat/keyheat/internal/testenv"
	"github.com/keyheat/keyheat/internal/testenv/browser"
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
	b.Run(chromedp.Navigate(base))
	imgs := browser.Eval[int](b.Tab, `document.querySelectorAll('img').length`)

	// 1. The planted key, timed from the navigation (performance.now()'s
	// origin) to the poll that first saw it, at 20 ms resolution.
	shownMs := b.waitAt("the planted key smoke:hot", demoHasRow("shop", "smoke:hot"))
	t.Logf("smoke:hot shown %.0f ms after the page's navigation started (first read of the registry at %.0f ms), %s after the demo started",
		shownMs, browser.Eval[float64](b.Tab, `performance.getEntriesByName('keyheat:first-data')[0]?.startTime ?? -1`), time.Since(started).Round(time.Millisecond))

	// 2. The hostile key is text: no dialog, no element of its own.
	b.WaitFor("the hostile key", demoHasRow("shop", hostile))
	require.Zero(t, browser.Eval[int](b.Tab, fmt.Sprintf(`[...document.querySelectorAll('#hk-scroll .hk-row .key')].find(n => n.textContent === %s).querySelectorAll('*').length`,
		strconv.Quote(hostile))), "its cell holds text only")
	require.Equal(t, imgs, browser.Eval[int](b.Tab, `document.querySelectorAll('img').length`), "no img element came from a key")
	require.Zero(t, browser.Eval[int](b.Tab, `document.querySelectorAll('[onerror]').length`))
	b.NoProblems()

	// 3. A promote through the page's form, token given when asked.
	b.Run(chromedp.Click(chromedp.ID("promote-new"), chromedp.NodeVisible))
	b.WaitFor("the form", `!document.getElementById('modal').hidden`)
	require.False(t, browser.Eval[bool](b.Tab, `document.getElementById('row-token').hidden`), "the token is asked for")
	b.fill(map[string]string{"f-key": "product:7", "f-app-in": "shop", "f-ttl": "10m", "f-by": "test", "f-reason": "demo", "f-token": token})
	b.Run(chromedp.Click(chromedp.ID("act-submit"), chromedp.NodeVisible))
	b.WaitFor("the form closed", `document.getElementById('modal').hidden`)
	b.WaitFor("product:7 as manual", demoHasRowWhere("shop", "product:7", `r.source === 'manual'`))
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
	pctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard)
	defer cancel()
	require.NoError(t, cl.ProduceSync(pctx, recs...).FirstErr())
	b.WaitFor("10,000 keys counted", fmt.Sprintf(`Number((document.querySelector('#counts b')?.textContent ?? '').replace(/\D/g, '')) >= %d`, n))
	t.Logf("counts: %s", browser.Eval[string](b.Tab, `document.getElementById('counts').textContent`))
	// Only the bulk app, sorted by key: the last row is k09999.
	b.WaitFor("the app bulk offered", `[...document.getElementById('f-app').options].some(o => o.value === 'bulk')`)
	b.Run(chromedp.SetValue(chromedp.ID("f-app"), "bulk"))
	browser.Eval[chromedp.Void](b.Tab, `document.getElementById('f-app').dispatchEvent(new Event('change'))`)
	b.Run(chromedp.Click(chromedp.CSS(`.thead [data-sort="key"]`), chromedp.NodeVisible))
	b.WaitFor("sorted by key", `document.querySelector('.thead [data-sort="key"]').dataset.dir === 'asc'`)
	b.WaitFor("the first bulk key on top", demoHasRow("bulk", "k00000"))
	last := fmt.Sprintf("k%05d", n-1)
	scrollMs := browser.Eval[float64](b.Tab, `(() => { const s = document.getElementById('hk-scroll'); s.scrollTop = s.scrollHeight; return performance.now(); })()`)
	lastMs := b.waitAt("the last key "+last, demoHasRow("bulk", last))
	rows := browser.Eval[int](b.Tab, `document.querySelectorAll('#hk-scroll .hk-row').length`)
	t.Logf("scrolled to the end of %d rows: %s shown %.0f ms after the scroll; %d row elements in the DOM", n, last, lastMs-scrollMs, rows)
	require.Less(t, rows, 500, "the table is virtualised")
	b.NoProblems()

	// 5. A picture of the whole page.
	dir := os.Getenv("KEYHEAT_TEST_OUT")
	if dir == "" {
		dir = t.TempDir()
	}
	require.NoError(t, os.MkdirAll(dir, 0o755))
	png := b.FullScreenshot()
	require.True(t, strings.HasPrefix(string(png), "\x89PNG"), "a PNG")
	path := filepath.Join(dir, "dashboard-demo.png")
	require.NoError(t, os.WriteFile(path, png, 0o644))
	t.Logf("screenshot: %s (%d bytes)", path, len(png))

	// 6. A clean stop.
	require.Equal(t, 0, p.Stop(), "a stop by SIGTERM is a clean exit")
	code, _ := apiCall(t, http.MethodGet, base+"api/hotkeys", "", nil)
	require.Zero(t, code, "the dashboard's server is gone")
}

// demoTab is the demo's dashboard in a headless Chromium of the test's
// own (see package browser), watching for what its CSP refuses.
type demoTab struct {
	*browser.Tab
	t testing.TB
}

func newDemoTab(t testing.TB, width, height int) *demoTab {
	t.Helper()
	return &demoTab{Tab: browser.New(t, width, height, browser.WatchCSP()), t: t}
}

// waitAt waits until expr is true and returns the page's performance.now()
// at the poll that first saw it.
func (b *demoTab) waitAt(what, expr string) float64 {
	b.t.Helper()
	b.WaitFor(what, `(() => { if (!(`+expr+`)) return false; window.__at = performance.now(); return true; })()`)
	return browser.Eval[float64](b.Tab, `window.__at`)
}

// fill types vals into the open form's inputs, by element id.
func (b *demoTab) fill(vals map[string]string) {
	b.t.Helper()
	for id, v := range vals {
		browser.Eval[chromedp.Void](b.Tab, `document.getElementById('`+id+`').value = ''`)
		b.Run(chromedp.SendKeys(chromedp.ID(id), v))
	}
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
