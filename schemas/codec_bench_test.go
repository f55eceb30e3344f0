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
