package schemas

import (
	"encoding/binary"
	"strconv"
	"unsafe"
)

// BinaryMagic is the first byte of every binary-encoded event.
const BinaryMagic byte = 0xC1

// BinaryVersion is the layout version this package writes and reads.
const BinaryVersion byte = 1

// AppendBinary appends e to dst in the binary format and returns the
// extended buffer. A typical event takes about half its JSON size.
//
// The binary wire format of an AccessEvent (version 1) is:
//
//	magic    1 byte   0xC1 (BinaryMagic)
//	version  1 byte   1    (BinaryVersion)
//	ts       8 bytes  TimeMs, little-endian two's complement
//	bytes    varint   Bytes
//	status   varint   Status
//	lat_us   varint   LatencyUs
//	lengths  5 × uvarint, the byte lengths of key, app, op, client, node
//	strings  key, app, op, client and node bytes, back to back
//
// "varint" is a zig-zag signed varint (encoding/binary.AppendVarint); ts is
// fixed-width because a millisecond time needs 6 varint bytes anyway and
// one 8-byte load decodes faster. The strings are any bytes: unlike JSON,
// the binary codec carries keys that are not UTF-8 unchanged. Keeping them in one block after all the lengths lets
// the decoder check the lengths against the input once and copy every
// string with one copy into one allocation. Every field is always present
// (an absent one costs one byte), the lengths must add up to exactly the
// rest of the record, and a new layout gets a new version byte.
//
// 0xC1 is never valid in UTF-8, so no JSON text (nor any UTF-8 log line)
// can start with it: DecodeAny tells the two codecs apart by the first byte.
func AppendBinary(dst []byte, e *AccessEvent) []byte {
	dst = append(dst, BinaryMagic, BinaryVersion)
	dst = binary.LittleEndian.AppendUint64(dst, uint64(e.TimeMs))
	dst = binary.AppendVarint(dst, e.Bytes)
	dst = binary.AppendVarint(dst, int64(e.Status))
	dst = binary.AppendVarint(dst, e.LatencyUs)
	dst = binary.AppendUvarint(dst, uint64(len(e.Key)))
	dst = binary.AppendUvarint(dst, uint64(len(e.App)))
	dst = binary.AppendUvarint(dst, uint64(len(e.Op)))
	dst = binary.AppendUvarint(dst, uint64(len(e.Client)))
	dst = binary.AppendUvarint(dst, uint64(len(e.Node)))
	dst = append(dst, e.Key...)
	dst = append(dst, e.App...)
	dst = append(dst, e.Op...)
	dst = append(dst, e.Client...)
	return append(dst, e.Node...)
}

// DecodeBinary decodes one binary-encoded event (see AppendBinary) into e,
// overwriting every field. Input that is truncated, has a wrong magic or
// version byte, a malformed varint, a string length beyond the remaining
// input, a status outside int32 or trailing bytes returns an
// *InvalidEventError with ReasonParse, and e is reset. It never allocates
// more than len(src) bytes, whatever the lengths claim.
//
// Strings are not validated as UTF-8 (Limits.Validate does that for keys
// when required). As with DecodeJSON, they do not alias src and share one
// allocated backing array.
func DecodeBinary(src []byte, e *AccessEvent) error {
	if err := decodeBinary(src, e, false); err != nil {
		e.Reset()
		return err
	}
	return nil
}

// uvarintSlow reads a varint of three or more bytes at src[p:] and returns it
// with the position after it, or p = -1 if it is truncated or overflows 64
// bits. It is kept out of line: the one-byte case is inlined by the caller.
//
//go:noinline
func uvarintSlow(src []byte, p int) (uint64, int) {
	var v uint64
	for shift := uint(0); shift < 64 && p < len(src); shift += 7 {
		c := src[p]
		p++
		if shift == 63 && c > 1 {
			return 0, -1 // more than 64 bits
		}
		v |= uint64(c&0x7f) << shift
		if c < 0x80 {
			return v, p
		}
	}
	return 0, -1 // truncated, or a 10th byte that still says "more"
}

// unzigzag undoes the zig-zag mapping of encoding/binary.AppendVarint.
func unzigzag(u uint64) int64 { return int64(u>>1) ^ -int64(u&1) }

func decodeBinary(src []byte, e *AccessEvent, shared bool) error {
	if len(src) < 1 || src[0] != BinaryMagic {
		return &InvalidEventError{Reason: ReasonParse, Detail: "not a binary event (missing magic byte 0xc1)"}
	}
	if len(src) >= 2 && src[1] != BinaryVersion {
		return &InvalidEventError{Reason: ReasonParse,
			Detail: "unsupported binary event version " + strconv.Itoa(int(src[1])) +
				"; this build reads version " + strconv.Itoa(int(BinaryVersion)) + " (is the consumer older than the producer?)"}
	}
	if len(src) < 10 {
		return &InvalidEventError{Reason: ReasonParse, Detail: "binary event truncated in its header"}
	}
	ts := int64(binary.LittleEndian.Uint64(src[2:]))

	// The eight varints that follow (bytes, status, lat_us, five lengths)
	// are read in one loop with the one- and two-byte cases inline: they
	// are nearly every value, and the loop keeps the code small.
	var v [3 + numStringFields]uint64
	p := 10
	for i := range v {
		if p < len(src) && src[p] < 0x80 {
			v[i] = uint64(src[p])
			p++
			continue
		}
		if p+1 < len(src) && src[p+1] < 0x80 { // two bytes: status codes, small sizes
			v[i] = uint64(src[p]&0x7f) | uint64(src[p+1])<<7
			p += 2
			continue
		}
		if v[i], p = uvarintSlow(src, p); p < 0 {
			return &InvalidEventError{Reason: ReasonParse, Detail: "binary event truncated or a varint is overlong"}
		}
	}
	nbytes, status, lat := unzigzag(v[0]), unzigzag(v[1]), unzigzag(v[2])
	lens := v[3:]
	if status != int64(int32(status)) {
		return &InvalidEventError{Reason: ReasonParse, Detail: "binary event status out of int32 range"}
	}
	// Each length is checked against the whole record before it is added,
	// so the sum of five cannot overflow; the sum must then be exactly what
	// is left. That bound is what keeps a corrupt length from causing a
	// huge allocation.
	var sum uint64
	for _, n := range lens {
		if n > uint64(len(src)) {
			return &InvalidEventError{Reason: ReasonParse, Detail: "binary event string lengths exceed the record"}
		}
		sum += n
	}
	switch rest := uint64(len(src) - p); {
	case sum > rest:
		return &InvalidEventError{Reason: ReasonParse, Detail: "binary event string lengths exceed the record"}
	case sum < rest:
		return &InvalidEventError{Reason: ReasonParse,
			Detail: strconv.FormatUint(rest-sum, 10) + " unexpected bytes after a binary event"}
	}

	// One allocation holds every string of the event, or src itself when
	// shared; the fields are substrings of it.
	var all string
	if shared {
		all = unsafe.String(unsafe.SliceData(src[p:]), len(src)-p)
	} else {
		all = string(src[p:])
	}
	e.TimeMs = ts
	e.Bytes = nbytes
	e.Status = int32(status)
	e.LatencyUs = lat
	off := uint64(0)
	e.Key, off = all[off:off+lens[sfKey]], off+lens[sfKey]
	e.App, off = all[off:off+lens[sfApp]], off+lens[sfApp]
	e.Op, off = all[off:off+lens[sfOp]], off+lens[sfOp]
	e.Client, off = all[off:off+lens[sfClient]], off+lens[sfClient]
	e.Node = all[off:]
	return nil
}
