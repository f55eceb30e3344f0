package hotkeys

import (
	"strconv"
	"testing"
)

// BenchmarkSetPublish: what one changed entry costs the writer in a set of
// n: the rebuild of its shard's table.
func BenchmarkSetPublish(b *testing.B) {
	for _, n := range []int{1_000, 100_000} {
		b.Run(strconv.Itoa(n/1000)+"k", func(b *testing.B) {
			w := newSetWriter(newEntrySet())
			for i := range n {
				w.put(&Entry{App: "shop", Key: "product:" + strconv.Itoa(i)})
			}
			w.publish()
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				w.put(&Entry{App: "shop", Key: "product:" + strconv.Itoa(i%n), Rate: float64(i)})
				w.publish()
				i++
			}
		})
	}
}
