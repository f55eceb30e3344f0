package sketch

import (
	"strings"
	"sync"
	"testing"
)

// The alternatives the chosen top-K was measured against (figures in
// docs/benchmarks-history.md), built on the same table, heap and
// memory budget so that only the update rule differs.

// addSpaceSaving is plain Space-Saving (Metwally et al. 2005): an untracked
// key always replaces the minimum and inherits its count as error.
func (t *TopK) addSpaceSaving(key string) {
	t.total++
	h := hashString(key, t.cfg.Sketch.Seed)
	if i := t.find(key, h); i >= 0 {
		t.heap[i].upper++
		t.heap[i].lower++
		t.down(i)
		return
	}
	if len(t.heap) < cap(t.heap) {
		t.admit(len(t.heap), key, h, 1, 1, int32(len(t.heap)))
		return
	}
	m := t.heap[0].upper
	t.unplace(uint64(t.heap[0].slot))
	t.admit(0, key, h, m+1, 1, t.heap[0].id)
}

// addCMSHeap is the classic Count-Min + min-heap top-K: every event goes into
// the sketch, and a key is ranked by its sketch estimate.
func (t *TopK) addCMSHeap(key string) {
	t.total++
	h := hashString(key, t.cfg.Sketch.Seed)
	est := t.filter.addHash(h, 1)
	if i := t.find(key, h); i >= 0 {
		t.heap[i].upper = est
		t.heap[i].lower++
		t.down(i)
		return
	}
	if len(t.heap) < cap(t.heap) {
		t.admit(len(t.heap), key, h, est, 1, int32(len(t.heap)))
		return
	}
	if est <= t.heap[0].upper {
		return
	}
	t.unplace(uint64(t.heap[0].slot))
	t.admit(0, key, h, est, 1, t.heap[0].id)
}

var topKAlgorithms = []struct {
	name string
	add  func(*TopK, string)
}{
	{"filtered-space-saving", (*TopK).Add},
	{"space-saving", (*TopK).addSpaceSaving},
	{"cms+heap", (*TopK).addCMSHeap},
}

var (
	compareMu    sync.Mutex
	compareCache = map[string]accuracyResult{}
)

// BenchmarkTopKAlgorithms times each update rule on the Zipf stream (as
// BenchmarkTopKAdd) and reports its accuracy on the three workloads of
// TestAccuracyAt1MiB (10M events, 1M with -short) as extra metrics: recall,
// precision, and the mean relative count error of the top-10 and top-k in %.
// Each runs at the 1 MiB budget (2048 keys) and at 64 KiB (256 keys), where
// the rules start to differ.
func BenchmarkTopKAlgorithms(b *testing.B) {
	keys := benchKeys(1 << 20)
	budgets := []struct {
		name             string
		budget, capacity int
	}{{"1MiB", accuracyBudget, accuracyCapacity}, {"64KiB", 64 << 10, 256}}
	for _, bud := range budgets {
		cfg, err := TopKConfigForBudget(bud.budget, bud.capacity, 32)
		if err != nil {
			b.Fatal(err)
		}
		for _, alg := range topKAlgorithms {
			b.Run(bud.name+"/"+alg.name+"/speed", func(b *testing.B) {
				tk, _ := NewTopK(cfg)
				for _, k := range keys {
					alg.add(tk, k)
				}
				b.ReportAllocs()
				i := 0
				for b.Loop() {
					alg.add(tk, keys[i&(len(keys)-1)])
					i++
				}
			})
			for _, w := range []func(uint64) workload{zipfWorkload, plantedWorkload, floodWorkload} {
				name := bud.name + "/" + alg.name + "/" + strings.ReplaceAll(w(0).name, "+", "-")
				b.Run(name, func(b *testing.B) {
					compareMu.Lock()
					r, ok := compareCache[name]
					if !ok {
						r = runAccuracyWith(b, cfg, w(42), eventsForTest(testing.Short()), alg.add, false)
						compareCache[name] = r
					}
					compareMu.Unlock()
					for b.Loop() {
					}
					b.ReportMetric(r.recall, "recall")
					b.ReportMetric(r.precision, "precision")
					b.ReportMetric(100*r.top10MeanErr, "top10err%")
					b.ReportMetric(100*r.top100Err, "topKerr%")
				})
			}
		}
	}
}
