package sketch

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestCardinality(t *testing.T) {
	for _, cfg := range []CardinalityConfig{{}, {Precision: 12, Sparse: true}} {
		a, err := NewCardinality(cfg)
		require.NoError(t, err)
		b, err := NewCardinality(cfg)
		require.NoError(t, err)
		for i := range uint64(60_000) {
			a.Add(keyOf(i))
			b.Add(keyOf(i + 40_000)) // overlap 20k
		}
		within := func(got uint64, want float64) {
			t.Helper()
			p := cfg.withDefaults().Precision
			se := 1.04 / math.Sqrt(float64(uint64(1)<<p))
			require.InDelta(t, want, float64(got), 4*se*want, "estimate %d, want %v ± 4σ", got, want)
		}
		within(a.Estimate(), 60_000)
		require.NoError(t, a.Merge(b))
		within(a.Estimate(), 100_000)

		enc, err := a.MarshalBinary()
		require.NoError(t, err)
		var d Cardinality
		require.NoError(t, d.UnmarshalBinary(enc))
		require.Equal(t, a.Estimate(), d.Estimate())
		require.Equal(t, a.Bytes(), d.Bytes())
		for n := range len(enc) {
			require.ErrorIs(t, d.UnmarshalBinary(enc[:n]), ErrCorrupt)
		}
		a.Reset()
		require.Zero(t, a.Estimate())
	}
}

func TestCardinalityErrors(t *testing.T) {
	_, err := NewCardinality(CardinalityConfig{Precision: 3})
	require.ErrorIs(t, err, ErrInvalidConfig)
	_, err = NewCardinality(CardinalityConfig{Precision: 19})
	require.ErrorIs(t, err, ErrInvalidConfig)
	a, _ := NewCardinality(CardinalityConfig{Precision: 10})
	b, _ := NewCardinality(CardinalityConfig{Precision: 12})
	err = a.Merge(b)
	require.ErrorIs(t, err, ErrDimensionMismatch)
	var me *MismatchError
	require.ErrorAs(t, err, &me)
	require.Equal(t, 10, me.Depth)
	require.Equal(t, 12, me.OtherDepth)
}

func TestCardinalityDenseDoesNotAllocate(t *testing.T) {
	c, err := NewCardinality(CardinalityConfig{})
	require.NoError(t, err)
	keys := make([]string, 1000)
	for i := range keys {
		keys[i] = keyOf(uint64(123_456 + i))
	}
	i := 0
	require.Zero(t, testing.AllocsPerRun(1000, func() {
		c.Add(keys[i%len(keys)])
		i++
	}))
}
