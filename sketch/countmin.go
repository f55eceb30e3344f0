package sketch

import (
	"encoding/binary"
	"math"
	"math/bits"
)

// Default Count-Min dimensions: four rows (hash functions) of 2048 counters.
// 4 × 2048 × 8 bytes = 64 KiB per sketch; a key's over-estimate stays within
// ε = e/2048 ≈ 0.13 % of the window's total with probability 1 − e⁻⁴ ≈ 98.2 %.
const (
	DefaultDepth = 4
	DefaultWidth = 2048
)

// Limits that keep a config (or a decoded blob) from asking for absurd
// amounts of memory.
const (
	MaxDepth = 32
	MaxWidth = 1 << 26
)

// CountMinConfig sizes a Count-Min sketch. The zero value is the default
// 4 × 2048 sketch with seed 0 and plain (mergeable-exact) updates.
type CountMinConfig struct {
	// Depth is the number of rows (independent hash functions). More rows
	// lower the probability δ = e^-Depth that a key's over-estimate exceeds
	// the bound. 0 means DefaultDepth.
	Depth int
	// Width is the number of counters per row. The over-estimate bound is
	// ε·N with ε = e/Width and N the total weight added. 0 means DefaultWidth.
	Width int
	// Seed selects the hash functions. Sketches can only be merged when
	// their seeds (and dimensions) are equal.
	Seed uint64
	// Conservative enables conservative update: an Add raises only the
	// counters that are below the key's new estimate. Estimates stay upper
	// bounds and get markedly tighter on skewed streams, but merging two
	// conservative sketches gives an upper bound of, not the same counters as,
	// one sketch fed both streams.
	Conservative bool
}

func (c CountMinConfig) withDefaults() CountMinConfig {
	if c.Depth == 0 {
		c.Depth = DefaultDepth
	}
	if c.Width == 0 {
		c.Width = DefaultWidth
	}
	return c
}

// Validate reports whether the config (after defaults) describes a sketch
// this package can build.
func (c CountMinConfig) Validate() error {
	c = c.withDefaults()
	if c.Depth < 1 || c.Depth > MaxDepth {
		return invalidf("count-min depth %d: want 1..%d (0 for the default %d)", c.Depth, MaxDepth, DefaultDepth)
	}
	if c.Width < 1 || c.Width > MaxWidth {
		return invalidf("count-min width %d: want 1..%d (0 for the default %d)", c.Width, MaxWidth, DefaultWidth)
	}
	return nil
}

// Bytes is the memory taken by the counters of a sketch with this config:
// Depth × Width × 8.
func (c CountMinConfig) Bytes() int {
	c = c.withDefaults()
	return c.Depth * c.Width * 8
}

// Epsilon is the relative error bound ε = e / Width: with probability at
// least 1 − Delta() a key's estimate exceeds its true count by at most ε·N,
// N being the sketch's Total.
func (c CountMinConfig) Epsilon() float64 {
	c = c.withDefaults()
	return math.E / float64(c.Width)
}

// Delta is the probability δ = e^-Depth that a key's over-estimate exceeds
// Epsilon()·N.
func (c CountMinConfig) Delta() float64 {
	c = c.withDefaults()
	return math.Exp(-float64(c.Depth))
}

// CountMin is a Count-Min sketch: Depth rows of Width counters in one flat
// array. Adding a key raises one counter per row; the estimate is the smallest
// of them, so it never falls below the key's true count and exceeds it only by
// the weight of other keys sharing all its counters.
//
// Build one with NewCountMin (or as the target of UnmarshalBinary); the zero
// value has no counters. A CountMin is not safe for concurrent use; the
// pipeline feeds each one from a single goroutine.
type CountMin struct {
	cfg      CountMinConfig
	width    uint32
	counters []uint64 // row r occupies counters[r*width : (r+1)*width]
	total    uint64
}

// NewCountMin builds an empty sketch. It returns an error wrapping
// ErrInvalidConfig when cfg does not validate.
func NewCountMin(cfg CountMinConfig) (*CountMin, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	return &CountMin{
		cfg:      cfg,
		width:    uint32(cfg.Width),
		counters: make([]uint64, cfg.Depth*cfg.Width),
	}, nil
}

// NewCountMinWithError builds a sketch whose estimates exceed the true count
// by at most epsilon·N with probability at least 1 − delta (0 < epsilon,
// delta < 1). See DimensionsForError for the sizing.
func NewCountMinWithError(epsilon, delta float64, seed uint64) (*CountMin, error) {
	d, w, err := DimensionsForError(epsilon, delta)
	if err != nil {
		return nil, err
	}
	return NewCountMin(CountMinConfig{Depth: d, Width: w, Seed: seed})
}

// Config returns the sketch's configuration with defaults filled in.
func (s *CountMin) Config() CountMinConfig { return s.cfg }

// Total is the sum of all weights added (N in the error bound).
func (s *CountMin) Total() uint64 { return s.total }

// Bytes is the memory held by the sketch's counters. It depends only on the
// dimensions, never on how many keys were added.
func (s *CountMin) Bytes() int { return len(s.counters) * 8 }

// ErrorBound is ε·Total: with probability at least 1 − δ any single key's
// estimate exceeds its true count by at most this much.
func (s *CountMin) ErrorBound() uint64 {
	return uint64(math.Ceil(s.cfg.Epsilon() * float64(s.total)))
}

// Add counts one occurrence of key.
func (s *CountMin) Add(key string) { s.add(hashString(key, s.cfg.Seed), 1) }

// AddN adds weight n (for example the bytes of a request) to key.
func (s *CountMin) AddN(key string, n uint64) { s.add(hashString(key, s.cfg.Seed), n) }

// add is addHash without computing the new estimate, the common case: a
// plain update is then just depth independent read-modify-writes the CPU
// can overlap.
func (s *CountMin) add(h, n uint64) {
	if s.cfg.Conservative || n == 0 {
		s.addHash(h, n)
		return
	}
	s.total = satAdd(s.total, n)
	h1, h2 := rowStep(h)
	w := s.width
	c := s.counters
	for base := uint32(0); int(base) < len(c); base += w {
		i := base + reduce(h1, w)
		c[i] = satAdd(c[i], n)
		h1 += h2
	}
}

// Estimate returns an upper bound of the total weight added for key.
func (s *CountMin) Estimate(key string) uint64 { return s.estimateHash(hashString(key, s.cfg.Seed)) }

// AddHash adds weight n to the key whose Hash is h and returns the key's
// estimate after the add: AddN and Estimate in one pass over the counters,
// for a caller that has already hashed the key.
func (s *CountMin) AddHash(h, n uint64) uint64 { return s.addHash(seeded(h, s.cfg.Seed), n) }

// EstimateHash is Estimate for the key whose Hash is h.
func (s *CountMin) EstimateHash(h uint64) uint64 { return s.estimateHash(seeded(h, s.cfg.Seed)) }

// addHash adds n to the key hashed to h and returns the key's new estimate.
func (s *CountMin) addHash(h, n uint64) uint64 {
	if n == 0 {
		return s.estimateHash(h)
	}
	s.total = satAdd(s.total, n)
	h1, h2 := rowStep(h)
	w := s.width
	c := s.counters
	if !s.cfg.Conservative {
		est := ^uint64(0)
		for base := uint32(0); int(base) < len(c); base += w {
			i := base + reduce(h1, w)
			v := satAdd(c[i], n)
			c[i] = v
			est = min(est, v)
			h1 += h2
		}
		return est
	}
	// Conservative update: the key's count is at most min+n, so no counter
	// needs to go above that; counters already higher hold other keys' weight.
	est := ^uint64(0)
	g := h1
	for base := uint32(0); int(base) < len(c); base += w {
		est = min(est, c[base+reduce(g, w)])
		g += h2
	}
	target := satAdd(est, n)
	for base := uint32(0); int(base) < len(c); base += w {
		i := base + reduce(h1, w)
		if c[i] < target {
			c[i] = target
		}
		h1 += h2
	}
	return target
}

// raiseTo is the second half of a conservative update of the key hashed to
// h: every counter of the key below target is raised to target. The caller
// computed target as the key's current estimate plus the weight added.
func (s *CountMin) raiseTo(h, n, target uint64) {
	s.total = satAdd(s.total, n)
	h1, h2 := rowStep(h)
	w := s.width
	c := s.counters
	for base := uint32(0); int(base) < len(c); base += w {
		i := base + reduce(h1, w)
		if c[i] < target {
			c[i] = target
		}
		h1 += h2
	}
}

func (s *CountMin) estimateHash(h uint64) uint64 {
	h1, h2 := rowStep(h)
	w := s.width
	c := s.counters
	est := ^uint64(0)
	for base := uint32(0); int(base) < len(c); base += w {
		est = min(est, c[base+reduce(h1, w)])
		h1 += h2
	}
	return est
}

// Reset zeroes every counter, keeping the allocation.
func (s *CountMin) Reset() {
	clear(s.counters)
	s.total = 0
}

func (s *CountMin) sameLayout(o *CountMin) bool {
	return s.cfg.Depth == o.cfg.Depth && s.cfg.Width == o.cfg.Width && s.cfg.Seed == o.cfg.Seed
}

func (s *CountMin) mismatch(o *CountMin) *MismatchError {
	return &MismatchError{
		Kind: "count-min", Depth: s.cfg.Depth, Width: s.cfg.Width, Seed: s.cfg.Seed,
		OtherDepth: o.cfg.Depth, OtherWidth: o.cfg.Width, OtherSeed: o.cfg.Seed,
	}
}

// Merge adds other's counters into s, so s then answers for both streams.
// For plain sketches the result has exactly the counters of one sketch fed
// both streams. If either side uses conservative update the result is still
// an upper bound for every key and is marked conservative.
//
// Both sketches must have the same depth, width and seed; otherwise Merge
// returns a *MismatchError (matching ErrDimensionMismatch) and leaves s
// unchanged. other is not modified.
func (s *CountMin) Merge(other *CountMin) error {
	if !s.sameLayout(other) {
		return s.mismatch(other)
	}
	for i, v := range other.counters {
		s.counters[i] = satAdd(s.counters[i], v)
	}
	s.total = satAdd(s.total, other.total)
	s.cfg.Conservative = s.cfg.Conservative || other.cfg.Conservative
	return nil
}

// Clone returns an independent copy of s.
func (s *CountMin) Clone() *CountMin {
	c := *s
	c.counters = append([]uint64(nil), s.counters...)
	return &c
}

const cmsMagic = "KHCM"

// MarshalBinary encodes the sketch (version 1): config, total and every
// counter as a varint, followed by a CRC-32C. Mostly-small counters make the
// encoding much smaller than Bytes().
func (s *CountMin) MarshalBinary() ([]byte, error) {
	return s.AppendBinary(make([]byte, 0, 32+len(s.counters)*2))
}

// AppendBinary appends the MarshalBinary encoding to dst, so a caller can
// reuse one buffer for every window.
func (s *CountMin) AppendBinary(dst []byte) ([]byte, error) {
	start := len(dst)
	dst = s.appendBody(dst)
	return appendCRC(dst, start), nil
}

// appendBody appends the encoding without its checksum, so a TopK can embed
// its filter under its own checksum.
func (s *CountMin) appendBody(dst []byte) []byte {
	dst = appendHeader(dst, cmsMagic)
	var flags byte
	if s.cfg.Conservative {
		flags |= 1
	}
	dst = append(dst, flags)
	dst = binary.AppendUvarint(dst, uint64(s.cfg.Depth))
	dst = binary.AppendUvarint(dst, uint64(s.cfg.Width))
	dst = binary.LittleEndian.AppendUint64(dst, s.cfg.Seed)
	dst = binary.AppendUvarint(dst, s.total)
	for _, v := range s.counters {
		dst = binary.AppendUvarint(dst, v)
	}
	return dst
}

// UnmarshalBinary replaces s with the sketch encoded in data. A truncated,
// inconsistent or checksum-failing blob returns an error wrapping ErrCorrupt
// and leaves s unchanged. It never panics.
func (s *CountMin) UnmarshalBinary(data []byte) error {
	r := newReader(data, "count-min")
	d, err := decodeCountMin(r)
	if err != nil {
		return err
	}
	if err := r.finish("count-min"); err != nil {
		return err
	}
	*s = *d
	return nil
}

// decodeCountMin parses one sketch body (header included) from r.
func decodeCountMin(r *reader) (*CountMin, error) {
	r.header(cmsMagic, "count-min")
	flags := r.byte("flags")
	depth := r.uvarint("depth")
	width := r.uvarint("width")
	seed := r.u64("seed")
	total := r.uvarint("total")
	if r.err != nil {
		return nil, r.err
	}
	if flags&^1 != 0 {
		return nil, corruptf("count-min: unknown flags %#x", flags)
	}
	if depth < 1 || depth > MaxDepth || width < 1 || width > MaxWidth {
		return nil, corruptf("count-min: dimensions %dx%d out of range", depth, width)
	}
	n := depth * width
	// Every counter takes at least one byte, so a header that declares more
	// counters than bytes left is corrupt; checking first keeps a forged
	// header from making us allocate gigabytes.
	if n > uint64(r.remaining()) {
		return nil, corruptf("count-min: %dx%d counters declared, only %d bytes left", depth, width, r.remaining())
	}
	s := &CountMin{
		cfg:      CountMinConfig{Depth: int(depth), Width: int(width), Seed: seed, Conservative: flags&1 != 0},
		width:    uint32(width),
		counters: make([]uint64, n),
		total:    total,
	}
	for i := range s.counters {
		s.counters[i] = r.uvarint("counter")
	}
	if r.err != nil {
		return nil, r.err
	}
	// Every event adds its weight once to every row, so a row sums to the
	// total exactly (plain update) or at most (conservative update). A blob
	// that breaks this was not written by us.
	for row := range int(depth) {
		var sum, carry uint64
		for _, v := range s.counters[row*int(width) : (row+1)*int(width)] {
			var c uint64
			sum, c = bits.Add64(sum, v, 0)
			carry |= c
		}
		if carry != 0 || sum > total || (!s.cfg.Conservative && sum != total) {
			return nil, corruptf("count-min: row %d sums to %d (overflow %v), total is %d", row, sum, carry != 0, total)
		}
	}
	return s, nil
}
