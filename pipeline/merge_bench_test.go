package pipeline

import (
	"fmt"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/keyheat/keyheat/schemas"
)

// BenchmarkMergeWindow merges one window of 8 partitions whose summaries
// list 1,000 keys each (one app), keyed (exact union) and not keyed
// (Count-Min sketches of default size bound the unlisted partitions).
// "add+merge" is the merger's whole cost per window: checking and decoding
// the 8 summaries, then merging; "merge" times Ready alone. cpu-µs/window
// is the process's CPU time over the same part.
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
				var cpu time.Duration
				i := 0
				for b.Loop() {
					if mode == "merge" {
						b.StopTimer()
					}
					cpu0 := processCPU(b)
					for j, w := range shifted(i) {
						if err := m.Add(w, int64(i*8+j), 0); err != nil {
							b.Fatal(err)
						}
					}
					if mode == "merge" {
						b.StartTimer()
						cpu0 = processCPU(b)
					}
					if got := m.Ready(nil); len(got) != 1 {
						b.Fatalf("window %d: %d windows ready, want 1", i, len(got))
					}
					cpu += processCPU(b) - cpu0
					m.Acked(int64(i) * 1000)
					i++
				}
				b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N), "µs/window")
				b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/window")
			})
		}
	}
}

// BenchmarkMergePartitions is the merger folding one window of 1,000
// partitions whose summaries each list 1,024 keys of one app (the top-K's
// capacity): keyed (every key on one partition: 1,024,000 distinct keys
// in the window) and not keyed (the partitions list overlapping keys and
// carry Count-Min sketches of default size). The summaries are eight
// partitions' summaries of a Zipf stream copied to 1,000 partitions;
// keyed, each copy's keys are renamed so that no two partitions share
// one. Timed is the merger's whole cost per window, as "add+merge" of
// BenchmarkMergeWindow: checking and decoding the 1,000 summaries, then
// merging. keys/s counts listed keys folded (1,024,000 a window);
// cpu-ms/window is the process's CPU time, which on a shared machine
// does not depend on how much of it the run got. An iteration takes
// seconds: run it with -benchtime 1x or 2x.
func BenchmarkMergePartitions(b *testing.B) {
	const parts, listed = 1000, 1024
	// Zipf 1.01 over 200k keys: every partition's top-K overflows.
	events := mergeZipfEvents(11, 400_000, 200_000, 1.01, []string{"shop"}, 0, 1000)
	for _, keyed := range []bool{true, false} {
		name := "unkeyed"
		if keyed {
			name = "keyed"
		}
		b.Run(fmt.Sprintf("partitions=%d/top=%d/%s", parts, listed, name), func(b *testing.B) {
			f := mergeFixture{topic: "keyheat.events", partitions: 8, windowMs: 1000, keyed: keyed, capacity: listed, big: 100}
			tmpl := f.build(b, events)
			if len(tmpl) != 8 {
				b.Fatalf("want 8 summaries of one window, got %d", len(tmpl))
			}
			ws := make([]*schemas.PartitionWindow, parts)
			for p := range ws {
				c := *tmpl[p%len(tmpl)]
				c.Partition, c.Partitions = int32(p), parts
				if n := len(c.Apps[0].Top); n != listed {
					b.Fatalf("partition %d lists %d keys, want %d", p, n, listed)
				}
				if keyed {
					c.Apps = []schemas.AppWindow{c.Apps[0]}
					a := &c.Apps[0]
					a.Top, a.Big = renamedKeys(a.Top, p), renamedKeys(a.Big, p)
				}
				ws[p] = &c
			}
			cfg := testMergerConfig(100)
			cfg.RedisCluster.Shards = 6
			m, err := NewMerger(cfg)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			var cpu time.Duration
			i := 0
			for b.Loop() {
				b.StopTimer()
				shifted := make([]*schemas.PartitionWindow, parts)
				for j, w := range ws {
					c := *w
					c.StartMs, c.EndMs = int64(i)*1000, int64(i+1)*1000
					c.WatermarkMs = c.EndMs
					c.ID = schemas.PartitionWindowID(c.Topic, c.Partition, c.StartMs)
					shifted[j] = &c
				}
				b.StartTimer()
				cpu0 := processCPU(b)
				for j, w := range shifted {
					if err := m.Add(w, int64(i*parts+j), 0); err != nil {
						b.Fatal(err)
					}
				}
				if got := m.Ready(nil); len(got) != 1 {
					b.Fatalf("window %d: %d windows ready, want 1", i, len(got))
				}
				cpu += processCPU(b) - cpu0
				m.Acked(int64(i) * 1000)
				i++
			}
			perWindow := b.Elapsed().Seconds() / float64(b.N)
			b.ReportMetric(perWindow*1000, "ms/window")
			b.ReportMetric(float64(cpu.Milliseconds())/float64(b.N), "cpu-ms/window")
			b.ReportMetric(parts*listed/perWindow, "keys/s")
		})
	}
}

// processCPU is the CPU time the process used so far, user and system.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// renamedKeys returns a copy of kcs whose keys carry partition p's
// number, placed on p.
func renamedKeys(kcs []schemas.KeyCount, p int) []schemas.KeyCount {
	out := make([]schemas.KeyCount, len(kcs))
	for i, kc := range kcs {
		kc.Key += "@" + strconv.Itoa(p)
		kc.Partition = int32(p)
		out[i] = kc
	}
	return out
}

// BenchmarkMergeSparse is the merger's side of a backfill of a quiet
// topic, one report window per iteration: four keyed partitions' real
// summaries of 250 events each (1,000 events/s, detect.BenchmarkEndToEnd's
// rate=1000), keys drawn from 100,000 so that nearly every key is listed
// once with a count of 1. An iteration decodes the four summaries from
// their binary form, adds them, merges the window and encodes its
// reports as JSON, as detect's merge runner does: what a window costs
// the merger whatever its events.
func BenchmarkMergeSparse(b *testing.B) {
	const parts, perWindow, templates = 4, 250, 16
	keys := make([]string, 100_000)
	for i := range keys {
		keys[i] = "key:" + strconv.Itoa(i)
	}
	// enc[w][p] is partition p's summary of window w, encoded.
	enc := make([][][]byte, templates)
	for p := range int32(parts) {
		src := testSource
		src.Partition, src.Partitions = p, parts
		pt, err := NewPartition(DefaultOptions(), src, Start{})
		if err != nil {
			b.Fatal(err)
		}
		var out Output
		e := schemas.AccessEvent{App: "app", Op: "GET", Bytes: 100}
		for i := range int64((templates + 30) * perWindow) {
			off := i*parts + int64(p)
			e.Key = keys[(off*off)%int64(len(keys))]
			e.TimeMs = t0Ms + i*1000/perWindow
			pt.Process(&e, i, &out)
			for _, w := range out.Windows {
				if wi := (w.StartMs - t0Ms) / 1000; wi < templates && w.Events > 0 {
					enc[wi] = append(enc[wi], w.AppendBinary(nil))
				}
				pt.Acked(w.StartMs)
			}
			for _, h := range out.HotKeys {
				pt.AckedHotKey(h.ID)
			}
			out.Reset()
		}
	}
	for w := range enc {
		if len(enc[w]) != parts {
			b.Fatalf("window %d: %d summaries, want %d", w, len(enc[w]), parts)
		}
	}
	m, err := NewMerger(MergerConfig{MergerOptions: DefaultMergerOptions(), Window: time.Second})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	var js []byte
	cpu0 := processCPU(b)
	i := 0
	for b.Loop() {
		for _, v := range enc[i%templates] {
			w, err := schemas.DecodePartitionWindow(v)
			if err != nil {
				b.Fatal(err)
			}
			// Each iteration is a window of its own.
			w.StartMs += int64(i/templates*templates) * 1000
			w.EndMs, w.WatermarkMs = w.StartMs+1000, w.StartMs+1000
			w.ID = schemas.PartitionWindowID(w.Topic, w.Partition, w.StartMs)
			if err := m.Add(w, int64(i), 0); err != nil {
				b.Fatal(err)
			}
		}
		mws := m.Ready(nil)
		if len(mws) != 1 {
			b.Fatalf("window %d: %d windows ready, want 1", i, len(mws))
		}
		for j := range mws[0].Reports {
			if js, err = mws[0].Reports[j].AppendJSON(js[:0]); err != nil {
				b.Fatal(err)
			}
		}
		m.Acked(mws[0].StartMs)
		i++
	}
	b.ReportMetric(float64((processCPU(b)-cpu0).Microseconds())/float64(b.N), "cpu-µs/window")
}
