package sketch

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"reflect"

	"github.com/axiomhq/hyperloglog"
)

// CardinalityBlob is a checked encoding of a Cardinality (MarshalBinary's),
// to be folded into a CardinalityUnion: a dense one is kept as the
// encoding's own bytes, not decoded into a Cardinality of 2^p bytes.
// Build one with ParseCardinality. It refers to the data it was parsed
// from, which must not change afterwards.
type CardinalityBlob struct {
	p uint8
	// Exactly one of these is set:
	regs   []byte       // dense: the 2^p registers
	list   []byte       // dense, version 2: nz (gap uvarint, value) pairs
	sparse *Cardinality // the library's sparse form, decoded by it
	nz     int
}

// ParseCardinality checks data as UnmarshalBinary does, returning the
// same error for the same data (wrapping ErrCorrupt), and returns the
// estimate it encodes for CardinalityUnion.Add.
func ParseCardinality(data []byte) (*CardinalityBlob, error) {
	if b := parseDense(data); b != nil {
		return b, nil
	}
	// Everything else (corrupt data, the library's sparse form and its
	// version 1 packed registers) goes through UnmarshalBinary, whose
	// errors are then the errors.
	c := new(Cardinality)
	if err := c.UnmarshalBinary(data); err != nil {
		return nil, err
	}
	if isSparse(c) {
		return &CardinalityBlob{p: c.p, sparse: c}, nil
	}
	return &CardinalityBlob{p: c.p, regs: registers(c)}, nil
}

// Precision is the blob's precision p (2^p registers).
func (b *CardinalityBlob) Precision() uint8 { return b.p }

// Equal reports whether b and o decode to the same estimate: the same
// dense registers however each is encoded, or sparse estimates the
// library decoded alike (as reflect.DeepEqual of two decoded Cardinality
// values says).
func (b *CardinalityBlob) Equal(o *CardinalityBlob) bool {
	switch {
	case b.p != o.p || (b.sparse == nil) != (o.sparse == nil):
		return false
	case b.sparse != nil:
		return reflect.DeepEqual(b.sparse, o.sparse)
	case b.list == nil && o.list == nil:
		return bytes.Equal(b.regs, o.regs)
	}
	x := make([]byte, 1<<b.p)
	y := make([]byte, 1<<b.p)
	b.maxInto(x)
	o.maxInto(y)
	return bytes.Equal(x, y)
}

// parseDense returns the blob of data when it is a dense encoding with
// nothing wrong, else nil (UnmarshalBinary then says what is wrong, or
// decodes the other forms). It accepts nothing UnmarshalBinary rejects,
// checking the same rules: FuzzParseCardinality holds it to that.
func parseDense(data []byte) *CardinalityBlob {
	const head = len(hllMagic) + 1
	if len(data) < head+crcLen || string(data[:len(hllMagic)]) != hllMagic {
		return nil
	}
	body := data[:len(data)-crcLen]
	if crc32.Checksum(body, castagnoli) != binary.LittleEndian.Uint32(data[len(body):]) {
		return nil
	}
	switch data[len(hllMagic)] {
	case hllVersionLibrary:
		// The library's dense encoding: version 2, p, bias 0, dense 0,
		// the register count 2^p, the registers.
		lib := body[head:]
		if len(lib) < 8 || lib[0] != 2 || lib[2] != 0 || lib[3] != 0 || lib[1] < 4 || lib[1] > 18 {
			return nil
		}
		p := lib[1]
		m := 1 << p
		if binary.BigEndian.Uint32(lib[4:8]) != uint32(m) || len(lib) != 8+m || !registersValid(lib[8:], maxRho(p)) {
			return nil
		}
		return &CardinalityBlob{p: p, regs: lib[8:]}
	case hllVersionList:
		if len(body) < head+1 {
			return nil
		}
		p := body[head]
		if p < hllListMinP || p > 18 {
			return nil
		}
		list := body[head+1:]
		nz, n := binary.Uvarint(list)
		if n <= 0 {
			return nil
		}
		list = list[n:]
		m := uint64(1) << p
		if nz > m || 2*nz > uint64(len(list)) {
			return nil
		}
		top := maxRho(p)
		i, off := int64(-1), 0
		for range nz {
			gap, n := binary.Uvarint(list[off:])
			if n <= 0 || off+n >= len(list) || gap == 0 || gap > m {
				return nil
			}
			v := list[off+n]
			off += n + 1
			i += int64(gap)
			if i >= int64(m) || v == 0 || v > top {
				return nil
			}
		}
		if off != len(list) {
			return nil
		}
		return &CardinalityBlob{p: p, list: list, nz: int(nz)}
	}
	return nil
}

// maxRho is the largest register value the library accepts at precision
// p: 64-p+1.
func maxRho(p uint8) uint8 { return 64 - p + 1 }

// Word-at-a-time byte arithmetic on registers, which are at most 65 < 128.
const (
	lowBits  = 0x0101010101010101
	highBits = 0x8080808080808080
)

// registersValid reports whether every byte of regs (whose length is a
// multiple of 8) is at most top (47..61), 8 at a time: a byte of x below
// 128 gets its top bit from adding 127-top exactly when it exceeds top,
// and no sum carries into the next byte.
func registersValid(regs []byte, top uint8) bool {
	k := uint64(127-top) * lowBits
	var bad uint64
	for w := 0; w < len(regs); w += 8 {
		x := binary.LittleEndian.Uint64(regs[w:])
		bad |= x | ((x &^ highBits) + k)
	}
	return bad&highBits == 0
}

// maxBytes sets each byte of dst (registers, length a multiple of 8) to
// the larger of it and src's, 8 at a time: with both bytes below 128,
// (a|128)-b keeps its top bit exactly when a ≥ b, and borrows from no
// other byte.
func maxBytes(dst, src []byte) {
	src = src[:len(dst)]
	for w := 0; w < len(dst); w += 8 {
		b := binary.LittleEndian.Uint64(src[w:])
		if b == 0 {
			continue
		}
		a := binary.LittleEndian.Uint64(dst[w:])
		ge := ((((a | highBits) - b) & highBits) >> 7) * 0xff // 0xff where a ≥ b
		binary.LittleEndian.PutUint64(dst[w:], a&ge|b&^ge)
	}
}

// maxInto raises regs (2^p registers) to b's dense registers.
func (b *CardinalityBlob) maxInto(regs []byte) {
	switch {
	case b.regs != nil:
		maxBytes(regs, b.regs)
	case b.list != nil:
		i, off := -1, 0
		for range b.nz {
			gap, n := binary.Uvarint(b.list[off:])
			v := b.list[off+n]
			off += n + 1
			i += int(gap)
			regs[i] = max(regs[i], v)
		}
	default:
		maxBytes(regs, registers(b.sparse))
	}
}

// isSparse reports whether c is in the library's sparse form (byte 3 of
// its encoding).
func isSparse(c *Cardinality) bool {
	var hdr [8]byte
	enc, err := c.hll.AppendBinary(hdr[:0])
	return err == nil && enc[3] == 1
}

// registers returns the dense registers of c (sparse or dense) in a new
// slice: those the library gives a dense sketch that c is merged into,
// which are the registers c itself would convert to (every hash it holds,
// each in its register, the largest kept).
func registers(c *Cardinality) []byte {
	d, err := hyperloglog.NewSketch(c.p, false)
	if err != nil {
		return make([]byte, 1<<c.p) // unreachable: c's precision is valid
	}
	_ = d.Merge(c.hll) // same precision
	enc, _ := d.AppendBinary(nil)
	return enc[8:]
}

// CardinalityUnion estimates the number of distinct keys of the union of
// the CardinalityBlob values and unions added to it: the estimate a
// Cardinality built with NewCardinality(CardinalityConfig{Precision: p,
// Sparse: true}) gives after merging each of them, decoded, in the same
// order. It starts sparse and stays in the library's sparse form (the same
// calls as that Cardinality's) until a dense estimate is added; from then
// on it keeps its own 2^p dense registers, into which a dense blob is
// folded register by register, without decoding it.
//
// A CardinalityUnion is not safe for concurrent use.
type CardinalityUnion struct {
	p uint8
	// sparse is the library's sketch until the first dense estimate is
	// added (the library may have turned it dense itself by then), else
	// nil; regs are then the 2^p registers.
	sparse *Cardinality
	regs   []byte
}

// NewCardinalityUnion builds an empty union of precision p (4..18).
func NewCardinalityUnion(p uint8) (*CardinalityUnion, error) {
	c, err := NewCardinality(CardinalityConfig{Precision: p, Sparse: true})
	if err != nil {
		return nil, err
	}
	return &CardinalityUnion{p: p, sparse: c}, nil
}

func (u *CardinalityUnion) mismatch(p uint8) error {
	return &MismatchError{Kind: "cardinality", Depth: int(u.p), OtherDepth: int(p)}
}

// dense turns u dense, as the library turns a sparse sketch dense when a
// dense one is merged into it.
func (u *CardinalityUnion) dense() {
	if u.regs == nil {
		u.regs, u.sparse = registers(u.sparse), nil
	}
}

// Add folds b into u. A different precision returns a *MismatchError
// (matching ErrDimensionMismatch) and leaves u unchanged.
func (u *CardinalityUnion) Add(b *CardinalityBlob) error {
	if b.p != u.p {
		return u.mismatch(b.p)
	}
	if b.sparse != nil && u.regs == nil {
		return u.sparse.Merge(b.sparse)
	}
	u.dense()
	b.maxInto(u.regs)
	return nil
}

// Merge folds o into u, as Add folds each of o's estimates. A different
// precision returns a *MismatchError and leaves u unchanged.
func (u *CardinalityUnion) Merge(o *CardinalityUnion) error {
	switch {
	case o.p != u.p:
		return u.mismatch(o.p)
	case o.regs == nil:
		return u.Add(&CardinalityBlob{p: o.p, sparse: o.sparse})
	}
	u.dense()
	maxBytes(u.regs, o.regs)
	return nil
}

// Estimate is the estimated number of distinct keys of the union.
func (u *CardinalityUnion) Estimate() uint64 {
	if u.regs == nil {
		return u.sparse.Estimate()
	}
	return denseEstimate(u.p, u.regs)
}
