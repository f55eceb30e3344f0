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
		require.True(t, r.Touch(keyName(i), t0Ms))
	}
	require.False(t, r.Touch("late-hot-key", t0Ms))
	require.False(t, r.Touch("late-hot-key", t0Ms))
	require.Zero(t, r.Frequency("late-hot-key", t0Ms))
	c, lim := r.TouchAndClamp("late-hot-key", 10, t0Ms)
	require.Zero(t, c)
	require.False(t, lim)
	require.True(t, r.Touch(keyName(0), t0Ms), "tracked keys still count at the cap")
	s := r.Stats()
	require.Equal(t, 3, s.Nodes)
	require.EqualValues(t, 3, s.RefusedByCap)
}

func TestSamplingAdmitsStableFraction(t *testing.T) {
	const capN, bits, tries = 100, 2, 40000
	r := newRing(t, Options{NodeCap: capN, SampleBits: bits})
	for i := 0; i < capN; i++ {
		require.True(t, r.Touch(keyName(i), t0Ms))
	}
	admitted := 0
	for i := 0; i < tries; i++ {
		k := fmt.Sprintf("new-%d", i)
		in := r.Touch(k, t0Ms)
		if in {
			admitted++
		}
		require.Equal(t, in, r.Touch(k, t0Ms), "key %q: the decision is stable", k)
	}
	frac := float64(admitted) / tries
	require.InDelta(t, 0.25, frac, 0.02, "about 1/2^%d admitted", bits)
	require.EqualValues(t, 2*(tries-admitted), r.Stats().SampledOut)

	// The decision depends on the key only: a fresh ring decides the same.
	r2 := newRing(t, Options{NodeCap: capN, SampleBits: bits})
	for i := 0; i < capN; i++ {
		r2.Touch(keyName(i), t0Ms)
	}
	for i := 0; i < 2000; i++ {
		k := fmt.Sprintf("new-%d", i)
		require.Equal(t, r.Frequency(k, t0Ms) > 0, r2.Touch(k, t0Ms), "key %q", k)
	}
}

func TestForceAdmitPastCap(t *testing.T) {
	r := newRing(t, Options{NodeCap: 2})
	r.Touch("a", t0Ms)
	r.Touch("b", t0Ms)
	require.False(t, r.Touch("hot", t0Ms))
	require.True(t, r.Admit("hot"))
	require.False(t, r.Admit("hot"), "already tracked")
	require.True(t, r.TouchN("hot", 7, t0Ms))
	require.EqualValues(t, 7, r.Frequency("hot", t0Ms))
	require.Equal(t, 3, r.Len())
	require.EqualValues(t, 1, r.Stats().ForceAdmitted)
}

func TestAdmitHook(t *testing.T) {
	var asked []string
	r := newRing(t, Options{NodeCap: 1, Admit: func(k string) bool {
		asked = append(asked, k)
		return k == "gated"
	}})
	require.True(t, r.Touch("first", t0Ms))
	require.Empty(t, asked, "not asked below the cap")
	require.False(t, r.Touch("other", t0Ms))
	require.True(t, r.Touch("gated", t0Ms))
	require.True(t, r.Touch("gated", t0Ms))
	require.Equal(t, []string{"other", "gated"}, asked, "asked only for new keys at the cap")
	require.EqualValues(t, 2, r.Frequency("gated", t0Ms))
}

func TestColdEvictionFreesRoom(t *testing.T) {
	r := newRing(t, Options{NodeCap: 10, WindowSlots: 8, WindowSlotDuration: slot})
	nowMs := t0Ms
	for i := 0; i < 10; i++ {
		require.True(t, r.Touch(keyName(i), nowMs))
	}
	require.False(t, r.Touch("new", nowMs))
	nowMs += 4 * slotMs
	r.Touch(keyName(0), nowMs) // still warm
	require.Zero(t, r.EvictCold(nowMs), "nothing has left the window yet")
	nowMs += 4 * slotMs
	require.Equal(t, 9, r.EvictCold(nowMs), "all but the recently touched key are cold")
	require.Equal(t, 1, r.Len())
	require.EqualValues(t, 1, r.Frequency(keyName(0), nowMs))
	require.True(t, r.Touch("new", nowMs), "room again")
	require.EqualValues(t, 9, r.Stats().Evicted)
	checkInvariants(t, r)
}

func TestAutomaticColdSweep(t *testing.T) {
	r := newRing(t, Options{
		NodeCap: 8, WindowSlots: 4, WindowSlotDuration: slot,
		ColdSweepInterval: 10 * time.Second,
	})
	nowMs := t0Ms
	for i := 0; i < 5; i++ {
		r.Touch(keyName(i), nowMs)
	}
	nowMs += 10 * secMs
	r.Tick(nowMs)
	require.Equal(t, 5, r.Len(), "below 3/4 of the cap the sweep leaves nodes alone")
	for i := 5; i < 8; i++ {
		r.Touch(keyName(i), nowMs)
	}
	require.False(t, r.Touch("new", nowMs))
	nowMs += 10 * secMs
	require.True(t, r.Touch("new", nowMs), "the sweep due at this time ran first and made room")
	require.Equal(t, 1, r.Len())
	require.EqualValues(t, 8, r.Stats().Evicted)
}

func TestRemove(t *testing.T) {
	r := newRing(t, Options{NodeCap: 2, RotationInterval: time.Minute})
	nowMs := t0Ms
	r.Touch("a", nowMs)
	nowMs += minMs
	r.Touch("a", nowMs)
	r.Touch("b", nowMs)
	require.Equal(t, 3, r.Len())
	require.True(t, r.Remove("a"), "removed from both generations")
	require.False(t, r.Remove("a"))
	require.Zero(t, r.Frequency("a", nowMs))
	require.Equal(t, 1, r.Len())
	require.True(t, r.Touch("c", nowMs), "removal frees a place under the cap")
	require.EqualValues(t, 2, r.Stats().Removed)
	checkInvariants(t, r)
}

// A sweep runs at the time of whichever call reaches its deadline first,
// while other goroutines touch keys at later event times. A node whose
// touches are all newer than the sweep's time is not cold: it used to be
// evicted, dropping touches that had already returned true.
func TestEvictColdKeepsNodesTouchedAfterNow(t *testing.T) {
	r := newRing(t, Options{WindowSlots: 4, WindowSlotDuration: slot})
	laterMs := t0Ms + 10*secMs
	require.True(t, r.Touch("ahead", laterMs))
	require.True(t, r.Touch("old", t0Ms))
	require.Equal(t, 1, r.EvictCold(laterMs-slotMs), "only the key whose window is empty goes")
	require.EqualValues(t, 1, r.Frequency("ahead", laterMs), "the touch at the later time survives")
	require.Zero(t, r.Frequency("old", laterMs))
	checkInvariants(t, r)
}
