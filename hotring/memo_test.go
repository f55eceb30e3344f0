package hotring

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/zeebo/xxh3"
)

// rawState is every node of r as it is held, not as of one instant: key,
// hash, newest slot, tag and every counter. Two rings fed the same calls
// hold the same nodes alike, whatever their memos.
func rawState(r *Ring) []string {
	var out []string
	for gi, t := range r.tables() {
		if t == nil {
			continue
		}
		t.walk(func(n *node) {
			n.lock()
			s := fmt.Sprintf("%d %q %x %d %d", gi, n.key, n.hash, n.epoch, n.tag)
			if r.windowed {
				s += fmt.Sprint(n.area(r.lay))
			} else {
				s += fmt.Sprint(n.count.Load())
			}
			n.unlock()
			out = append(out, s)
		})
	}
	slices.Sort(out)
	return out
}

// memoOps drives p with random calls of every method the API offers, on
// options of every kind, and compares every answer, the nodes and the
// counters after each call.
type memoOps struct {
	t      *testing.T
	rng    *rand.Rand
	o      Options
	slotMs int64
	keys   int
	nowMs  int64
	lane   int // the lane most EvictLowest calls compare
	near   [3]int64
	p      *memoPair
}

func (m *memoOps) key() string { return keyName(m.rng.IntN(m.keys)) }

// weight is mostly small, so that counts tie, and now and then saturates.
func (m *memoOps) weight() uint64 {
	switch m.rng.IntN(40) {
	case 0:
		return maxCount - uint64(m.rng.IntN(3))
	case 1:
		return math.MaxUint64 - uint64(m.rng.IntN(3))
	}
	return uint64(m.rng.IntN(4) + m.rng.IntN(2))
}

func (m *memoOps) weights() Weights {
	var w Weights
	for l := range max(m.o.Lanes, 1) {
		w[l] = m.weight()
	}
	return w
}

// at is a time near now: mostly one of a few kept a slot or two apart
// (so that calls go back and forth between the same slots, reading and
// writing past each other's, with the slot cache on either), else any
// time a few slots back or ahead.
func (m *memoOps) at() int64 {
	if m.rng.IntN(4) > 0 {
		return m.near[m.rng.IntN(len(m.near))]
	}
	span := int64(m.o.WindowSlots+2) * m.slotMs
	return m.nowMs + m.rng.Int64N(2*span) - span
}

// moveNear picks one of the kept times anew, up to two slots from now.
func (m *memoOps) moveNear() {
	m.near[m.rng.IntN(len(m.near))] = m.nowMs + (m.rng.Int64N(5)-2)*m.slotMs + m.rng.Int64N(m.slotMs) - m.slotMs/2
}

func (m *memoOps) step(what string) {
	t, rng, a, b := m.t, m.rng, m.p.walks, m.p.memo
	eq := func(x, y any) { t.Helper(); require.Equal(t, x, y, what) }
	switch rng.IntN(31) {
	case 0: // time moves on, a little or past the window
		m.nowMs += rng.Int64N(int64(m.o.WindowSlots+1) * m.slotMs)
	case 1: // back
		m.nowMs -= rng.Int64N(int64(m.o.WindowSlots+1) * m.slotMs)
	case 2: // to one of the kept times
		m.nowMs = m.near[rng.IntN(len(m.near))]
	case 3:
		m.moveNear()
	case 4, 5, 6:
		k := m.key()
		credit := make([]Weights, rng.IntN(m.o.WindowSlots+2))
		for i := range credit {
			credit[i] = m.weights()
		}
		var w1, w2 Window
		at := m.nowMs
		if rng.IntN(4) == 0 {
			at = m.at()
		}
		eq(a.InsertHash(nsHash("", k), "", k, credit, at, &w1), b.InsertHash(nsHash("", k), "", k, credit, at, &w2))
		eq(w1, w2)
	case 7, 8, 9, 10:
		k := m.key()
		w := m.weights()
		ts, now := m.nowMs, m.nowMs
		switch rng.IntN(4) {
		case 0:
			ts = m.at()
		case 1:
			now = m.at()
		}
		var w1, w2 Window
		t1, c1 := a.TouchHash(nsHash("", k), "", k, &w, ts, now, &w1)
		t2, c2 := b.TouchHash(nsHash("", k), "", k, &w, ts, now, &w2)
		eq([]any{t1, c1, w1}, []any{t2, c2, w2})
	case 11:
		k := m.key()
		at := m.at()
		var w1, w2 Window
		eq(a.WindowHash(nsHash("", k), "", k, at, &w1), b.WindowHash(nsHash("", k), "", k, at, &w2))
		eq(w1, w2)
	case 12:
		k, tag := m.key(), rng.Uint64()
		eq(a.SetTagHash(nsHash("", k), "", k, tag), b.SetTagHash(nsHash("", k), "", k, tag))
		eq(a.MayTrackHash(nsHash("", k)), b.MayTrackHash(nsHash("", k)))
	case 13: // the string methods, on their own keys and on the hashed ones
		k := m.key()
		if rng.IntN(2) == 0 {
			k = "s-" + k
		}
		at := m.nowMs
		if rng.IntN(3) == 0 {
			at = m.at()
		}
		switch rng.IntN(6) {
		case 0:
			eq(a.Touch(k, at), b.Touch(k, at))
		case 1:
			d := m.weight()
			eq(a.TouchN(k, d, at), b.TouchN(k, d, at))
		case 2:
			lim := uint64(rng.IntN(6))
			c1, l1 := a.TouchAndClamp(k, lim, at)
			c2, l2 := b.TouchAndClamp(k, lim, at)
			eq([]any{c1, l1}, []any{c2, l2})
		case 3:
			eq(a.Admit(k), b.Admit(k))
		case 4:
			eq(a.Remove(k), b.Remove(k))
		default:
			eq(a.Frequency(k, at), b.Frequency(k, at))
		}
	case 14: // reads, at any time
		at := m.at()
		switch rng.IntN(3) {
		case 0:
			n := 1 + rng.IntN(5)
			eq(a.TopN(n, at), b.TopN(n, at))
		case 1:
			th := uint64(rng.IntN(5))
			eq(a.KeysAbove(th, at), b.KeysAbove(th, at))
		default:
			eq(a.Top(at), b.Top(at))
		}
	case 15:
		at := m.nowMs
		if rng.IntN(2) == 0 {
			at = m.at()
		}
		a.Tick(at)
		b.Tick(at)
	case 16:
		at := m.nowMs
		if rng.IntN(2) == 0 {
			at = m.at()
		}
		eq(a.EvictCold(at), b.EvictCold(at))
	case 17, 18, 19:
		n := 1 << 30
		if rng.IntN(4) == 0 {
			n = rng.IntN(6) - 1
		}
		at := m.nowMs
		if rng.IntN(4) == 0 {
			at = m.at()
		}
		eq(a.SweepCold(at, n), b.SweepCold(at, n))
	default:
		lane := m.lane
		if rng.IntN(8) == 0 {
			lane = rng.IntN(max(m.o.Lanes, 1)+2) - 1 // invalid ones too
		}
		below := uint64(rng.IntN(8))
		switch rng.IntN(4) {
		case 0:
			below = math.MaxUint64
		case 1:
			below = maxCount
		}
		at := m.nowMs
		if rng.IntN(6) == 0 {
			at = m.at()
		}
		if v, _ := b.knownLowest(floorDiv(at, m.slotMs), lane); v != nil {
			m.p.hits++
		}
		got := b.EvictLowest(at, lane, below)
		eq(a.EvictLowest(at, lane, below), got)
		if got {
			m.p.evicts++
		}
	}
	require.Equal(t, rawState(a), rawState(b), "after %s", what)
	require.Equal(t, a.Stats(), b.Stats(), "after %s", what)
	require.Equal(t, a.sweepCursor.Load(), b.sweepCursor.Load(), "after %s", what)
}

// TestMemoMatchesWalksEveryMethod is TestMemoMatchesWalks over every
// method and option a SingleWriter ring may be used with: a node cap with
// sampling and an Admit hook, automatic cold sweeps, one to eight lanes,
// a one-slot window, saturating weights and credits, reads, ticks and
// evictions at times behind and ahead of the writes, EvictLowest by lanes
// the ring does not have, and sweeps of no bucket. Nodes are compared as
// they are held, counters and all.
func TestMemoMatchesWalksEveryMethod(t *testing.T) {
	rounds := 300
	if short() {
		rounds = 50
	}
	var hits, evicts int
	for seed := range uint64(rounds) {
		rng := rand.New(rand.NewPCG(seed, 0x3e30))
		slotMs := int64(slotMs)
		if rng.IntN(3) == 0 {
			slotMs = 1 + rng.Int64N(3)
		}
		lanes := 1 + rng.IntN(4)
		if rng.IntN(8) == 0 {
			lanes = MaxLanes
		}
		o := Options{
			Bits:               1 + rng.IntN(5),
			TopK:               rng.IntN(4),
			WindowSlots:        1 + rng.IntN(5),
			WindowSlotDuration: time.Duration(slotMs) * time.Millisecond,
			Lanes:              lanes,
		}
		if rng.IntN(2) == 0 {
			o.NodeCap = 4 + rng.IntN(40)
			if rng.IntN(2) == 0 {
				o.SampleBits = 1 + rng.IntN(2)
			}
			if rng.IntN(2) == 0 {
				o.Admit = func(key string) bool { return xxh3.HashString(key)%3 == 0 }
			}
		}
		if rng.IntN(2) == 0 {
			o.ColdSweepInterval = time.Duration(slotMs*(1+rng.Int64N(4))) * time.Millisecond
		}
		m := &memoOps{t: t, rng: rng, o: o, slotMs: slotMs, keys: 4 + rng.IntN(80),
			nowMs: t0Ms + rng.Int64N(4*slotMs), lane: rng.IntN(lanes), p: newMemoPair(t, o)}
		for range len(m.near) {
			m.moveNear()
		}
		for step := range 400 {
			m.step(fmt.Sprintf("seed %d step %d (%+v)", seed, step, o))
		}
		checkInvariants(t, m.p.memo)
		hits, evicts = hits+m.p.hits, evicts+m.p.evicts
	}
	t.Logf("%d evictions, %d answered by the memo", evicts, hits)
	require.Greater(t, hits, evicts/4)
}

// TestMemoNotMadeBehindSlotCache: a SingleWriter ring's TouchHash takes
// its slot from the slot cache without computing an epoch, so a memo made
// as of a slot earlier than the cached one would miss that touch's slide
// into the later slot, which drops counts the memo relies on. Here the
// cache holds slot E+1 while EvictLowest and SweepCold run as of E; a
// touch at E+1 then slides "a" past its only count, making it the lowest
// key (and cold) as of E.
func TestMemoNotMadeBehindSlotCache(t *testing.T) {
	for _, sweep := range []bool{false, true} {
		p := newMemoPair(t, Options{Bits: 3, WindowSlots: 2, WindowSlotDuration: slot, Lanes: 2})
		now, next := t0Ms+slotMs/2, t0Ms+slotMs+slotMs/2 // slots E and E+1
		both := func(f func(r *Ring) any) any {
			t.Helper()
			want := f(p.walks)
			require.Equal(t, want, f(p.memo))
			return want
		}
		credits := map[string][]Weights{"a": {{}, {5, 5}}, "b": {{3, 3}}, "c": {{9, 9}}}
		for _, k := range []string{"a", "b", "c"} {
			both(func(r *Ring) any { var w Window; return r.InsertHash(nsHash("", k), "", k, credits[k], now, &w) })
		}
		touch := func(k string) any {
			return both(func(r *Ring) any {
				var w Window
				tracked, _ := r.TouchHash(nsHash("", k), "", k, &Weights{1, 1}, next, next, &w)
				return tracked
			})
		}
		require.Equal(t, true, touch("c")) // the cache now holds E+1
		if sweep {
			require.Equal(t, 0, both(func(r *Ring) any { return r.SweepCold(now, 1<<30) }))
		} else {
			require.Equal(t, false, both(func(r *Ring) any { return r.EvictLowest(now, 1, 3) }), "b's 3 is the least")
		}
		require.Equal(t, false, touch("a"), "a is cold as of E+1")
		if sweep {
			require.Equal(t, 1, both(func(r *Ring) any { return r.SweepCold(now, 1<<30) }), "a is cold as of E+1 and E")
		} else {
			require.Equal(t, true, both(func(r *Ring) any { return r.EvictLowest(now, 1, 3) }), "a's 0 is the least")
		}
		p.same("the second call", now)
		require.Equal(t, []string{"b 3 3", "c 9 9"}, state(p.memo, floorDiv(now, slotMs)))
	}
}

// TestNoMemoWithoutSingleWriter: a ring used from several goroutines at
// once keeps no memo, so EvictLowest, SweepCold and the inserts that file
// nodes in it must write none of it (the race detector reports a write).
func TestNoMemoWithoutSingleWriter(t *testing.T) {
	r := newRing(t, Options{Bits: 3, WindowSlots: 3, WindowSlotDuration: slot, Lanes: 2})
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 300 {
				k, now := keyName((g*7+i)%40), t0Ms+int64(i/50)*slotMs
				var w Window
				switch i % 5 {
				case 0:
					r.InsertHash(nsHash("", k), "", k, []Weights{{1, 2}}, now, &w)
				case 1:
					r.TouchHash(nsHash("", k), "", k, &Weights{1, 1}, now, now, &w)
				case 2:
					r.Touch(k, now)
				case 3:
					r.SweepCold(now, 1<<30)
				default:
					r.EvictLowest(now, i%2, 1<<62)
				}
			}
		})
	}
	wg.Wait()
	checkInvariants(t, r)
	require.Equal(t, int64(noEpoch), r.memo.coldE)
	require.Equal(t, int64(noEpoch), r.memo.lowE)
	require.Empty(t, r.memo.heap)
}
