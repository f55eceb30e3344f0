package sketch

import (
	"encoding/binary"
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

// Estimates of few keys are encoded as a list of their registers, much
// shorter than the dense registers and decoding to the same ones: the
// same estimate, and merges that give what merging the originals gives.
// Encodings of version 1 (the library's) still decode.
func TestCardinalityListedRegisters(t *testing.T) {
	for _, n := range []uint64{0, 1, 250, 3000, 20_000} {
		a, err := NewCardinality(CardinalityConfig{})
		require.NoError(t, err)
		for i := range n {
			a.Add(keyOf(i))
		}
		enc, err := a.MarshalBinary()
		require.NoError(t, err)
		if n <= 3000 {
			require.Equal(t, byte(hllVersionList), enc[4], "%d keys", n)
			require.Less(t, len(enc), 4*int(n)+16, "%d keys", n)
		} else {
			require.Equal(t, byte(hllVersionLibrary), enc[4], "%d keys", n)
		}
		var d Cardinality
		require.NoError(t, d.UnmarshalBinary(enc))
		require.Equal(t, a.Estimate(), d.Estimate(), "%d keys", n)
		lib, err := a.hll.MarshalBinary()
		require.NoError(t, err)
		dl, err := d.hll.MarshalBinary()
		require.NoError(t, err)
		require.Equal(t, lib, dl, "%d keys: registers", n)

		// Version 1 of the same estimate, as written before lists.
		v1 := appendCRC(append(appendHeader(nil, hllMagic), lib...), 0)
		var e Cardinality
		require.NoError(t, e.UnmarshalBinary(v1))
		require.Equal(t, a.Estimate(), e.Estimate())

		b, _ := NewCardinality(CardinalityConfig{})
		for i := range uint64(500) {
			b.Add(keyOf(1_000_000 + i))
		}
		require.NoError(t, d.Merge(b))
		require.NoError(t, a.Merge(b))
		require.Equal(t, a.Estimate(), d.Estimate())

		for k := range len(enc) {
			require.ErrorIs(t, d.UnmarshalBinary(enc[:k]), ErrCorrupt, "%d keys, cut at %d", n, k)
		}
		// Appended to a buffer, after what it holds.
		got, err := a.AppendBinary([]byte("prefix"))
		require.NoError(t, err)
		want, _ := a.MarshalBinary()
		require.Equal(t, append([]byte("prefix"), want...), got)
	}
}

// A list that names a register twice, out of range, out of order or
// with a zero value is refused, not decoded to something else.
func TestCardinalityListCorrupt(t *testing.T) {
	list := func(p byte, entries ...uint64) []byte {
		b := append([]byte(hllMagic), hllVersionList, p)
		b = binary.AppendUvarint(b, uint64(len(entries)/2))
		for i := 0; i < len(entries); i += 2 {
			b = binary.AppendUvarint(b, entries[i])
			b = append(b, byte(entries[i+1]))
		}
		return appendCRC(b, 0)
	}
	var c Cardinality
	require.NoError(t, c.UnmarshalBinary(list(14, 1, 3, 5, 2)))
	require.Equal(t, uint64(2), c.Estimate())
	for name, b := range map[string][]byte{
		"gap 0":            list(14, 1, 3, 0, 2),
		"past the end":     list(14, 1<<14+1, 1),
		"value 0":          list(14, 1, 0),
		"value too large":  list(14, 1, 60),
		"precision 4":      list(4, 1, 1),
		"precision 19":     list(19, 1, 1),
		"count past bytes": appendCRC(binary.AppendUvarint(append([]byte(hllMagic), hllVersionList, 14), 100), 0),
	} {
		require.ErrorIs(t, c.UnmarshalBinary(b), ErrCorrupt, name)
	}
}
