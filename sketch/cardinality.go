package sketch

import (
	"errors"

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

// MarshalBinary encodes the estimate (version 1): the library's own encoding
// framed by this package's magic, version and CRC-32C.
func (c *Cardinality) MarshalBinary() ([]byte, error) { return c.AppendBinary(nil) }

// AppendBinary appends the MarshalBinary encoding to dst.
func (c *Cardinality) AppendBinary(dst []byte) ([]byte, error) {
	start := len(dst)
	dst = appendHeader(dst, hllMagic)
	dst, err := c.hll.AppendBinary(dst)
	if err != nil {
		return dst[:start], err
	}
	return appendCRC(dst, start), nil
}

// UnmarshalBinary replaces c with the estimate encoded in data. Corrupt input
// returns an error wrapping ErrCorrupt and leaves c unchanged.
func (c *Cardinality) UnmarshalBinary(data []byte) error {
	r := newReader(data, "cardinality")
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

// Bytes is the size of the dense register array, 2^p bytes: what the
// estimate holds once it is dense (a sparse one holds less until it
// converts).
func (c *Cardinality) Bytes() int { return 1 << c.p }
