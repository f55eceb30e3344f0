package hotkeys

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/keyheat/keyheat/internal/testenv"
)

// benchKeys are the keys the benchmarks record, 1,024 of them about 20
// bytes long.
func benchKeys() []string {
	keys := make([]string, 1024)
	for i := range keys {
		keys[i] = "user:" + strconv.Itoa(i*7919) + ":profile"
	}
	return keys
}

// recordLoop records keys until b is done, from one goroutine or, when
// parallel, from GOMAXPROCS goroutines (b.RunParallel), and reports the
// events dropped per op: a run that dropped events (and so skipped
// encoding them) shows as one.
func recordLoop(b *testing.B, r *Reporter, parallel bool) {
	keys := benchKeys()
	before := r.Stats()
	b.ReportAllocs()
	b.ResetTimer()
	if parallel {
		b.RunParallel(func(pb *testing.PB) {
			i := 0
			for pb.Next() {
				r.Record("shop", keys[i%len(keys)], "GET", 512)
				i++
			}
		})
	} else {
		for i := 0; b.Loop(); i++ {
			r.Record("shop", keys[i%len(keys)], "GET", 512)
		}
	}
	b.StopTimer()
	after := r.Stats()
	b.ReportMetric(float64(after.DroppedFull-before.DroppedFull)/float64(b.N), "dropped/op")
}

// BenchmarkRecord measures Record alone, in steady state: a goroutine
// standing in for an infinitely fast Kafka empties every buffer the
// stripes hand over at once, so Record finds a free buffer whenever its
// own fills and never drops. Sequential records from one goroutine,
// Parallel from GOMAXPROCS goroutines at once.
func BenchmarkRecord(b *testing.B) {
	run := func(b *testing.B, parallel bool) {
		cfg := ReporterConfig{Topic: "bench.events", Client: "bench-host-01"}.withDefaults()
		r := newReporter(cfg)
		stop := make(chan struct{})
		var wg sync.WaitGroup
		wg.Go(func() {
			for {
				select {
				case buf := <-r.ready:
					buf.reset()
					r.free <- buf
				case <-stop:
					return
				}
			}
		})
		defer func() {
			close(stop)
			wg.Wait()
		}()
		recordLoop(b, r, parallel)
	}
	b.Run("Sequential", func(b *testing.B) { run(b, false) })
	b.Run("Parallel", func(b *testing.B) { run(b, true) })
}

// BenchmarkRecordKFake records into a whole Reporter producing to an
// embedded broker with the default buffers. Its ns/op is Record's with
// the flusher and franz-go on the same CPUs; recording as fast as
// possible outruns the broker, so most events are dropped (dropped/op):
// it shows what dropping costs, not a rate Kafka takes.
func BenchmarkRecordKFake(b *testing.B) {
	run := func(b *testing.B, parallel bool) {
		seeds := testenv.KFake(b)
		r, err := NewReporter(ReporterConfig{
			ClientOpts: []kgo.Opt{kgo.SeedBrokers(seeds...), kgo.AllowAutoTopicCreation()},
			Topic:      "bench.events",
			Client:     "bench-host-01",
		})
		if err != nil {
			b.Fatal(err)
		}
		defer func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if err := r.Close(ctx); err != nil {
				b.Error(err)
			}
		}()
		recordLoop(b, r, parallel)
	}
	b.Run("Sequential", func(b *testing.B) { run(b, false) })
	b.Run("Parallel", func(b *testing.B) { run(b, true) })
}
