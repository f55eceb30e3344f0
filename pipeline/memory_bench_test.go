package pipeline

import (
	"fmt"
	"runtime"
	"strconv"
	"testing"

	"github.com/keyheat/keyheat/schemas"
)

// BenchmarkMemoryDistinctKeys streams events (100,000 events per second
// of event time, one app, keyed) through one Partition with
// DefaultOptions, their keys taken in turn from a set of 1,000 to
// 10,000,000 distinct keys, and reports the heap the partition holds once
// the stream ends next to Options.MemoryBound: memory is bounded by the
// configuration, not by the number of distinct keys. A stream is a
// million events (ten one-second windows), or as many as it has distinct
// keys when that is more. heap-inuse-MiB is the runtime's
// HeapInuse after a collection, less what was in use before the
// partition was built (spans in use, so fragmentation included);
// heap-live-MiB is HeapAlloc measured the same way. Run it with
// -benchtime 1x: an iteration is the whole stream.
func BenchmarkMemoryDistinctKeys(b *testing.B) {
	o := DefaultOptions()
	bound := o.MemoryBound()
	for _, distinct := range []int{1_000, 10_000, 100_000, 1_000_000, 10_000_000} {
		n := max(1_000_000, distinct)
		b.Run(fmt.Sprintf("distinct=%d/events=%d", distinct, n), func(b *testing.B) {
			var inuse, live int64
			for range b.N {
				b.StopTimer()
				before := heapNow()
				p, err := NewPartition(o, testSource, Start{})
				if err != nil {
					b.Fatal(err)
				}
				var out Output
				e := schemas.AccessEvent{App: "shop", Op: "GET", Bytes: 100}
				buf := make([]byte, 0, 32)
				b.StartTimer()
				for i := range int64(n) {
					buf = strconv.AppendInt(append(buf[:0], "key:"...), i%int64(distinct), 10)
					e.Key = string(buf)
					e.TimeMs = t0Ms + i/100
					p.Process(&e, i, &out)
					for _, w := range out.Windows {
						p.Acked(w.StartMs)
					}
					for _, h := range out.HotKeys {
						p.AckedHotKey(h.ID)
					}
					out.Reset()
				}
				b.StopTimer()
				after := heapNow()
				runtime.KeepAlive(p)
				inuse = max(inuse, int64(after.HeapInuse)-int64(before.HeapInuse))
				live = max(live, int64(after.HeapAlloc)-int64(before.HeapAlloc))
				b.StartTimer()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/event")
			b.ReportMetric(float64(inuse)/(1<<20), "heap-inuse-MiB")
			b.ReportMetric(float64(live)/(1<<20), "heap-live-MiB")
			b.ReportMetric(float64(bound)/(1<<20), "bound-MiB")
		})
	}
}

// heapNow returns the memory statistics after two collections: the
// second frees what the first's finalizers and sweeping left.
func heapNow() runtime.MemStats {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m
}
