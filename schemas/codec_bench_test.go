package schemas

import "testing"

// typicalEvent is the event the performance targets are stated for: its
// JSON encoding is 113 bytes.
var typicalEvent = AccessEvent{
	TimeMs: 1767225600123,
	Key:    "user:42:profile",
	App:    "shop",
	Op:     "GET",
	Bytes:  512,
	Status: 200,
	Client: "10.1.2.3",
}

// fullEvent has every field set; its JSON encoding is 143 bytes.
var fullEvent = AccessEvent{
	TimeMs:    1767225600123,
	Key:       "user:42:profile",
	App:       "shop",
	Op:        "GET",
	Bytes:     512,
	Status:    200,
	Client:    "10.1.2.3",
	Node:      "redis-3",
	LatencyUs: 870,
}

var benchEvents = []struct {
	name string
	e    *AccessEvent
}{
	{"typical", &typicalEvent},
	{"full", &fullEvent},
}

// The figures are noisy on a shared machine: compare runs with -count=5
// (or more) and look at the best and the median, not one run.

func BenchmarkDecode(b *testing.B) {
	for _, c := range []Codec{JSON, Binary} {
		for _, be := range benchEvents {
			src := c.Append(nil, be.e)
			b.Run(c.Name()+"/"+be.name, func(b *testing.B) {
				b.ReportAllocs()
				b.SetBytes(int64(len(src)))
				var e AccessEvent
				for b.Loop() {
					if err := c.Decode(src, &e); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

func BenchmarkEncode(b *testing.B) {
	for _, c := range []Codec{JSON, Binary} {
		for _, be := range benchEvents {
			b.Run(c.Name()+"/"+be.name, func(b *testing.B) {
				b.ReportAllocs()
				buf := c.Append(nil, be.e)
				b.SetBytes(int64(len(buf)))
				for b.Loop() {
					buf = c.Append(buf[:0], be.e)
				}
			})
		}
	}
}

// BenchmarkDecodeFloor measures what any decoder meeting this package's
// contract must pay: copy the string bytes into one allocation and store
// five strings into the event (with GC write barriers). Read the Decode
// figures against it: on a shared machine this floor alone varies by a
// factor of two from run to run.
func BenchmarkDecodeFloor(b *testing.B) {
	src := AppendBinary(nil, &typicalEvent)
	strs := src[len(src)-len(typicalEvent.Key+typicalEvent.App+typicalEvent.Op+typicalEvent.Client):]
	b.ReportAllocs()
	e := new(AccessEvent)
	floorSink = e // on the heap, like a consumer's reused event
	for b.Loop() {
		all := string(strs)
		e.Key, e.App, e.Op, e.Client, e.Node = all[:15], all[15:19], all[19:22], all[22:], ""
	}
}

var floorSink *AccessEvent

// busyWindow is a partition's summary of a busy window: one app, every
// Redis Cluster slot hit, a 16 KiB distinct-key sketch, 100 top keys and
// 100 big keys.
func busyWindow() *PartitionWindow {
	a := AppWindow{App: "shop", Events: 250_000, Bytes: 25_000_000, Reads: 250_000, Floor: 12,
		Distinct: make([]byte, 16<<10), Slots: make([]SlotCount, 16384)}
	for i := range a.Slots {
		a.Slots[i] = SlotCount{Slot: uint16(i), Events: uint64(i%40 + 1)}
	}
	for i := range a.Distinct {
		a.Distinct[i] = byte(i * 7)
	}
	for i := range 100 {
		k := KeyCount{App: "shop", Key: "key:" + string(rune('a'+i%26)) + ":" + string(rune('a'+i/26)),
			Count: uint64(1000 - i), Bytes: uint64(100_000 - i), Reads: uint64(1000 - i), Partition: 2}
		a.Top = append(a.Top, k)
		a.Big = append(a.Big, k)
	}
	return &PartitionWindow{Version: WindowVersion, ID: PartitionWindowID("keyheat.events", 2, 1000),
		Topic: "keyheat.events", Partition: 2, Partitions: 4, StartMs: 1000, EndMs: 2000,
		FirstOffset: 0, LastOffset: 249_999, Events: 250_000, WatermarkMs: 2000, Keyed: true, Apps: []AppWindow{a}}
}

// BenchmarkPartitionWindow: a busy summary, written by a partition and read
// by the merger, in each form.
func BenchmarkPartitionWindow(b *testing.B) {
	w := busyWindow()
	js, err := w.AppendJSON(nil)
	if err != nil {
		b.Fatal(err)
	}
	forms := []struct {
		name   string
		encode func([]byte) []byte
		enc    []byte
	}{
		{"json", func(dst []byte) []byte { dst, _ = w.AppendJSON(dst); return dst }, js},
		{"binary", w.AppendBinary, w.AppendBinary(nil)},
	}
	for _, f := range forms {
		b.Run("encode/"+f.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(f.enc)))
			var buf []byte
			for b.Loop() {
				buf = f.encode(buf[:0])
			}
		})
		b.Run("decode/"+f.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(f.enc)))
			for b.Loop() {
				if _, err := DecodePartitionWindow(f.enc); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
