package sketch

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// randomStream returns n key ids drawn from a skewed distribution over
// keys distinct keys, so some keys repeat a lot and many collide.
func randomStream(seed uint64, n, keys int) []uint64 {
	r := rand.New(rand.NewPCG(seed, 99))
	z := rand.NewZipf(r, 1.3, 1, uint64(keys-1))
	out := make([]uint64, n)
	for i := range out {
		out[i] = z.Uint64()
	}
	return out
}

func newCMS(t testing.TB, cfg CountMinConfig) *CountMin {
	t.Helper()
	s, err := NewCountMin(cfg)
	require.NoError(t, err)
	return s
}

func TestCountMinConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  CountMinConfig
		ok   bool
	}{
		{"zero value is the default", CountMinConfig{}, true},
		{"explicit", CountMinConfig{Depth: 5, Width: 1000, Seed: 7}, true},
		{"negative depth", CountMinConfig{Depth: -1}, false},
		{"depth over max", CountMinConfig{Depth: MaxDepth + 1}, false},
		{"negative width", CountMinConfig{Width: -3}, false},
		{"width over max", CountMinConfig{Width: MaxWidth + 1}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			if tc.ok {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, ErrInvalidConfig)
			_, err = NewCountMin(tc.cfg)
			require.ErrorIs(t, err, ErrInvalidConfig)
		})
	}
}

func TestCountMinNeverUnderestimates(t *testing.T) {
	for _, cfg := range []CountMinConfig{
		{Depth: 4, Width: 64},
		{Depth: 4, Width: 64, Conservative: true},
		{Depth: 2, Width: 17, Seed: 3},
		{Depth: 1, Width: 1, Conservative: true},
	} {
		s := newCMS(t, cfg)
		exact := map[uint64]uint64{}
		r := rand.New(rand.NewPCG(1, 2))
		for _, id := range randomStream(5, 20_000, 5_000) {
			w := 1 + r.Uint64N(3)
			exact[id] += w
			if w == 1 {
				s.Add(keyOf(id))
			} else {
				s.AddN(keyOf(id), w)
			}
		}
		var total uint64
		for id, c := range exact {
			total += c
			require.GreaterOrEqual(t, s.Estimate(keyOf(id)), c, "cfg %+v key %d", cfg, id)
		}
		require.Equal(t, total, s.Total())
	}
}

// TestCountMinErrorBound checks the (ε, δ) guarantee on a fixed-seed stream:
// the fraction of keys whose over-estimate exceeds ε·N stays below δ.
func TestCountMinErrorBound(t *testing.T) {
	for _, cfg := range []CountMinConfig{{Depth: 3, Width: 272}, {Depth: 4, Width: 2048}} {
		s := newCMS(t, cfg)
		exact := map[uint64]uint64{}
		for _, id := range randomStream(11, 200_000, 100_000) {
			exact[id]++
			s.Add(keyOf(id))
		}
		bound := cfg.Epsilon() * float64(s.Total())
		bad := 0
		for id, c := range exact {
			if float64(s.Estimate(keyOf(id))-c) > bound {
				bad++
			}
		}
		frac := float64(bad) / float64(len(exact))
		t.Logf("%dx%d: %d of %d keys over ε·N = %.0f (%.4f%%, δ = %.4f%%)", cfg.Depth, cfg.Width, bad, len(exact), bound, 100*frac, 100*cfg.Delta())
		require.Less(t, frac, cfg.Delta())
	}
}

func TestCountMinMergeEqualsOneSketch(t *testing.T) {
	cfg := CountMinConfig{Depth: 4, Width: 128, Seed: 9}
	a, b, both := newCMS(t, cfg), newCMS(t, cfg), newCMS(t, cfg)
	for i, id := range randomStream(3, 30_000, 4_000) {
		k := keyOf(id)
		if i%3 == 0 {
			a.AddN(k, 2)
		} else {
			b.Add(k)
		}
		if i%3 == 0 {
			both.AddN(k, 2)
		} else {
			both.Add(k)
		}
	}
	require.NoError(t, a.Merge(b))
	require.Equal(t, both.counters, a.counters, "merged counters differ from one sketch fed both streams")
	require.Equal(t, both.Total(), a.Total())
}

func TestCountMinConservativeMergeIsUpperBound(t *testing.T) {
	cfg := CountMinConfig{Depth: 3, Width: 50, Conservative: true}
	a, b := newCMS(t, cfg), newCMS(t, cfg)
	exact := map[uint64]uint64{}
	for i, id := range randomStream(4, 10_000, 3_000) {
		exact[id]++
		if i%2 == 0 {
			a.Add(keyOf(id))
		} else {
			b.Add(keyOf(id))
		}
	}
	require.NoError(t, a.Merge(b))
	for id, c := range exact {
		require.GreaterOrEqual(t, a.Estimate(keyOf(id)), c)
	}
}

func TestCountMinMergeMismatch(t *testing.T) {
	base := CountMinConfig{Depth: 4, Width: 100, Seed: 1}
	for _, other := range []CountMinConfig{
		{Depth: 3, Width: 100, Seed: 1},
		{Depth: 4, Width: 101, Seed: 1},
		{Depth: 4, Width: 100, Seed: 2},
	} {
		a, b := newCMS(t, base), newCMS(t, other)
		a.Add("x")
		before := a.Clone()
		err := a.Merge(b)
		require.ErrorIs(t, err, ErrDimensionMismatch)
		var me *MismatchError
		require.ErrorAs(t, err, &me)
		require.Equal(t, MismatchError{Kind: "count-min", Depth: 4, Width: 100, Seed: 1,
			OtherDepth: other.Depth, OtherWidth: other.Width, OtherSeed: other.Seed}, *me)
		require.Equal(t, before, a, "a failed merge must leave the receiver unchanged")
	}
}

func TestCountMinRoundTrip(t *testing.T) {
	for _, cfg := range []CountMinConfig{{}, {Depth: 2, Width: 33, Seed: math.MaxUint64, Conservative: true}} {
		s := newCMS(t, cfg)
		for _, id := range randomStream(8, 5_000, 1_000) {
			s.AddN(keyOf(id), id%7+1)
		}
		b, err := s.MarshalBinary()
		require.NoError(t, err)
		var got CountMin
		require.NoError(t, got.UnmarshalBinary(b))
		require.Equal(t, s, &got)
		// AppendBinary onto a prefix frames the same bytes.
		b2, err := s.AppendBinary([]byte("prefix"))
		require.NoError(t, err)
		require.Equal(t, b, b2[len("prefix"):])
	}
}

func TestCountMinRejectsCorruption(t *testing.T) {
	s := newCMS(t, CountMinConfig{Depth: 2, Width: 16})
	for i := range 100 {
		s.Add(keyOf(uint64(i)))
	}
	good, err := s.MarshalBinary()
	require.NoError(t, err)
	check := func(name string, b []byte) {
		t.Helper()
		var d CountMin
		err := d.UnmarshalBinary(b)
		require.ErrorIs(t, err, ErrCorrupt, name)
	}
	for n := range len(good) {
		check("truncated", good[:n])
	}
	check("trailing byte", append(append([]byte{}, good...), 0))
	for i := range good {
		for _, bit := range []byte{1, 0x80} {
			b := append([]byte{}, good...)
			b[i] ^= bit
			check("bit flip", b)
		}
	}
	bad := append([]byte{}, good[:len(good)-crcLen]...)
	bad[4] = 2
	bad = withCRC(bad) // a well-formed blob from a newer writer
	var d CountMin
	require.ErrorContains(t, d.UnmarshalBinary(bad), "unsupported version 2")
	require.True(t, errors.Is(d.UnmarshalBinary(nil), ErrCorrupt))
}

func TestDimensionsForError(t *testing.T) {
	d, w, err := DimensionsForError(0.001, 0.01)
	require.NoError(t, err)
	require.Equal(t, 5, d)    // ⌈ln 100⌉
	require.Equal(t, 2719, w) // ⌈e / 0.001⌉
	s, err := NewCountMinWithError(0.001, 0.01, 0)
	require.NoError(t, err)
	require.LessOrEqual(t, s.Config().Epsilon(), 0.001)
	require.LessOrEqual(t, s.Config().Delta(), 0.01)
	for _, bad := range [][2]float64{{0, 0.1}, {0.1, 0}, {1, 0.1}, {0.1, 1}, {math.NaN(), 0.1}, {1e-12, 0.1}} {
		_, _, err := DimensionsForError(bad[0], bad[1])
		require.ErrorIs(t, err, ErrInvalidConfig, "%v", bad)
	}
}

func TestDimensionsForBudget(t *testing.T) {
	cfg, err := DimensionsForBudget(1<<20, 0)
	require.NoError(t, err)
	require.Equal(t, CountMinConfig{Depth: 4, Width: 32768}, cfg)
	require.Equal(t, 1<<20, cfg.Bytes())
	_, err = DimensionsForBudget(16, 4)
	require.ErrorIs(t, err, ErrInvalidConfig)
	_, err = DimensionsForBudget(1<<20, MaxDepth+1)
	require.ErrorIs(t, err, ErrInvalidConfig)

	tk, err := TopKConfigForBudget(1<<20, 2048, 32)
	require.NoError(t, err)
	want := TopKTableBytes(2048) + 2048*TopKEntryBytes(32) + tk.Sketch.Bytes()
	require.LessOrEqual(t, want, 1<<20)
	_, err = TopKConfigForBudget(1<<16, 2048, 32)
	require.ErrorIs(t, err, ErrInvalidConfig)
	_, err = TopKConfigForBudget(1<<20, 0, 32)
	require.ErrorIs(t, err, ErrInvalidConfig)
}

func TestDefaultMemory(t *testing.T) {
	s := newCMS(t, CountMinConfig{})
	require.Equal(t, 64<<10, s.Bytes())
	require.InDelta(t, 0.00133, s.Config().Epsilon(), 0.00001)
}

// loopAdd is the row-by-row update the four-row fast path unrolls, kept
// here as its reference.
func loopAdd(c []uint64, width uint32, h, n uint64, conservative bool) uint64 {
	h1, h2 := rowStep(h)
	if !conservative {
		est := ^uint64(0)
		for r := uint32(0); int(r) < len(c)/int(width); r, h1 = r+1, h1+h2 {
			i := r*width + reduce(h1, width)
			c[i] = satAdd(c[i], n)
			est = min(est, c[i])
		}
		return est
	}
	est := ^uint64(0)
	for r, g := uint32(0), h1; int(r) < len(c)/int(width); r, g = r+1, g+h2 {
		est = min(est, c[r*width+reduce(g, width)])
	}
	target := satAdd(est, n)
	for r := uint32(0); int(r) < len(c)/int(width); r, h1 = r+1, h1+h2 {
		c[r*width+reduce(h1, width)] = max(c[r*width+reduce(h1, width)], target)
	}
	return target
}

// The four-row paths (cells4) touch the counters the row loops touch and
// leave them, the estimates and the total exactly as the loops do, plain
// and conservative, at widths from 1 up, with a weight that saturates.
func TestCountMinFourRowsMatchLoops(t *testing.T) {
	for _, tc := range []struct {
		width        int
		conservative bool
	}{{1, true}, {7, true}, {64, true}, {4096, true}, {7, false}, {4096, false}} {
		width := tc.width
		s := newCMS(t, CountMinConfig{Depth: 4, Width: width, Conservative: tc.conservative})
		ref := make([]uint64, 4*width)
		r := rand.New(rand.NewPCG(uint64(width), 3))
		var total uint64
		for i, id := range randomStream(9, 20_000, 3_000) {
			h := Hash(keyOf(id))
			n := 1 + r.Uint64N(4)
			if i == 10_000 {
				n = math.MaxUint64 - 5 // saturates
			}
			total = satAdd(total, n)
			require.Equal(t, loopAdd(ref, uint32(width), h, n, tc.conservative), s.AddHash(h, n), "width %d event %d", width, i)
			if i%997 == 0 {
				require.Equal(t, ref, s.counters, "width %d event %d", width, i)
			}
		}
		require.Equal(t, ref, s.counters, "width %d", width)
		require.Equal(t, total, s.Total())
		for id := range 3_000 {
			h := Hash(keyOf(uint64(id)))
			want := ^uint64(0)
			h1, h2 := rowStep(h)
			for row := range uint32(4) {
				want = min(want, ref[row*uint32(width)+reduce(h1+row*h2, uint32(width))])
			}
			require.Equal(t, want, s.EstimateHash(h), "width %d key %d", width, id)
		}
	}
}

// Reset leaves a sketch as a new one, whether it clears the counters its
// few updates raised one by one or the whole array, through every way of
// updating it (plain and conservative, four rows and others, AddHash,
// AddN, merges and decoded sketches).
func TestCountMinResetClearsEverything(t *testing.T) {
	for _, cfg := range []CountMinConfig{
		{Width: 64}, {Width: 64, Conservative: true}, {Depth: 3, Width: 64},
		{Depth: 3, Width: 64, Conservative: true}, {Width: 64, Seed: 9},
	} {
		for _, n := range []int{0, 1, resetLog - 1, resetLog, resetLog + 1, 10 * resetLog} {
			s, err := NewCountMin(cfg)
			require.NoError(t, err)
			fresh := s.Clone()
			r := rand.New(rand.NewPCG(uint64(n), 3))
			for i := range n {
				switch i % 3 {
				case 0:
					s.AddHash(r.Uint64(), 1+r.Uint64N(5))
				case 1:
					s.AddN(string(rune('a'+r.IntN(26))), 2)
				default:
					s.Add("k")
				}
			}
			s.Reset()
			require.Equal(t, fresh.counters, s.counters, "%+v after %d updates", cfg, n)
			require.Zero(t, s.Total())

			// A sketch whose counters came from a merge or a decoder.
			o := fresh.Clone()
			o.AddHash(r.Uint64(), 7)
			s.AddHash(r.Uint64(), 1)
			require.NoError(t, s.Merge(o))
			s.Reset()
			require.Equal(t, fresh.counters, s.counters, "%+v merged", cfg)
			blob, err := o.MarshalBinary()
			require.NoError(t, err)
			require.NoError(t, s.UnmarshalBinary(blob))
			s.Reset()
			require.Equal(t, fresh.counters, s.counters, "%+v decoded", cfg)
		}
	}
}
