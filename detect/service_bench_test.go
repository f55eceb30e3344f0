package detect_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
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
// (a backfill of a quiet topic, rate=1000: 1,000 one-second windows) weighs
// windows, a high one (rate=100000: 10 windows) events. The events are
// in the binary codec (ingest's default) for codec=binary, JSON for
// codec=json.
//
// Names are broker/input/consumer, the input filled once for both
// consumers, which run one after the other: a -bench pattern that leaves
// an input out skips filling it.
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
	}{{1_000, schemas.Binary}, {100_000, schemas.Binary}, {1_000, schemas.JSON}, {100_000, schemas.JSON}} {
		b.Run(fmt.Sprintf("rate=%d/codec=%s", in.rate, in.codec.Name()), func(b *testing.B) {
			benchEndToEndInput(b, seeds, fillTopic(b, seeds, n, in.rate, in.codec), n)
		})
	}
}

// benchEndToEndInput runs the floor and detect over topic's n events.
func benchEndToEndInput(b *testing.B, seeds []string, topic string, n int) {
	b.Run("franz-go", func(b *testing.B) {
		cpu0 := cpuTime(b)
		for range b.N {
			group := testenv.UniqueName(b, "raw")
			b.Cleanup(func() { deleteKafka(seeds, nil, []string{group}) })
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
	b.Run("detect", func(b *testing.B) {
		cpu0 := cpuTime(b)
		for range b.N {
			e := benchEnv(b, seeds, topic) // every run reads from the start: new groups, new outputs
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

// cpuTime is the CPU time the process used so far (user and system, all
// threads): with kfake the broker's too. On a machine whose cores other
// work shares, it is the figure that does not depend on how much of them
// the run got.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	require.NoError(b, syscall.Getrusage(syscall.RUSAGE_SELF, &ru))
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// benchEnv is an env reading topic with outputs and groups of names no
// earlier run used (a real broker keeps what a run leaves), its topics
// and groups deleted when the benchmark ends.
func benchEnv(b *testing.B, seeds []string, topic string) *env {
	e := &env{seeds: seeds, parts: 4, events: topic, dlq: testenv.UniqueName(b, "dlq"), hotkeys: testenv.UniqueName(b, "hot"),
		windows: testenv.UniqueName(b, "win"), reports: testenv.UniqueName(b, "rep"), progress: testenv.UniqueName(b, "prog"),
		group: testenv.UniqueName(b, "g"), mergeGroup: testenv.UniqueName(b, "m")}
	b.Cleanup(func() {
		deleteKafka(seeds, []string{e.dlq, e.hotkeys, e.windows, e.reports, e.progress}, []string{e.group, e.mergeGroup})
	})
	return e
}

// deleteKafka deletes topics and groups, as far as it can.
func deleteKafka(seeds, topics, groups []string) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		return
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	adm := kadm.NewClient(cl)
	_, _ = adm.DeleteTopics(ctx, topics...)
	_, _ = adm.DeleteGroups(ctx, groups...)
}

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
