package schemas

import (
	"encoding/binary"
	"strconv"
)

// Binary wire format of an AccessEvent (version 1):
//
//	magic    1 byte   0xC1 (BinaryMagic)
//	version  1 byte   1    (BinaryVersion)
//	ts       varint   TimeMs
//	bytes    varint   Bytes
//	status   varint   Status
//	lat_us   varint   LatencyUs
//	lengths  5 × uvarint, the byte lengths of key, app, op, client, node
//	strings  key, app, op, client and node bytes, back to back
//
// "varint" is a zig-zag signed varint (encoding/binary.AppendVarint). The
// strings are any bytes: unlike JSON, the binary codec carries keys that are
// not UTF-8 unchanged. Keeping them in one block after all the lengths lets
// the decoder check the lengths against the input once and copy every
// string with one copy into one allocation. Every field is always present
// (an absent one costs one byte), the lengths must add up to exactly the
// rest of the record, and a new layout gets a new version byte.
//
// 0xC1 is never valid in UTF-8, so no JSON text (nor any UTF-8 log line)
// can start with it: DecodeAny tells the two codecs apart by the first byte.

// BinaryMagic is the first byte of every binary-encoded event.
const BinaryMagic byte = 0xC1

// BinaryVersion is the layout version this package writes and reads.
const BinaryVersion byte = 1

// AppendBinary appends e to dst in the binary format and returns the
// extended buffer. A typical event takes about half its JSON size.
func AppendBinary(dst []byte, e *AccessEvent) []byte {
	dst = append(dst, BinaryMagic, BinaryVersion)
	dst = binary.AppendVarint(dst, e.TimeMs)
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
	if err := decodeBinary(src, e); err != nil {
		e.Reset()
		return err
	}
	return nil
}

// uvarintAt reads a uvarint at src[p:] and returns it with the position
// after it. p < 0 means an earlier read failed; the failure is passed on so
// that a decode is a straight sequence of reads checked at the points where
// the error message needs the field name. Results: -1 truncated or
// overlong varint.
func uvarintAt(src []byte, p int) (uint64, int) {
	if uint(p) < uint(len(src)) && src[p] < 0x80 { // one byte: the common case
		return uint64(src[p]), p + 1
	}
	return uvarintSlow(src, p)
}

func uvarintSlow(src []byte, p int) (uint64, int) {
	if p < 0 {
		return 0, p
	}
	v, n := binary.Uvarint(src[p:])
	if n <= 0 {
		return 0, -1
	}
	return v, p + n
}

func varintAt(src []byte, p int) (int64, int) {
	u, p := uvarintAt(src, p)
	return int64(u>>1) ^ -int64(u&1), p
}

func decodeBinary(src []byte, e *AccessEvent) error {
	if len(src) < 2 || src[0] != BinaryMagic {
		return &InvalidEventError{Reason: ReasonParse, Detail: "not a binary event (missing magic byte 0xc1)"}
	}
	if src[1] != BinaryVersion {
		return &InvalidEventError{Reason: ReasonParse,
			Detail: "unsupported binary event version " + strconv.Itoa(int(src[1])) +
				"; this build reads version " + strconv.Itoa(int(BinaryVersion)) + " (is the consumer older than the producer?)"}
	}
	ts, p := varintAt(src, 2)
	nbytes, p := varintAt(src, p)
	status, p := varintAt(src, p)
	lat, p := varintAt(src, p)
	var lens [numStringFields]uint64
	for i := range lens {
		lens[i], p = uvarintAt(src, p)
	}
	if p < 0 {
		return &InvalidEventError{Reason: ReasonParse, Detail: "binary event truncated or a varint is overlong"}
	}
	if status != int64(int32(status)) {
		return &InvalidEventError{Reason: ReasonParse, Detail: "binary event status out of int32 range"}
	}
	// Subtracting each length from what is left (rather than adding them
	// up) cannot overflow, and it is what bounds the allocation below by
	// len(src) whatever a corrupt record claims.
	rest := uint64(len(src) - p)
	for _, n := range lens {
		if n > rest {
			return &InvalidEventError{Reason: ReasonParse, Detail: "binary event string lengths exceed the record"}
		}
		rest -= n
	}
	if rest != 0 {
		return &InvalidEventError{Reason: ReasonParse,
			Detail: strconv.FormatUint(rest, 10) + " unexpected bytes after a binary event"}
	}

	// One allocation holds every string of the event; the fields are
	// substrings of it.
	all := string(src[p:])
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
