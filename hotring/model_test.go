package hotring

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func keyName(i int) string { return fmt.Sprintf("key-%04d", i) }

func seeds() []uint64 {
	if short() {
		return []uint64{1, 2, 3}
	}
	return []uint64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
}

// Lifetime counts with no cap and no rotation are exact: every read agrees
// with a map, including after removals, and TopN/KeysAbove order agrees.
func TestPropertyLifetimeMatchesMap(t *testing.T) {
	for _, seed := range seeds() {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 0))
			r := newRing(t, Options{Bits: 3}) // few buckets: long lists
			model := map[string]uint64{}
			for i := 0; i < 5000; i++ {
				k := keyName(rng.IntN(300))
				switch op := rng.IntN(100); {
				case op < 70:
					require.True(t, r.Touch(k, t0Ms))
					model[k]++
				case op < 90:
					w := rng.Uint64N(1000)
					require.True(t, r.TouchN(k, w, t0Ms))
					model[k] += w
				case op < 95:
					_, had := model[k]
					require.Equal(t, had, r.Remove(k), "Remove(%q)", k)
					delete(model, k)
				default:
					require.Equal(t, model[k], r.Frequency(k, t0Ms), "Frequency(%q)", k)
				}
			}
			for i := 0; i < 300; i++ {
				k := keyName(i)
				require.Equal(t, model[k], r.Frequency(k, t0Ms), "Frequency(%q)", k)
			}
			require.Equal(t, len(model), r.Len())
			require.Equal(t, modelTop(model, 25), r.TopN(25, t0Ms))
			require.Equal(t, modelTop(model, -1), r.TopN(1000, t0Ms))
			require.Equal(t, modelAbove(model, 2000), r.KeysAbove(2000, t0Ms))
			checkInvariants(t, r)
		})
	}
}

// windowModel keeps every touch with its slot epoch and answers the exact
// window count.
type windowModel struct {
	slots  int64
	events map[string]map[int64]uint64 // key → epoch → weight
}

func (m *windowModel) add(k string, e int64, w uint64) {
	if m.events[k] == nil {
		m.events[k] = map[int64]uint64{}
	}
	m.events[k][e] += w
}

func (m *windowModel) counts(e int64) map[string]uint64 {
	out := map[string]uint64{}
	for k, byEpoch := range m.events {
		for ep, w := range byEpoch {
			if ep > e-m.slots && ep <= e {
				out[k] += w
			}
		}
	}
	return out
}

// Sliding-window counts read at the newest time seen are exact, with late
// events, slot-boundary times and long gaps, with and without rotation
// (rotation must not change window answers: the generations are summed).
func TestPropertyWindowMatchesModel(t *testing.T) {
	for _, rot := range []time.Duration{0, 2 * time.Second, 3 * time.Second} {
		for _, seed := range seeds() {
			t.Run(fmt.Sprintf("rotation=%v/seed=%d", rot, seed), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(seed, 1))
				const slots = 8
				r := newRing(t, Options{Bits: 4, WindowSlots: slots, WindowSlotDuration: slot, RotationInterval: rot})
				m := &windowModel{slots: slots, events: map[string]map[int64]uint64{}}
				nowMs := t0Ms
				check := func() {
					e := nowMs / slotMs
					want := m.counts(e)
					for k, c := range want {
						require.Equal(t, c, r.Frequency(k, nowMs), "Frequency(%q) at slot %d", k, e)
					}
					require.Equal(t, modelTop(want, 10), r.TopN(10, nowMs))
					require.Equal(t, modelAbove(want, 3), r.KeysAbove(3, nowMs))
				}
				for i := 0; i < 3000; i++ {
					switch s := rng.IntN(100); {
					case s < 60: // small steps, often exactly onto a boundary
						nowMs += rng.Int64N(slotMs / 2)
						if rng.IntN(4) == 0 {
							nowMs = (nowMs/slotMs + 1) * slotMs
						}
					case s < 62: // long gap
						nowMs += slots * slotMs * (1 + rng.Int64N(3))
					}
					atMs := nowMs
					if rng.IntN(10) == 0 { // late event, within or beyond the window
						atMs -= rng.Int64N(12 * slotMs)
					}
					k := keyName(rng.IntN(40))
					w := 1 + rng.Uint64N(3)
					require.True(t, r.TouchN(k, w, atMs))
					m.add(k, atMs/slotMs, w)
					if i%97 == 0 {
						check()
					}
				}
				check()
				checkInvariants(t, r)
				if rot > 0 {
					require.Greater(t, r.Stats().Rotations, uint64(10), "the workload must cross rotations")
				}
			})
		}
	}
}

// With a strict cap the first NodeCap distinct keys are tracked exactly and
// every other key is refused and reads 0.
func TestPropertyStrictCapMatchesModel(t *testing.T) {
	for _, seed := range seeds() {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 2))
			const cap = 50
			r := newRing(t, Options{Bits: 4, NodeCap: cap})
			model := map[string]uint64{}
			var refused uint64
			for i := 0; i < 4000; i++ {
				k := keyName(int(rng.ExpFloat64() * 60))
				_, tracked := model[k]
				if !tracked && len(model) < cap {
					tracked = true
				}
				require.Equal(t, tracked, r.Touch(k, t0Ms), "Touch(%q)", k)
				if tracked {
					model[k]++
				} else {
					refused++
				}
			}
			for i := 0; i < 1000; i++ {
				require.Equal(t, model[keyName(i)], r.Frequency(keyName(i), t0Ms))
			}
			require.Equal(t, cap, r.Len())
			require.Equal(t, modelTop(model, 20), r.TopN(20, t0Ms))
			require.Equal(t, refused, r.Stats().RefusedByCap)
			checkInvariants(t, r)
		})
	}
}

// Lifetime counts with rotation follow the generation model: Frequency is
// max(active, warm), TopN ranks by active + warm, and a gap of two or more
// intervals drops both generations.
func TestPropertyRotationMatchesModel(t *testing.T) {
	const ivMs = minMs
	for _, seed := range seeds() {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 3))
			r := newRing(t, Options{Bits: 4, RotationInterval: time.Minute})
			active, warm := map[string]uint64{}, map[string]uint64{}
			nowMs := t0Ms + rng.Int64N(ivMs)
			boundaryMs := (nowMs/ivMs + 1) * ivMs
			var rotations uint64
			for i := 0; i < 4000; i++ {
				if rng.IntN(50) == 0 {
					nowMs += rng.Int64N(3 * ivMs)
				} else {
					nowMs += rng.Int64N(ivMs / 20)
				}
				if nowMs >= boundaryMs {
					k := (nowMs-boundaryMs)/ivMs + 1
					rotations += uint64(k)
					if k >= 2 {
						warm = map[string]uint64{}
					} else {
						warm = active
					}
					active = map[string]uint64{}
					boundaryMs = (nowMs/ivMs + 1) * ivMs
				}
				key := keyName(rng.IntN(60))
				require.True(t, r.Touch(key, nowMs))
				active[key]++
				if i%50 == 0 {
					for j := 0; j < 60; j++ {
						k := keyName(j)
						require.Equal(t, max(active[k], warm[k]), r.Frequency(k, nowMs), "Frequency(%q)", k)
					}
					sum := map[string]uint64{}
					for k, c := range active {
						sum[k] += c
					}
					for k, c := range warm {
						sum[k] += c
					}
					require.Equal(t, modelTop(sum, 15), r.TopN(15, nowMs))
					require.Equal(t, modelAbove(sum, 5), r.KeysAbove(5, nowMs))
				}
			}
			require.Equal(t, rotations, r.Stats().Rotations)
			require.Equal(t, len(active)+len(warm), r.Len())
			checkInvariants(t, r)
		})
	}
}

// Same calls, same answers: what makes a replay match the live run.
func TestDeterministicReplay(t *testing.T) {
	run := func() ([]KeyCount, Stats) {
		rng := rand.New(rand.NewPCG(42, 42))
		r := newRing(t, DefaultOptions())
		nowMs := t0Ms
		for i := 0; i < 20000; i++ {
			nowMs += rng.Int64N(2) // 0.5ms apart on average
			r.Touch(keyName(int(rng.ExpFloat64()*30)), nowMs)
		}
		return r.TopN(10, nowMs), r.Stats()
	}
	top1, s1 := run()
	top2, s2 := run()
	require.NotEmpty(t, top1)
	require.Equal(t, top1, top2)
	require.Equal(t, s1, s2)
}
