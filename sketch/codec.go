package sketch

import (
	"encoding/binary"
	"hash/crc32"
)

// Every encoding in this package is framed the same way:
//
//	magic (4 bytes) | version (1 byte) | body ... | CRC-32C of all preceding bytes (4 bytes, little endian)
//
// Integers in the body are unsigned varints unless noted. The decoder checks
// the checksum first, so a damaged blob is rejected before any length in it
// is trusted for an allocation, and then every structural rule of the body;
// either way the error wraps ErrCorrupt and the receiver is left unchanged.

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

const (
	codecVersion = 1
	crcLen       = 4
)

func appendHeader(dst []byte, magic string) []byte {
	dst = append(dst, magic...)
	return append(dst, codecVersion)
}

// appendCRC appends the checksum of dst[start:].
func appendCRC(dst []byte, start int) []byte {
	return binary.LittleEndian.AppendUint32(dst, crc32.Checksum(dst[start:], castagnoli))
}

// reader is a bounds-checked cursor over an encoding's body. The first
// failure is sticky: later reads return zero values and err keeps the first
// cause.
type reader struct {
	buf []byte
	off int
	err error
}

// newReader verifies data's trailing checksum and returns a reader over the
// body before it.
func newReader(data []byte, kind string) *reader {
	r := &reader{buf: data}
	if len(data) < crcLen {
		r.fail("%s: %d bytes, too short for a checksum", kind, len(data))
		return r
	}
	body := data[:len(data)-crcLen]
	want := binary.LittleEndian.Uint32(data[len(body):])
	if got := crc32.Checksum(body, castagnoli); got != want {
		r.fail("%s: checksum %#08x, want %#08x (truncated or damaged in transit?)", kind, got, want)
		return r
	}
	r.buf = body
	return r
}

func (r *reader) fail(format string, args ...any) {
	if r.err == nil {
		r.err = corruptf(format, args...)
	}
}

func (r *reader) remaining() int { return len(r.buf) - r.off }

func (r *reader) uvarint(what string) uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.buf[r.off:])
	if n <= 0 {
		r.fail("%s at offset %d: bad or truncated varint", what, r.off)
		return 0
	}
	r.off += n
	return v
}

func (r *reader) u64(what string) uint64 {
	if r.err != nil {
		return 0
	}
	if r.remaining() < 8 {
		r.fail("%s at offset %d: truncated", what, r.off)
		return 0
	}
	v := binary.LittleEndian.Uint64(r.buf[r.off:])
	r.off += 8
	return v
}

func (r *reader) byte(what string) byte {
	if r.err != nil {
		return 0
	}
	if r.remaining() < 1 {
		r.fail("%s at offset %d: truncated", what, r.off)
		return 0
	}
	b := r.buf[r.off]
	r.off++
	return b
}

// bytes returns the next n bytes without copying.
func (r *reader) bytes(what string, n uint64) []byte {
	if r.err != nil {
		return nil
	}
	if n > uint64(r.remaining()) {
		r.fail("%s at offset %d: %d bytes declared, %d left", what, r.off, n, r.remaining())
		return nil
	}
	b := r.buf[r.off : r.off+int(n)]
	r.off += int(n)
	return b
}

// header checks magic and version at the cursor.
func (r *reader) header(magic, kind string) {
	if r.err != nil {
		return
	}
	if r.remaining() < len(magic)+1 {
		r.fail("%s at offset %d: %d bytes left, shorter than the smallest encoding", kind, r.off, r.remaining())
		return
	}
	if got := r.buf[r.off : r.off+len(magic)]; string(got) != magic {
		r.fail("%s at offset %d: bad magic %q, want %q (is this blob of another type?)", kind, r.off, got, magic)
		return
	}
	r.off += len(magic)
	if v := r.byte("version"); v != codecVersion && r.err == nil {
		r.fail("%s: unsupported version %d (this build reads version %d; upgrade the reader)", kind, v, codecVersion)
	}
}

// finish checks that the body was consumed exactly.
func (r *reader) finish(kind string) error {
	if r.err != nil {
		return r.err
	}
	if r.remaining() != 0 {
		return corruptf("%s: %d unexpected bytes after the body", kind, r.remaining())
	}
	return nil
}
