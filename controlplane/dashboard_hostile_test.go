package controlplane_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/keyheat/keyheat/internal/testenv"
	"github.com/keyheat/keyheat/schemas"
)

// TestDashboardHostileKeys: keys are attacker-controlled; markup in a key
// or an app shows as literal text in every panel, and nothing of it runs
// or becomes an element.
func TestDashboardHostileKeys(t *testing.T) {
	const app = `<i>app</i>`
	keys := []struct{ key, shown string }{
		{`<img src=x onerror=alert(1)>`, `<img src=x onerror=alert(1)>`},
		{`"><script>alert(2)</script>`, `"><script>alert(2)</script>`},
		{`<svg onload=alert(3)>`, `<svg onload=alert(3)>`},
		{`</span></div><iframe src="javascript:alert(4)"></iframe>`, `</span></div><iframe src="javascript:alert(4)"></iframe>`},
		{"javascript:alert(5)", "javascript:alert(5)"},
		// A right-to-left override would show "txt.exe" as "exe.txt".
		{"invoice\u202etxt.exe", `invoice\u{202e}txt.exe`},
		{"<b>\xff</b>", `<b>\xff</b>`},
	}
	now := time.Now()
	var top []schemas.KeyCount
	var alerts []*schemas.HotKeyEvent
	for _, k := range keys {
		top = append(top, schemas.KeyCount{App: app, Key: k.key, Count: 100, Share: 0.1})
		alerts = append(alerts, siteEvent(app, k.key, 5000, 5000, schemas.MitigationLocalCache, 0, now))
	}
	report := schemas.WindowReport{Version: schemas.ReportVersion, Scope: schemas.ScopeCluster, StartMs: now.Add(-time.Minute).UnixMilli(),
		EndMs: now.UnixMilli(), Events: 1000, Top: top,
		Skew: schemas.Skew{Partitions: []schemas.PartitionLoad{{Topic: `<img src=x onerror=alert(6)>`, Partition: 0, Events: 1000, Share: 1}},
			Nodes: []schemas.NodeLoad{{Node: `<img src=x onerror=alert(7)>`, LastSlot: 16383, Events: 1000, Share: 1}}}}
	report.Version, report.ID = schemas.ReportVersion, schemas.WindowReportID(schemas.ScopeCluster, "", report.StartMs)
	s := newSite(t)
	s.hist.AddReport(&report)
	for _, a := range alerts {
		s.hist.AddAlert(a)
	}
	for _, k := range keys {
		s.reg.produce(eventRecord(t, siteEvent(app, k.key, 5000, 5000, schemas.MitigationLocalCache, 0, now)))
	}
	s.reg.barrier(s.f)

	b := newTab(t, 1400, 900)
	b.open(s.url)
	for _, k := range keys {
		b.WaitFor("the key "+k.shown, hasRow(app, k.shown, ""))
	}
	b.WaitFor("the report", `document.querySelectorAll('#top-list li').length === `+jsonInt(len(keys)))
	b.WaitFor("the alerts", `document.querySelectorAll('#alert-list li').length === `+jsonInt(len(keys)))
	var want []string
	for _, k := range keys {
		want = append(want, app+k.shown)
	}
	require.Equal(t, want, eval[[]string](b, `[...document.querySelectorAll('#top-list .lbl')].map(n => n.textContent)`), "the report's order")
	// The alerts all came at one millisecond: their order is the IDs'.
	require.ElementsMatch(t, want, eval[[]string](b, `[...document.querySelectorAll('#alert-list .what')].map(n => n.textContent)`))
	require.Equal(t, `<img src=x onerror=alert(7)>`, eval[string](b, `document.querySelector('#node-list .cl').textContent`))

	// The form shows the key as text too.
	b.clickRow(app, keys[0].shown, "promote")
	require.Equal(t, keys[0].shown, eval[string](b, `document.getElementById('f-key-shown').textContent`))
	b.Run(chromedp.Click(chromedp.ID("act-cancel"), chromedp.NodeVisible))

	// No element came from a key: the page's one img is its logo, its one
	// script app.js.
	require.Equal(t, 1, eval[int](b, `document.querySelectorAll('img').length`))
	require.Equal(t, 1, eval[int](b, `document.querySelectorAll('script').length`))
	require.Empty(t, eval[[]string](b, `[...document.querySelectorAll('iframe, i, b:not(.counts b):not(.summary b):not(.chip b), [onerror], [onload], [src^="javascript"], svg:not(.spark):not(.strip)')].map(n => n.outerHTML.slice(0, 200))`))
	b.NoProblems()

	// And the browser would refuse to parse a string as HTML anyway, and
	// say so in the errors the tests watch.
	require.True(t, eval[bool](b, `(() => { try { document.createElement('div').innerHTML = '<b>x</b>'; return false; } catch (e) { return e instanceof TypeError; } })()`),
		"Trusted Types are enforced")
	testenv.Eventually(t, "the violation reported", func() bool { return len(b.Problems()) == 1 })
	require.Contains(t, b.Problems()[0], "TrustedHTML")
}

func jsonInt(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}
