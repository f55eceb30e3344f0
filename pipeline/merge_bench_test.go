package pipeline

import (
	"testing"

	"github.com/keyheat/keyheat/schemas"
)

// BenchmarkMergeWindow merges one window of 8 partitions whose summaries
// list 1,000 keys each (one app), keyed (exact union) and not keyed
// (Count-Min sketches of default size bound the unlisted partitions).
// "add+merge" is the merger's whole cost per window: checking and decoding
// the 8 summaries, then merging; "merge" times Ready alone.
func BenchmarkMergeWindow(b *testing.B) {
	// Zipf 1.01 over 200k keys: every partition's top overflows 1,000 keys.
	events := mergeZipfEvents(11, 400_000, 200_000, 1.01, []string{"shop"}, 0, 1000)
	for _, keyed := range []bool{true, false} {
		name := "unkeyed"
		if keyed {
			name = "keyed"
		}
		f := mergeFixture{topic: "keyheat.events", partitions: 8, windowMs: 1000, keyed: keyed, capacity: 1024, list: 1000, big: 100}
		ws := f.build(b, events)
		if len(ws) != 8 {
			b.Fatalf("want 8 summaries of one window, got %d", len(ws))
		}
		for _, w := range ws {
			if n := len(w.Apps[0].Top); n != 1000 {
				b.Fatalf("partition %d lists %d keys, want 1000", w.Partition, n)
			}
		}
		// shifted returns the summaries moved to window i.
		shifted := func(i int) []*schemas.PartitionWindow {
			out := make([]*schemas.PartitionWindow, len(ws))
			for j, w := range ws {
				c := *w
				c.StartMs, c.EndMs = int64(i)*1000, int64(i+1)*1000
				c.ID = schemas.PartitionWindowID(c.Topic, c.Partition, c.StartMs)
				out[j] = &c
			}
			return out
		}
		for _, mode := range []string{"add+merge", "merge"} {
			b.Run(name+"/"+mode, func(b *testing.B) {
				cfg := testMergerConfig(100)
				cfg.RedisCluster.Shards = 6
				m, err := NewMerger(cfg)
				if err != nil {
					b.Fatal(err)
				}
				b.ReportAllocs()
				i := 0
				for b.Loop() {
					if mode == "merge" {
						b.StopTimer()
					}
					for j, w := range shifted(i) {
						if err := m.Add(w, int64(i*8+j), 0); err != nil {
							b.Fatal(err)
						}
					}
					if mode == "merge" {
						b.StartTimer()
					}
					if got := m.Ready(nil); len(got) != 1 {
						b.Fatalf("window %d: %d windows ready, want 1", i, len(got))
					}
					m.Acked(int64(i) * 1000)
					i++
				}
				b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N), "µs/window")
			})
		}
	}
}
