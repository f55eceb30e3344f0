package pipeline

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/keyheat/keyheat/hotring"
	"github.com/keyheat/keyheat/schemas"
	"github.com/keyheat/keyheat/sketch"
	"github.com/stretchr/testify/require"
)

// hotOptions: the default rule plus a writes-only rule with a longer
// window, so that two groups, ops filtering and mitigation are exercised.
func hotOptions() Options {
	o := DefaultOptions()
	o.Rules = []Rule{
		{Name: "counters", Key: "counter:*", Window: 2 * time.Second, Rate: 500, Ops: OpsWrites},
		{Name: "default", Key: "*", Window: time.Second, Rate: 1000},
	}
	return o
}

// episode is what the oracle expects the detector to publish for one key:
// hot at the first true crossing, cooled once the key stayed below for
// the cool-down after its last crossing.
type episode struct {
	first    onset
	endMs    int64 // the last crossing's end; -1 if it never ended
	cooledMs int64 // endMs + cool-down; -1 if not within the stream
}

// episodes groups a key's true crossings the way the alert state does: a
// crossing less than CoolDown after the previous one ended continues it.
func episodes(ons []onset, coolMs, durationMs int64) []episode {
	var eps []episode
	for _, on := range ons {
		if n := len(eps); n > 0 && eps[n-1].endMs >= 0 && on.atMs < eps[n-1].endMs+coolMs {
			eps[n-1].endMs = on.endMs
			continue
		}
		eps = append(eps, episode{first: on, endMs: on.endMs})
	}
	for i := range eps {
		eps[i].cooledMs = -1
		if eps[i].endMs >= 0 && eps[i].endMs+coolMs < t0Ms+durationMs-1000 {
			eps[i].cooledMs = eps[i].endMs + coolMs
		}
	}
	return eps
}

type watched struct {
	app, key string
	rule     Rule
	count    func(*schemas.AccessEvent) bool
}

// TestNoMissedHotKey plants keys with different rate profiles in a Zipf
// background and checks every hot-key event against an exact sliding-
// window count computed here from the stream: each true episode is
// published hot once, no later than one slot after the true onset (and
// not more than one slot before), with a rate within 5% of the true rate
// at the onset; published cooled after the burst ends plus the cool-down;
// and a key that never comes within 5% of its threshold is never
// published. The updates between (checkUpdates) carry the key's exact
// counts over the window they name.
func TestNoMissedHotKey(t *testing.T) {
	durationMs, bgPerMs := int64(60_000), 20
	if testing.Short() || raceEnabled {
		durationMs, bgPerMs = 48_000, 6
	}
	for _, tc := range []struct {
		seed            uint64
		bgPerMs, bgKeys int
	}{{1, bgPerMs, 100_000}, {2, bgPerMs, 100_000}, {3, 3 * bgPerMs, 1_000_000}} {
		t.Run(fmt.Sprint(tc.seed), func(t *testing.T) {
			seed := tc.seed
			o := hotOptions()
			spec := streamSpec{seed: seed, durationMs: durationMs, bgPerMs: tc.bgPerMs, bgKeys: tc.bgKeys, bgApps: []string{"shop"}}
			add := func(key, op string, rate func(int64) float64) {
				spec.planted = append(spec.planted, &planted{app: "shop", key: key, op: op, bytes: 512, rate: rate})
			}
			add("burst-2x", "GET", steady(2000, 5000, 12000))
			add("burst-1.1x", "GET", steady(1100, 15000, 22000))
			add("burst-10x", "GET", steady(10_000, 25_000, 25_600))
			add("ramp", "GET", func(ms int64) float64 {
				if ms < 20_000 || ms >= 30_000 {
					return 0
				}
				return 2500 * float64(ms-20_000) / 10_000
			})
			add("warm-then-hot", "GET", func(ms int64) float64 {
				switch {
				case ms < 30_000:
					return 600
				case ms < 36_000:
					return 1500
				}
				return 0
			})
			add("just-below", "GET", steady(900, 0, 40_000))
			add("flappy", "GET", func(ms int64) float64 {
				if ms >= 35_000 && ms < 44_000 && (ms/1500)%2 == 0 {
					return 1600
				}
				return 0
			})
			add("counter:x", "INCR", steady(800, 8000, 14_000))
			add("counter:x", "GET", steady(3000, 8000, 14_000)) // reads: not counted by the writes rule
			add("counter:y", "INCR", steady(300, 8000, 14_000))
			events := generate(spec)

			p := newPart(t, o, testSource, Start{})
			out := run(p, events, true)

			rules, err := NewRules(o)
			require.NoError(t, err)
			var keys []watched
			for _, pk := range spec.planted {
				if pk.op == "GET" && pk.key == "counter:x" {
					continue
				}
				keys = append(keys, watched{app: pk.app, key: pk.key})
			}
			for i := range 20 {
				keys = append(keys, watched{app: "shop", key: "user:" + strconv.Itoa(i)})
			}
			alerted := map[string]bool{}
			updates := 0
			for _, h := range out.HotKeys {
				alerted[h.App+"/"+h.Key] = true
			}
			for _, k := range keys {
				var x *rule
				for _, r := range rules.rules {
					if r.key.match(k.key) {
						x = r
						break
					}
				}
				count := allEvents
				if x.ops == OpsWrites {
					count = func(e *schemas.AccessEvent) bool { return rules.ops.classify(e.Op) == opWrite }
				}
				need := x.rate * float64(x.windowMs) / 1000
				ons := trueOnsets(events, k.app, k.key, x.windowMs, need, count)
				eps := episodes(ons, o.Detect.CoolDown.Milliseconds(), durationMs)
				got := alertsOf(out, k.app, k.key)
				checkEpisodes(t, k.key, x, eps, got, o, events, count)
				updates += checkUpdates(t, events, hotKeysOf(out, k.app, k.key), x.windowMs, o.Detect.RefreshChange, true, count)
				delete(alerted, k.app+"/"+k.key)
			}
			// Every other alerted key must be a real crossing too: check
			// those the oracle was not asked about.
			for ak := range alerted {
				app, key, _ := cutSlash(ak)
				ons := trueOnsets(events, app, key, 1000, 1000, allEvents)
				require.NotEmpty(t, ons, "%s alerted but never crossed", ak)
			}
			st := p.Stats()
			require.Zero(t, st.RingRefused)
			require.Positive(t, updates, "the bursts and the ramp moved their rates")
			t.Logf("seed %d: %d events, %d hot, %d updates (%d checked), %d cooled, %d keys admitted", seed, len(events), st.Hot, st.Updates, updates, st.Cooled, st.RingAdmitted)
		})
	}
}

func cutSlash(s string) (string, string, bool) {
	for i := range s {
		if s[i] == '/' {
			return s[:i], s[i+1:], true
		}
	}
	return s, "", false
}

func checkEpisodes(t *testing.T, key string, x *rule, eps []episode, got []schemas.HotKeyEvent, o Options, events []event, count func(*schemas.AccessEvent) bool) {
	t.Helper()
	slot := x.slotMs
	var want []string
	for _, ep := range eps {
		want = append(want, "hot")
		if ep.cooledMs >= 0 {
			want = append(want, "cooled")
		}
	}
	var types []string
	for _, h := range got {
		types = append(types, h.Type)
	}
	require.Equal(t, want, types, "%s: published %v for true episodes %+v", key, got, eps)
	i := 0
	for _, ep := range eps {
		h := got[i]
		i++
		trueRate := float64(ep.first.count) / (float64(x.windowMs) / 1000)
		require.LessOrEqual(t, h.OnsetMs, ep.first.atMs+slot, "%s: hot at %d, true onset %d: later than one slot", key, h.OnsetMs-t0Ms, ep.first.atMs-t0Ms)
		require.GreaterOrEqual(t, h.OnsetMs, ep.first.atMs-slot, "%s: hot at %d, true onset %d: more than a slot early", key, h.OnsetMs-t0Ms, ep.first.atMs-t0Ms)
		require.InEpsilon(t, trueRate, h.Rate, 0.05, "%s: rate %v, true rate at onset %v", key, h.Rate, trueRate)
		t.Logf("%s: onset %+d ms (slot %d), rate %.1f true %.1f (%.2f%%)", key, h.OnsetMs-ep.first.atMs, slot, h.Rate, trueRate, 100*(h.Rate-trueRate)/trueRate)
		require.Equal(t, x.name, h.Rule)
		require.Equal(t, schemas.HotKeyID(testSource.Topic, testSource.Partition, h.Rule, "hot", h.App, h.Key, h.OnsetMs), h.ID)
		require.NotNil(t, h.Mitigation)
		if ep.cooledMs < 0 {
			continue
		}
		c := got[i]
		i++
		require.InDelta(t, ep.cooledMs, c.OnsetMs, float64(2*slot), "%s: cooled at %d, want %d (end %d + cool-down)", key, c.OnsetMs-t0Ms, ep.cooledMs-t0Ms, ep.endMs-t0Ms)
		require.Nil(t, c.Mitigation)
	}
	_ = math.Abs
}

func boolp(b bool) *bool { return &b }

// A whitelisted key is never published, however hot, and never listed in
// a window's top keys; it still counts in the totals. A rule with alert
// false watches without publishing.
func TestWhitelistAndWatchOnly(t *testing.T) {
	o := DefaultOptions()
	o.Rules = []Rule{
		{Name: "watch", Key: "quiet:*", Window: time.Second, Rate: 100, Alert: boolp(false)},
		{Name: "default", Key: "*", Window: time.Second, Rate: 1000},
	}
	o.Whitelist = []KeyMatch{{Key: "health:*"}, {App: "admin", Key: "*"}}
	spec := streamSpec{seed: 4, durationMs: 5000, bgPerMs: 2, bgKeys: 1000, planted: []*planted{
		{app: "shop", key: "health:ping", op: "GET", rate: steady(5000, 0, 5000)},
		{app: "admin", key: "anything", op: "GET", rate: steady(5000, 0, 5000)},
		{app: "shop", key: "quiet:1", op: "GET", rate: steady(5000, 0, 5000)},
		{app: "shop", key: "hot", op: "GET", rate: steady(5000, 0, 5000)},
	}}
	events := generate(spec)
	p := newPart(t, o, testSource, Start{})
	out := run(p, events, true)
	require.Empty(t, hotKeysOf(out, "shop", "health:ping"))
	require.Empty(t, hotKeysOf(out, "admin", "anything"))
	require.Empty(t, hotKeysOf(out, "shop", "quiet:1"), "a watch-only rule publishes nothing")
	require.Equal(t, []string{"hot", "update"}, typesOf(hotKeysOf(out, "shop", "hot")),
		"hot at its crossing, then its 5,000/s a window later")
	var adminEvents uint64
	for _, w := range out.Windows {
		for _, a := range w.Apps {
			for _, kc := range a.Top {
				require.NotEqual(t, "health:ping", kc.Key)
				require.NotEqual(t, "admin", kc.App)
			}
			if a.App == "admin" {
				adminEvents += a.Events
			}
		}
	}
	require.EqualValues(t, 5*5000, adminEvents, "whitelisted keys count in totals")
	require.EqualValues(t, 2*5*5000, p.Stats().Whitelisted)
	rules, err := NewRules(o)
	require.NoError(t, err)
	r, ok := rules.Threshold("shop", "quiet:7")
	require.True(t, ok)
	require.Equal(t, 100.0, r, "a watch-only rule still has a threshold for advice")
	_, ok = rules.Threshold("shop", "health:x")
	require.False(t, ok, "whitelisted")
}

// After a key is published cooled, a new crossing within Suppress is held
// back: published at the end of Suppress if the key is still hot then,
// never if it cooled meanwhile.
func TestSuppression(t *testing.T) {
	o := DefaultOptions()
	o.Detect.CoolDown = time.Second
	o.Detect.Suppress = 5 * time.Second
	spec := streamSpec{seed: 5, durationMs: 20_000, bgPerMs: 1, bgKeys: 100, planted: []*planted{
		{app: "shop", key: "long", op: "GET", rate: func(ms int64) float64 {
			if ms < 2000 || (ms >= 5000 && ms < 14_000) {
				return 2000
			}
			return 0
		}},
		{app: "shop", key: "short", op: "GET", rate: func(ms int64) float64 {
			if ms < 2000 || (ms >= 5000 && ms < 6000) {
				return 2000
			}
			return 0
		}},
	}}
	events := generate(spec)
	out := run(newPart(t, o, testSource, Start{}), events, true)
	for _, key := range []string{"long", "short"} {
		// Suppression decides hot and cooled; updates (2,000/s after a
		// crossing at 1,000) only come between them.
		hs := alertsOf(out, "shop", key)
		checkUpdates(t, events, hotKeysOf(out, "shop", key), 1000, o.Detect.RefreshChange, true, allEvents)
		require.GreaterOrEqual(t, len(hs), 2, key)
		require.Equal(t, schemas.HotKeyHot, hs[0].Type)
		require.Equal(t, schemas.HotKeyCooled, hs[1].Type)
		cooled := hs[1].OnsetMs
		// 2000/s stops at 2 s: the window count falls below 1000 at 2.5 s.
		require.InDelta(t, t0Ms+2500+1000, cooled, 200, "%s cooled a cool-down after the first burst", key)
		if key == "short" {
			require.Len(t, hs, 2, "the second burst ended within Suppress: never published")
			continue
		}
		require.Len(t, hs, 4, "hot, cooled, hot, cooled")
		require.Equal(t, schemas.HotKeyHot, hs[2].Type)
		require.GreaterOrEqual(t, hs[2].OnsetMs, cooled+5000, "held back for Suppress")
		require.LessOrEqual(t, hs[2].OnsetMs, cooled+5000+100, "published at the first slot after Suppress")
		require.Equal(t, schemas.HotKeyCooled, hs[3].Type)
	}
}

// A key that turns hot while the ring is full of keys warm enough to pass
// the gate still gets a node, and is published no later than one slot
// after its true onset.
func TestHotKeyAfterRingFull(t *testing.T) {
	o := DefaultOptions()
	o.Detect.RingNodes = 20 // at most 40 nodes
	spec := streamSpec{seed: 6, durationMs: 12_000, bgPerMs: 1, bgKeys: 100}
	for i := range 100 {
		spec.planted = append(spec.planted, &planted{app: "shop", key: fmt.Sprintf("warm:%03d", i), op: "GET", rate: steady(650, 0, 12_000)})
	}
	spec.planted = append(spec.planted, &planted{app: "shop", key: "late-bloomer", op: "GET", rate: steady(1500, 6000, 12_000)})
	events := generate(spec)
	p := newPart(t, o, testSource, Start{})
	out := run(p, events, true)
	require.NotZero(t, p.Stats().RingRefused, "the ring was full")
	require.NotZero(t, p.Stats().RingEvicted, "the late bloomer took a warm key's place")
	for _, g := range p.det.groups {
		require.LessOrEqual(t, g.ring.Len(), 2*o.Detect.RingNodes)
	}
	hs := hotKeysOf(out, "shop", "late-bloomer")
	require.Equal(t, []string{"hot", "update"}, typesOf(hs), "hot at its crossing, then its 1,500/s a window later")
	require.Equal(t, 1500.0, hs[1].Rate)
	ons := trueOnsets(events, "shop", "late-bloomer", 1000, 1000, allEvents)
	require.Len(t, ons, 1)
	require.LessOrEqual(t, hs[0].OnsetMs, ons[0].atMs+100)
	require.InEpsilon(t, float64(ons[0].count), hs[0].Rate, 0.05)
	for _, h := range out.HotKeys {
		require.Equal(t, "late-bloomer", h.Key, "no warm key is published: %+v", h)
	}
}

// A bytes-per-second rule publishes a key that moves many bytes in few
// events, with its bytes rate; write-heavy keys get split advice.
func TestBytesRuleAndMitigation(t *testing.T) {
	o := DefaultOptions()
	o.Rules = []Rule{{Name: "bytes", Key: "blob:*", Window: time.Second, BytesRate: 1 << 20},
		{Name: "default", Key: "*", Window: time.Second, Rate: 1000}}
	o.Detect.SplitCapacity = 1000
	spec := streamSpec{seed: 7, durationMs: 6000, bgPerMs: 1, bgKeys: 100, planted: []*planted{
		{app: "shop", key: "blob:big", op: "GET", bytes: 64 << 10, rate: steady(20, 1000, 6000)},   // 1.25 MiB/s
		{app: "shop", key: "blob:small", op: "GET", bytes: 1 << 10, rate: steady(500, 1000, 6000)}, // 0.5 MiB/s
		{app: "shop", key: "counter", op: "INCR", rate: steady(5000, 1000, 6000)},
		{app: "shop", key: "page", op: "GET", rate: steady(5000, 1000, 6000)},
	}}
	events := generate(spec)
	out := run(newPart(t, o, testSource, Start{}), events, true)
	hs := hotKeysOf(out, "shop", "blob:big")
	// A window after the crossing the whole window holds 20 events of
	// 64 KiB, 1.25 MiB/s: 25 % over the crossing's 1 MiB/s, an update.
	require.Equal(t, []string{"hot", "update"}, typesOf(hs))
	require.Equal(t, float64(20<<16), hs[1].BytesRate)
	require.Equal(t, "bytes", hs[0].Rule)
	require.Equal(t, float64(1<<20), hs[0].BytesThreshold)
	require.InEpsilon(t, float64(1<<20), hs[0].BytesRate, 0.07)
	require.Empty(t, hotKeysOf(out, "shop", "blob:small"))
	c := hotKeysOf(out, "shop", "counter")
	require.Equal(t, []string{"hot", "update"}, typesOf(c))
	require.Equal(t, &schemas.Mitigation{Kind: schemas.MitigationSplit, Split: 2}, c[0].Mitigation,
		"~1000 writes/s at the onset over 1000/s per key: the smallest split")
	require.Equal(t, &schemas.Mitigation{Kind: schemas.MitigationSplit, Split: 8}, c[1].Mitigation,
		"5,000 writes/s a window later: 8 keys of 1,000/s")
	require.Equal(t, &schemas.Mitigation{Kind: schemas.MitigationLocalCache}, hotKeysOf(out, "shop", "page")[0].Mitigation)
}

// SetRules between events keeps counts: lowering a threshold alerts a key
// already over the new one at its next event, not a window later; a rule
// window no rule uses any more cools its hot keys after the cool-down.
func TestSetRulesKeepsCounts(t *testing.T) {
	o := DefaultOptions()
	o.Rules = []Rule{{Name: "slow", Key: "slow:*", Window: 5 * time.Second, Rate: 100},
		{Name: "r", Key: "*", Window: time.Second, Rate: 2000}}
	spec := streamSpec{seed: 8, durationMs: 30_000, bgPerMs: 1, bgKeys: 100, planted: []*planted{
		{app: "shop", key: "k", op: "GET", rate: steady(1500, 0, 30_000)},
		{app: "shop", key: "slow:1", op: "GET", rate: steady(300, 0, 8000)},
	}}
	events := generate(spec)
	p := newPart(t, o, testSource, Start{})
	var out Output
	reloadAt := indexOf(events, 0)
	for i := range events {
		if events[i].e.TimeMs >= t0Ms+5000 {
			reloadAt = i
			break
		}
	}
	for i := range events[:reloadAt] {
		p.Process(&events[i].e, events[i].off, &out)
	}
	require.Len(t, hotKeysOf(out, "shop", "slow:1"), 1)
	require.Empty(t, hotKeysOf(out, "shop", "k"), "1500/s is under 2000/s")

	o2 := o
	o2.Rules = []Rule{{Name: "r", Key: "*", Window: time.Second, Rate: 1000}} // the 5 s window goes
	rules, err := NewRules(o2)
	require.NoError(t, err)
	require.NoError(t, p.SetRules(rules))
	require.Same(t, rules, p.Rules())
	for i := range events[reloadAt:] {
		e := &events[reloadAt+i]
		p.Process(&e.e, e.off, &out)
	}
	hs := hotKeysOf(out, "shop", "k")
	require.Len(t, hs, 1)
	require.LessOrEqual(t, hs[0].OnsetMs, events[reloadAt].e.TimeMs+1, "alerted at the first events after the reload: its count was kept")
	// The count leaves out the oldest of the window's 10 slots: between
	// 9 and 10 slots of a steady 1,500/s, and with the oldest slot's
	// events (Error) at least the whole window's.
	require.InDelta(t, 1425, hs[0].Rate, 1500*0.05+75)
	require.InEpsilon(t, 1500, hs[0].Count+hs[0].Error, 0.05)
	slow := hotKeysOf(out, "shop", "slow:1")
	require.Len(t, slow, 2, "the key hot under the removed window is published cooled")
	require.Equal(t, schemas.HotKeyCooled, slow[1].Type)
	require.InDelta(t, events[reloadAt].e.TimeMs+o.Detect.CoolDown.Milliseconds(), slow[1].OnsetMs, 600)
	require.Len(t, p.det.groups, 1, "the retired group is dropped once its keys cooled")
}

// checkSteady checks what lets a hot key's events skip its alert state: a
// ring node tagged with its group's steady value belongs to a key whose
// state is hot, not below since, under the alerting rule that watches it
// now. (Events of such a key would change nothing in its state.)
func checkSteady(t *testing.T, p *Partition, at int) {
	t.Helper()
	for _, g := range p.det.groups {
		nowMs := p.maxTs
		for _, kc := range g.ring.TopN(g.ring.Len()+1, nowMs) {
			n, rest, _ := strings.Cut(kc.Key, ":")
			l, err := strconv.Atoi(n)
			require.NoError(t, err)
			app, key := rest[:l], rest[l:]
			ad := p.det.app(app)
			hr := ringHash(sketch.Hash(key), ad.salt)
			var win hotring.Window
			if !g.ring.WindowHash(hr, ad.ns, key, nowMs, &win) || win.Tag != g.steady {
				continue
			}
			st := g.lookup(hr, ad.ns, key)
			require.NotNil(t, st, "event %d: %s/%s tagged steady without a state", at, app, key)
			x, xg := ad.match(key)
			require.True(t, st.hot && st.belowMs == noTime && x != nil && xg == g && x.alert && st.rule == x.name,
				"event %d: %s/%s tagged steady in state %+v under rule %v", at, app, key, *st, x)
		}
	}
}

// Keys flapping around their threshold, a watch-only rule, and reloads
// that rename rules and turn alerts off and on: the steady tags stay on
// steady keys only, event after event.
func TestSteadyTags(t *testing.T) {
	o := DefaultOptions()
	o.Detect.CoolDown = 300 * time.Millisecond
	o.Detect.Suppress = 500 * time.Millisecond
	o.Rules = []Rule{{Name: "watch", Key: "w:*", Window: time.Second, Rate: 1000, Alert: new(bool)},
		{Name: "a", Key: "*", Window: time.Second, Rate: 1000}}
	flap := func(hi, lo float64, periodMs int64) func(int64) float64 {
		return func(ms int64) float64 {
			if (ms/periodMs)%2 == 0 {
				return hi
			}
			return lo
		}
	}
	spec := streamSpec{seed: 11, durationMs: 9000, bgPerMs: 2, bgKeys: 200, planted: []*planted{
		{app: "shop", key: "f1", op: "GET", rate: flap(1400, 500, 700)},
		{app: "shop", key: "f2", op: "SET", rate: flap(1100, 850, 400)},
		{app: "cart", key: "f1", op: "GET", rate: flap(1300, 0, 1500)},
		{app: "shop", key: "w:1", op: "GET", rate: steady(3000, 0, 9000)},
		{app: "shop", key: "hot", op: "GET", rate: steady(2500, 0, 9000)},
	}}
	events := generate(spec)
	p := newPart(t, o, testSource, Start{})
	var out Output
	reload := func(rules ...Rule) {
		o2 := o
		o2.Rules = rules
		r, err := NewRules(o2)
		require.NoError(t, err)
		require.NoError(t, p.SetRules(r))
	}
	tr := true
	for i := range events {
		// Reloads in the middle of a slot, where no tick intervenes.
		switch events[i].e.TimeMs {
		case t0Ms + 3050:
			if events[i-1].e.TimeMs < t0Ms+3050 {
				reload(Rule{Name: "b", Key: "*", Window: time.Second, Rate: 1000}) // renamed, and w:1 alerts now
			}
		case t0Ms + 6050:
			if events[i-1].e.TimeMs < t0Ms+6050 {
				reload(Rule{Name: "b", Key: "*", Window: time.Second, Rate: 1000, Alert: new(bool)},
					Rule{Name: "c", Key: "x", Window: time.Second, Rate: 10, Alert: &tr})
			}
		}
		p.Process(&events[i].e, events[i].off, &out)
		checkSteady(t, p, i)
	}
	require.NotEmpty(t, hotKeysOf(out, "shop", "f1"))
	require.NotEmpty(t, hotKeysOf(out, "shop", "w:1"), "alerting after the first reload")
}

// Log timestamps of whole seconds (nginx, Apache) put all of a second's
// events at its first millisecond. Keys at 510, 550 and 900 events/s under
// a 1,000/s rule are never hot, however their seconds fall on slot
// boundaries; one at 1,500/s for 10 s is hot once, at the first second of
// its burst, updated once to its 1,500/s, and cools once after it.
func TestWholeSecondTimestamps(t *testing.T) {
	o := DefaultOptions() // 1,000 events/s over 1 s, 10 slots
	p := newPart(t, o, Source{Topic: "access", Partition: 0, Partitions: 1, Keyed: true}, Start{})
	rates := map[string]int{"k510": 510, "k550": 550, "k900": 900}
	var out Output
	off := int64(0)
	for s := range int64(40) {
		var keys []string
		for k, r := range rates {
			for range r {
				keys = append(keys, k)
			}
		}
		if s >= 10 && s < 20 {
			for range 1500 {
				keys = append(keys, "k1500")
			}
		}
		rng := rand.New(rand.NewPCG(uint64(s), 7))
		rng.Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
		for _, k := range keys {
			p.Process(ev(s*1000, k), off, &out)
			off++
		}
	}
	for _, k := range []string{"k510", "k550", "k900"} {
		require.Empty(t, hotKeysOf(out, "shop", k), "%s is under the rule", k)
	}
	hs := hotKeysOf(out, "shop", "k1500")
	require.Equal(t, []string{"hot", "update", "cooled"}, typesOf(hs), "one hot, one update, one cooled: %+v", hs)
	require.Equal(t, t0Ms+10_000, hs[0].OnsetMs, "hot at the burst's first second")
	require.Equal(t, uint64(1000), hs[0].Count, "at the event that reached the rule")
	// At the next second the window [10 s, 11 s) holds that second's
	// 1,500 events whole: the registry says 1,500/s, not the crossing's
	// 1,000.
	require.Equal(t, schemas.HotKeyID("access", 0, "default", "update", "shop", "k1500", t0Ms+11_000), hs[1].ID)
	require.Equal(t, 1500.0, hs[1].Rate)
	require.Equal(t, hs[0].OnsetMs, hs[1].OnsetMs)
	require.Equal(t, schemas.HotKeyCooled, hs[2].Type)
	require.Equal(t, 1500.0, hs[2].PeakRate)
	require.GreaterOrEqual(t, hs[2].OnsetMs, t0Ms+20_000+o.Detect.CoolDown.Milliseconds(), "cooled a cool-down after the burst")
}
