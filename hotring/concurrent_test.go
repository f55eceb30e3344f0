package hotring

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// checkSnapshot verifies what a concurrent reader may rely on: sorted,
// no key twice.
func checkSnapshot(t testing.TB, kcs []KeyCount) {
	seen := make(map[string]bool, len(kcs))
	for i, kc := range kcs {
		if seen[kc.Key] {
			t.Errorf("key %q twice in snapshot", kc.Key)
		}
		seen[kc.Key] = true
		if i > 0 && better(kc, kcs[i-1]) {
			t.Errorf("snapshot out of order at %d: %v before %v", i, kcs[i-1], kc)
		}
	}
}

// Many goroutines touching overlapping keys lose no increment, with or
// without a window, while walkers run TopN and KeysAbove.
func TestConcurrentTouchesNotLost(t *testing.T) {
	for _, o := range []Options{
		{Bits: 2},
		{Bits: 2, WindowSlots: 8, WindowSlotDuration: time.Hour},
	} {
		t.Run(fmt.Sprintf("window=%v", o.WindowSlots > 0), func(t *testing.T) {
			r := newRing(t, o)
			const workers, keys = 8, 64
			per := 20000
			if short() {
				per = 4000
			}
			var want [keys]atomic.Uint64
			var wg, walkers sync.WaitGroup
			stop := make(chan struct{})
			for w := 0; w < 2; w++ {
				walkers.Add(1)
				go func() {
					defer walkers.Done()
					for {
						select {
						case <-stop:
							return
						default:
						}
						checkSnapshot(t, r.TopN(10, t0Ms))
						checkSnapshot(t, r.KeysAbove(1, t0Ms))
					}
				}()
			}
			for w := 0; w < workers; w++ {
				wg.Add(1)
				go func(seed uint64) {
					defer wg.Done()
					rng := rand.New(rand.NewPCG(seed, 9))
					for i := 0; i < per; i++ {
						k := rng.IntN(keys)
						n := 1 + rng.Uint64N(3)
						if !r.TouchN(keyName(k), n, t0Ms) {
							t.Errorf("touch of %d refused", k)
						}
						want[k].Add(n)
					}
				}(uint64(w))
			}
			wg.Wait()
			close(stop)
			walkers.Wait()
			var total uint64
			for k := range want {
				require.Equal(t, want[k].Load(), r.Frequency(keyName(k), t0Ms), "key %d", k)
				total += want[k].Load()
			}
			require.Equal(t, total, r.Stats().Touches)
			require.Equal(t, keys, r.Len())
			checkInvariants(t, r)
		})
	}
}

// Concurrent TouchAndClamp never lets a key past its limit.
func TestConcurrentClampExact(t *testing.T) {
	for _, o := range []Options{{}, {WindowSlots: 4, WindowSlotDuration: time.Hour}} {
		t.Run(fmt.Sprintf("window=%v", o.WindowSlots > 0), func(t *testing.T) {
			r := newRing(t, o)
			const workers, per, limit = 8, 500, 1234
			var admitted, limited atomic.Int64
			var wg sync.WaitGroup
			for w := 0; w < workers; w++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := 0; i < per; i++ {
						c, lim := r.TouchAndClamp("k", limit, t0Ms)
						if c > limit {
							t.Errorf("count %d past limit", c)
						}
						if lim {
							limited.Add(1)
						} else {
							admitted.Add(1)
						}
					}
				}()
			}
			wg.Wait()
			require.EqualValues(t, limit, admitted.Load())
			require.EqualValues(t, workers*per-limit, limited.Load())
			require.EqualValues(t, limit, r.Frequency("k", t0Ms))
			require.EqualValues(t, workers*per-limit, r.Stats().Clamped)
		})
	}
}

// Removal, cold eviction and admission race with touches and walkers. The
// list structure stays intact, and eviction never loses a touch: a touch
// racing with the eviction of its key moves to a fresh node.
func TestConcurrentRemoveEvictTouch(t *testing.T) {
	for _, o := range []Options{
		{Bits: 2},
		{Bits: 2, WindowSlots: 4, WindowSlotDuration: time.Hour},
	} {
		t.Run(fmt.Sprintf("window=%v", o.WindowSlots > 0), func(t *testing.T) {
			r := newRing(t, o)
			const keys = 40
			per := 5000
			if short() {
				per = 1500
			}
			var want [keys]atomic.Uint64
			var wg, bg sync.WaitGroup
			stop := make(chan struct{})
			running := func() bool {
				select {
				case <-stop:
					return false
				default:
					return true
				}
			}
			bg.Add(3)
			go func() { // evictor: only zero-count nodes may go
				defer bg.Done()
				for running() {
					r.EvictCold(t0Ms)
				}
			}()
			go func() { // admits and removes keys nobody touches
				defer bg.Done()
				for i := 0; running(); i++ {
					k := fmt.Sprintf("cold-%d", i%17)
					r.Admit(k)
					r.Remove(fmt.Sprintf("cold-%d", (i+5)%17))
				}
			}()
			go func() {
				defer bg.Done()
				for running() {
					checkSnapshot(t, r.KeysAbove(0, t0Ms))
				}
			}()
			for w := 0; w < 4; w++ {
				wg.Add(1)
				go func(seed uint64) {
					defer wg.Done()
					rng := rand.New(rand.NewPCG(seed, 7))
					for i := 0; i < per; i++ {
						k := rng.IntN(keys)
						r.Touch(keyName(k), t0Ms)
						want[k].Add(1)
					}
				}(uint64(w))
			}
			wg.Wait()
			close(stop)
			bg.Wait()
			for k := range want {
				require.Equal(t, want[k].Load(), r.Frequency(keyName(k), t0Ms), "key %d", k)
			}
			checkInvariants(t, r)
		})
	}
}

// Removing touched keys while others touch them keeps the structure sound
// and a key's count afterwards is at most its touches.
func TestConcurrentRemoveWhileTouching(t *testing.T) {
	r := newRing(t, Options{Bits: 1})
	const keys = 16
	var wg sync.WaitGroup
	var touched [keys]atomic.Uint64
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func(seed uint64) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, 5))
			for i := 0; i < 3000; i++ {
				k := rng.IntN(keys)
				if rng.IntN(10) == 0 {
					r.Remove(keyName(k))
				} else {
					r.Touch(keyName(k), t0Ms)
					touched[k].Add(1)
				}
			}
		}(uint64(w))
	}
	wg.Wait()
	for k := range touched {
		require.LessOrEqual(t, r.Frequency(keyName(k), t0Ms), touched[k].Load())
	}
	checkInvariants(t, r)
}

// Touches and rotations race: every touch lands in some generation.
func TestConcurrentRotation(t *testing.T) {
	r := newRing(t, Options{Bits: 3, RotationInterval: time.Minute})
	var nowMs atomic.Int64 // event time as the workers see it
	nowMs.Store(t0Ms)
	var wg sync.WaitGroup
	const workers, per = 4, 2000
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < per; i++ {
				r.Touch("k", nowMs.Load())
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; i < 20; i++ {
			r.Tick(nowMs.Add(5 * secMs)) // 100 s: crosses exactly one boundary
		}
	}()
	wg.Wait()
	sum := r.TopN(1, nowMs.Load())
	require.Len(t, sum, 1)
	require.EqualValues(t, workers*per, sum[0].Count, "active + warm holds every touch")
	require.EqualValues(t, 1, r.Stats().Rotations)
}

// Readers racing a rotation see one consistent pair of generations. rotate
// used to store the warm pointer and then, after allocating the new table,
// the active one; a reader loading active then warm in between got the old
// active table twice and summed a key's counts twice.
func TestConcurrentRotationNoTornGenerations(t *testing.T) {
	r := newRing(t, Options{Bits: 12, RotationInterval: time.Minute})
	ivMs := minMs
	r.Tick(t0Ms) // start the schedule; t0Ms is aligned, readers stay at t0Ms
	rotations := 20000
	if short() {
		rotations = 4000
	}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	var worst atomic.Uint64
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			// "k" is touched once every other generation, so active + warm
			// never holds it more than once.
			for _, kc := range r.TopN(1, t0Ms) {
				if kc.Count > worst.Load() {
					worst.Store(kc.Count)
				}
			}
		}
	}()
	for i := int64(1); i <= int64(rotations); i++ {
		r.Tick(t0Ms + i*ivMs)
		if i%2 == 0 {
			r.Touch("k", t0Ms+i*ivMs)
		}
	}
	close(stop)
	wg.Wait()
	require.EqualValues(t, rotations, r.Stats().Rotations)
	require.LessOrEqual(t, worst.Load(), uint64(1), "a reader summed one generation twice")
}

// With two generations, KeysAbove and TopN report each key once and never
// skip one that stays tracked. collect used to walk the active table and
// then look each warm key up in the active one: a key removed from the
// active table between the two passes was reported twice, and a key
// inserted there between them not at all.
func TestConcurrentWalkAcrossGenerations(t *testing.T) {
	const keys = 40
	r := newRing(t, Options{Bits: 2, RotationInterval: time.Minute})
	for k := 0; k < keys; k++ {
		r.Touch(keyName(k), t0Ms)
	}
	t1Ms := t0Ms + minMs
	r.Tick(t1Ms) // every key now has a count of 1 in the warm generation
	require.EqualValues(t, 1, r.Stats().Rotations)
	walks := 3000
	if short() {
		walks = 600
	}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Add(1)
	go func() { // zero-count nodes come and go in the active generation
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			for k := 0; k < keys; k++ {
				r.Admit(keyName(k))
			}
			r.EvictCold(t1Ms)
		}
	}()
	for i := 0; i < walks && !t.Failed(); i++ {
		got := r.KeysAbove(1, t1Ms)
		checkSnapshot(t, got)
		if len(got) != keys {
			t.Errorf("walk %d: %d keys, want %d", i, len(got), keys)
		}
	}
	close(stop)
	wg.Wait()
	checkInvariants(t, r)
}

// Inserts and unlinks of neighbouring nodes in two buckets (the Harris
// problem: an unlink must not cut off a node spliced after its victim).
// Anchor keys are never removed, so each must keep every one of its
// touches however its neighbours churn.
func TestConcurrentNeighbourChurnKeepsAnchors(t *testing.T) {
	for _, o := range []Options{{Bits: 1}, {Bits: 1, WindowSlots: 4, WindowSlotDuration: time.Hour}} {
		t.Run(fmt.Sprintf("window=%v", o.WindowSlots > 0), func(t *testing.T) {
			r := newRing(t, o)
			const anchors, churn = 16, 48
			per := 30000
			if short() {
				per = 1500
			}
			var want [anchors]atomic.Uint64
			var wg sync.WaitGroup
			for w := 0; w < 4; w++ {
				wg.Add(1)
				go func(seed uint64) {
					defer wg.Done()
					rng := rand.New(rand.NewPCG(seed, 11))
					for i := 0; i < per; i++ {
						if seed%2 == 0 {
							k := rng.IntN(anchors)
							r.Touch(fmt.Sprintf("anchor-%d", k), t0Ms)
							want[k].Add(1)
							continue
						}
						k := fmt.Sprintf("churn-%d", rng.IntN(churn))
						if rng.IntN(2) == 0 {
							r.Remove(k)
						} else {
							r.Touch(k, t0Ms)
						}
					}
				}(uint64(w))
			}
			wg.Wait()
			for k := range want {
				require.Equal(t, want[k].Load(), r.Frequency(fmt.Sprintf("anchor-%d", k), t0Ms), "anchor %d", k)
			}
			checkInvariants(t, r)
		})
	}
}
