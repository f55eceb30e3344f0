package hotring

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestDefaultOptions(t *testing.T) {
	o := DefaultOptions()
	require.NoError(t, o.Validate())
	require.Equal(t, 0, o.Bits, "sized from NodeCap, not a fixed 12")
	require.Equal(t, 16, o.TopK)
	require.Equal(t, 8, o.WindowSlots)
	require.Equal(t, 250*time.Millisecond, o.WindowSlotDuration)
	require.Equal(t, 30*time.Minute, o.RotationInterval)
	require.Equal(t, 250_000, o.NodeCap)
	require.Equal(t, 0, o.SampleBits)
	require.Zero(t, o.DecayInterval)
	require.Zero(t, o.DecayShift)
	require.Equal(t, 10*time.Second, o.ColdSweepInterval)
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
		{"negative decay interval", func(o *Options) { noWindow(o); o.DecayInterval = -time.Millisecond; o.DecayShift = 1 }, "DecayInterval = -1ms, want 0 (off) or a whole number of milliseconds"},
		{"decay interval below 1ms", func(o *Options) { noWindow(o); o.DecayInterval = time.Microsecond; o.DecayShift = 1 }, "DecayInterval = 1µs, want 0 (off) or a whole number of milliseconds >= 1ms"},
		{"decay interval in fractional ms", func(o *Options) { noWindow(o); o.DecayInterval = 1500 * time.Microsecond; o.DecayShift = 1 }, "DecayInterval = 1.5ms"},
		{"decay interval without shift", func(o *Options) { noWindow(o); o.DecayInterval = time.Second }, "set both"},
		{"decay shift without interval", func(o *Options) { noWindow(o); o.DecayShift = 1 }, "set both"},
		{"decay shift too large", func(o *Options) { noWindow(o); o.DecayInterval = time.Second; o.DecayShift = 64 }, "DecayShift"},
		{"decay with a window", func(o *Options) { o.DecayInterval = time.Second; o.DecayShift = 1 }, "decay applies only to lifetime counts"},
		{"negative slots", func(o *Options) { o.WindowSlots = -1 }, "WindowSlots"},
		{"too many slots", func(o *Options) { o.WindowSlots = MaxWindowSlots + 1 }, "WindowSlots"},
		{"slots without duration", func(o *Options) { o.WindowSlotDuration = 0 }, "set both"},
		{"duration without slots", func(o *Options) { o.WindowSlots = 0 }, "set both"},
		{"negative slot duration", func(o *Options) { o.WindowSlotDuration = -time.Second }, "WindowSlotDuration = -1s, want 0 (off) or a whole number of milliseconds"},
		{"slot duration below 1ms", func(o *Options) { o.WindowSlotDuration = 999 * time.Microsecond }, "WindowSlotDuration = 999µs"},
		{"slot duration in fractional ms", func(o *Options) { o.WindowSlotDuration = 250*time.Millisecond + 1 }, "WindowSlotDuration = 250.000001ms"},
		{"negative rotation", func(o *Options) { o.RotationInterval = -time.Second }, "RotationInterval = -1s, want 0 (off)"},
		{"rotation in fractional ms", func(o *Options) { o.RotationInterval = time.Hour + time.Microsecond }, "RotationInterval = 1h0m0.000001s, want 0 (off) or a whole number of milliseconds"},
		{"rotation shorter than window", func(o *Options) { o.RotationInterval = time.Second }, "shorter than the window"},
		{"negative cap", func(o *Options) { o.NodeCap = -1 }, "NodeCap"},
		{"negative sample bits", func(o *Options) { o.SampleBits = -1 }, "SampleBits"},
		{"too many sample bits", func(o *Options) { o.SampleBits = MaxSampleBits + 1 }, "SampleBits"},
		{"sampling without cap", func(o *Options) { o.NodeCap = 0; o.SampleBits = 2 }, "without NodeCap"},
		{"negative sweep", func(o *Options) { o.ColdSweepInterval = -time.Second }, "ColdSweepInterval = -1s, want 0 (off)"},
		{"sweep below 1ms", func(o *Options) { o.ColdSweepInterval = time.Nanosecond }, "ColdSweepInterval = 1ns, want 0 (off) or a whole number of milliseconds >= 1ms"},
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

// noWindow turns DefaultOptions' window (and the rotation bound tied to
// it) off, so that decay may be set.
func noWindow(o *Options) { o.WindowSlots, o.WindowSlotDuration = 0, 0 }

func TestValidateAccepts(t *testing.T) {
	for _, tc := range []struct {
		name string
		mod  func(*Options)
	}{
		{"zero value", func(o *Options) { *o = Options{} }},
		{"defaults", func(o *Options) {}},
		{"1ms everywhere", func(o *Options) {
			*o = Options{WindowSlots: 4, WindowSlotDuration: time.Millisecond, RotationInterval: 4 * time.Millisecond, ColdSweepInterval: time.Millisecond}
		}},
		{"decay without a window", func(o *Options) { noWindow(o); o.DecayInterval, o.DecayShift = time.Millisecond, 1 }},
		{"rotation exactly the window", func(o *Options) { o.RotationInterval = 8 * slot }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := DefaultOptions()
			tc.mod(&o)
			require.NoError(t, o.Validate())
			_, err := New(o)
			require.NoError(t, err)
		})
	}
}

// A huge slot duration times the slot count used to overflow a Duration
// and pass the rotation check; the window length is now computed in ms.
func TestValidateRotationAgainstHugeWindow(t *testing.T) {
	o := Options{WindowSlots: 8, WindowSlotDuration: time.Duration(1<<61) / time.Millisecond * time.Millisecond, RotationInterval: time.Hour}
	require.ErrorContains(t, o.Validate(), "shorter than the window")
}

func TestNewSizesBits(t *testing.T) {
	got := newRing(t, DefaultOptions()).Options()
	require.Equal(t, 17, got.Bits, "Bits 0 is sized from the 250,000 cap")
	o := DefaultOptions()
	o.Bits = 5
	require.Equal(t, 5, newRing(t, o).Options().Bits, "an explicit Bits is kept")
}
