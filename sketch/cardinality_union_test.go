package sketch

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/stretchr/testify/require"
)

// unionInput is one encoded estimate for the differential tests.
type unionInput struct {
	name string
	enc  []byte
}

// unionInputs encodes estimates of precision p over disjoint and
// overlapping key ranges, sparse and dense, in every version the decoder
// reads: MarshalBinary's choice, the library's dense form forced (version
// 1 where version 2 would be chosen) and, for dense ones, the library's
// packed version 1 registers.
func unionInputs(t testing.TB, p uint8, sizes []int) []unionInput {
	var out []unionInput
	for si, n := range sizes {
		for _, sparse := range []bool{false, true} {
			c, err := NewCardinality(CardinalityConfig{Precision: p, Sparse: sparse})
			require.NoError(t, err)
			for i := range n {
				c.Add(keyOf(uint64(si*1_000_000 + i/2 + i%2*(si+1)*777)))
			}
			name := fmt.Sprintf("p=%d/n=%d/sparse=%t", p, n, sparse)
			enc, err := c.MarshalBinary()
			require.NoError(t, err)
			out = append(out, unionInput{name, enc})
			if sparse {
				continue
			}
			lib, err := c.hll.AppendBinary(nil)
			require.NoError(t, err)
			out = append(out, unionInput{name + "/v1", frameLib(lib)})
			if packed, ok := packedV1(lib); ok {
				out = append(out, unionInput{name + "/packed", frameLib(packed)})
			}
		}
	}
	return out
}

// frameLib frames a library encoding as this package's version 1.
func frameLib(lib []byte) []byte {
	dst := appendHeader(nil, hllMagic)
	dst = append(dst, lib...)
	return appendCRC(dst, 0)
}

// packedV1 re-encodes the library's dense encoding lib in its version 1
// (two 4-bit registers a byte over a bias), when the registers fit.
func packedV1(lib []byte) ([]byte, bool) {
	regs := lib[8:]
	lo, hi := byte(255), byte(0)
	for _, r := range regs {
		lo, hi = min(lo, r), max(hi, r)
	}
	if hi-lo > 15 {
		return nil, false
	}
	out := append([]byte{1, lib[1], lo, 0, 0, 0, 0, 0}, make([]byte, len(regs)/2)...)
	for i := 0; i < len(regs); i += 2 {
		out[8+i/2] = (regs[i]-lo)<<4 | (regs[i+1] - lo)
	}
	return out, true
}

// libraryUnion is what the merger computed before CardinalityUnion: every
// encoding decoded by UnmarshalBinary and merged into a sparse Cardinality.
func libraryUnion(t testing.TB, p uint8, encs [][]byte) *Cardinality {
	acc, err := NewCardinality(CardinalityConfig{Precision: p, Sparse: true})
	require.NoError(t, err)
	for _, e := range encs {
		c := new(Cardinality)
		require.NoError(t, c.UnmarshalBinary(e))
		require.NoError(t, acc.Merge(c))
	}
	return acc
}

func newUnion(t testing.TB, p uint8, encs [][]byte) *CardinalityUnion {
	u, err := NewCardinalityUnion(p)
	require.NoError(t, err)
	for _, e := range encs {
		b, err := ParseCardinality(e)
		require.NoError(t, err)
		require.NoError(t, u.Add(b))
	}
	return u
}

// requireSameUnion checks that u and the library's acc hold the same
// form, registers and estimate.
func requireSameUnion(t testing.TB, acc *Cardinality, u *CardinalityUnion, what string) {
	t.Helper()
	if u.regs == nil {
		require.Truef(t, isSparse(u.sparse) == isSparse(acc), "%s: forms differ", what)
	} else {
		require.Falsef(t, isSparse(acc), "%s: union dense, library sparse", what)
		require.Truef(t, bytes.Equal(registers(acc), u.regs), "%s: registers differ", what)
	}
	require.Equalf(t, acc.Estimate(), u.Estimate(), "%s: estimates differ", what)
}

// TestCardinalityUnionMatchesLibrary holds CardinalityUnion to the
// library's merge and estimate: for every precision, the same estimate
// (and registers) for every input alone, and for shuffled mixes of sparse
// and dense inputs, also as unions of unions.
func TestCardinalityUnionMatchesLibrary(t *testing.T) {
	sizes := []int{0, 1, 3, 60, 700, 20_000}
	if !testing.Short() {
		sizes = append(sizes, 300_000)
	}
	for p := uint8(4); p <= 18; p++ {
		t.Run(fmt.Sprintf("p=%d", p), func(t *testing.T) {
			t.Parallel()
			rng := rand.New(rand.NewPCG(7, uint64(p)))
			ins := unionInputs(t, p, sizes)
			for _, in := range ins {
				orig := bytes.Clone(in.enc)
				acc := libraryUnion(t, p, [][]byte{in.enc})
				u := newUnion(t, p, [][]byte{in.enc})
				requireSameUnion(t, acc, u, in.name)
				require.Equal(t, orig, in.enc, "%s: input changed", in.name)
			}
			for round := range 12 {
				k := 1 + rng.IntN(len(ins))
				perm := rng.Perm(len(ins))[:k]
				encs := make([][]byte, k)
				names := make([]string, k)
				for i, j := range perm {
					encs[i], names[i] = ins[j].enc, ins[j].name
				}
				what := fmt.Sprintf("round %d: %v", round, names)
				acc := libraryUnion(t, p, encs)
				u := newUnion(t, p, encs)
				requireSameUnion(t, acc, u, what)

				// Unions of unions, as the merger combines apps' reports
				// (each estimated first, as reports are).
				h := rng.IntN(k + 1)
				accA, accB := libraryUnion(t, p, encs[:h]), libraryUnion(t, p, encs[h:])
				uA, uB := newUnion(t, p, encs[:h]), newUnion(t, p, encs[h:])
				requireSameUnion(t, accA, uA, what+" first part")
				requireSameUnion(t, accB, uB, what+" second part")
				require.NoError(t, accA.Merge(accB))
				require.NoError(t, uA.Merge(uB))
				requireSameUnion(t, accA, uA, what+" merged")
				requireSameUnion(t, accB, uB, what+" second part after the merge")
			}
		})
	}
}

// TestCardinalityUnionSparseStaysSparse: sparse inputs alone keep the union
// in the library's sparse form (linear counting), and the first dense one
// turns it dense, as a sparse Cardinality would.
func TestCardinalityUnionSparseStaysSparse(t *testing.T) {
	var encs [][]byte
	for i := range 3 {
		c, err := NewCardinality(CardinalityConfig{Precision: 14, Sparse: true})
		require.NoError(t, err)
		for k := range 40 {
			c.Add(keyOf(uint64(i*100 + k)))
		}
		enc, err := c.MarshalBinary()
		require.NoError(t, err)
		encs = append(encs, enc)
	}
	u := newUnion(t, 14, encs)
	require.Nil(t, u.regs)
	require.Equal(t, libraryUnion(t, 14, encs).Estimate(), u.Estimate())

	d, err := NewCardinality(CardinalityConfig{Precision: 14})
	require.NoError(t, err)
	d.Add("one")
	enc, err := d.MarshalBinary()
	require.NoError(t, err)
	encs = append(encs, enc)
	u = newUnion(t, 14, encs)
	require.Len(t, u.regs, 1<<14)
	requireSameUnion(t, libraryUnion(t, 14, encs), u, "sparse then dense")
}

// TestCardinalityUnionMillions merges dense estimates of millions of keys.
func TestCardinalityUnionMillions(t *testing.T) {
	if testing.Short() {
		t.Skip("adds 4 million keys")
	}
	var encs [][]byte
	for i := range 2 {
		c, err := NewCardinality(CardinalityConfig{Precision: 16})
		require.NoError(t, err)
		for k := range 2_000_000 {
			c.Add(keyOf(uint64(i*1_500_000 + k)))
		}
		enc, err := c.MarshalBinary()
		require.NoError(t, err)
		encs = append(encs, enc)
	}
	u := newUnion(t, 16, encs)
	requireSameUnion(t, libraryUnion(t, 16, encs), u, "millions")
	require.InDelta(t, 3_500_000, float64(u.Estimate()), 3_500_000*0.02)
}

func TestCardinalityUnionMismatch(t *testing.T) {
	u := newUnion(t, 12, nil)
	c, err := NewCardinality(CardinalityConfig{Precision: 14})
	require.NoError(t, err)
	c.Add("a")
	enc, err := c.MarshalBinary()
	require.NoError(t, err)
	b, err := ParseCardinality(enc)
	require.NoError(t, err)
	require.Equal(t, uint8(14), b.Precision())

	err = u.Add(b)
	var me *MismatchError
	require.ErrorAs(t, err, &me)
	require.ErrorIs(t, err, ErrDimensionMismatch)
	require.Equal(t, MismatchError{Kind: "cardinality", Depth: 12, OtherDepth: 14}, *me)
	require.Nil(t, u.regs, "a refused blob leaves the union as it was")
	require.Equal(t, uint64(0), u.Estimate())

	require.ErrorAs(t, u.Merge(newUnion(t, 14, [][]byte{enc})), &me)
	require.Nil(t, u.regs)
}

// TestCardinalityBlobEqual: blobs are equal when they decode to the same
// estimate, whatever the version, as decoded Cardinality values are.
func TestCardinalityBlobEqual(t *testing.T) {
	ins := unionInputs(t, 12, []int{0, 5, 5_000})
	for _, a := range ins {
		for _, b := range ins {
			x, err := ParseCardinality(a.enc)
			require.NoError(t, err)
			y, err := ParseCardinality(b.enc)
			require.NoError(t, err)
			ca, cb := new(Cardinality), new(Cardinality)
			require.NoError(t, ca.UnmarshalBinary(a.enc))
			require.NoError(t, cb.UnmarshalBinary(b.enc))
			require.Equalf(t, deepEqualCardinality(ca, cb), x.Equal(y), "%s vs %s", a.name, b.name)
		}
	}
}

// TestParseCardinalityCorrupt: every corruption returns UnmarshalBinary's
// error, wrapping ErrCorrupt.
func TestParseCardinalityCorrupt(t *testing.T) {
	for _, in := range unionInputs(t, 10, []int{0, 3, 3_000}) {
		for i := range in.enc {
			for _, bit := range []byte{1, 0x80} {
				bad := bytes.Clone(in.enc)
				bad[i] ^= bit
				checkParse(t, bad)
				checkParse(t, fixCRC(bad))
			}
		}
		checkParse(t, in.enc[:len(in.enc)-1])
		checkParse(t, fixCRC(append(bytes.Clone(in.enc[:len(in.enc)-crcLen]), 0, 0, 0, 0, 0)))
	}
}

// fixCRC returns data with its checksum recomputed, so that a corruption
// reaches the checks behind it.
func fixCRC(data []byte) []byte {
	if len(data) < crcLen {
		return data
	}
	out := bytes.Clone(data)
	body := out[:len(out)-crcLen]
	binary.LittleEndian.PutUint32(out[len(body):], crc32.Checksum(body, castagnoli))
	return out
}

// checkParse holds ParseCardinality to UnmarshalBinary on data: the same
// error, or the same estimate.
func checkParse(t testing.TB, data []byte) {
	t.Helper()
	orig := bytes.Clone(data)
	c := new(Cardinality)
	want := c.UnmarshalBinary(data)
	b, err := ParseCardinality(data)
	require.Equal(t, orig, data, "input changed")
	if want != nil {
		require.Error(t, err)
		require.Equal(t, want.Error(), err.Error())
		require.ErrorIs(t, err, ErrCorrupt)
		require.Nil(t, b)
		return
	}
	require.NoError(t, err)
	require.Equal(t, c.p, b.Precision())
	u, err := NewCardinalityUnion(c.p)
	require.NoError(t, err)
	require.NoError(t, u.Add(b))
	acc, err := NewCardinality(CardinalityConfig{Precision: c.p, Sparse: true})
	require.NoError(t, err)
	require.NoError(t, acc.Merge(c))
	requireSameUnion(t, acc, u, fmt.Sprintf("%x", data))
}

func FuzzParseCardinality(f *testing.F) {
	for _, p := range []uint8{4, 10, 14} {
		for _, in := range unionInputs(f, p, []int{0, 2, 200}) {
			f.Add(in.enc, false)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte, withCRC bool) {
		if withCRC {
			data = fixCRC(data)
		}
		checkParse(t, data)
	})
}

// deepEqualCardinality is how the merger compared decoded sketches before
// CardinalityBlob.Equal.
func deepEqualCardinality(a, b *Cardinality) bool {
	return reflect.DeepEqual(a, b)
}

// TestSumAndZerosLibraryOrder holds sumAndZeros to the library's loop bit
// for bit on registers whose sum rounds (values up to 61 at p = 18): a
// different order of additions gives other bits.
func TestSumAndZerosLibraryOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	regs := make([]byte, 1<<18)
	for i := range regs {
		regs[i] = byte(rng.IntN(62))
	}
	var want, wantZ float64
	for _, v := range regs {
		if v == 0 {
			wantZ++
		}
		want += 1.0 / math.Pow(2.0, float64(v))
	}
	got, gotZ := sumAndZeros(regs)
	require.Equal(t, math.Float64bits(want), math.Float64bits(got))
	require.Equal(t, wantZ, gotZ)
}
