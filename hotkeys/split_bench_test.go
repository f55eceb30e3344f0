package hotkeys

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/keyheat/keyheat/internal/testenv"
)

// BenchmarkSplit measures one Incr and one Get of a counter, unsplit and
// split 4, 16 and 64 ways, on the shared Redis node: the latency a split
// adds to a caller (one INCRBY either way; a Get reads factor+1 keys with
// one MGET). The vs-plain runs alternate a split and a plain call in one
// loop and report their mean latencies and ratio, which a busy machine
// skews less than two runs minutes apart.
func BenchmarkSplit(b *testing.B) {
	rdb, prefix := testenv.RedisClient(b)
	reg := &splitReg{}
	s, err := NewSplitter(rdb, SplitConfig{Lookup: reg.lookup})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	for _, factor := range []int{0, 4, 16, 64} {
		name := "plain"
		if factor > 0 {
			name = "split=" + strconv.Itoa(factor)
		}
		key := prefix + name
		reg.set(key, factor)
		for range 4 * max(factor, 1) {
			if err := s.Incr(ctx, splitTestApp, key, 1); err != nil {
				b.Fatal(err)
			}
		}
		b.Run("incr/"+name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := s.Incr(ctx, splitTestApp, key, 1); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("get/"+name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := s.Get(ctx, splitTestApp, key); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	splitVsPlain(b, s, prefix)
}

// BenchmarkSplitCluster is BenchmarkSplit's vs-plain runs on a one-node
// cluster, where a split Get takes two round trips (the shards, each with
// its fold record, then the key with its fold notes).
func BenchmarkSplitCluster(b *testing.B) {
	rdb := testenv.PrivateRedisCluster(b)
	reg := &splitReg{}
	s, err := NewSplitter(rdb, SplitConfig{Lookup: reg.lookup})
	if err != nil {
		b.Fatal(err)
	}
	for _, factor := range []int{4, 16, 64} {
		reg.set("split="+strconv.Itoa(factor), factor)
		for range 4 * factor {
			if err := s.Incr(context.Background(), splitTestApp, "split="+strconv.Itoa(factor), 1); err != nil {
				b.Fatal(err)
			}
		}
	}
	splitVsPlain(b, s, "")
}

// splitVsPlain alternates a call on the key prefix+"plain" and one on
// prefix+"split=N" (N = 4, 16, 64) and reports their mean latencies and
// ratio.
func splitVsPlain(b *testing.B, s *Splitter, prefix string) {
	ctx := context.Background()
	for _, op := range []string{"incr", "get"} {
		call := func(key string) error {
			if op == "incr" {
				return s.Incr(ctx, splitTestApp, key, 1)
			}
			_, err := s.Get(ctx, splitTestApp, key)
			return err
		}
		for _, factor := range []int{4, 16, 64} {
			name := "split=" + strconv.Itoa(factor)
			b.Run("vs-plain/"+op+"/"+name, func(b *testing.B) {
				var plain, split time.Duration
				for b.Loop() {
					t0 := time.Now()
					if err := call(prefix + "plain"); err != nil {
						b.Fatal(err)
					}
					t1 := time.Now()
					if err := call(prefix + name); err != nil {
						b.Fatal(err)
					}
					plain += t1.Sub(t0)
					split += time.Since(t1)
				}
				b.ReportMetric(float64(plain.Nanoseconds())/float64(b.N), "plain-ns/call")
				b.ReportMetric(float64(split.Nanoseconds())/float64(b.N), "split-ns/call")
				b.ReportMetric(float64(split)/float64(plain), "split/plain")
			})
		}
	}
}
