package hotring

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func windowRing(t *testing.T, clk *ManualClock) *Ring {
	return newRing(t, Options{WindowSlots: 8, WindowSlotDuration: slot, Clock: clk.Now})
}

func TestWindowSlotBoundaries(t *testing.T) {
	clk := NewManualClock(time.Unix(0, t0))
	r := windowRing(t, clk)
	r.Touch("k") // slot 0
	clk.Advance(slot - 1)
	r.Touch("k") // still slot 0 (last nanosecond)
	clk.Advance(1)
	r.Touch("k") // slot 1 (first nanosecond)
	require.EqualValues(t, 3, r.Frequency("k"))

	// Slot 0 stays in the window through the last nanosecond of slot 7 and
	// leaves it at the first nanosecond of slot 8.
	clk.Set(t0 + 8*int64(slot) - 1)
	require.EqualValues(t, 3, r.Frequency("k"))
	clk.Set(t0 + 8*int64(slot))
	require.EqualValues(t, 1, r.Frequency("k"))
	clk.Set(t0 + 9*int64(slot))
	require.EqualValues(t, 0, r.Frequency("k"))
}

func TestWindowLongGapAndLateEvents(t *testing.T) {
	clk := NewManualClock(time.Unix(0, t0))
	r := windowRing(t, clk)
	for i := 0; i < 5; i++ {
		r.Touch("k")
	}
	clk.Advance(time.Hour)
	require.Zero(t, r.Frequency("k"), "a long gap empties the window")
	r.Touch("k")
	require.EqualValues(t, 1, r.Frequency("k"), "stale slots do not come back after a gap")

	now := clk.Now()
	require.True(t, r.TouchAt("k", now-int64(3*slot)), "late but inside the window")
	require.EqualValues(t, 2, r.FrequencyAt("k", now))
	r.TouchAt("k", now-int64(20*slot)) // older than the window: not in it
	require.EqualValues(t, 2, r.FrequencyAt("k", now))
	// A reader behind the newest event sees the window as of its own time.
	require.EqualValues(t, 1, r.FrequencyAt("k", now-int64(slot)))
}

func TestWindowClamp(t *testing.T) {
	clk := NewManualClock(time.Unix(0, t0))
	r := windowRing(t, clk)
	for i := 1; i <= 3; i++ {
		c, lim := r.TouchAndClamp("k", 3)
		require.False(t, lim)
		require.EqualValues(t, i, c)
	}
	c, lim := r.TouchAndClamp("k", 3)
	require.True(t, lim)
	require.EqualValues(t, 3, c)
	clk.Advance(8 * slot)
	c, lim = r.TouchAndClamp("k", 3)
	require.False(t, lim, "the window forgot the burst")
	require.EqualValues(t, 1, c)
	require.EqualValues(t, 1, r.Stats().Clamped)
}

func TestLifetimeClamp(t *testing.T) {
	r := newRing(t, Options{})
	c, lim := r.TouchAndClamp("k", 0)
	require.True(t, lim, "limit 0 refuses everything")
	require.Zero(t, c)
	require.True(t, r.TouchN("k", 5))
	c, lim = r.TouchAndClamp("k", 6)
	require.False(t, lim)
	require.EqualValues(t, 6, c)
	c, lim = r.TouchAndClamp("k", 6)
	require.True(t, lim)
	require.EqualValues(t, 6, c)
}

func TestRotationGenerations(t *testing.T) {
	clk := NewManualClock(time.Unix(0, t0))
	r := newRing(t, Options{RotationInterval: time.Minute, Clock: clk.Now})
	r.TouchN("k", 10)
	clk.Advance(time.Minute)
	r.Tick()
	s := r.Stats()
	require.EqualValues(t, 1, s.Rotations)
	require.Equal(t, 0, s.Nodes)
	require.Equal(t, 1, s.WarmNodes)
	require.EqualValues(t, 10, r.Frequency("k"), "warm keeps the previous generation")
	r.TouchN("k", 3)
	require.EqualValues(t, 10, r.Frequency("k"), "Frequency is max(active, warm)")
	require.Equal(t, []KeyCount{{"k", 13}}, r.TopN(5), "TopN is active + warm")
	require.Equal(t, 2, r.Len())
	c, lim := r.TouchAndClamp("k", 10)
	require.True(t, lim, "the warm count counts toward the limit")
	require.EqualValues(t, 10, c)

	clk.Advance(time.Minute)
	require.EqualValues(t, 3, r.Frequency("k"))
	clk.Advance(5 * time.Minute)
	require.Zero(t, r.Frequency("k"), "a gap of several intervals drops both generations")
	require.Zero(t, r.Len())
	require.EqualValues(t, 7, r.Stats().Rotations)
}

func TestRotationAlignedToInterval(t *testing.T) {
	r := newRing(t, Options{RotationInterval: time.Minute})
	r.TouchAt("k", t0+int64(59*time.Second)) // schedule starts; boundary t0+1m
	r.TouchAt("k", t0+int64(time.Minute)-1)
	require.Zero(t, r.Stats().Rotations)
	r.TouchAt("k", t0+int64(time.Minute))
	require.EqualValues(t, 1, r.Stats().Rotations, "rotates at the aligned boundary, not 1m after start")
}

func TestWindowWithRotationSumsGenerations(t *testing.T) {
	clk := NewManualClock(time.Unix(0, t0))
	r := newRing(t, Options{WindowSlots: 8, WindowSlotDuration: slot, RotationInterval: 2 * time.Second, Clock: clk.Now})
	clk.Set(t0 + int64(2*time.Second) - int64(slot))
	r.TouchN("k", 4) // last slot before the boundary
	clk.Set(t0 + int64(2*time.Second))
	r.TouchN("k", 4) // first slot after it, in the new generation
	require.EqualValues(t, 1, r.Stats().Rotations)
	require.EqualValues(t, 8, r.Frequency("k"), "window counts straddling a rotation add up")
}

func TestDecay(t *testing.T) {
	clk := NewManualClock(time.Unix(0, t0))
	r := newRing(t, Options{DecayInterval: time.Second, DecayShift: 1, Clock: clk.Now})
	r.TouchN("k", 100)
	clk.Advance(time.Second)
	require.EqualValues(t, 50, r.Frequency("k"))
	clk.Advance(3 * time.Second)
	require.EqualValues(t, 6, r.Frequency("k"), "a gap applies each missed interval")
	require.EqualValues(t, 4, r.Stats().Decays)
	clk.Advance(time.Hour)
	require.Zero(t, r.Frequency("k"))
	require.Equal(t, 1, r.EvictCold(), "decayed to zero is cold")
	require.Zero(t, r.Len())
}

func TestClockReadOnlyWhenNeeded(t *testing.T) {
	calls := 0
	r := newRing(t, Options{Clock: func() int64 { calls++; return 0 }})
	r.Touch("k")
	r.Frequency("k")
	r.TopN(1)
	require.Zero(t, calls, "no time-based feature: the clock is never read")
}

func TestTouchBytesCopiesKey(t *testing.T) {
	r := newRing(t, Options{})
	buf := []byte("aaaa")
	r.TouchBytesAt(buf, 1, 0)
	copy(buf, "bbbb")
	r.TouchBytesAt(buf, 2, 0)
	require.EqualValues(t, 1, r.Frequency("aaaa"))
	require.EqualValues(t, 2, r.Frequency("bbbb"))
}
