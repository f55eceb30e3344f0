package sketch

import (
	"encoding/binary"
	"math/bits"
)

// UnmarshalBinaryReuse is UnmarshalBinary for a caller that decodes many
// sketches of one shape, as the cluster merger does with every
// partition's sketch every window: when s's counter array has room for
// the encoded depth × width (and is not more than twice that), it is
// decoded into in place instead of allocating a new one. Decoded, s
// equals what UnmarshalBinary would make of data, field for field.
//
// Unlike UnmarshalBinary, an error (wrapping ErrCorrupt, as there) leaves
// s as the zero CountMin, not unchanged: its counters may have been
// overwritten when the blob proved corrupt.
func (s *CountMin) UnmarshalBinaryReuse(data []byte) error {
	if err := s.decodeReuse(data); err != nil {
		*s = CountMin{}
		return err
	}
	return nil
}

func (s *CountMin) decodeReuse(data []byte) error {
	r := newReader(data, "count-min")
	r.header(cmsMagic, "count-min")
	flags := r.byte("flags")
	depth := r.uvarint("depth")
	width := r.uvarint("width")
	seed := r.u64("seed")
	total := r.uvarint("total")
	if r.err != nil {
		return r.err
	}
	if flags&^1 != 0 {
		return corruptf("count-min: unknown flags %#x", flags)
	}
	if depth < 1 || depth > MaxDepth || width < 1 || width > MaxWidth {
		return corruptf("count-min: dimensions %dx%d out of range", depth, width)
	}
	n := depth * width
	// As in decodeCountMin: a counter takes at least one byte, so this
	// bounds the allocation by the blob's size.
	if n > uint64(r.remaining()) {
		return corruptf("count-min: %dx%d counters declared, only %d bytes left", depth, width, r.remaining())
	}
	counters := s.counters
	if uint64(cap(counters)) < n || uint64(cap(counters)) > 2*n {
		counters = make([]uint64, n)
	}
	counters = counters[:n]
	// Most counters of a sketch of default width fit one varint byte:
	// that case is decoded inline, the rest by binary.Uvarint, with the
	// reader's error for a bad one.
	buf := r.buf[r.off:]
	for i := range counters {
		if len(buf) > 0 && buf[0] < 0x80 {
			counters[i] = uint64(buf[0])
			buf = buf[1:]
			continue
		}
		v, k := binary.Uvarint(buf)
		if k <= 0 {
			r.off = len(r.buf) - len(buf)
			r.fail("%s at offset %d: bad or truncated varint", "counter", r.off)
			return r.err
		}
		counters[i] = v
		buf = buf[k:]
	}
	r.off = len(r.buf) - len(buf)
	conservative := flags&1 != 0
	for row := range int(depth) {
		var sum, carry uint64
		for _, v := range counters[row*int(width) : (row+1)*int(width)] {
			var c uint64
			sum, c = bits.Add64(sum, v, 0)
			carry |= c
		}
		if carry != 0 || sum > total || (!conservative && sum != total) {
			return corruptf("count-min: row %d sums to %d (overflow %v), total is %d", row, sum, carry != 0, total)
		}
	}
	if err := r.finish("count-min"); err != nil {
		return err
	}
	*s = CountMin{
		cfg:      CountMinConfig{Depth: int(depth), Width: int(width), Seed: seed, Conservative: conservative},
		width:    uint32(width),
		counters: counters,
		total:    total,
	}
	return nil
}
