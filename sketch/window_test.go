package sketch

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func newPair(t *testing.T, length time.Duration) *WindowPair {
	t.Helper()
	w, err := NewWindowPair(WindowConfig{Length: length, Sketch: CountMinConfig{Width: 256}})
	require.NoError(t, err)
	return w
}

func TestWindowConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  WindowConfig
		ok   bool
	}{
		{"zero value", WindowConfig{}, true},
		{"1 minute", WindowConfig{Length: time.Minute}, true},
		{"negative", WindowConfig{Length: -time.Second}, false},
		{"sub-millisecond", WindowConfig{Length: time.Microsecond}, false},
		{"fractional ms", WindowConfig{Length: 1500 * time.Microsecond}, false},
		{"bad sketch", WindowConfig{Sketch: CountMinConfig{Depth: -1}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewWindowPair(tc.cfg)
			if tc.ok {
				require.NoError(t, err)
			} else {
				require.ErrorIs(t, err, ErrInvalidConfig)
			}
		})
	}
}

func TestWindowPairRotation(t *testing.T) {
	w := newPair(t, time.Second)
	k := "k"
	require.True(t, w.Add(k, 10_500))
	require.Equal(t, int64(10_000), w.CurrentStartMs())
	w.AddN(k, 4, 10_999)
	require.Equal(t, uint64(5), w.Estimate(k))

	// An event in the next window rotates: current becomes previous.
	require.True(t, w.Add(k, 11_000))
	require.Equal(t, int64(11_000), w.CurrentStartMs())
	require.Equal(t, uint64(1), w.Current().Estimate(k))
	require.Equal(t, uint64(5), w.Previous().Estimate(k))

	// A late event for the previous window still counts there.
	require.True(t, w.Add(k, 10_001))
	require.Equal(t, uint64(6), w.Previous().Estimate(k))
	// Older than previous: dropped and counted.
	require.False(t, w.Add(k, 9_999))
	require.Equal(t, uint64(1), w.Late())

	// Advance within the window does nothing; one window closes one.
	require.Zero(t, w.Advance(11_999))
	require.Equal(t, int64(1), w.Advance(12_000))
	require.Equal(t, uint64(1), w.Previous().Estimate(k))
	require.Zero(t, w.Current().Estimate(k))
	// A gap of several windows empties both.
	require.Equal(t, int64(3), w.Advance(15_100))
	require.Zero(t, w.Previous().Total())
	require.Zero(t, w.Current().Total())
	require.Equal(t, 2*256*4*8, w.Bytes())
}

func TestWindowPairNegativeTime(t *testing.T) {
	w := newPair(t, time.Second)
	w.Add("k", -1)
	require.Equal(t, int64(-1000), w.CurrentStartMs())
}

func TestWindowPairRates(t *testing.T) {
	w := newPair(t, 2*time.Second)
	k := "steady"
	// A steady 100 events/s for 3 s: 200 in [0,2000), 100 in [2000,3000).
	for ms := int64(0); ms < 3000; ms += 10 {
		w.Add(k, ms)
	}
	require.Equal(t, int64(2000), w.CurrentStartMs())
	// Rate halves across the boundary: 100 events in the current window / 2 s.
	require.InDelta(t, 50, w.Rate(k), 1e-9)
	// The smoothed rate sees the sliding window (1000, 3000]: 100 from
	// current plus half of previous's 200.
	require.InDelta(t, 100, w.SmoothedRate(k, 3000), 1e-9)
	// At the window start previous counts in full; at its end not at all.
	require.InDelta(t, (100+200)/2.0, w.SmoothedRate(k, 2000), 1e-9)
	require.InDelta(t, 100/2.0, w.SmoothedRate(k, 4000), 1e-9)
	// Past the current window (not yet advanced): current weighs by overlap.
	require.InDelta(t, 100*0.5/2, w.SmoothedRate(k, 5000), 1e-9)
	require.Zero(t, w.SmoothedRate(k, 7000))
	require.Equal(t, int64(2000), w.CurrentStartMs(), "SmoothedRate must not rotate")
}
