package controlplane_test

import (
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/keyheat/keyheat/schemas"
)

// TestDashboardDistinctKeysShownDistinct: the table is how an operator
// tells keys apart before promoting or demoting one, so two different
// keys of one app must never show as the same text: the four characters
// `\xff` and the byte 0xff, or "\u200b\u200c" and "\u200b" followed by
// the text `\u{200c}` (an escaped key's own backslashes are doubled).
func TestDashboardDistinctKeysShownDistinct(t *testing.T) {
	const app = "shop"
	pairs := [][2]string{
		{`\xff`, "\xff"},
		{"\u200b\u200c", "\u200b" + `\u{200c}`},
	}
	now := time.Now()
	s := newSite(t)
	for _, p := range pairs {
		for _, k := range p {
			s.reg.produce(eventRecord(t, siteEvent(app, k, 5000, 5000, schemas.MitigationLocalCache, 0, now)))
		}
	}
	s.reg.barrier(s.f)
	b := newTab(t, 1400, 900)
	b.open(s.url)
	listed := s.api.all(url.Values{})
	var names []string
	for _, h := range listed {
		names = append(names, keyOf(t, h))
	}
	require.Len(t, listed, 8, "the API lists every key (and the barrier's): %q", names)
	b.WaitFor("every key", `document.querySelectorAll('#hk-scroll .hk-row:not([hidden])').length === `+jsonInt(len(listed)))
	shown := eval[[]string](b, `[...document.querySelectorAll('#hk-scroll .hk-row:not([hidden])')].filter(r => r.querySelector('.app').textContent === 'shop').map(r => r.querySelector('.key').textContent)`)
	require.Len(t, shown, 4)
	seen := map[string]int{}
	for _, k := range shown {
		seen[k]++
	}
	for k, n := range seen {
		require.Equal(t, 1, n, "%d different keys show as %q: %q", n, k, shown)
	}
}
