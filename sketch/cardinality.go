package sketch

import (
	"encoding/binary"
	"errors"
	"math/bits"

	"github.com/axiomhq/hyperloglog"
)

// DefaultPrecision is the HyperLogLog precision p when CardinalityConfig
// leaves it at zero: 2^14 registers, 16 KiB dense, standard error
// 1.04/√2^14 ≈ 0.81 %.
const DefaultPrecision = 14

// CardinalityConfig sizes a Cardinality estimate.
type CardinalityConfig struct {
	// Precision p uses 2^p registers (4..18). The relative standard error
	// is 1.04/√(2^p). 0 means DefaultPrecision.
	Precision uint8
	// Sparse starts in the library's sparse representation: small for
	// windows with few keys, but inserts allocate while it grows. The dense
	// default never allocates after construction.
	Sparse bool
}

func (c CardinalityConfig) withDefaults() CardinalityConfig {
	if c.Precision == 0 {
		c.Precision = DefaultPrecision
	}
	return c
}

// Validate reports whether the config (after defaults) is usable.
func (c CardinalityConfig) Validate() error {
	c = c.withDefaults()
	if c.Precision < 4 || c.Precision > 18 {
		return invalidf("cardinality precision %d: want 4..18 (0 for the default %d)", c.Precision, DefaultPrecision)
	}
	return nil
}

// Cardinality estimates the number of distinct keys added ("distinct keys in
// this window") in fixed memory, using HyperLogLog (Flajolet, Fusy, Gandouet
// and Meunier 2007) as implemented by github.com/axiomhq/hyperloglog, fed
// with the same xxh3 hash as the rest of the package.
// Estimates from different partitions merge into the estimate of the union.
//
// Build one with NewCardinality (or as the target of UnmarshalBinary). A
// Cardinality is not safe for concurrent use.
type Cardinality struct {
	hll *hyperloglog.Sketch
	p   uint8
}

// NewCardinality builds an empty estimate.
func NewCardinality(cfg CardinalityConfig) (*Cardinality, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	h, err := hyperloglog.NewSketch(cfg.Precision, cfg.Sparse)
	if err != nil {
		return nil, invalidf("cardinality: %v", err)
	}
	return &Cardinality{hll: h, p: cfg.Precision}, nil
}

// Add records key.
func (c *Cardinality) Add(key string) { c.hll.InsertHash(hashString(key, 0)) }

// AddHash records the key whose Hash is h.
func (c *Cardinality) AddHash(h uint64) { c.hll.InsertHash(h) }

// Estimate is the estimated number of distinct keys added.
func (c *Cardinality) Estimate() uint64 { return c.hll.Estimate() }

// Reset forgets every key, keeping the allocation.
func (c *Cardinality) Reset() { c.hll.Reset() }

// Merge folds other into c: c then estimates the union of both key sets.
// Different precisions return a *MismatchError (matching
// ErrDimensionMismatch) and leave c unchanged.
func (c *Cardinality) Merge(other *Cardinality) error {
	if err := c.hll.Merge(other.hll); err != nil {
		if errors.Is(err, hyperloglog.ErrorPrecisionMismatch) {
			return &MismatchError{Kind: "cardinality", Depth: int(c.p), OtherDepth: int(other.p)}
		}
		return err
	}
	return nil
}

const hllMagic = "KHHL"

// An estimate is encoded in one of two versions, framed alike:
//
//   - version 1: the library's own encoding (its dense registers, or its
//     sparse form);
//   - version 2, for a dense estimate of precision hllListMinP or more
//     whose non-zero registers are few (a window with few keys): the
//     precision (1 byte), the number of non-zero registers (uvarint), and
//     per non-zero register, in order, its index minus the previous one's
//     plus one (uvarint; the first: its index + 1) and its value (1 byte).
//
// Both decode to the same dense registers, so estimates and merges do
// not depend on the version. Version 1 is what a reader built before
// version 2 existed can read: a writer of version 2 needs every reader
// of its encodings upgraded first.
const (
	hllVersionLibrary = 1
	hllVersionList    = 2
	// hllListMinP is the least precision listed: below it the dense form
	// is at most 512 bytes, which a list saves too little of to matter.
	hllListMinP = 10
)

// MarshalBinary encodes the estimate (see hllVersionList for the two
// versions), framed by this package's magic, version and CRC-32C.
func (c *Cardinality) MarshalBinary() ([]byte, error) { return c.AppendBinary(nil) }

// AppendBinary appends the MarshalBinary encoding to dst: version 2 when
// it is the shorter, else version 1.
func (c *Cardinality) AppendBinary(dst []byte) ([]byte, error) {
	start := len(dst)
	dst = appendHeader(dst, hllMagic)
	dst, err := c.hll.AppendBinary(dst)
	if err != nil {
		return dst[:start], err
	}
	// The library's dense encoding: version, p, bias, 0 (dense), the
	// register count (4 bytes), one byte per register.
	lib := dst[start+len(hllMagic)+1:]
	if c.p >= hllListMinP && len(lib) > 8 && lib[3] == 0 {
		regs := lib[8:]
		nz := nonZero(regs)
		// A register takes at most 4 bytes listed (3 of index gap below
		// 2^21 registers, 1 of value).
		if 2+binary.MaxVarintLen32+4*nz < len(lib) {
			// Listed after the library's encoding, then moved over it.
			end := len(dst)
			dst = append(dst, hllMagic...)
			dst = append(dst, hllVersionList, c.p)
			dst = binary.AppendUvarint(dst, uint64(nz))
			prev := -1
			for w := 0; w < len(regs); w += 8 {
				if binary.LittleEndian.Uint64(regs[w:]) == 0 {
					continue // most words of a list's registers
				}
				for i, r := range regs[w : w+8] {
					if r != 0 {
						dst = binary.AppendUvarint(dst, uint64(w+i-prev))
						dst = append(dst, r)
						prev = w + i
					}
				}
			}
			dst = dst[:start+copy(dst[start:], dst[end:])]
		}
	}
	return appendCRC(dst, start), nil
}

// nonZero counts the non-zero bytes of regs, whose length is a multiple
// of 8 (2^p, p ≥ 4), a word at a time.
func nonZero(regs []byte) int {
	n := 0
	for w := 0; w < len(regs); w += 8 {
		if x := binary.LittleEndian.Uint64(regs[w:]); x != 0 {
			// A byte is non-zero when any of its bits is: fold them into
			// its top bit.
			x |= x >> 4
			x |= x >> 2
			x |= x >> 1
			n += bits.OnesCount64(x & 0x0101010101010101)
		}
	}
	return n
}

// UnmarshalBinary replaces c with the estimate encoded in data, of either
// version. Corrupt input returns an error wrapping ErrCorrupt and leaves c
// unchanged.
func (c *Cardinality) UnmarshalBinary(data []byte) error {
	r := newReader(data, "cardinality")
	if r.err == nil && r.remaining() >= len(hllMagic)+2 && string(r.buf[:len(hllMagic)]) == hllMagic && r.buf[len(hllMagic)] == hllVersionList {
		return c.unmarshalList(r)
	}
	r.header(hllMagic, "cardinality")
	if r.err != nil {
		return r.err
	}
	body := r.bytes("body", uint64(r.remaining()))
	if err := r.finish("cardinality"); err != nil {
		return err
	}
	h := new(hyperloglog.Sketch)
	if err := h.UnmarshalBinary(body); err != nil {
		return corruptf("cardinality: %v", err)
	}
	// The library validated the header, whose second byte is p.
	c.hll, c.p = h, body[1]
	return nil
}

// unmarshalList decodes version 2 from r, at its magic: it rebuilds the
// library's dense encoding of the listed registers, which the library
// then validates as it validates version 1's.
func (c *Cardinality) unmarshalList(r *reader) error {
	r.off += len(hllMagic) + 1
	p := r.byte("precision")
	if r.err == nil && (p < hllListMinP || p > 18) {
		r.fail("cardinality: listed precision %d, want %d..18", p, hllListMinP)
	}
	nz := r.uvarint("registers")
	if r.err != nil {
		return r.err
	}
	m := uint64(1) << p
	// Every listed register takes 2 bytes at least: a count past what is
	// left is corrupt, checked before anything is sized from it.
	if nz > m || 2*nz > uint64(r.remaining()) {
		return corruptf("cardinality: %d registers listed, %d bytes left of %d registers", nz, r.remaining(), m)
	}
	lib := make([]byte, 8+m)
	lib[0], lib[1] = 2, p // the library's version 2, dense, no bias
	binary.BigEndian.PutUint32(lib[4:8], uint32(m))
	i := int64(-1)
	for range nz {
		gap := r.uvarint("register gap")
		v := r.byte("register")
		if r.err != nil {
			return r.err
		}
		if gap == 0 || gap > m {
			return corruptf("cardinality: register gap %d after %d of %d", gap, i, m)
		}
		i += int64(gap)
		if i >= int64(m) || v == 0 {
			return corruptf("cardinality: listed register %d = %d of %d", i, v, m)
		}
		lib[8+i] = v
	}
	if err := r.finish("cardinality"); err != nil {
		return err
	}
	h := new(hyperloglog.Sketch)
	if err := h.UnmarshalBinary(lib); err != nil {
		return corruptf("cardinality: %v", err)
	}
	c.hll, c.p = h, p
	return nil
}

// Bytes is the size of the dense register array, 2^p bytes: what the
// estimate holds once it is dense (a sparse one holds less until it
// converts).
func (c *Cardinality) Bytes() int { return 1 << c.p }
