package hotring

import (
	"math"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/require"
	"github.com/zeebo/xxh3"

	"github.com/keyheat/keyheat/internal/testenv"
)

// Weights large enough to reach the top bit of a count must saturate, not
// carry into deadBit: a carry made a live node look deleted (it read 0, was
// never unlinked nor uncounted, and the next touch inserted a second node),
// and a weight of 2^63 or more made TouchN loop forever inserting nodes.
func TestHugeWeightsSaturate(t *testing.T) {
	for _, o := range []Options{{Bits: 2}, {Bits: 2, WindowSlots: 4, WindowSlotDuration: slot}} {
		t.Run(map[bool]string{false: "lifetime", true: "window"}[o.WindowSlots > 0], func(t *testing.T) {
			r := newRing(t, o)
			require.True(t, r.TouchN("k", 1<<62, t0Ms))
			require.True(t, r.TouchN("k", 1<<62, t0Ms))
			require.EqualValues(t, maxCount, r.Frequency("k", t0Ms), "saturated, still live")
			require.Equal(t, 1, r.Len())
			checkInvariants(t, r)

			done := make(chan struct{})
			go func() {
				defer close(done)
				r.TouchN("k", math.MaxUint64, t0Ms)
				r.TouchN("big", math.MaxUint64, t0Ms)
				r.TouchAndClamp("k", math.MaxUint64, t0Ms)
			}()
			select {
			case <-done:
			case <-time.After(testenv.HangGuard):
				t.Fatal("TouchN with a weight >= 2^63 does not return")
			}
			require.EqualValues(t, maxCount, r.Frequency("k", t0Ms))
			require.EqualValues(t, maxCount, r.Frequency("big", t0Ms))
			require.Equal(t, []KeyCount{{"big", maxCount}, {"k", maxCount}}, r.TopN(5, t0Ms))
			require.Equal(t, 2, r.Len())
			checkInvariants(t, r)
		})
	}
}

// TouchN(key, 0) tracks key without counting; limit 0 refuses every touch;
// KeysAbove(0) lists every tracked key, zero counts included.
func TestZeroEdges(t *testing.T) {
	r := newRing(t, Options{WindowSlots: 4, WindowSlotDuration: slot})
	require.True(t, r.TouchN("zero", 0, t0Ms))
	require.Zero(t, r.Frequency("zero", t0Ms))
	require.Equal(t, 1, r.Len())
	c, lim := r.TouchAndClamp("zero", 0, t0Ms)
	require.True(t, lim)
	require.Zero(t, c)
	require.Equal(t, []KeyCount{{"zero", 0}}, r.KeysAbove(0, t0Ms))
	require.Empty(t, r.TopN(5, t0Ms), "zero counts are left out of TopN")
}

// Times at the ends of the int64 range: epoch and schedule arithmetic must
// not wrap. A window with 1ms slots used to loop for ~2^64 epochs on a gap
// from near MinInt64 to near MaxInt64, the rotation schedule wrapped
// negative near MaxInt64 (every call rotated), and such a gap counted as
// fewer than two rotations, keeping a stale warm generation.
func TestExtremeTimes(t *testing.T) {
	r := newRing(t, Options{WindowSlots: 4, WindowSlotDuration: time.Millisecond})
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.Touch("k", math.MinInt64+10)
		r.Touch("k", math.MaxInt64-10)
	}()
	select {
	case <-done:
	case <-time.After(testenv.HangGuard):
		t.Fatal("a window gap of more than 2^63 slots does not return")
	}
	require.EqualValues(t, 1, r.Frequency("k", math.MaxInt64-10))

	r = newRing(t, Options{RotationInterval: time.Minute})
	r.Touch("k", math.MaxInt64-5)
	r.Touch("k", math.MaxInt64-4)
	require.EqualValues(t, 2, r.Frequency("k", math.MaxInt64-3), "no boundary in between")
	require.Zero(t, r.Stats().Rotations)

	r = newRing(t, Options{RotationInterval: time.Minute})
	r.Touch("k", math.MinInt64+5)
	r.Touch("k", math.MaxInt64-2*minMs)
	require.Equal(t, []KeyCount{{"k", 1}}, r.TopN(5, math.MaxInt64-2*minMs),
		"a gap of many intervals drops both old generations")
	rot := r.Stats().Rotations
	require.True(t, rot > 1<<48 && rot < 1<<49, "about 2^64ms / 1m rotations, got %d", rot)
}

// The node keeps the caller's string, not a copy: that is what makes an
// insert one allocation, and why the package asks for immutable keys.
func TestNodeKeepsCallersString(t *testing.T) {
	r := newRing(t, Options{})
	key := strings.Repeat("k", 40) // heap-allocated, not a constant
	require.True(t, r.Touch(key, t0Ms))
	n := r.gens.Load().active.lookup(xxh3.HashString(key), key)
	require.NotNil(t, n)
	require.Same(t, unsafe.StringData(key), unsafe.StringData(n.key))
}

// A windowed node's counters sit right after it in every allocation shape
// (area finds them there), and the node stays one cache line.
func TestNodeLayout(t *testing.T) {
	require.EqualValues(t, 64, nodeBytes)
	for _, off := range []uintptr{
		unsafe.Offsetof(winNode[[4]uint64]{}.slots),
		unsafe.Offsetof(winNode[[64]uint64]{}.slots),
		unsafe.Offsetof(winNode[[maxWords]uint64]{}.slots),
	} {
		require.Equal(t, nodeBytes, off)
	}
	for _, lay := range []layout{{slots: 3, lanes: 1}, {slots: 11, lanes: 5, sums: true}, {slots: 64, lanes: 7, sums: true}} {
		n := newNode(1, "k", lay)
		a := n.area(lay)
		for i := range a {
			a[i] = uint64(i) + 1 // the whole area is the node's to write
		}
		require.Equal(t, "k", n.key)
		require.Zero(t, n.tag)
	}
}
