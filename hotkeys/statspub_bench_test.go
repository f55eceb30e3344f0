package hotkeys

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"
)

// benchPublisher is a StatsPublisher without a Kafka client, for gather
// alone.
func benchPublisher(c *Cache, maxKeys int) *StatsPublisher {
	return &StatsPublisher{client: "bench/1", interval: DefaultStatsInterval, maxKeys: maxKeys,
		started: time.Now(), cache: c, prev: map[statsKeyID]uint64{}}
}

// BenchmarkStatsPublisherGather is what one record costs the publisher's
// goroutine: reading a cache of n keys (under its lock), ranking them and
// encoding the busiest 256.
func BenchmarkStatsPublisherGather(b *testing.B) {
	for _, keys := range []int{16, 1024} {
		b.Run(fmt.Sprintf("keys=%d", keys), func(b *testing.B) {
			c, _ := benchCache(b, keys)
			p := benchPublisher(c, DefaultStatsMaxKeys)
			b.ReportAllocs()
			for b.Loop() {
				s := p.gather(time.Now())
				v, err := s.AppendJSON(nil)
				if err != nil {
					b.Fatal(err)
				}
				benchSink = v
			}
		})
	}
}

// BenchmarkCacheHitWhileGathering is BenchmarkCacheHit's parallel case
// over 1,024 keys, alone ("idle") and with a goroutine gathering records
// back to back ("gathering"): a publisher's effect on the hit path, at
// thousands of times its default rate. A hit takes no lock, so only the
// gathering's share of the cores should show.
func BenchmarkCacheHitWhileGathering(b *testing.B) {
	for _, gathering := range []bool{false, true} {
		name := "idle"
		if gathering {
			name = "gathering"
		}
		b.Run(name, func(b *testing.B) {
			c, names := benchCache(b, 1024)
			ctx := context.Background()
			stop := make(chan struct{})
			var wg sync.WaitGroup
			if gathering {
				p := benchPublisher(c, DefaultStatsMaxKeys)
				wg.Go(func() {
					for {
						select {
						case <-stop:
							return
						default:
							_ = p.gather(time.Now())
						}
					}
				})
			}
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				i := 0
				for pb.Next() {
					if _, err := c.Get(ctx, "a", names[i%1024], unusedLoad); err != nil {
						b.Error(err)
						return
					}
					i++
				}
			})
			b.StopTimer()
			close(stop)
			wg.Wait()
		})
	}
}
