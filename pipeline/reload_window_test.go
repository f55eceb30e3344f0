package pipeline

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/keyheat/keyheat/schemas"
)

// TestReloadNewWindowKeepsHotKeyInRegistry: a key at 1,500/s under the
// default rule (1,000/s over 1 s) is hot, and stays at 1,500/s for the
// whole stream. Ten seconds in, the rules are reloaded with the rule over
// another window. The registry is keyed by app and key only
// (schemas.HotKeyRecordKey), and a follower holds what the latest record
// of the key says: whatever the partition publishes around the reload,
// the key's latest record says cooled only when the key is below the rule
// that watches it now.
func TestReloadNewWindowKeepsHotKeyInRegistry(t *testing.T) {
	const key = "url:/checkout"
	for _, tc := range []struct {
		name      string
		rule      Rule
		stillHot  bool
		handedOff bool
	}{
		{"2s window, still hot", Rule{Name: "default", Key: "*", Window: 2 * time.Second, Rate: 1000}, true, true},
		// The 30 s window needs 30,000 events to cross: 20 s at 1,500/s,
		// well past the old window's cool-down.
		{"30s window, hot once it filled", Rule{Name: "default", Key: "*", Window: 30 * time.Second, Rate: 1000}, true, true},
		{"2s window, no longer hot", Rule{Name: "default", Key: "*", Window: 2 * time.Second, Rate: 5000}, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := DefaultOptions()
			spec := streamSpec{seed: 7, durationMs: 60_000, bgPerMs: 1, bgKeys: 200, planted: []*planted{
				{app: "shop", key: key, op: "GET", rate: steady(1500, 2000, 60_000)},
			}}
			events := generate(spec)
			p := newPart(t, o, testSource, Start{})

			reloaded := o
			reloaded.Rules = []Rule{tc.rule}
			r, err := NewRules(reloaded)
			require.NoError(t, err)

			var out Output
			var seq []string
			latestAt := map[int64]string{} // second of event time → the key's latest record type then
			latest := ""
			done := false
			for i := range events {
				e := &events[i]
				if !done && e.e.TimeMs >= t0Ms+10_000 {
					require.NoError(t, p.SetRules(r))
					done = true
				}
				p.Process(&e.e, e.off, &out)
				for _, h := range out.HotKeys {
					if h.App == "shop" && h.Key == key {
						latest = h.Type
						seq = append(seq, h.Type+"("+time.Duration(h.WindowMs*int64(time.Millisecond)).String()+")")
					}
				}
				out.HotKeys = out.HotKeys[:0]
				out.Windows = out.Windows[:0]
				latestAt[(e.e.TimeMs-t0Ms)/1000] = latest
			}
			t.Logf("the key's records: %v", seq)
			if tc.stillHot {
				for s := int64(5); s < 60; s++ {
					require.NotEqual(t, schemas.HotKeyCooled, latestAt[s], "at second %d: records %v", s, seq)
				}
			} else {
				require.Equal(t, schemas.HotKeyCooled, latest, "a key below the rule that watches it now is cooled: %v", seq)
			}
			if tc.handedOff {
				require.EqualValues(t, 1, p.Stats().HandedOver, "the old window's episode was handed over")
			} else {
				require.Zero(t, p.Stats().HandedOver)
			}
		})
	}
}
