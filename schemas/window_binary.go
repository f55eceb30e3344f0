package schemas

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// WindowBinaryMagic is the first byte of a binary-encoded PartitionWindow.
// Like BinaryMagic it is never valid in UTF-8, so no JSON text starts with
// it, and it differs from BinaryMagic, so neither decoder takes the other's
// records.
const WindowBinaryMagic byte = 0xC0

// AppendBinary appends w's binary form to dst: what the service writes to
// keyheat.windows, where a busy window's summary (a slot count per Redis
// Cluster slot, a 16 KiB distinct-key sketch) costs the merger far less to
// read than its JSON. DecodePartitionWindow reads both forms.
//
// The layout (WindowVersion 2, which is also the version byte) is:
//
//	magic, version   2 bytes: 0xC0 (WindowBinaryMagic), WindowVersion
//	id, topic        strings
//	partition, partitions, start_ms, end_ms, first_offset, last_offset,
//	watermark_ms     varints
//	events, late     uvarints
//	flags            1 byte: 1 keyed, 2 final, 4 approximate
//	apps             list of app
//
//	app:      app (string); events, bytes, reads, writes, latency_us, floor
//	          (uvarints); flags (1 byte: 1 approximate); top, big,
//	          top_reads, top_writes, top_latency (lists of key count);
//	          distinct (bytes); slots (list of slot delta as a varint from
//	          the previous slot, starting at 0, and events as a uvarint);
//	          sketch (bytes)
//	key count: app, key (strings); count, error, bytes, reads, writes,
//	          latency_us, bytes_error (uvarints); partition (varint);
//	          share (uvarint of its IEEE 754 bits); flags (1 byte:
//	          1 shortened)
//
// Version 1 had no approximate flag, no app flags, no top_reads,
// top_writes or top_latency and no key count flags; the decoder reads it
// too (see DecodePartitionWindow).
//
// A string is a uvarint length and its bytes; bytes and lists are a uvarint
// length and their elements. The lists the JSON form always writes (apps,
// top) count their length plus one, 0 standing for nil, and those it
// omits when empty (big, the other rankings, distinct, slots, sketch)
// decode empty as nil: a summary decodes from either form to the same
// value, so the merger cannot tell which one crossed the topic. The one
// difference is that the binary form carries strings that are not UTF-8
// unchanged, where JSON replaces the invalid bytes. A "varint" is zig-zag
// (encoding/binary.AppendVarint).
func (w *PartitionWindow) AppendBinary(dst []byte) []byte {
	dst = append(dst, WindowBinaryMagic, WindowVersion)
	dst = appendString(dst, w.ID)
	dst = appendString(dst, w.Topic)
	for _, v := range [...]int64{int64(w.Partition), int64(w.Partitions), w.StartMs, w.EndMs, w.FirstOffset, w.LastOffset, w.WatermarkMs} {
		dst = binary.AppendVarint(dst, v)
	}
	dst = binary.AppendUvarint(dst, w.Events)
	dst = binary.AppendUvarint(dst, w.Late)
	var flags byte
	if w.Keyed {
		flags |= 1
	}
	if w.Final {
		flags |= 2
	}
	if w.Approximate {
		flags |= 4
	}
	dst = append(dst, flags)
	dst = appendLen(dst, w.Apps == nil, len(w.Apps))
	for i := range w.Apps {
		a := &w.Apps[i]
		dst = appendString(dst, a.App)
		for _, v := range [...]uint64{a.Events, a.Bytes, a.Reads, a.Writes, a.LatencyUs, a.Floor} {
			dst = binary.AppendUvarint(dst, v)
		}
		dst = append(dst, boolFlag(a.Approximate))
		dst = appendKeyCounts(dst, a.Top, true)
		dst = appendKeyCounts(dst, a.Big, false)
		dst = appendKeyCounts(dst, a.TopReads, false)
		dst = appendKeyCounts(dst, a.TopWrites, false)
		dst = appendKeyCounts(dst, a.TopLatency, false)
		dst = appendBytes(dst, a.Distinct)
		dst = binary.AppendUvarint(dst, uint64(len(a.Slots)))
		prev := int64(0)
		for _, s := range a.Slots {
			dst = binary.AppendVarint(dst, int64(s.Slot)-prev)
			dst = binary.AppendUvarint(dst, s.Events)
			prev = int64(s.Slot)
		}
		dst = appendBytes(dst, a.Sketch)
	}
	return dst
}

// appendKeyCounts writes a list of key counts; keepNil tells a nil list
// from an empty one (see AppendBinary).
func appendKeyCounts(dst []byte, kcs []KeyCount, keepNil bool) []byte {
	if keepNil {
		dst = appendLen(dst, kcs == nil, len(kcs))
	} else {
		dst = binary.AppendUvarint(dst, uint64(len(kcs)))
	}
	for i := range kcs {
		k := &kcs[i]
		dst = appendString(dst, k.App)
		dst = appendString(dst, k.Key)
		for _, v := range [...]uint64{k.Count, k.Error, k.Bytes, k.Reads, k.Writes, k.LatencyUs, k.BytesError} {
			dst = binary.AppendUvarint(dst, v)
		}
		dst = binary.AppendVarint(dst, int64(k.Partition))
		dst = binary.AppendUvarint(dst, math.Float64bits(k.Share))
		dst = append(dst, boolFlag(k.Shortened))
	}
	return dst
}

func boolFlag(b bool) byte {
	if b {
		return 1
	}
	return 0
}

func appendString(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

func appendBytes(dst, b []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(b)))
	return append(dst, b...)
}

// appendLen writes a list's or byte slice's length plus one, 0 for nil.
func appendLen(dst []byte, isNil bool, n int) []byte {
	if isNil {
		return append(dst, 0)
	}
	return binary.AppendUvarint(dst, uint64(n)+1)
}

// errWindowBinary is what every malformed binary summary reports.
var errWindowBinary = errors.New("binary partition window truncated or malformed")

// windowReader reads the binary form of version v; the first error
// sticks and every later read returns zero values.
type windowReader struct {
	src []byte
	p   int
	v   int
	err error
}

func (r *windowReader) fail() { r.err, r.p = errWindowBinary, len(r.src) }

func (r *windowReader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	if r.p < len(r.src) && r.src[r.p] < 0x80 {
		r.p++
		return uint64(r.src[r.p-1])
	}
	v, n := binary.Uvarint(r.src[r.p:])
	if n <= 0 {
		r.fail()
		return 0
	}
	r.p += n
	return v
}

func (r *windowReader) varint() int64 { return unzigzag(r.uvarint()) }

func (r *windowReader) int32() int32 {
	v := r.varint()
	if v != int64(int32(v)) {
		r.fail()
	}
	return int32(v)
}

func (r *windowReader) byte() byte {
	if r.err != nil || r.p >= len(r.src) {
		r.fail()
		return 0
	}
	r.p++
	return r.src[r.p-1]
}

// bytes returns the next n bytes, aliasing src.
func (r *windowReader) bytes(n uint64) []byte {
	if r.err != nil || n > uint64(len(r.src)-r.p) {
		r.fail()
		return nil
	}
	b := r.src[r.p : r.p+int(n)]
	r.p += int(n)
	return b
}

func (r *windowReader) string() string { return string(r.bytes(r.uvarint())) }

// list reads a list length: with keepNil one written by appendLen, -1
// for nil; without, a plain length, -1 for empty. Every element takes at
// least minSize bytes, so a length the rest of the input cannot hold is
// refused before anything is allocated for it.
func (r *windowReader) list(minSize int, keepNil bool) int {
	n := r.uvarint()
	if r.err != nil || n == 0 {
		return -1
	}
	if keepNil {
		n--
	}
	if n > uint64(len(r.src)-r.p)/uint64(minSize) {
		r.fail()
		return -1
	}
	return int(n)
}

func (r *windowReader) byteSlice() []byte {
	n := r.list(1, false)
	if n < 0 {
		return nil
	}
	return append([]byte{}, r.bytes(uint64(n))...)
}

// Smallest encodings of a list element in version 1, for list's bound
// (version 2's are larger, so the bound holds for it too).
const (
	minAppBytes      = 12 // string, 6 uvarints, 5 lists and bytes
	minKeyCountBytes = 11 // 2 strings, 7 uvarints, varint, uvarint
	minSlotBytes     = 2
)

func (r *windowReader) keyCounts(keepNil bool) []KeyCount {
	n := r.list(minKeyCountBytes, keepNil)
	if n < 0 {
		return nil
	}
	kcs := make([]KeyCount, n)
	for i := range kcs {
		k := &kcs[i]
		k.App, k.Key = r.string(), r.string()
		k.Count, k.Error, k.Bytes, k.Reads = r.uvarint(), r.uvarint(), r.uvarint(), r.uvarint()
		k.Writes, k.LatencyUs, k.BytesError = r.uvarint(), r.uvarint(), r.uvarint()
		k.Partition = r.int32()
		k.Share = math.Float64frombits(r.uvarint())
		if r.v >= 2 {
			k.Shortened = r.flag()
		}
	}
	return kcs
}

// flag reads a flags byte that holds one flag, 1.
func (r *windowReader) flag() bool {
	f := r.byte()
	if f&^1 != 0 {
		r.fail()
	}
	return f == 1
}

// decodeWindowBinary decodes AppendBinary's form, of this version or
// version 1; src starts with WindowBinaryMagic. The version byte is
// checked by the caller with the JSON form's.
func decodeWindowBinary(src []byte, w *PartitionWindow) error {
	if len(src) < 2 {
		return errWindowBinary
	}
	if w.Version = int(src[1]); w.Version != WindowVersion && w.Version != 1 {
		return nil // the caller says which version this is
	}
	r := windowReader{src: src, p: 2, v: w.Version}
	w.ID, w.Topic = r.string(), r.string()
	w.Partition, w.Partitions = r.int32(), r.int32()
	w.StartMs, w.EndMs, w.FirstOffset, w.LastOffset, w.WatermarkMs = r.varint(), r.varint(), r.varint(), r.varint(), r.varint()
	w.Events, w.Late = r.uvarint(), r.uvarint()
	flags := r.byte()
	if known := byte(3 | 4*(r.v-1)); flags&^known != 0 {
		r.fail()
	}
	w.Keyed, w.Final, w.Approximate = flags&1 != 0, flags&2 != 0, flags&4 != 0
	if n := r.list(minAppBytes, true); n >= 0 {
		w.Apps = make([]AppWindow, n)
	}
	for i := range w.Apps {
		a := &w.Apps[i]
		a.App = r.string()
		a.Events, a.Bytes, a.Reads, a.Writes, a.LatencyUs, a.Floor = r.uvarint(), r.uvarint(), r.uvarint(), r.uvarint(), r.uvarint(), r.uvarint()
		if r.v >= 2 {
			a.Approximate = r.flag()
		}
		a.Top = r.keyCounts(true)
		a.Big = r.keyCounts(false)
		if r.v >= 2 {
			a.TopReads, a.TopWrites, a.TopLatency = r.keyCounts(false), r.keyCounts(false), r.keyCounts(false)
		}
		a.Distinct = r.byteSlice()
		if n := r.list(minSlotBytes, false); n >= 0 {
			a.Slots = make([]SlotCount, n)
			slot := int64(0)
			for j := range a.Slots {
				slot += r.varint()
				if slot < 0 || slot > math.MaxUint16 {
					r.fail()
					break
				}
				a.Slots[j] = SlotCount{Slot: uint16(slot), Events: r.uvarint()}
			}
		}
		a.Sketch = r.byteSlice()
		if r.err != nil {
			break
		}
	}
	if r.err == nil && r.p != len(src) {
		return fmt.Errorf("%w: %d bytes after the last app", errWindowBinary, len(src)-r.p)
	}
	return r.err
}
