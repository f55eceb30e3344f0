package hotkeys_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/keyheat/keyheat/hotkeys"
	"github.com/keyheat/keyheat/internal/testenv"
)

// benchRegistry writes n hot keys ("product:0" … of app "shop") to a new
// one-partition-per-25k registry on kfake and returns it.
func benchRegistry(b *testing.B, n int) *registry {
	b.Helper()
	seeds := testenv.KFake(b)
	parts := int32(max(1, n/25_000))
	topic := testenv.NewTopicWithConfigs(b, seeds, parts, map[string]string{"cleanup.policy": "compact"})
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(0))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(cl.Close)
	recs := make([]*kgo.Record, 0, 10_000)
	flush := func() {
		ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
		defer cancel()
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			b.Fatal(err)
		}
		recs = recs[:0]
	}
	for i := range n {
		recs = append(recs, bulkHotRecord("shop", "product:"+strconv.Itoa(i), float64(i)))
		if len(recs) == cap(recs) {
			flush()
		}
	}
	flush()
	return &registry{seeds: seeds, topic: topic, cl: cl}
}

func benchFollower(b *testing.B, r *registry) *hotkeys.Follower {
	b.Helper()
	f, err := hotkeys.NewFollower(hotkeys.FollowerConfig{ClientOpts: []kgo.Opt{kgo.SeedBrokers(r.seeds...)}, Topic: r.topic})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	if err := f.WaitReady(ctx); err != nil {
		b.Fatal(err)
	}
	return f
}

// BenchmarkFollowerBootstrap: from NewFollower to WaitReady returning over
// a registry of 100k keys.
func BenchmarkFollowerBootstrap(b *testing.B) {
	r := benchRegistry(b, 100_000)
	b.ResetTimer()
	for b.Loop() {
		start := time.Now()
		f := benchFollower(b, r)
		b.ReportMetric(float64(time.Since(start).Milliseconds()), "ms/ready")
		if n := f.Stats().Entries; n != 100_000 {
			b.Fatalf("%d entries", n)
		}
		f.Close()
	}
}

// benchSizes are the registry sizes the lookup benchmarks run on.
var benchSizes = []struct {
	name string
	n    int
}{{"1k", 1_000}, {"100k", 100_000}}

// lookupKeys are the keys a lookup benchmark asks about, in turn.
//
//   - hit, miss: up to 1024 keys in the set (hit) or not (miss), spread
//     over the whole set: an application's working set, whose keys stay in
//     the CPU's caches as a hot key's would.
//   - hit-cold, miss-cold: every key of the set, or as many not in it, so
//     most lookups touch memory no recent lookup touched: the bound when
//     the set is much larger than the keys an application uses.
func lookupKeys(n int) []struct {
	name string
	keys []string
} {
	step := max(1, n/1024)
	var hit, miss, hitCold, missCold []string
	for i := range n {
		k, m := "product:"+strconv.Itoa(i), "user:"+strconv.Itoa(i)
		hitCold, missCold = append(hitCold, k), append(missCold, m)
		if i%step == 0 && len(hit) < 1024 {
			hit, miss = append(hit, k), append(miss, m)
		}
	}
	out := []struct {
		name string
		keys []string
	}{{"hit", hit}, {"miss", miss}}
	if n > 1024 {
		out = append(out, struct {
			name string
			keys []string
		}{"hit-cold", hitCold}, struct {
			name string
			keys []string
		}{"miss-cold", missCold})
	}
	return out
}

var sinkBool bool

// BenchmarkIsHot: one goroutine asking about keys in turn.
func BenchmarkIsHot(b *testing.B) {
	for _, size := range benchSizes {
		b.Run(size.name, func(b *testing.B) {
			f := benchFollower(b, benchRegistry(b, size.n))
			defer f.Close()
			for _, lk := range lookupKeys(size.n) {
				want := lk.name == "hit" || lk.name == "hit-cold"
				b.Run(lk.name, func(b *testing.B) {
					keys := lk.keys
					for _, k := range keys {
						if f.IsHot("shop", k) != want {
							b.Fatalf("IsHot(%q) != %v", k, want)
						}
					}
					b.ReportAllocs()
					i := 0
					for b.Loop() {
						sinkBool = f.IsHot("shop", keys[i])
						if i++; i == len(keys) {
							i = 0
						}
					}
				})
			}
		})
	}
}

// BenchmarkIsHotParallel: GOMAXPROCS goroutines asking at once, each
// starting at another key.
func BenchmarkIsHotParallel(b *testing.B) {
	for _, size := range benchSizes {
		b.Run(size.name, func(b *testing.B) {
			f := benchFollower(b, benchRegistry(b, size.n))
			defer f.Close()
			for _, lk := range lookupKeys(size.n) {
				b.Run(lk.name, func(b *testing.B) {
					keys := lk.keys
					var next atomic.Int64
					b.ReportAllocs()
					b.RunParallel(func(pb *testing.PB) {
						i := int(next.Add(7919)) % len(keys)
						var hot bool
						for pb.Next() {
							hot = f.IsHot("shop", keys[i])
							if i++; i == len(keys) {
								i = 0
							}
						}
						sinkBool = hot
					})
				})
			}
		})
	}
}

var sinkRate float64

// BenchmarkGet: Get copies the entry out; the caller reads a field of it.
func BenchmarkGet(b *testing.B) {
	for _, size := range benchSizes {
		b.Run(size.name, func(b *testing.B) {
			f := benchFollower(b, benchRegistry(b, size.n))
			defer f.Close()
			for _, lk := range lookupKeys(size.n)[:2] {
				b.Run(lk.name, func(b *testing.B) {
					keys := lk.keys
					b.ReportAllocs()
					i := 0
					var rate float64
					for b.Loop() {
						if e, ok := f.Get("shop", keys[i]); ok {
							rate += e.Rate
						}
						if i++; i == len(keys) {
							i = 0
						}
					}
					sinkRate = rate
				})
			}
		})
	}
}
