package hotring

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestDefaultOptionsMatchSeed(t *testing.T) {
	o := DefaultOptions()
	require.NoError(t, o.Validate())
	require.Equal(t, 0, o.Bits, "sized from NodeCap, not the seed's fixed 12")
	require.Equal(t, 16, o.TopK)
	require.Equal(t, 8, o.WindowSlots)
	require.Equal(t, 250*time.Millisecond, o.WindowSlotDuration)
	require.Equal(t, 30*time.Minute, o.RotationInterval)
	require.Equal(t, 250_000, o.NodeCap)
	require.Equal(t, 0, o.SampleBits)
	require.Zero(t, o.DecayInterval)
	require.Zero(t, o.DecayShift)
}

func TestSizeBits(t *testing.T) {
	for _, tc := range []struct{ cap, want int }{
		{0, MinBits},
		{1000, MinBits},
		{8192, MinBits},
		{8194, 13},
		{250_000, 17},
		{262_144, 17},
		{262_146, 18},
		{1 << 40, MaxBits},
	} {
		require.Equal(t, tc.want, SizeBits(tc.cap), "SizeBits(%d)", tc.cap)
		require.GreaterOrEqual(t, 1<<SizeBits(tc.cap), min(tc.cap/2, 1<<MaxBits), "at most two nodes per bucket at cap %d", tc.cap)
	}
}

func TestValidateRejects(t *testing.T) {
	for _, tc := range []struct {
		name string
		mod  func(*Options)
		want string
	}{
		{"negative bits", func(o *Options) { o.Bits = -1 }, "Bits"},
		{"too many bits", func(o *Options) { o.Bits = MaxBits + 1 }, "Bits"},
		{"negative topk", func(o *Options) { o.TopK = -1 }, "TopK"},
		{"negative decay interval", func(o *Options) { o.DecayInterval = -1; o.DecayShift = 1 }, "DecayInterval"},
		{"decay interval without shift", func(o *Options) { o.DecayInterval = time.Second }, "set both"},
		{"decay shift without interval", func(o *Options) { o.DecayShift = 1 }, "set both"},
		{"decay shift too large", func(o *Options) { o.DecayInterval = time.Second; o.DecayShift = 64 }, "DecayShift"},
		{"negative slots", func(o *Options) { o.WindowSlots = -1 }, "WindowSlots"},
		{"too many slots", func(o *Options) { o.WindowSlots = MaxWindowSlots + 1 }, "WindowSlots"},
		{"slots without duration", func(o *Options) { o.WindowSlotDuration = 0 }, "set both"},
		{"duration without slots", func(o *Options) { o.WindowSlots = 0 }, "set both"},
		{"negative slot duration", func(o *Options) { o.WindowSlotDuration = -time.Second }, "WindowSlotDuration"},
		{"negative rotation", func(o *Options) { o.RotationInterval = -time.Second }, "RotationInterval"},
		{"rotation shorter than window", func(o *Options) { o.RotationInterval = time.Second }, "shorter than the window"},
		{"negative cap", func(o *Options) { o.NodeCap = -1 }, "NodeCap"},
		{"negative sample bits", func(o *Options) { o.SampleBits = -1 }, "SampleBits"},
		{"too many sample bits", func(o *Options) { o.SampleBits = MaxSampleBits + 1 }, "SampleBits"},
		{"sampling without cap", func(o *Options) { o.NodeCap = 0; o.SampleBits = 2 }, "without NodeCap"},
		{"negative sweep", func(o *Options) { o.ColdSweepInterval = -time.Second }, "ColdSweepInterval"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := DefaultOptions()
			tc.mod(&o)
			err := o.Validate()
			require.ErrorIs(t, err, ErrInvalidOptions)
			require.ErrorContains(t, err, tc.want)
			_, err = New(o)
			require.ErrorIs(t, err, ErrInvalidOptions)
		})
	}
}

func TestNewNormalizes(t *testing.T) {
	o := DefaultOptions()
	o.Bits = 0
	o.DecayInterval, o.DecayShift = time.Second, 1
	r := newRing(t, o)
	got := r.Options()
	require.Equal(t, 17, got.Bits, "Bits 0 is sized from the 250,000 cap")
	require.Zero(t, got.DecayInterval, "window on turns decay off")
	require.Zero(t, got.DecayShift)

	o.WindowSlots, o.WindowSlotDuration = 0, 0
	got = newRing(t, o).Options()
	require.Equal(t, time.Second, got.DecayInterval, "decay kept without window")
}

func TestManualClock(t *testing.T) {
	c := NewManualClock(time.Unix(10, 0))
	require.Equal(t, int64(10e9), c.Now())
	c.Advance(time.Second)
	require.Equal(t, int64(11e9), c.Now())
	c.Set(5)
	require.Equal(t, int64(5), c.Now())
}
