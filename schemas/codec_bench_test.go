package schemas

import "testing"

// typicalEvent is the event the performance targets are stated for: its
// JSON encoding is about 110 bytes.
var typicalEvent = AccessEvent{
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

func BenchmarkDecode(b *testing.B) {
	for _, c := range []Codec{JSON, Binary} {
		src := c.Append(nil, &typicalEvent)
		b.Run(c.Name(), func(b *testing.B) {
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

func BenchmarkEncode(b *testing.B) {
	for _, c := range []Codec{JSON, Binary} {
		b.Run(c.Name(), func(b *testing.B) {
			b.ReportAllocs()
			buf := c.Append(nil, &typicalEvent)
			b.SetBytes(int64(len(buf)))
			for b.Loop() {
				buf = c.Append(buf[:0], &typicalEvent)
			}
		})
	}
}
