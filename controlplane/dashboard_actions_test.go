package controlplane_test

import (
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/keyheat/keyheat/hotkeys"
	"github.com/keyheat/keyheat/internal/testenv"
	"github.com/keyheat/keyheat/schemas"
)

// fillForm types into the action form's fields (by id) what vals gives,
// replacing what they held.
func (b *tab) fillForm(vals map[string]string) {
	b.t.Helper()
	b.WaitFor("the form", `!document.getElementById('modal').hidden`)
	for id, v := range vals {
		switch id {
		case "f-mit", "f-split":
			b.Run(chromedp.SetValue(chromedp.ID(id), v))
			eval[chromedp.Void](b, `document.getElementById('`+id+`').dispatchEvent(new Event('change'))`)
		default:
			eval[chromedp.Void](b, `document.getElementById('`+id+`').value = ''`)
			b.Run(chromedp.SendKeys(chromedp.ID(id), v))
		}
	}
}

// TestDashboardPromoteDemote: the page's Promote and Demote buttons change
// the registry, with the token typed once; a key that is not UTF-8 goes
// through the key_b64 routes.
func TestDashboardPromoteDemote(t *testing.T) {
	s := newSite(t)
	const app = "shop"
	keys := []struct{ key, shown string }{
		{"product:42", "product:42"},
		{"bin\xff\x00k", `bin\xff\x00k`},
		{"a/b?c=%41#.", "a/b?c=%41#."},
	}
	for _, k := range keys {
		s.reg.produce(detector(schemas.HotKeyHot, app, k.key, 500))
	}
	s.reg.barrier(s.f)

	b := newTab(t, 1400, 900)
	b.open(s.url)
	require.Equal(t, "no token", eval[string](b, `document.getElementById('token-state').textContent`))

	// A wrong token: the form shows the API's answer and stays open.
	b.clickRow(app, keys[0].shown, "promote")
	b.fillForm(map[string]string{"f-token": "wrong-token", "f-reason": "test"})
	b.Run(chromedp.Click(chromedp.ID("act-submit"), chromedp.NodeVisible))
	b.WaitFor("the API's error", `document.getElementById('act-error').textContent === '401: invalid bearer token'`)
	require.False(t, eval[bool](b, `document.getElementById('modal').hidden`))
	require.False(t, eval[bool](b, `document.getElementById('row-token').hidden`), "the token is asked again")
	b.Run(chromedp.Click(chromedp.ID("act-cancel"), chromedp.NodeVisible))
	e, ok := s.f.Get(app, keys[0].key)
	require.True(t, ok)
	require.Equal(t, hotkeys.SourceDetector, e.Source)

	for i, k := range keys {
		b.clickRow(app, k.shown, "promote")
		form := map[string]string{"f-mit": "split", "f-split": "8", "f-ttl": "5m", "f-by": "ana", "f-reason": "flash sale"}
		if i == 0 {
			form["f-token"] = token
		} else {
			require.True(t, eval[bool](b, `document.getElementById('row-token').hidden`), "the token is kept for the tab")
		}
		b.fillForm(form)
		require.Equal(t, k.shown, eval[string](b, `document.getElementById('f-key-shown').textContent`))
		b.Run(chromedp.Click(chromedp.ID("act-submit"), chromedp.NodeVisible))
		b.WaitFor("the form closed", `document.getElementById('modal').hidden`)
		testenv.Eventually(t, "the promote in the registry", func() bool {
			e, ok := s.f.Get(app, k.key)
			return ok && e.Source == hotkeys.SourceManual
		})
		e, _ := s.f.Get(app, k.key)
		require.Equal(t, hotkeys.MitigationSplit, e.Mitigation, k.shown)
		require.Equal(t, 8, e.SplitFactor, k.shown)
		require.Equal(t, "5m0s", e.TTL.String(), k.shown)
		b.WaitFor("the promote on the page", hasRow(app, k.shown, `r.source === 'manual' && r.mitigation === 'split ×8'`))
	}
	require.Equal(t, "token set for this tab", eval[string](b, `document.getElementById('token-state').textContent`))
	require.Equal(t, token, eval[string](b, `sessionStorage.getItem('keyheat.token')`))
	require.Empty(t, eval[string](b, `localStorage.length ? JSON.stringify(localStorage) : ''`), "the token is not kept beyond the tab")

	for _, k := range keys {
		b.clickRow(app, k.shown, "demote")
		b.fillForm(map[string]string{"f-ttl": "2m", "f-reason": "done"})
		b.Run(chromedp.Click(chromedp.ID("act-submit"), chromedp.NodeVisible))
		b.WaitFor("the form closed", `document.getElementById('modal').hidden`)
		testenv.Eventually(t, "the demote in the registry", func() bool { return !s.f.IsHot(app, k.key) })
		b.WaitFor("the key gone from the page", `!`+hasRow(app, k.shown, ""))
	}

	// Promote a key the registry does not hold, typed in.
	b.Run(chromedp.Click(chromedp.ID("promote-new"), chromedp.NodeVisible))
	b.fillForm(map[string]string{"f-key": "user:7 ü", "f-app-in": "auth", "f-mit": "coalesce", "f-ttl": "1m"})
	b.Run(chromedp.Click(chromedp.ID("act-submit"), chromedp.NodeVisible))
	// The form closes when the page has the API's answer, which can come
	// after the follower below sees the record: until then its backdrop
	// covers the page, and a click meant for "Promote a key…" lands on it
	// and closes the form instead (CI lost the next form that way).
	b.WaitFor("the form closed", `document.getElementById('modal').hidden`)
	testenv.Eventually(t, "the typed-in promote", func() bool {
		e, ok := s.f.Get("auth", "user:7 ü")
		return ok && e.Mitigation == hotkeys.MitigationCoalesce
	})
	// A request the API refuses: its reason shows.
	b.Run(chromedp.Click(chromedp.ID("promote-new"), chromedp.NodeVisible))
	b.fillForm(map[string]string{"f-key": "k", "f-app-in": "auth", "f-ttl": "forever"})
	b.Run(chromedp.Click(chromedp.ID("act-submit"), chromedp.NodeVisible))
	b.WaitFor("the API's error", `document.getElementById('act-error').textContent.startsWith('400: ')`)
	require.Contains(t, eval[string](b, `document.getElementById('act-error').textContent`), "ttl")
	b.NoProblems()
}
