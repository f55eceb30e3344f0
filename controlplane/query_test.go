package controlplane_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/keyheat/keyheat/controlplane"
)

// TestMalformedQueryRefused: a query string that does not parse (a ';'
// in it, a bad percent escape) is a 400, not read in part: URL.Query would
// drop such a pair without a word, so a filter would not be applied, or a
// page size or an operator's reason would vanish.
func TestMalformedQueryRefused(t *testing.T) {
	r := newRegistry(t, 1)
	f := r.follower()
	a := r.server(f, controlplane.Config{Token: token})
	a.promote("shop", "manual-1", controlplane.PromoteRequest{Mitigation: "coalesce", TTL: "10m"})
	a.promote("blog", "manual-2", controlplane.PromoteRequest{Mitigation: "coalesce", TTL: "10m"})
	r.barrier(f)

	t.Run("list", func(t *testing.T) {
		for _, q := range []string{
			"source=detector;",      // a stray ';' (or "app=shop;source=manual")
			"app=sh%zzop",           // a bad escape
			"app=shop&limit=1;",     // the limit
			"app=blog&bogus;param=", // an unknown parameter
		} {
			rep := a.do("GET", "/api/hotkeys?"+q, nil)
			if rep.code == http.StatusOK {
				p := decode[controlplane.HotKeyPage](t, rep.body)
				var got []string
				for _, h := range p.HotKeys {
					got = append(got, h.App+"/"+h.Key+" ("+h.Source.String()+")")
				}
				t.Errorf("GET /api/hotkeys?%s: 200 listing %v; want 400 naming the parameter it cannot read", q, got)
				continue
			}
			require.Equal(t, http.StatusBadRequest, rep.code, "%s: %s", q, rep.body)
		}
	})

	t.Run("demote", func(t *testing.T) {
		// An operator's reason with a bare '%' ("50%off") is not a valid
		// escape: the reason is dropped and the demote written without it.
		rep := a.do("DELETE", "/api/hotkeys/manual-1?app=shop&ttl=10m&by=alice&reason=50%off", nil)
		if rep.code == http.StatusOK {
			pub := decode[controlplane.Published](t, rep.body)
			t.Errorf("demote with an unreadable reason: 200, reason written %q; want 400", pub.Reason)
		}
		// An unknown parameter hidden behind a ';' goes through too.
		rep = a.do("DELETE", "/api/hotkeys/manual-2?app=blog&ttl=10m&mitigation;=split", nil)
		require.Equal(t, http.StatusBadRequest, rep.code, "unknown parameter behind a ';': %s", rep.body)
	})
}
