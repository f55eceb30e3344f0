package hotring

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/zeebo/xxh3"
)

// nsHash is a consistent (ns, key) hash for the tests, as a caller of the
// hashed methods would compute one.
func nsHash(ns, key string) uint64 {
	return xxh3.HashString(ns) ^ xxh3.HashString(key)*0x9e3779b97f4a7c15
}

func lanesRing(t testing.TB, slots, lanes int) *Ring {
	return newRing(t, Options{Bits: 4, WindowSlots: slots, WindowSlotDuration: slot, Lanes: lanes})
}

// laneModel is the exact per-(ns, key) history the hashed methods must
// agree with: every counted touch with its slot, per lane.
type laneModel struct {
	slots int
	lanes int
	keys  map[string]map[int64]Weights // ns+"\x00"+key -> epoch -> weights
}

func (m *laneModel) window(id string, nowMs int64) Window {
	e := floorDiv(nowMs, slotMs)
	var w Window
	for ep, ws := range m.keys[id] {
		if ep > e-int64(m.slots) && ep <= e {
			for l := range m.lanes {
				w.Sum[l] += ws[l]
				if ep == e-int64(m.slots)+1 {
					w.Oldest[l] += ws[l]
				}
			}
		}
	}
	return w
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b < 0 {
		q--
	}
	return q
}

// TouchHash, InsertHash and WindowHash agree with an exact model on random
// streams over two namespaces sharing key names, with late touches, keys
// going cold (and so untracked) and credits at insertion.
func TestHashedMatchesModel(t *testing.T) {
	for _, seed := range seeds() {
		for _, tc := range []struct {
			lanes  int
			single bool
		}{{1, false}, {3, false}, {3, true}, {2, true}, {5, true}, {8, true}} {
			lanes := tc.lanes
			t.Run(fmt.Sprintf("seed=%d/lanes=%d/single=%v", seed, lanes, tc.single), func(t *testing.T) {
				const slots = 6
				rng := rand.New(rand.NewPCG(seed, 7))
				r := newRing(t, Options{Bits: 4, WindowSlots: slots, WindowSlotDuration: slot, Lanes: lanes, SingleWriter: tc.single})
				var touched uint64
				m := &laneModel{slots: slots, lanes: lanes, keys: map[string]map[int64]Weights{}}
				nowMs := t0Ms
				var win Window
				for i := 0; i < 4000; i++ {
					nowMs += rng.Int64N(40)
					ns := []string{"1:a", "1:b"}[rng.IntN(2)]
					key := keyName(rng.IntN(40))
					id := ns + "\x00" + key
					h := nsHash(ns, key)
					tsMs := nowMs
					if rng.IntN(10) == 0 {
						tsMs -= rng.Int64N(int64(slots+2) * slotMs) // late, maybe too late
					}
					var w Weights
					for l := range lanes {
						w[l] = rng.Uint64N(3)
					}
					w[0] = 1
					want := m.window(id, nowMs)
					warm := want.Sum[0] > 0
					if warm {
						require.True(t, r.MayTrackHash(h), "step %d: a tracked key's bucket is not empty", i)
					}
					tracked, counted := r.TouchHash(h, ns, key, &w, tsMs, nowMs, &win)
					require.Equal(t, warm, tracked, "step %d: %s tracked", i, id)
					if !tracked {
						delete(m.keys, id) // cold nodes are absent: their old slots are gone
						if rng.IntN(2) == 0 {
							continue
						}
						// Admit with a credit in the two newest slots, the touch folded in.
						credit := []Weights{w, {}}
						credit[1][0] = rng.Uint64N(2)
						require.True(t, r.InsertHash(h, ns, key, credit, nowMs, &win), "step %d: insert %s", i, id)
						e := floorDiv(nowMs, slotMs)
						m.keys[id] = map[int64]Weights{e: credit[0], e - 1: credit[1]}
						require.Equal(t, m.window(id, nowMs), win, "step %d: window after insert of %s", i, id)
						require.False(t, r.InsertHash(h, ns, key, credit, nowMs, &win), "a warm key is left alone")
						require.Equal(t, m.window(id, nowMs), win)
						continue
					}
					e := floorDiv(nowMs, slotMs)
					te := floorDiv(tsMs, slotMs)
					require.Equal(t, te > e-slots, counted, "step %d: counted at slot %d, now slot %d", i, te, e)
					if counted {
						touched += w[0]
						ws := m.keys[id][te]
						for l := range lanes {
							ws[l] += w[l]
						}
						m.keys[id][te] = ws
					}
					require.Equal(t, m.window(id, nowMs), win, "step %d: window of %s", i, id)
					var got Window
					require.True(t, r.WindowHash(h, ns, key, nowMs, &got))
					require.Equal(t, win, got, "WindowHash agrees with TouchHash")
				}
				for id := range m.keys {
					ns, key, _ := strings.Cut(id, "\x00")
					want := m.window(id, nowMs)
					var got Window
					require.Equal(t, want.Sum[0] > 0, r.WindowHash(nsHash(ns, key), ns, key, nowMs, &got), id)
					if want.Sum[0] > 0 {
						require.Equal(t, want, got, id)
					}
				}
				require.Equal(t, touched, r.Stats().Touches, "lane-0 weight counted by TouchHash")
				checkInvariants(t, r)
			})
		}
	}
}

// A hashed key is its namespace and key: the same key in two namespaces is
// two keys, the walks report ns+key, and a key's node keeps a copy, not
// the caller's strings.
func TestHashedNamespacesAndCopies(t *testing.T) {
	r := lanesRing(t, 4, 2)
	var win Window
	buf := []byte("2:ab")
	ns := string(buf[:2]) // "2:"
	for i, n := range []string{"1:", "2:"} {
		credit := []Weights{{uint64(i + 1), 10}}
		require.True(t, r.InsertHash(nsHash(n, "k"), n, "k", credit, t0Ms, &win))
		require.EqualValues(t, i+1, win.Sum[0])
	}
	require.Equal(t, []KeyCount{{"2:k", 2}, {"1:k", 1}}, r.TopN(10, t0Ms))
	w := Weights{1, 5}
	tracked, counted := r.TouchHash(nsHash(ns, "k"), ns, "k", &w, t0Ms, t0Ms, &win)
	require.True(t, tracked)
	require.True(t, counted)
	require.Equal(t, Window{Sum: Weights{3, 15}, Oldest: Weights{}}, win)
	buf[0] = 'x' // the ring kept no reference to the caller's bytes
	require.Equal(t, []KeyCount{{"2:k", 3}, {"1:k", 1}}, r.TopN(10, t0Ms))

	// Oldest is the slot about to leave; Sum covers all four slots.
	w = Weights{1, 1}
	r.TouchHash(nsHash("1:", "k"), "1:", "k", &w, t0Ms+3*slotMs, t0Ms+3*slotMs, &win)
	require.Equal(t, Window{Sum: Weights{2, 11}, Oldest: Weights{1, 10}}, win)
	require.True(t, r.WindowHash(nsHash("1:", "k"), "1:", "k", t0Ms+4*slotMs, &win))
	require.Equal(t, Window{Sum: Weights{1, 1}, Oldest: Weights{}}, win)
	require.False(t, r.WindowHash(nsHash("1:", "k"), "1:", "k", t0Ms+8*slotMs, &win), "cold: reads as untracked")
	require.False(t, r.WindowHash(nsHash("1:", "kk"), "1:", "kk", t0Ms, &win))

	require.False(t, lanesRing(t, 4, 2).MayTrackHash(nsHash("1:", "k")), "nothing tracked, no bucket used")

	plain := newRing(t, Options{})
	require.False(t, plain.InsertHash(1, "", "k", []Weights{{1}}, t0Ms, &win), "no window, no hashed methods")
	tr, c := plain.TouchHash(1, "", "k", &w, t0Ms, t0Ms, &win)
	require.False(t, tr || c)
}

// A tag stays with its key's node: every window reports it, until the key
// goes cold and InsertHash resets the node, or the node is swept and made
// anew; a key without a node keeps none.
func TestHashedTags(t *testing.T) {
	for _, single := range []bool{false, true} {
		t.Run(fmt.Sprintf("single=%v", single), func(t *testing.T) {
			r := newRing(t, Options{Bits: 4, WindowSlots: 4, WindowSlotDuration: slot, Lanes: 2, SingleWriter: single})
			var win Window
			h := nsHash("1:", "k")
			require.False(t, r.SetTagHash(h, "1:", "k", 7), "no node, no tag")
			require.True(t, r.InsertHash(h, "1:", "k", []Weights{{1, 1}}, t0Ms, &win))
			require.Zero(t, win.Tag)
			require.True(t, r.SetTagHash(h, "1:", "k", 7))
			w := Weights{1, 1}
			tracked, _ := r.TouchHash(h, "1:", "k", &w, t0Ms+slotMs, t0Ms+slotMs, &win)
			require.True(t, tracked)
			require.EqualValues(t, 7, win.Tag, "TouchHash reports the tag")
			require.True(t, r.WindowHash(h, "1:", "k", t0Ms+2*slotMs, &win))
			require.EqualValues(t, 7, win.Tag, "WindowHash reports the tag")
			require.False(t, r.InsertHash(h, "1:", "k", []Weights{{1}}, t0Ms+2*slotMs, &win), "warm: left alone")
			require.EqualValues(t, 7, win.Tag, "and so is its tag")
			require.False(t, r.SetTagHash(nsHash("2:", "k"), "2:", "k", 9), "another namespace is another key")

			// Cold, then admitted again: the node is reset, and its tag.
			require.True(t, r.InsertHash(h, "1:", "k", []Weights{{1}}, t0Ms+9*slotMs, &win))
			require.Zero(t, win.Tag)
			tracked, _ = r.TouchHash(h, "1:", "k", &w, t0Ms+9*slotMs, t0Ms+9*slotMs, &win)
			require.True(t, tracked)
			require.Zero(t, win.Tag)

			// Swept, then made anew.
			require.True(t, r.SetTagHash(h, "1:", "k", 8))
			require.Equal(t, 1, r.EvictCold(t0Ms+20*slotMs))
			require.True(t, r.InsertHash(h, "1:", "k", []Weights{{1}}, t0Ms+20*slotMs, &win))
			require.Zero(t, win.Tag)
		})
	}
}

// A window reports zero past the ring's lanes, whatever the Window held.
func TestHashedWindowPastLanes(t *testing.T) {
	for lanes := 1; lanes <= MaxLanes; lanes++ {
		for _, single := range []bool{false, true} {
			r := newRing(t, Options{Bits: 4, WindowSlots: 3, WindowSlotDuration: slot, Lanes: lanes, SingleWriter: single})
			var win Window
			w := Weights{1, 2, 3, 4, 5, 6, 7, 8}
			require.True(t, r.InsertHash(1, "", "k", []Weights{w}, t0Ms, &win))
			for _, touch := range []bool{true, false} {
				for l := range MaxLanes {
					win.Sum[l], win.Oldest[l] = 99, 99
				}
				if touch {
					tracked, _ := r.TouchHash(1, "", "k", &w, t0Ms, t0Ms, &win)
					require.True(t, tracked)
				} else {
					require.True(t, r.WindowHash(1, "", "k", t0Ms, &win))
				}
				for l := range MaxLanes {
					want := uint64(0)
					if l < lanes {
						want = 2 * w[l]
					}
					require.Equal(t, want, win.Sum[l], "lanes %d, single %v, touch %v: lane %d", lanes, single, touch, l)
					if l >= lanes {
						require.Zero(t, win.Oldest[l], "lanes %d, single %v, touch %v: lane %d", lanes, single, touch, l)
					}
				}
			}
		}
	}
}

func TestCmpNS(t *testing.T) {
	parts := []string{"", "a", "b", "ab", "ba", "abc", "1:", "1:a", "2:"}
	for _, s := range parts {
		for _, ns := range parts {
			for _, key := range parts {
				require.Equal(t, strings.Compare(s, ns+key), cmpNS(s, ns, key), "cmpNS(%q, %q, %q)", s, ns, key)
			}
		}
	}
}

// Lane totals that saturate stay saturated and recover once the
// saturated slot leaves the window; a weight of 2^63 or more saturates
// without wrapping, on both touch paths.
func TestHashedSaturation(t *testing.T) {
	for _, single := range []bool{false, true} {
		t.Run(fmt.Sprintf("single=%v", single), func(t *testing.T) {
			r := newRing(t, Options{Bits: 4, WindowSlots: 3, WindowSlotDuration: slot, Lanes: 2, SingleWriter: single})
			var win Window
			require.True(t, r.InsertHash(1, "", "k", []Weights{{1, maxCount - 1}}, t0Ms, &win))
			w := Weights{1, 5}
			r.TouchHash(1, "", "k", &w, t0Ms+slotMs, t0Ms+slotMs, &win)
			require.Equal(t, uint64(maxCount), win.Sum[1])
			r.TouchHash(1, "", "k", &w, t0Ms+2*slotMs, t0Ms+2*slotMs, &win)
			require.Equal(t, uint64(maxCount), win.Sum[1])
			require.Equal(t, uint64(maxCount-1), win.Oldest[1])
			r.TouchHash(1, "", "k", &w, t0Ms+3*slotMs, t0Ms+3*slotMs, &win)
			require.Equal(t, Weights{3, 15}, win.Sum, "the saturated slot left; the total is exact again")

			huge := Weights{1, 1 << 63}
			r.TouchHash(1, "", "k", &huge, t0Ms+3*slotMs, t0Ms+3*slotMs, &win)
			require.Equal(t, Weights{4, maxCount}, win.Sum)
			r.TouchHash(1, "", "k", &huge, t0Ms+3*slotMs, t0Ms+3*slotMs, &win)
			require.Equal(t, Weights{5, maxCount}, win.Sum, "no wrap past 2^64")
		})
	}
}

// SweepCold spreads EvictCold over calls: a pass over every bucket removes
// exactly the cold nodes, and the cursor carries on where it stopped.
func TestSweepCold(t *testing.T) {
	r := newRing(t, Options{Bits: 6, WindowSlots: 4, WindowSlotDuration: slot, Lanes: 2})
	var win Window
	for i := range 200 {
		k := keyName(i)
		atMs := t0Ms
		if i%2 == 0 {
			atMs += 10 * slotMs // the even keys are warm at the sweep's time
		}
		require.True(t, r.InsertHash(nsHash("", k), "", k, []Weights{{1, 1}}, atMs, &win))
	}
	nowMs := t0Ms + 10*slotMs
	removed := 0
	for range 64 / 8 {
		removed += r.SweepCold(nowMs, 8)
	}
	require.Equal(t, 100, removed, "one pass over the 64 buckets")
	require.Equal(t, 100, r.Len())
	require.Zero(t, r.SweepCold(nowMs, 1000), "nothing cold is left")
	require.EqualValues(t, 100, r.Stats().Evicted)
	require.Zero(t, r.SweepCold(nowMs, 0))
	checkInvariants(t, r)
}

// The hashed methods are safe for concurrent use like the rest of the ring.
func TestHashedConcurrent(t *testing.T) {
	r := newRing(t, Options{Bits: 3, WindowSlots: 4, WindowSlotDuration: slot, Lanes: 2})
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 1))
			var win Window
			for i := range 3000 {
				k := keyName(rng.IntN(50))
				nowMs := t0Ms + int64(i)
				w := Weights{1, 2}
				if tr, _ := r.TouchHash(nsHash("", k), "", k, &w, nowMs, nowMs, &win); !tr {
					r.InsertHash(nsHash("", k), "", k, []Weights{w}, nowMs, &win)
				}
				if i%97 == 0 {
					r.SweepCold(nowMs, 2)
				}
			}
		})
	}
	wg.Wait()
	checkInvariants(t, r)
}

func TestValidateLanes(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    Options
		want string
	}{
		{"negative", Options{Lanes: -1}, "Lanes = -1"},
		{"too many", Options{Lanes: MaxLanes + 1, WindowSlots: 2, WindowSlotDuration: slot}, "Lanes = 9"},
		{"no window", Options{Lanes: 2}, "without a window"},
		{"too many counters", Options{Lanes: 8, WindowSlots: 64, WindowSlotDuration: slot}, "520 counters per key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.o.Validate()
			require.ErrorIs(t, err, ErrInvalidOptions)
			require.ErrorContains(t, err, tc.want)
		})
	}
	require.NoError(t, Options{Lanes: 8, WindowSlots: 63, WindowSlotDuration: time.Millisecond}.Validate())
	require.NoError(t, Options{Lanes: 1}.Validate(), "one lane needs no window")
}

func TestEvictLowest(t *testing.T) {
	r := lanesRing(t, 4, 2)
	var win Window
	for i, c := range []uint64{5, 3, 9, 3} {
		k := keyName(i)
		require.True(t, r.InsertHash(nsHash("", k), "", k, []Weights{{1, c}}, t0Ms, &win))
	}
	require.False(t, r.EvictLowest(t0Ms, 1, 3), "nothing below 3")
	require.True(t, r.EvictLowest(t0Ms, 1, 4))
	require.Equal(t, 3, r.Len())
	left := map[string]bool{}
	for _, kc := range r.TopN(10, t0Ms) {
		left[kc.Key] = true
	}
	require.Len(t, left, 3)
	require.True(t, left[keyName(0)] && left[keyName(2)], "the heavier keys stay: %v", left)
	require.True(t, r.EvictLowest(t0Ms, 1, 4), "the other 3 goes next")
	require.False(t, r.EvictLowest(t0Ms, 1, 4))
	require.False(t, r.EvictLowest(t0Ms, 5, 100), "no such lane")
	// A cold key counts as 0 whatever its other lanes hold.
	require.True(t, r.InsertHash(nsHash("", "cold"), "", "cold", []Weights{{0, 100}}, t0Ms, &win))
	require.True(t, r.EvictLowest(t0Ms, 1, 1))
	require.False(t, r.WindowHash(nsHash("", "cold"), "", "cold", t0Ms, &win))
	require.Equal(t, 2, r.Len())
	checkInvariants(t, r)
}
