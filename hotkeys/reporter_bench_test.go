package hotkeys

import (
	"context"
	"strconv"
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
// parallel, from GOMAXPROCS goroutines (b.RunParallel), calling every,
// when not nil, after every 256 events; it reports the events dropped
// per op: a run that dropped events (and so skipped encoding them) shows
// as one. It also reports cpu-ns/op, the CPU time the process used per
// event: unlike ns/op, it does not grow when other processes take the
// CPUs, and in Parallel it is the cost of one call, not the wall time
// divided among the goroutines.
func recordLoop(b *testing.B, r *Reporter, parallel bool, every func()) {
	keys := benchKeys()
	before := r.Stats()
	b.ReportAllocs()
	b.ResetTimer()
	cpu0, cpuOK := processCPU()
	if parallel {
		b.RunParallel(func(pb *testing.PB) {
			i := 0
			for pb.Next() {
				r.Record("shop", keys[i%len(keys)], "GET", 512)
				i++
				if i%256 == 0 && every != nil {
					every()
				}
			}
		})
	} else {
		for i := 1; b.Loop(); i++ {
			r.Record("shop", keys[i%len(keys)], "GET", 512)
			if i%256 == 0 && every != nil {
				every()
			}
		}
	}
	b.StopTimer()
	if cpu1, _ := processCPU(); cpuOK {
		b.ReportMetric(float64(cpu1-cpu0)/float64(b.N), "cpu-ns/op")
	}
	after := r.Stats()
	b.ReportMetric(float64(after.DroppedFull-before.DroppedFull)/float64(b.N), "dropped/op")
}

// BenchmarkRecord measures Record alone, in steady state: the recording
// goroutines stand in for an infinitely fast Kafka, emptying the buffers
// the stripes handed over every 256 events, so Record finds a free buffer
// whenever its own fills and never drops (dropped/op 0). Sequential
// records from one goroutine, Parallel from GOMAXPROCS goroutines at
// once, each with the default configuration.
func BenchmarkRecord(b *testing.B) {
	run := func(b *testing.B, parallel bool) {
		r := newReporter(ReporterConfig{Topic: "bench.events", Client: "bench-host-01"}.withDefaults())
		recycle := func() {
			for {
				select {
				case buf := <-r.ready:
					buf.reset()
					r.free <- buf
				default:
					return
				}
			}
		}
		recordLoop(b, r, parallel, recycle)
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
			ClientOpts: []kgo.Opt{kgo.SeedBrokers(seeds...)},
			Topic:      testenv.NewTopic(b, seeds, 4),
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
		recordLoop(b, r, parallel, nil)
	}
	b.Run("Sequential", func(b *testing.B) { run(b, false) })
	b.Run("Parallel", func(b *testing.B) { run(b, true) })
}
