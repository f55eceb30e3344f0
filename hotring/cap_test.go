package hotring

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestStrictCapRefuses(t *testing.T) {
	r := newRing(t, Options{NodeCap: 3})
	for i := 0; i < 3; i++ {
		require.True(t, r.Touch(keyName(i)))
	}
	require.False(t, r.Touch("late-hot-key"))
	require.False(t, r.Touch("late-hot-key"))
	require.Zero(t, r.Frequency("late-hot-key"))
	c, lim := r.TouchAndClamp("late-hot-key", 10)
	require.Zero(t, c)
	require.False(t, lim)
	require.True(t, r.Touch(keyName(0)), "tracked keys still count at the cap")
	s := r.Stats()
	require.Equal(t, 3, s.Nodes)
	require.EqualValues(t, 3, s.RefusedByCap)
}

func TestSamplingAdmitsStableFraction(t *testing.T) {
	const capN, bits, tries = 100, 2, 40000
	r := newRing(t, Options{NodeCap: capN, SampleBits: bits})
	for i := 0; i < capN; i++ {
		require.True(t, r.Touch(keyName(i)))
	}
	admitted := 0
	for i := 0; i < tries; i++ {
		k := fmt.Sprintf("new-%d", i)
		in := r.Touch(k)
		if in {
			admitted++
		}
		require.Equal(t, in, r.Touch(k), "key %q: the decision is stable", k)
	}
	frac := float64(admitted) / tries
	require.InDelta(t, 0.25, frac, 0.02, "about 1/2^%d admitted", bits)
	require.EqualValues(t, 2*(tries-admitted), r.Stats().SampledOut)

	// The decision depends on the key only: a fresh ring decides the same.
	r2 := newRing(t, Options{NodeCap: capN, SampleBits: bits})
	for i := 0; i < capN; i++ {
		r2.Touch(keyName(i))
	}
	for i := 0; i < 2000; i++ {
		k := fmt.Sprintf("new-%d", i)
		require.Equal(t, r.Frequency(k) > 0, r2.Touch(k), "key %q", k)
	}
}

func TestForceAdmitPastCap(t *testing.T) {
	r := newRing(t, Options{NodeCap: 2})
	r.Touch("a")
	r.Touch("b")
	require.False(t, r.Touch("hot"))
	require.True(t, r.Admit("hot"))
	require.False(t, r.Admit("hot"), "already tracked")
	require.True(t, r.TouchN("hot", 7))
	require.EqualValues(t, 7, r.Frequency("hot"))
	require.Equal(t, 3, r.Len())
	require.EqualValues(t, 1, r.Stats().ForceAdmitted)
}

func TestAdmitHook(t *testing.T) {
	var asked []string
	r := newRing(t, Options{NodeCap: 1, Admit: func(k string) bool {
		asked = append(asked, k)
		return k == "gated"
	}})
	require.True(t, r.Touch("first"))
	require.Empty(t, asked, "not asked below the cap")
	require.False(t, r.Touch("other"))
	require.True(t, r.Touch("gated"))
	require.True(t, r.Touch("gated"))
	require.Equal(t, []string{"other", "gated"}, asked, "asked only for new keys at the cap")
	require.EqualValues(t, 2, r.Frequency("gated"))
}

func TestColdEvictionFreesRoom(t *testing.T) {
	clk := NewManualClock(time.Unix(0, t0))
	r := newRing(t, Options{NodeCap: 10, WindowSlots: 8, WindowSlotDuration: slot, Clock: clk.Now})
	for i := 0; i < 10; i++ {
		require.True(t, r.Touch(keyName(i)))
	}
	require.False(t, r.Touch("new"))
	clk.Advance(4 * slot)
	r.Touch(keyName(0)) // still warm
	require.Zero(t, r.EvictCold(), "nothing has left the window yet")
	clk.Advance(4 * slot)
	require.Equal(t, 9, r.EvictCold(), "all but the recently touched key are cold")
	require.Equal(t, 1, r.Len())
	require.EqualValues(t, 1, r.Frequency(keyName(0)))
	require.True(t, r.Touch("new"), "room again")
	require.EqualValues(t, 9, r.Stats().Evicted)
	checkInvariants(t, r)
}

func TestAutomaticColdSweep(t *testing.T) {
	clk := NewManualClock(time.Unix(0, t0))
	r := newRing(t, Options{
		NodeCap: 8, WindowSlots: 4, WindowSlotDuration: slot,
		ColdSweepInterval: 10 * time.Second, Clock: clk.Now,
	})
	for i := 0; i < 5; i++ {
		r.Touch(keyName(i))
	}
	clk.Advance(10 * time.Second)
	r.Tick()
	require.Equal(t, 5, r.Len(), "below 3/4 of the cap the sweep leaves nodes alone")
	for i := 5; i < 8; i++ {
		r.Touch(keyName(i))
	}
	require.False(t, r.Touch("new"))
	clk.Advance(10 * time.Second)
	require.True(t, r.Touch("new"), "the sweep due at this time ran first and made room")
	require.Equal(t, 1, r.Len())
	require.EqualValues(t, 8, r.Stats().Evicted)
}

func TestRemove(t *testing.T) {
	clk := NewManualClock(time.Unix(0, t0))
	r := newRing(t, Options{NodeCap: 2, RotationInterval: time.Minute, Clock: clk.Now})
	r.Touch("a")
	clk.Advance(time.Minute)
	r.Touch("a")
	r.Touch("b")
	require.Equal(t, 3, r.Len())
	require.True(t, r.Remove("a"), "removed from both generations")
	require.False(t, r.Remove("a"))
	require.Zero(t, r.Frequency("a"))
	require.Equal(t, 1, r.Len())
	require.True(t, r.Touch("c"), "removal frees a place under the cap")
	require.EqualValues(t, 2, r.Stats().Removed)
	checkInvariants(t, r)
}

// A sweep runs at the time of whichever call reaches its deadline first,
// while other goroutines touch keys at later event times. A node whose
// touches are all newer than the sweep's time is not cold: it used to be
// evicted, dropping touches that had already returned true.
func TestEvictColdKeepsNodesTouchedAfterNow(t *testing.T) {
	r := newRing(t, Options{WindowSlots: 4, WindowSlotDuration: slot})
	later := t0 + int64(10*time.Second)
	require.True(t, r.TouchAt("ahead", later))
	require.True(t, r.TouchAt("old", t0))
	require.Equal(t, 1, r.EvictColdAt(later-int64(slot)), "only the key whose window is empty goes")
	require.EqualValues(t, 1, r.FrequencyAt("ahead", later), "the touch at the later time survives")
	require.Zero(t, r.FrequencyAt("old", later))
	checkInvariants(t, r)
}
