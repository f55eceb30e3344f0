package hotring

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
)

func benchKeys(n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("user:%012d", i)
	}
	return keys
}

// Touch on keys already tracked, one goroutine.
func BenchmarkTouchExisting(b *testing.B) {
	for _, tc := range []struct {
		name string
		o    Options
	}{
		{"lifetime/bits=12", Options{Bits: 12}},
		{"window/bits=12", Options{Bits: 12, WindowSlots: 8, WindowSlotDuration: slot}},
		{"lifetime/bits=17", Options{Bits: 17}},
		{"window/bits=17", Options{Bits: 17, WindowSlots: 8, WindowSlotDuration: slot}},
	} {
		for _, size := range []int{1, 1_000, 100_000} {
			b.Run(fmt.Sprintf("%s/keys=%d", tc.name, size), func(b *testing.B) {
				r := newRing(b, tc.o)
				keys := benchKeys(size)
				for _, k := range keys {
					r.Touch(k, t0Ms)
				}
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					// Time moves through the slots as a stream would: one
					// millisecond per thousand touches.
					r.Touch(keys[i%size], t0Ms+int64(i)/1000)
				}
			})
		}
	}
}

// Touch with DefaultOptions and wall-clock time: what a caller pays that
// reads the clock for every touch instead of passing event times.
func BenchmarkTouchDefaultOptionsWallClock(b *testing.B) {
	r := newRing(b, DefaultOptions())
	keys := benchKeys(1000)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r.Touch(keys[i%len(keys)], time.Now().UnixMilli())
	}
}

// Touch from several goroutines on a Zipf(1.1) stream over 100k keys.
func BenchmarkTouchParallelZipf(b *testing.B) {
	const universe, stream = 100_000, 1 << 16
	keys := benchKeys(universe)
	for _, win := range []bool{false, true} {
		for _, g := range []int{1, 2} {
			b.Run(fmt.Sprintf("window=%v/goroutines=%d", win, g), func(b *testing.B) {
				o := Options{Bits: 17}
				if win {
					o.WindowSlots, o.WindowSlotDuration = 8, slot
				}
				r := newRing(b, o)
				defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(g))
				b.ReportAllocs()
				b.ResetTimer()
				var seed atomic.Uint64 // a different stream per goroutine
				b.RunParallel(func(pb *testing.PB) {
					z := rand.NewZipf(rand.New(rand.NewPCG(seed.Add(1), 1)), 1.1, 1, universe-1)
					idx := make([]uint64, stream)
					for i := range idx {
						idx[i] = z.Uint64()
					}
					for i := 0; pb.Next(); i++ {
						r.Touch(keys[idx[i&(stream-1)]], t0Ms)
					}
				})
			})
		}
	}
}

// Insert of a new key: one allocation, the node.
func BenchmarkInsert(b *testing.B) {
	const batch = 1 << 16
	keys := benchKeys(batch)
	for _, tc := range []struct {
		name string
		o    Options
	}{
		{"lifetime", Options{Bits: 16}},
		{"window", Options{Bits: 16, WindowSlots: 8, WindowSlotDuration: slot}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			r := newRing(b, tc.o)
			for i := 0; i < b.N; i++ {
				if i%batch == 0 && i > 0 {
					b.StopTimer()
					r = newRing(b, tc.o)
					b.StartTimer()
				}
				r.Touch(keys[i%batch], t0Ms)
			}
		})
	}
}

func fillRing(b *testing.B, o Options, n int) *Ring {
	r := newRing(b, o)
	rng := rand.New(rand.NewPCG(1, 1))
	for _, k := range benchKeys(n) {
		r.TouchN(k, 1+rng.Uint64N(1000), t0Ms)
	}
	return r
}

// TopN(100) over 250,000 nodes.
func BenchmarkTopN(b *testing.B) {
	for _, tc := range []struct {
		name string
		o    Options
	}{
		{"lifetime/bits=12", Options{Bits: 12}},
		{"window/bits=12", Options{Bits: 12, WindowSlots: 8, WindowSlotDuration: slot}},
		{"lifetime/bits=18", Options{Bits: 18}},
	} {
		for _, n := range []int{250_000} {
			b.Run(fmt.Sprintf("%s/nodes=%d", tc.name, n), func(b *testing.B) {
				r := fillRing(b, tc.o, n)
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					if got := r.TopN(100, t0Ms); len(got) != 100 {
						b.Fatalf("TopN returned %d keys", len(got))
					}
				}
			})
		}
	}
}

// Memory per tracked node, excluding the key bytes (the keys are built
// before measuring), including the amortized bucket array.
func BenchmarkMemoryPerNode(b *testing.B) {
	const n = 200_000
	for _, tc := range []struct {
		name string
		o    Options
	}{
		{"lifetime", Options{Bits: 12}},
		{"window=8", Options{Bits: 12, WindowSlots: 8, WindowSlotDuration: slot}},
		{"window=6", Options{Bits: 12, WindowSlots: 6, WindowSlotDuration: 100 * time.Millisecond}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			keys := benchKeys(n)
			var perNode float64
			for i := 0; i < b.N; i++ {
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				r := newRing(b, tc.o)
				for _, k := range keys {
					r.Touch(k, t0Ms)
				}
				runtime.GC()
				runtime.ReadMemStats(&after)
				perNode = float64(after.HeapAlloc-before.HeapAlloc) / n
				runtime.KeepAlive(r)
			}
			b.ReportMetric(perNode, "bytes/node")
		})
	}
}

// Touch on a ring filled to the default cap, keys drawn Zipf(1.1): what the
// table size costs once chains outgrow the CPU cache. bits=12 is a fixed
// 2^12-bucket table (chains of about 61 nodes); bits=auto is DefaultOptions
// (sized from the cap, chains of about two).
func BenchmarkTouchFullRing(b *testing.B) {
	const universe, stream = 250_000, 1 << 16
	keys := benchKeys(universe)
	for _, bits := range []int{12, 0} {
		name := fmt.Sprintf("bits=%d", bits)
		if bits == 0 {
			name = fmt.Sprintf("bits=auto(%d)", SizeBits(universe))
		}
		b.Run(name, func(b *testing.B) {
			r := newRing(b, Options{Bits: bits, NodeCap: universe})
			for _, k := range keys {
				r.Touch(k, t0Ms)
			}
			z := rand.NewZipf(rand.New(rand.NewPCG(1, 1)), 1.1, 1, universe-1)
			idx := make([]uint64, stream)
			for i := range idx {
				idx[i] = z.Uint64()
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				r.Touch(keys[idx[i&(stream-1)]], t0Ms)
			}
		})
	}
}

// TouchHash on tracked keys with the detector's layout (11 slots, 5 lanes,
// a namespace), one goroutine: the per-event cost of an exactly tracked
// key, with and without running lane totals (Lanes 1 sums by walking),
// with and without SingleWriter.
func BenchmarkTouchHash(b *testing.B) {
	for _, lanes := range []int{1, 5} {
		for _, size := range []int{1_000, 10_000} {
			for _, single := range []bool{false, true} {
				b.Run(fmt.Sprintf("lanes=%d/keys=%d/single=%v", lanes, size, single), func(b *testing.B) {
					r := newRing(b, Options{WindowSlots: 11, WindowSlotDuration: 100 * time.Millisecond, Lanes: lanes, NodeCap: 2 * size, SingleWriter: single})
					keys := benchKeys(size)
					hs := make([]uint64, size)
					var win Window
					w := Weights{1, 1, 120, 1}
					for i, k := range keys {
						hs[i] = nsHash("4:shop", k)
						r.InsertHash(hs[i], "4:shop", k, []Weights{w}, t0Ms, &win)
					}
					b.ReportAllocs()
					b.ResetTimer()
					for i := 0; i < b.N; i++ {
						nowMs := t0Ms + int64(i)/1000
						j := i % size
						r.TouchHash(hs[j], "4:shop", keys[j], &w, nowMs, nowMs, &win)
					}
				})
			}
		}
	}
}
