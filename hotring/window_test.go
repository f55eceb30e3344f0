package hotring

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

const (
	secMs = int64(time.Second / time.Millisecond)
	minMs = 60 * secMs
)

func windowRing(t *testing.T) *Ring {
	return newRing(t, Options{WindowSlots: 8, WindowSlotDuration: slot})
}

func TestWindowSlotBoundaries(t *testing.T) {
	r := windowRing(t)
	nowMs := t0Ms
	r.Touch("k", nowMs) // slot 0
	nowMs += slotMs - 1
	r.Touch("k", nowMs) // still slot 0 (last millisecond)
	nowMs++
	r.Touch("k", nowMs) // slot 1 (first millisecond)
	require.EqualValues(t, 3, r.Frequency("k", nowMs))

	// Slot 0 stays in the window through the last millisecond of slot 7 and
	// leaves it at the first millisecond of slot 8.
	require.EqualValues(t, 3, r.Frequency("k", t0Ms+8*slotMs-1))
	require.EqualValues(t, 1, r.Frequency("k", t0Ms+8*slotMs))
	require.EqualValues(t, 0, r.Frequency("k", t0Ms+9*slotMs))
}

func TestWindowLongGapAndLateEvents(t *testing.T) {
	r := windowRing(t)
	nowMs := t0Ms
	for i := 0; i < 5; i++ {
		r.Touch("k", nowMs)
	}
	nowMs += 60 * minMs
	require.Zero(t, r.Frequency("k", nowMs), "a long gap empties the window")
	r.Touch("k", nowMs)
	require.EqualValues(t, 1, r.Frequency("k", nowMs), "stale slots do not come back after a gap")

	require.True(t, r.Touch("k", nowMs-3*slotMs), "late but inside the window")
	require.EqualValues(t, 2, r.Frequency("k", nowMs))
	r.Touch("k", nowMs-20*slotMs) // older than the window: not in it
	require.EqualValues(t, 2, r.Frequency("k", nowMs))
	// A reader behind the newest event sees the window as of its own time.
	require.EqualValues(t, 1, r.Frequency("k", nowMs-slotMs))
}

func TestWindowClamp(t *testing.T) {
	r := windowRing(t)
	nowMs := t0Ms
	for i := 1; i <= 3; i++ {
		c, lim := r.TouchAndClamp("k", 3, nowMs)
		require.False(t, lim)
		require.EqualValues(t, i, c)
	}
	c, lim := r.TouchAndClamp("k", 3, nowMs)
	require.True(t, lim)
	require.EqualValues(t, 3, c)
	nowMs += 8 * slotMs
	c, lim = r.TouchAndClamp("k", 3, nowMs)
	require.False(t, lim, "the window forgot the burst")
	require.EqualValues(t, 1, c)
	require.EqualValues(t, 1, r.Stats().Clamped)
}

func TestLifetimeClamp(t *testing.T) {
	r := newRing(t, Options{})
	c, lim := r.TouchAndClamp("k", 0, t0Ms)
	require.True(t, lim, "limit 0 refuses everything")
	require.Zero(t, c)
	require.True(t, r.TouchN("k", 5, t0Ms))
	c, lim = r.TouchAndClamp("k", 6, t0Ms)
	require.False(t, lim)
	require.EqualValues(t, 6, c)
	c, lim = r.TouchAndClamp("k", 6, t0Ms)
	require.True(t, lim)
	require.EqualValues(t, 6, c)
}

func TestRotationGenerations(t *testing.T) {
	r := newRing(t, Options{RotationInterval: time.Minute})
	nowMs := t0Ms
	r.TouchN("k", 10, nowMs)
	nowMs += minMs
	r.Tick(nowMs)
	s := r.Stats()
	require.EqualValues(t, 1, s.Rotations)
	require.Equal(t, 0, s.Nodes)
	require.Equal(t, 1, s.WarmNodes)
	require.EqualValues(t, 10, r.Frequency("k", nowMs), "warm keeps the previous generation")
	r.TouchN("k", 3, nowMs)
	require.EqualValues(t, 10, r.Frequency("k", nowMs), "Frequency is max(active, warm)")
	require.Equal(t, []KeyCount{{"k", 13}}, r.TopN(5, nowMs), "TopN is active + warm")
	require.Equal(t, 2, r.Len())
	c, lim := r.TouchAndClamp("k", 10, nowMs)
	require.True(t, lim, "the warm count counts toward the limit")
	require.EqualValues(t, 10, c)

	nowMs += minMs
	require.EqualValues(t, 3, r.Frequency("k", nowMs))
	nowMs += 5 * minMs
	require.Zero(t, r.Frequency("k", nowMs), "a gap of several intervals drops both generations")
	require.Zero(t, r.Len())
	require.EqualValues(t, 7, r.Stats().Rotations)
}

func TestRotationAlignedToInterval(t *testing.T) {
	r := newRing(t, Options{RotationInterval: time.Minute})
	r.Touch("k", t0Ms+59*secMs) // schedule starts; boundary t0Ms+1m
	r.Touch("k", t0Ms+minMs-1)
	require.Zero(t, r.Stats().Rotations)
	r.Touch("k", t0Ms+minMs)
	require.EqualValues(t, 1, r.Stats().Rotations, "rotates at the aligned boundary, not 1m after start")
}

func TestWindowWithRotationSumsGenerations(t *testing.T) {
	r := newRing(t, Options{WindowSlots: 8, WindowSlotDuration: slot, RotationInterval: 2 * time.Second})
	r.TouchN("k", 4, t0Ms+2*secMs-slotMs) // last slot before the boundary
	nowMs := t0Ms + 2*secMs
	r.TouchN("k", 4, nowMs) // first slot after it, in the new generation
	require.EqualValues(t, 1, r.Stats().Rotations)
	require.EqualValues(t, 8, r.Frequency("k", nowMs), "window counts straddling a rotation add up")
}

func TestDecay(t *testing.T) {
	r := newRing(t, Options{DecayInterval: time.Second, DecayShift: 1})
	nowMs := t0Ms
	r.TouchN("k", 100, nowMs)
	nowMs += secMs
	require.EqualValues(t, 50, r.Frequency("k", nowMs))
	nowMs += 3 * secMs
	require.EqualValues(t, 6, r.Frequency("k", nowMs), "a gap applies each missed interval")
	require.EqualValues(t, 4, r.Stats().Decays)
	nowMs += 60 * minMs
	require.Zero(t, r.Frequency("k", nowMs))
	require.Equal(t, 1, r.EvictCold(nowMs), "decayed to zero is cold")
	require.Zero(t, r.Len())
}

// Without a time-based feature the ring ignores nowMs: any value, even one
// moving backwards, gives the same counts.
func TestTimeIgnoredWithoutTimeFeatures(t *testing.T) {
	r := newRing(t, Options{})
	for _, nowMs := range []int64{t0Ms, 0, -1, t0Ms + 60*minMs, t0Ms - 60*minMs} {
		require.True(t, r.Touch("k", nowMs))
	}
	require.EqualValues(t, 5, r.Frequency("k", 0))
	require.EqualValues(t, 5, r.Frequency("k", t0Ms+1e9))
	require.Equal(t, []KeyCount{{"k", 5}}, r.TopN(1, -1e9))
	require.Zero(t, r.Stats().Rotations+r.Stats().Decays)
}
