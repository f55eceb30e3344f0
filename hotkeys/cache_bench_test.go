package hotkeys

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// benchCache returns a LocalOnly cache in which keys hot keys of app "a"
// ask for the local cache, each already loaded with a 64-byte value.
func benchCache(b *testing.B, keys int) (*Cache, []string) {
	b.Helper()
	reg := &StaticRegistry{}
	names := make([]string, keys)
	for i := range names {
		names[i] = fmt.Sprintf("product:%d", i)
		reg.Set(Entry{App: "a", Key: names[i], Mitigation: MitigationLocalCache})
	}
	c, err := NewCache(CacheConfig{Registry: reg, SharedTTL: time.Hour, LocalOnly: true})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(c.Close)
	val := make([]byte, 64)
	for _, k := range names {
		if _, err := c.Get(context.Background(), "a", k, func(context.Context) ([]byte, error) { return val, nil }); err != nil {
			b.Fatal(err)
		}
	}
	return c, names
}

var benchSink []byte

func unusedLoad(context.Context) ([]byte, error) { panic("a hit must not load") }

// BenchmarkCacheHit is the cost of a Get served from the cache, the
// registry's lookup (StaticRegistry) included: one hot key read by every
// goroutine (the hot-key case), and 1,024 keys.
func BenchmarkCacheHit(b *testing.B) {
	for _, keys := range []int{1, 1024} {
		b.Run(fmt.Sprintf("keys=%d/sequential", keys), func(b *testing.B) {
			c, names := benchCache(b, keys)
			ctx := context.Background()
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				v, err := c.Get(ctx, "a", names[i%keys], unusedLoad)
				if err != nil {
					b.Fatal(err)
				}
				benchSink = v
				i++
			}
		})
		b.Run(fmt.Sprintf("keys=%d/parallel", keys), func(b *testing.B) {
			c, names := benchCache(b, keys)
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				i := 0
				for pb.Next() {
					if _, err := c.Get(ctx, "a", names[i%keys], unusedLoad); err != nil {
						b.Error(err)
						return
					}
					i++
				}
			})
		})
	}
	// What a caller pays for a func literal that captures its key: the
	// closure escapes to the cache's load goroutine, so Go allocates it
	// on every call, hit or not.
	b.Run("keys=1/sequential/capturing-closure", func(b *testing.B) {
		c, names := benchCache(b, 1)
		ctx := context.Background()
		b.ReportAllocs()
		for b.Loop() {
			key := names[0]
			v, err := c.Get(ctx, "a", key, func(context.Context) ([]byte, error) { return []byte(key), nil })
			if err != nil {
				b.Fatal(err)
			}
			benchSink = v
		}
	})
}

// BenchmarkCacheColdGet is the overhead of a Get of a key that is not hot:
// the registry's lookup and the table's, before load.
func BenchmarkCacheColdGet(b *testing.B) {
	c, _ := benchCache(b, 1)
	ctx := context.Background()
	val := []byte("v")
	load := func(context.Context) ([]byte, error) { return val, nil }
	b.ReportAllocs()
	for b.Loop() {
		v, err := c.Get(ctx, "a", "cold", load)
		if err != nil {
			b.Fatal(err)
		}
		benchSink = v
	}
}

// BenchmarkCacheMissStorm: 16 goroutines per core read one hot key whose
// mitigation is coalesce (nothing is kept, so every Get misses) from an
// upstream that takes 100 µs. gets/load is the collapse ratio: Gets served
// per upstream call.
func BenchmarkCacheMissStorm(b *testing.B) {
	c, err := NewCache(CacheConfig{Registry: hotRegistry("a", "k", MitigationCoalesce), SharedTTL: time.Hour, LocalOnly: true})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	val := []byte("v")
	load := func(context.Context) ([]byte, error) {
		time.Sleep(100 * time.Microsecond)
		return val, nil
	}
	b.ReportAllocs()
	b.SetParallelism(16)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := c.Get(ctx, "a", "k", load); err != nil {
				b.Error(err)
				return
			}
		}
	})
	st := c.Stats()
	b.ReportMetric(st.CollapseRatio(), "gets/load")
}
