package hotring

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// memoPair is two single-writer rings fed the same calls, one of them
// without the memo: every answer and every node must agree.
type memoPair struct {
	t      *testing.T
	memo   *Ring
	walks  *Ring
	hits   int // EvictLowest calls the memo answered
	evicts int
}

func newMemoPair(t *testing.T, o Options) *memoPair {
	o.SingleWriter = true
	p := &memoPair{t: t, memo: newRing(t, o), walks: newRing(t, o)}
	p.walks.noMemo = true
	return p
}

// state is every live node of r: its key, then each lane's window as of e.
func state(r *Ring, e int64) []string {
	var out []string
	for _, t := range r.tables() {
		if t == nil {
			continue
		}
		t.walk(func(n *node) {
			n.lock()
			s := n.key
			for l := range r.lay.lanes {
				s += fmt.Sprintf(" %d", n.laneWindow(e, r.lay, l))
			}
			n.unlock()
			out = append(out, s)
		})
	}
	slices.Sort(out)
	return out
}

func (p *memoPair) same(what string, nowMs int64) {
	p.t.Helper()
	e := floorDiv(nowMs, slotMs)
	require.Equal(p.t, state(p.walks, e), state(p.memo, e), "after %s", what)
	require.Equal(p.t, p.walks.Len(), p.memo.Len(), "after %s", what)
}

// TestMemoMatchesWalks: EvictLowest and whole SweepColds answered from the
// memo pick exactly what walks pick, on random calls of every kind: keys
// inserted with credits (some cold), touched at present and late times,
// read "from the future", swept in part and whole, evicted by every lane
// with random limits, through the string methods too (Touch, Admit,
// Remove), with time mostly standing within a slot (where the memo
// answers) and sometimes moving on or back. Small lane counts make many
// keys count alike, and few buckets many keys share one: ties are decided
// by the ring's order.
func TestMemoMatchesWalks(t *testing.T) {
	rounds := 400
	if short() {
		rounds = 60
	}
	var hits, evicts int
	for seed := range uint64(rounds) {
		rng := rand.New(rand.NewPCG(seed, 0x10e))
		o := Options{Bits: 2 + rng.IntN(5), WindowSlots: 2 + rng.IntN(4), WindowSlotDuration: slot, Lanes: 1 + rng.IntN(3)}
		p := newMemoPair(t, o)
		keys := 8 + rng.IntN(400)
		key := func() string { return keyName(rng.IntN(keys)) }
		nowMs := t0Ms + rng.Int64N(4*slotMs)
		// Each round mixes the calls its own way: some keep the ring
		// nearly empty, others fill it past the memo's candidates.
		var mix [8]int
		for i, w := range []int{6, 2, 10 + rng.IntN(40), 10 + rng.IntN(30), 3, 3, 2 + rng.IntN(14), 5 + rng.IntN(25)} {
			mix[i] = w
			if i > 0 {
				mix[i] += mix[i-1]
			}
		}
		for step := range 800 {
			what := fmt.Sprintf("seed %d step %d", seed, step)
			switch x := rng.IntN(mix[7]); {
			case x < mix[0]: // time moves on, within the window or past it
				nowMs += rng.Int64N(int64(o.WindowSlots+1) * slotMs)
			case x < mix[1]: // a call from the past
				nowMs -= rng.Int64N(2 * slotMs)
			case x < mix[2]:
				k := key()
				credit := make([]Weights, 1+rng.IntN(o.WindowSlots+1))
				for i := range credit {
					for l := range o.Lanes {
						credit[i][l] = uint64(rng.IntN(3))
					}
				}
				var w1, w2 Window
				require.Equal(t, p.walks.InsertHash(nsHash("", k), "", k, credit, nowMs, &w1),
					p.memo.InsertHash(nsHash("", k), "", k, credit, nowMs, &w2), what)
				require.Equal(t, w1, w2, what)
			case x < mix[3]:
				k := key()
				var w Weights
				for l := range o.Lanes {
					w[l] = uint64(rng.IntN(3))
				}
				ts := nowMs - rng.Int64N(int64(o.WindowSlots+2)*slotMs)*int64(rng.IntN(2))
				var w1, w2 Window
				a1, b1 := p.walks.TouchHash(nsHash("", k), "", k, &w, ts, nowMs, &w1)
				a2, b2 := p.memo.TouchHash(nsHash("", k), "", k, &w, ts, nowMs, &w2)
				require.Equal(t, []any{a1, b1, w1}, []any{a2, b2, w2}, what)
			case x < mix[4]: // a read ahead of the writes: nodes slide past now
				k := key()
				ahead := nowMs + rng.Int64N(int64(o.WindowSlots+1)*slotMs)
				var w1, w2 Window
				require.Equal(t, p.walks.WindowHash(nsHash("", k), "", k, ahead, &w1),
					p.memo.WindowHash(nsHash("", k), "", k, ahead, &w2), what)
			case x < mix[5]: // the string methods
				k := "s-" + key()
				switch rng.IntN(3) {
				case 0:
					require.Equal(t, p.walks.Touch(k, nowMs), p.memo.Touch(k, nowMs), what)
				case 1:
					require.Equal(t, p.walks.Admit(k), p.memo.Admit(k), what)
				default:
					require.Equal(t, p.walks.Remove(k), p.memo.Remove(k), what)
				}
			case x < mix[6]:
				b := 1 << 30
				if rng.IntN(4) == 0 {
					b = 1 + rng.IntN(4)
				}
				require.Equal(t, p.walks.SweepCold(nowMs, b), p.memo.SweepCold(nowMs, b), what)
			default:
				lane := 0
				if o.Lanes > 1 && rng.IntN(5) > 0 {
					lane = 1 + rng.IntN(o.Lanes-1)
				}
				below := uint64(rng.IntN(12))
				if rng.IntN(3) == 0 {
					below = 1 << 62
				}
				if v, _ := p.memo.knownLowest(floorDiv(nowMs, slotMs), lane); v != nil {
					p.hits++
				}
				got := p.memo.EvictLowest(nowMs, lane, below)
				require.Equal(t, p.walks.EvictLowest(nowMs, lane, below), got, what)
				if got {
					p.evicts++
				}
			}
			p.same(what, nowMs)
		}
		checkInvariants(t, p.memo)
		hits, evicts = hits+p.hits, evicts+p.evicts
	}
	// The comparison is worth something only if the memo answered often.
	t.Logf("%d evictions, %d answered by the memo", evicts, hits)
	require.Greater(t, hits, evicts/4)
}
