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
	// Once the sketch was Reset, adds counts the updates since, up to
	// resetLog + 1, and added holds the (seeded) hashes of the first
	// resetLog of them: while they are all there, Reset clears only their
	// counters. A sketch reset slot after slot or window after window
	// then costs its few updates to reset, not its whole array. A sketch
	// never reset (so never reused) has no log.
	adds  int
	added *[resetLog]uint64
}

// resetLog is how many updates since the last Reset a sketch remembers
// to clear them one by one; past it, Reset clears every counter.
const resetLog = 128

// ResetLogBytes is what a CountMin holds besides its counters (Bytes)
// once it was Reset: the log of its updates since.
const ResetLogBytes = resetLog * 8

// note remembers an update of the key hashed (seeded) to h for Reset.
func (s *CountMin) note(h uint64) {
	if l := s.added; l != nil {
		if n := s.adds; n < resetLog {
			l[n] = h
			s.adds = n + 1
		} else if n == resetLog {
			s.adds = n + 1 // and no store at every update past it
		}
	}
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
	s.note(h)
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
func (s *CountMin) AddHash(h, n uint64) uint64 { return s.addUnseeded(h, n) }

// addUnseeded is AddHash, kept out of it so that AddHash inlines and a
// caller's add is one call: the per-event path of a detector's slot
// sketches. Four rows are written out, as in addUnder.
func (s *CountMin) addUnseeded(h, n uint64) uint64 {
	h = seeded(h, s.cfg.Seed)
	if s.cfg.Depth != 4 || n == 0 {
		return s.addHash(h, n)
	}
	i0, i1, i2, i3 := s.cells4(h)
	c := s.counters
	s.total = satAdd(s.total, n)
	s.note(h)
	if !s.cfg.Conservative {
		c[i0], c[i1], c[i2], c[i3] = satAdd(c[i0], n), satAdd(c[i1], n), satAdd(c[i2], n), satAdd(c[i3], n)
		return min(c[i0], c[i1], c[i2], c[i3])
	}
	target := satAdd(min(c[i0], c[i1], c[i2], c[i3]), n)
	c[i0] = max(c[i0], target)
	c[i1] = max(c[i1], target)
	c[i2] = max(c[i2], target)
	c[i3] = max(c[i3], target)
	return target
}

// EstimateHash is Estimate for the key whose Hash is h.
func (s *CountMin) EstimateHash(h uint64) uint64 { return s.estimateHash(seeded(h, s.cfg.Seed)) }

// addHash adds n to the key hashed to h and returns the key's new estimate.
func (s *CountMin) addHash(h, n uint64) uint64 {
	if n == 0 {
		return s.estimateHash(h)
	}
	if s.cfg.Conservative {
		est, _ := s.addUnder(h, n, ^uint64(0))
		return satAdd(est, n)
	}
	s.total = satAdd(s.total, n)
	s.note(h)
	h1, h2 := rowStep(h)
	w := s.width
	c := s.counters
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

// addUnder is a conservative update of the key hashed to h by n (n > 0),
// made only if the key's new estimate is at most limit: a TopK's filter
// check, and with no limit the conservative Add. It returns the key's
// estimate before the update and whether it was made.
//
// The key's count is at most its estimate + n, so no counter needs to go
// above that; counters already higher hold other keys' weight.
//
// Four rows, the default, are written out: a detector's top-K makes this
// check for every event of a key it does not track. Computing the columns
// once, with no loop, and storing counters whether or not they change (a
// branch on random data costs more than a store) takes a fraction of the
// instructions and none of the branch misses of the row loops, which other
// depths still use.
func (s *CountMin) addUnder(h, n, limit uint64) (est uint64, added bool) {
	c := s.counters
	if s.cfg.Depth == 4 {
		i0, i1, i2, i3 := s.cells4(h)
		est = min(c[i0], c[i1], c[i2], c[i3])
		target := satAdd(est, n)
		if target > limit {
			return est, false
		}
		s.total = satAdd(s.total, n)
		s.note(h)
		c[i0] = max(c[i0], target)
		c[i1] = max(c[i1], target)
		c[i2] = max(c[i2], target)
		c[i3] = max(c[i3], target)
		return est, true
	}
	h1, h2 := rowStep(h)
	w := s.width
	est = ^uint64(0)
	g := h1
	for base := uint32(0); int(base) < len(c); base += w {
		est = min(est, c[base+reduce(g, w)])
		g += h2
	}
	target := satAdd(est, n)
	if target > limit {
		return est, false
	}
	s.total = satAdd(s.total, n)
	s.note(h)
	for base := uint32(0); int(base) < len(c); base += w {
		i := base + reduce(h1, w)
		if c[i] < target {
			c[i] = target
		}
		h1 += h2
	}
	return est, true
}

// cells4 returns the counters of the key hashed to h in a sketch of four
// rows: the columns the row loops visit (h1 + r·h2 wraps in 32 bits there
// too), one per row. rowStep and reduce are written out so that it inlines.
func (s *CountMin) cells4(h uint64) (i0, i1, i2, i3 uint32) {
	w := uint64(s.width)
	h1, h2 := uint32(h), uint32(h>>32)|1
	return uint32(uint64(h1) * w >> 32), uint32(w + uint64(h1+h2)*w>>32),
		uint32(2*w + uint64(h1+2*h2)*w>>32), uint32(3*w + uint64(h1+3*h2)*w>>32)
}

func (s *CountMin) estimateHash(h uint64) uint64 {
	c := s.counters
	if s.cfg.Depth == 4 {
		i0, i1, i2, i3 := s.cells4(h)
		return min(c[i0], c[i1], c[i2], c[i3])
	}
	h1, h2 := rowStep(h)
	w := s.width
	est := ^uint64(0)
	for base := uint32(0); int(base) < len(c); base += w {
		est = min(est, c[base+reduce(h1, w)])
		h1 += h2
	}
	return est
}

// Reset zeroes every counter, keeping the allocation. After few updates
// it clears only the counters they raised.
func (s *CountMin) Reset() {
	if s.added == nil {
		clear(s.counters)
		s.added = new([resetLog]uint64)
	} else if s.adds > resetLog {
		clear(s.counters)
	} else {
		c, w := s.counters, s.width
		for _, h := range s.added[:s.adds] {
			h1, h2 := rowStep(h)
			for base := uint32(0); int(base) < len(c); base += w {
				c[base+reduce(h1, w)] = 0
				h1 += h2
			}
		}
	}
	s.total, s.adds = 0, 0
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
	if s.added != nil {
		s.adds = resetLog + 1 // other's updates are not in s.added
	}
	s.total = satAdd(s.total, other.total)
	s.cfg.Conservative = s.cfg.Conservative || other.cfg.Conservative
	return nil
}

// Clone returns an independent copy of s.
func (s *CountMin) Clone() *CountMin {
	c := *s
	c.counters = append([]uint64(nil), s.counters...)
	c.added, c.adds = nil, 0 // its next Reset clears every counter
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
