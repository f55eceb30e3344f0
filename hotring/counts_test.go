package hotring

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Weights large enough to reach the top bit of a count must saturate, not
// carry into deadBit: a carry made a live node look deleted (it read 0, was
// never unlinked nor uncounted, and the next touch inserted a second node),
// and a weight of 2^63 or more made TouchN loop forever inserting nodes.
func TestHugeWeightsSaturate(t *testing.T) {
	for _, o := range []Options{{Bits: 2}, {Bits: 2, WindowSlots: 4, WindowSlotDuration: slot}} {
		t.Run(map[bool]string{false: "lifetime", true: "window"}[o.WindowSlots > 0], func(t *testing.T) {
			r := newRing(t, o)
			require.True(t, r.TouchNAt("k", 1<<62, t0))
			require.True(t, r.TouchNAt("k", 1<<62, t0))
			require.EqualValues(t, maxCount, r.FrequencyAt("k", t0), "saturated, still live")
			require.Equal(t, 1, r.Len())
			checkInvariants(t, r)

			done := make(chan struct{})
			go func() {
				defer close(done)
				r.TouchNAt("k", math.MaxUint64, t0)
				r.TouchNAt("big", math.MaxUint64, t0)
				r.TouchAndClampAt("k", math.MaxUint64, t0)
			}()
			select {
			case <-done:
			case <-time.After(5 * time.Second):
				t.Fatal("TouchN with a weight >= 2^63 does not return")
			}
			require.EqualValues(t, maxCount, r.FrequencyAt("k", t0))
			require.EqualValues(t, maxCount, r.FrequencyAt("big", t0))
			require.Equal(t, []KeyCount{{"big", maxCount}, {"k", maxCount}}, r.TopNAt(5, t0))
			require.Equal(t, 2, r.Len())
			checkInvariants(t, r)
		})
	}
}

// TouchN(key, 0) tracks key without counting; limit 0 refuses every touch;
// KeysAbove(0) lists every tracked key, zero counts included.
func TestZeroEdges(t *testing.T) {
	r := newRing(t, Options{WindowSlots: 4, WindowSlotDuration: slot})
	require.True(t, r.TouchNAt("zero", 0, t0))
	require.Zero(t, r.FrequencyAt("zero", t0))
	require.Equal(t, 1, r.Len())
	c, lim := r.TouchAndClampAt("zero", 0, t0)
	require.True(t, lim)
	require.Zero(t, c)
	require.Equal(t, []KeyCount{{"zero", 0}}, r.KeysAboveAt(0, t0))
	require.Empty(t, r.TopNAt(5, t0), "zero counts are left out of TopN")
}

// Times at the ends of the int64 range: epoch and schedule arithmetic must
// not wrap. A window with 1ns slots used to loop for ~2^64 epochs on a gap
// from near MinInt64 to near MaxInt64, the rotation schedule wrapped
// negative near MaxInt64 (every call rotated), and such a gap counted as
// fewer than two rotations, keeping a stale warm generation.
func TestExtremeTimes(t *testing.T) {
	r := newRing(t, Options{WindowSlots: 4, WindowSlotDuration: 1})
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.TouchAt("k", math.MinInt64+10)
		r.TouchAt("k", math.MaxInt64-10)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("a window gap of more than 2^63 slots does not return")
	}
	require.EqualValues(t, 1, r.FrequencyAt("k", math.MaxInt64-10))

	r = newRing(t, Options{RotationInterval: time.Minute})
	r.TouchAt("k", math.MaxInt64-5)
	r.TouchAt("k", math.MaxInt64-4)
	require.EqualValues(t, 2, r.FrequencyAt("k", math.MaxInt64-3), "no boundary in between")
	require.Zero(t, r.Stats().Rotations)

	r = newRing(t, Options{RotationInterval: time.Minute})
	r.TouchAt("k", math.MinInt64+5)
	r.TouchAt("k", math.MaxInt64-int64(2*time.Minute))
	require.Equal(t, []KeyCount{{"k", 1}}, r.TopNAt(5, math.MaxInt64-int64(2*time.Minute)),
		"a gap of many intervals drops both old generations")
	rot := r.Stats().Rotations
	require.True(t, rot > 1<<28 && rot < 1<<29, "about 2^64ns / 1m rotations, got %d", rot)
}
