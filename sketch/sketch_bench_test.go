package sketch

import (
	"fmt"
	"testing"

	"github.com/zeebo/xxh3"
)

// benchKeys returns n ~25-byte keys drawn from the Zipf 1.1 workload, the
// skew a cache access log shows. The keys lie back to back in one buffer and
// the benchmarks walk them in order, as a consumer walks a fetched batch of
// records, so the timings measure the sketch and not cache misses on
// scattered key bytes.
func benchKeys(n int) []string {
	w := zipfWorkload(7)
	buf := make([]byte, 0, n*26)
	ends := make([]int, n)
	for i := range ends {
		buf = appendKey(append(buf, "prod-"...), w.gen()) // 24–25 bytes
		ends[i] = len(buf)
	}
	all := string(buf)
	keys := make([]string, n)
	start := 0
	for i, end := range ends {
		keys[i] = all[start:end]
		start = end
	}
	return keys
}

var cmsSizes = []CountMinConfig{
	{Depth: 4, Width: 2048},
	{Depth: 4, Width: 32768},
	{Depth: 8, Width: 2048},
}

func cmsName(c CountMinConfig) string { return fmt.Sprintf("%dx%d", c.Depth, c.Width) }

func BenchmarkCountMinAdd(b *testing.B) {
	keys := benchKeys(1 << 16)
	for _, cfg := range cmsSizes {
		for _, cons := range []bool{false, true} {
			cfg.Conservative = cons
			name := cmsName(cfg)
			if cons {
				name += "/conservative"
			}
			b.Run(name, func(b *testing.B) {
				s, _ := NewCountMin(cfg)
				b.ReportAllocs()
				i := 0
				for b.Loop() {
					s.Add(keys[i&(len(keys)-1)])
					i++
				}
			})
		}
	}
}

func BenchmarkCountMinEstimate(b *testing.B) {
	keys := benchKeys(1 << 16)
	s, _ := NewCountMin(CountMinConfig{})
	for _, k := range keys {
		s.Add(k)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		s.Estimate(keys[i&(len(keys)-1)])
		i++
	}
}

func BenchmarkCountMinMerge(b *testing.B) {
	for _, cfg := range cmsSizes[:2] {
		b.Run(cmsName(cfg), func(b *testing.B) {
			x, _ := NewCountMin(cfg)
			y, _ := NewCountMin(cfg)
			for _, k := range benchKeys(100_000) {
				y.Add(k)
			}
			b.ReportAllocs()
			for b.Loop() {
				if err := x.Merge(y); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkCountMinMarshal encodes a sketch that saw 100k events (one busy
// 1 s window). "append" reuses one buffer as a pipeline would.
func BenchmarkCountMinMarshal(b *testing.B) {
	for _, cfg := range cmsSizes[:2] {
		s, _ := NewCountMin(cfg)
		for _, k := range benchKeys(100_000) {
			s.Add(k)
		}
		enc, _ := s.MarshalBinary()
		b.Run(cmsName(cfg)+"/marshal", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_, _ = s.MarshalBinary()
			}
			b.ReportMetric(float64(len(enc)), "bytes/blob")
		})
		b.Run(cmsName(cfg)+"/append", func(b *testing.B) {
			b.ReportAllocs()
			buf := make([]byte, 0, len(enc))
			for b.Loop() {
				buf, _ = s.AppendBinary(buf[:0])
			}
		})
		b.Run(cmsName(cfg)+"/unmarshal", func(b *testing.B) {
			b.ReportAllocs()
			var d CountMin
			for b.Loop() {
				if err := d.UnmarshalBinary(enc); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

var topKSizes = []struct {
	name string
	cfg  func() TopKConfig
}{
	{"cap100-4x2048", func() TopKConfig { return TopKConfig{Capacity: 100} }},
	{"cap1024-4x2048", func() TopKConfig { return TopKConfig{} }},
	{"cap2048-1MiB", func() TopKConfig {
		c, _ := TopKConfigForBudget(1<<20, 2048, 32)
		return c
	}},
}

// BenchmarkTopKAdd measures steady state on the Zipf stream: the TopK has
// seen the whole key set once before the timer starts.
func BenchmarkTopKAdd(b *testing.B) {
	keys := benchKeys(1 << 20)
	for _, sz := range topKSizes {
		b.Run(sz.name, func(b *testing.B) {
			tk, _ := NewTopK(sz.cfg())
			for _, k := range keys {
				tk.Add(k)
			}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				tk.Add(keys[i&(len(keys)-1)])
				i++
			}
		})
	}
}

func BenchmarkTopKMerge(b *testing.B) {
	keys := benchKeys(200_000)
	for _, sz := range topKSizes[1:] {
		b.Run(sz.name, func(b *testing.B) {
			x, _ := NewTopK(sz.cfg())
			y, _ := NewTopK(sz.cfg())
			for i, k := range keys {
				if i%2 == 0 {
					x.Add(k)
				} else {
					y.Add(k)
				}
			}
			b.ReportAllocs()
			for b.Loop() {
				z, _ := NewTopK(sz.cfg())
				_ = z.Merge(x)
				_ = z.Merge(y)
			}
		})
	}
}

func BenchmarkTopKMarshal(b *testing.B) {
	tk, _ := NewTopK(TopKConfig{})
	for _, k := range benchKeys(200_000) {
		tk.Add(k)
	}
	enc, _ := tk.MarshalBinary()
	b.Run("append", func(b *testing.B) {
		b.ReportAllocs()
		buf := make([]byte, 0, len(enc))
		for b.Loop() {
			buf, _ = tk.AppendBinary(buf[:0])
		}
		b.ReportMetric(float64(len(enc)), "bytes/blob")
	})
	b.Run("unmarshal", func(b *testing.B) {
		b.ReportAllocs()
		var d TopK
		for b.Loop() {
			if err := d.UnmarshalBinary(enc); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkCardinalityAdd(b *testing.B) {
	keys := benchKeys(1 << 16)
	c, _ := NewCardinality(CardinalityConfig{})
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		c.Add(keys[i&(len(keys)-1)])
		i++
	}
}

var hashSink uint64

// BenchmarkHashBaseline is the xxh3 hash of the same keys alone: the floor under
// every Add, to read the other figures against on a noisy machine.
func BenchmarkHashBaseline(b *testing.B) {
	keys := benchKeys(1 << 16)
	i := 0
	for b.Loop() {
		hashSink += xxh3.HashString(keys[i&(len(keys)-1)])
		i++
	}
}
