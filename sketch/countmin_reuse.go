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
	// Most counters of a sketch fit one varint byte: eight of them are
	// taken at once while they do, summed row by row as they go, the rest
	// by binary.Uvarint with the reader's error for a bad one. The rows'
	// sums are checked only once every counter decoded, as
	// decodeCountMin does, so a blob bad in both ways fails the same way.
	buf := r.buf[r.off:]
	var sums, carries [MaxDepth]uint64
	w := int(width)
	for row := range int(depth) {
		c := counters[row*w : (row+1)*w]
		var sum, carry uint64
		i := 0
		for i < len(c) {
			if len(c)-i >= 8 && len(buf) >= 8 {
				if x := binary.LittleEndian.Uint64(buf); x&0x8080808080808080 == 0 {
					c := c[i : i+8 : i+8]
					c[0], c[1], c[2], c[3] = x&0x7f, x>>8&0x7f, x>>16&0x7f, x>>24&0x7f
					c[4], c[5], c[6], c[7] = x>>32&0x7f, x>>40&0x7f, x>>48&0x7f, x>>56
					// The eight bytes' sum, at most 8 × 127: no carry.
					pairs := x&0x00ff00ff00ff00ff + x>>8&0x00ff00ff00ff00ff
					quads := pairs&0x0000ffff0000ffff + pairs>>16&0x0000ffff0000ffff
					var cy uint64
					sum, cy = bits.Add64(sum, quads&0xffffffff+quads>>32, 0)
					carry |= cy
					buf = buf[8:]
					i += 8
					continue
				}
			}
			var v uint64
			if len(buf) > 0 && buf[0] < 0x80 {
				v = uint64(buf[0])
				buf = buf[1:]
			} else {
				var k int
				v, k = binary.Uvarint(buf)
				if k <= 0 {
					r.off = len(r.buf) - len(buf)
					r.fail("%s at offset %d: bad or truncated varint", "counter", r.off)
					return r.err
				}
				buf = buf[k:]
			}
			c[i] = v
			var cy uint64
			sum, cy = bits.Add64(sum, v, 0)
			carry |= cy
			i++
		}
		sums[row], carries[row] = sum, carry
	}
	r.off = len(r.buf) - len(buf)
	conservative := flags&1 != 0
	for row := range int(depth) {
		sum, carry := sums[row], carries[row]
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
