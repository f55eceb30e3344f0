package detect_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/keyheat/keyheat/detect"
	"github.com/keyheat/keyheat/internal/testenv"
	"github.com/keyheat/keyheat/pipeline"
	"github.com/keyheat/keyheat/schemas"
)

// A simulated cluster: several detect instances in one group (each a
// Service of its own, with its own clients, as separate processes would
// be) reading one topic of many partitions on kfake. What it checks is
// that the cluster's reports are whole however the partitions are spread:
// every window's cluster report heard from every partition and counts
// its events exactly.

// clusterInput is n keyed events (binary codec, ingest's default) for a
// topic of parts partitions, rate per second of event time from an hour
// ago, then one trailer event per partition a minute after the last, so
// that every window of the n events closes. It returns the records (Topic unset) and the
// number of report windows the n events span.
func clusterInput(parts int32, n, rate int) ([]*kgo.Record, int) {
	base := time.Now().Add(-time.Hour).Truncate(time.Second).UnixMilli()
	recs := make([]*kgo.Record, 0, n+int(parts))
	last := base
	for i := range n {
		key := "key:" + strconv.Itoa((i*i)%100_000)
		e := schemas.AccessEvent{TimeMs: base + int64(i)*1000/int64(rate), Key: key, App: "app", Op: "GET", Bytes: 100}
		last = e.TimeMs
		recs = append(recs, &kgo.Record{Key: []byte(key), Value: schemas.AppendBinary(nil, &e)})
	}
	// The trailer names its partition; its keys are its partition's own,
	// so the topic stays keyed.
	for p := range parts {
		key := "trailer:" + strconv.Itoa(int(p))
		e := schemas.AccessEvent{TimeMs: last + time.Minute.Milliseconds(), Key: key, App: "app", Op: "GET"}
		recs = append(recs, &kgo.Record{Partition: p, Key: []byte(key), Value: schemas.AppendBinary(nil, &e)})
	}
	return recs, int((last-base)/1000) + 1
}

// produceInput writes clusterInput's records to topic: the events by
// their keys' hash, the trailer to the partition each names, after them.
func produceInput(tb testing.TB, seeds []string, topic string, recs []*kgo.Record, parts int32) {
	tb.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ProducerLinger(5*time.Millisecond))
	require.NoError(tb, err)
	defer cl.Close()
	n := len(recs) - int(parts)
	for i := 0; i < n; i += 10_000 {
		batch := recs[i:min(i+10_000, n)]
		for _, r := range batch {
			r.Topic = topic
		}
		require.NoError(tb, cl.ProduceSync(context.Background(), batch...).FirstErr())
	}
	mcl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	require.NoError(tb, err)
	defer mcl.Close()
	for _, r := range recs[n:] {
		r.Topic = topic
	}
	require.NoError(tb, mcl.ProduceSync(context.Background(), recs[n:]...).FirstErr())
}

// clusterRun is one run of instances over topic, until the cluster
// reports of the n events' windows are all on the reports topic.
type clusterRun struct {
	reports map[int64]schemas.WindowReport // cluster scope, by window start
	elapsed time.Duration                  // from the first instance's start to the last report read
}

// runCluster makes a topic of parts partitions, starts instances
// services in one group over it, waits until the group gave each of them
// partitions and all parts are assigned, writes recs (clusterInput's),
// reads the reports topic until the cluster reports sum the n events,
// stops the services as SIGTERM would, and returns what it read.
func runCluster(tb testing.TB, seeds []string, recs []*kgo.Record, parts int32, instances int) clusterRun {
	tb.Helper()
	n := len(recs) - int(parts)
	topic := testenv.NewTopic(tb, seeds, parts)
	e := &env{seeds: seeds, parts: parts, events: topic, dlq: testenv.UniqueName(tb, "dlq"), hotkeys: testenv.UniqueName(tb, "hot"),
		windows: testenv.UniqueName(tb, "win"), reports: testenv.UniqueName(tb, "rep"), progress: testenv.UniqueName(tb, "prog"),
		group: testenv.UniqueName(tb, "g"), mergeGroup: testenv.UniqueName(tb, "m")}
	tb.Cleanup(func() {
		deleteKafka(seeds, []string{e.dlq, e.hotkeys, e.windows, e.reports, e.progress}, []string{e.group, e.mergeGroup})
	})
	cfg := e.config(nil)
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg.Pipeline = pipeline.DefaultOptions()
	cfg.Pipeline.IdleTimeout = time.Hour // windows close by event time only
	cfg.Merge.Lateness = cfg.Pipeline.Lateness
	cfg.Partitions = 1 // the outputs; the events topic exists

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	start := time.Now()
	done := make(chan error, instances)
	svcs := make([]*detect.Service, instances)
	for i := range instances {
		c := cfg
		c.Options.InstanceID = fmt.Sprintf("i%d", i)
		svc, err := detect.New(c)
		require.NoError(tb, err)
		svcs[i] = svc
		go func() { done <- svc.Run(ctx) }()
	}
	waitSpread(tb, svcs, parts)
	produceInput(tb, seeds, topic, recs, parts)

	rcl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumeTopics(e.reports),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	require.NoError(tb, err)
	defer rcl.Close()
	run := clusterRun{reports: map[int64]schemas.WindowReport{}}
	var events uint64
	// A hang guard, not a deadline the test depends on: a starved run
	// takes minutes, a broken one forever.
	guard, stopGuard := context.WithTimeout(ctx, 30*time.Minute)
	defer stopGuard()
	for events < uint64(n) {
		fs := rcl.PollFetches(guard)
		require.NoError(tb, guard.Err(), "waiting for the cluster reports of %d events: %d read in %d reports", n, events, len(run.reports))
		fs.EachRecord(func(r *kgo.Record) {
			wr, err := schemas.DecodeWindowReport(r.Value)
			require.NoError(tb, err)
			if wr.Scope != schemas.ScopeCluster {
				return
			}
			// A report written again (the merger's at-least-once after a
			// failover) is the same report: reports are deterministic.
			if was, ok := run.reports[wr.StartMs]; ok {
				require.Equal(tb, was, *wr, "window %d reported twice, differently", wr.StartMs)
				return
			}
			run.reports[wr.StartMs] = *wr
			events += wr.Events
		})
	}
	run.elapsed = time.Since(start)
	cancel()
	for range instances {
		require.NoError(tb, <-done)
	}
	return run
}

// waitSpread waits until every service holds partitions and together
// they hold all parts: the group has taken in every instance.
func waitSpread(tb testing.TB, svcs []*detect.Service, parts int32) {
	tb.Helper()
	testenv.EventuallyExplained(tb, fmt.Sprintf("the group to spread %d partitions over %d instances", parts, len(svcs)), 10*time.Minute, func() (bool, string) {
		total, idle := 0, 0
		for _, s := range svcs {
			a := s.Assigned()
			total += a
			if a == 0 {
				idle++
			}
		}
		return idle == 0 && total == int(parts), fmt.Sprintf("%d assigned, %d instances with none", total, idle)
	})
}

// checkComplete fails unless reports are windows cluster reports, each
// whole (no partition missing) and keyed, summing n events.
func checkComplete(tb testing.TB, reports map[int64]schemas.WindowReport, windows, n int) {
	tb.Helper()
	var sum uint64
	for _, r := range reports {
		require.False(tb, r.Partial, "window %d: partial, missing %v", r.StartMs, r.Missing)
		require.True(tb, r.Keyed, "window %d: not keyed", r.StartMs)
		sum += r.Events
	}
	require.Equal(tb, uint64(n), sum, "events in the cluster reports")
	require.Len(tb, reports, windows, "cluster reports, one per window")
}

// TestClusterOfTen: ten instances share 100 partitions; every window's
// cluster report heard from all of them and sums their events exactly,
// however the group spread the partitions and however often it
// rebalanced as the instances joined.
func TestClusterOfTen(t *testing.T) {
	seeds := testenv.KFake(t)
	const parts, n, rate = 100, 20_000, 2_000
	recs, windows := clusterInput(parts, n, rate)
	run := runCluster(t, seeds, recs, parts, 10)
	checkComplete(t, run.reports, windows, n)
	t.Logf("10 instances, %d partitions, %d events in %d windows: %s", parts, n, windows, run.elapsed)
}

// BenchmarkCluster runs 1, 2, 5 and 10 instances, each a Service of its
// own, in one group over the same 100-partition topic on kfake (1M keyed
// events, 20k per second of event time: 50 windows), until every
// window's cluster report is read, and checks the reports whole. All
// share this machine's cores, so events/s cannot grow with instances
// here; what adding instances must not do is cost more CPU per event
// (the progress board, alignment, rebalances and the merger's
// bookkeeping grow with members): cpu-ns/event (the process's, kfake's
// included) is the figure to compare across instance counts.
func BenchmarkCluster(b *testing.B) {
	seeds := benchSeeds(b)
	const parts, n, rate = 100, 1_000_000, 20_000
	recs, windows := clusterInput(parts, n, rate)
	for _, instances := range []int{1, 2, 5, 10} {
		b.Run(fmt.Sprintf("instances=%d", instances), func(b *testing.B) {
			cpu0 := cpuTime(b)
			for range b.N {
				run := runCluster(b, seeds, recs, parts, instances)
				checkComplete(b, run.reports, windows, n)
				b.ReportMetric(float64(n)/run.elapsed.Seconds(), "events/s")
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/event")
			b.ReportMetric(float64((cpuTime(b)-cpu0).Nanoseconds())/float64(b.N*n), "cpu-ns/event")
		})
	}
}
