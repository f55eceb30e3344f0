package detect_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/keyheat/keyheat/detect"
	"github.com/keyheat/keyheat/internal/testenv"
	"github.com/keyheat/keyheat/pipeline"
	"github.com/keyheat/keyheat/schemas"
)

// BenchmarkEndToEnd measures a batch run (ExitAtEnd) of the service over
// events already on a topic (4 partitions, keyed, 100k distinct keys)
// against the floor: franz-go consuming the same records in a group and
// doing nothing with them. Both run against an in-process kfake broker
// sharing the CPU; the ratio (of ns/event, and of cpu-ns/event: the
// process's CPU time, kfake's included) is the cost of decoding, detection,
// publishing, merging and committing. ns/event includes the fixed cost of
// a run (joining the groups, the merger's last windows). The events come
// at rate events per second of event time: every report window costs a
// summary per partition and a merge, whatever its events, so a low rate
// (a backfill of a quiet topic) weighs windows, a high one events. The
// events are JSON; the runs named codec=binary read the same events in
// the binary codec.
//
// With KEYHEAT_TEST_KAFKA set it runs against the real broker too, whose
// CPU time cpu-ns/event leaves out.
func BenchmarkEndToEnd(b *testing.B) {
	type broker struct {
		name  string
		seeds []string
	}
	bs := []broker{{"kfake", benchSeeds(b)}}
	if os.Getenv(testenv.EnvKafka) != "" {
		bs = append(bs, broker{"kafka", testenv.KafkaSeeds(b)})
	}
	for _, br := range bs {
		b.Run(br.name, func(b *testing.B) { benchEndToEnd(b, br.seeds) })
	}
}

func benchEndToEnd(b *testing.B, seeds []string) {
	const n = 1_000_000
	for _, in := range []struct {
		rate  int
		codec schemas.Codec
	}{{1_000, schemas.JSON}, {100_000, schemas.JSON}, {100_000, schemas.Binary}} {
		rate := in.rate
		topic := fillTopic(b, seeds, n, rate, in.codec)
		name := fmt.Sprintf("events=%d/rate=%d", n, rate)
		if in.codec != schemas.JSON {
			name += "/codec=" + in.codec.Name()
		}
		b.Run("franz-go/"+name, func(b *testing.B) {
			cpu0 := cpuTime(b)
			for range b.N {
				group := fmt.Sprintf("raw-%d", benchRun.Add(1))
				start := time.Now()
				cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumeTopics(topic), kgo.ConsumerGroup(group),
					kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
				require.NoError(b, err)
				got := 0
				for got < n {
					fs := cl.PollRecords(context.Background(), 10_000)
					fs.EachRecord(func(*kgo.Record) { got++ })
				}
				require.NoError(b, cl.CommitUncommittedOffsets(context.Background()))
				cl.Close()
				b.ReportMetric(float64(n)/time.Since(start).Seconds(), "events/s")
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/event")
			b.ReportMetric(float64((cpuTime(b)-cpu0).Nanoseconds())/float64(b.N*n), "cpu-ns/event")
		})
		b.Run("detect/"+name, func(b *testing.B) {
			cpu0 := cpuTime(b)
			for range b.N {
				run := benchRun.Add(1) // every run reads from the start: new groups, new windows topic
				e := &env{seeds: seeds, parts: 4, events: topic,
					dlq: "b-dlq", hotkeys: "b-hot", windows: fmt.Sprintf("b-win-%d", run), reports: "b-rep",
					group: fmt.Sprintf("det-%d", run), mergeGroup: fmt.Sprintf("mrg-%d", run)}
				cfg := e.config(nil)
				cfg.ExitAtEnd = true
				cfg.Pipeline = pipeline.DefaultOptions()
				cfg.Pipeline.IdleTimeout = time.Hour
				cfg.Merge.Lateness = cfg.Pipeline.Lateness
				start := time.Now()
				svc, err := detect.New(cfg)
				require.NoError(b, err)
				require.NoError(b, svc.Run(context.Background()))
				b.ReportMetric(float64(n)/time.Since(start).Seconds(), "events/s")
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/event")
			b.ReportMetric(float64((cpuTime(b)-cpu0).Nanoseconds())/float64(b.N*n), "cpu-ns/event")
		})
	}
}

// cpuTime is the CPU time the process used so far (user and system, all
// threads): with kfake the broker's too. On a machine whose cores other
// work shares, it is the figure that does not depend on how much of them
// the run got.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	require.NoError(b, syscall.Getrusage(syscall.RUSAGE_SELF, &ru))
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// benchRun numbers benchmark runs, for names no earlier run used.
var benchRun atomic.Int64

// benchSeeds is an in-process broker for benchmarks.
func benchSeeds(b *testing.B) []string {
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	require.NoError(b, err)
	b.Cleanup(c.Close)
	return c.ListenAddrs()
}

// fillTopic writes n events in codec, rate per second of event time from
// an hour ago, keyed, to a new 4-partition topic.
func fillTopic(b *testing.B, seeds []string, n, rate int, codec schemas.Codec) string {
	topic := testenv.NewTopic(b, seeds, 4)
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ProducerLinger(5*time.Millisecond))
	require.NoError(b, err)
	defer cl.Close()
	base := time.Now().Add(-time.Hour).UnixMilli()
	recs := make([]*kgo.Record, 0, 10_000)
	for i := range n {
		key := "key:" + strconv.Itoa((i*i)%100_000)
		e := schemas.AccessEvent{TimeMs: base + int64(i)*1000/int64(rate), Key: key, App: "app", Op: "GET", Bytes: 100}
		recs = append(recs, &kgo.Record{Topic: topic, Key: []byte(key), Value: codec.Append(nil, &e)})
		if len(recs) == cap(recs) || i == n-1 {
			require.NoError(b, cl.ProduceSync(context.Background(), recs...).FirstErr())
			recs = recs[:0]
		}
	}
	return topic
}
