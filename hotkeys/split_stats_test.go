package hotkeys

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"github.com/zeebo/xxh3"
)

// requireLatency checks what holds of any latency distribution with n
// calls, without bounding a latency: its buckets add up to n, and a call
// took some time, no quantile exceeding the largest.
func requireLatency(t *testing.T, l SplitLatency, n uint64, what string) {
	t.Helper()
	require.Equal(t, n, l.Count, "%s: count", what)
	require.Len(t, l.Buckets, splitBuckets, what)
	var sum uint64
	for i, b := range l.Buckets {
		sum += b.Count
		if i > 0 {
			require.Greater(t, b.UpperBound, l.Buckets[i-1].UpperBound, "%s: bucket bounds ascend", what)
		}
	}
	require.Equal(t, n, sum, "%s: the buckets add up to the count", what)
	if n == 0 {
		require.Zero(t, l.Total, what)
		require.Zero(t, l.Max, what)
		require.Zero(t, l.P50(), what)
		return
	}
	p50, p99 := l.P50(), l.P99()
	require.Positive(t, p50, "%s: p50", what)
	require.GreaterOrEqual(t, p99, p50, "%s: p99 >= p50", what)
	require.GreaterOrEqual(t, l.Max, p99, "%s: max >= p99", what)
	require.GreaterOrEqual(t, l.Total, l.Max, "%s: total >= max", what)
	require.Positive(t, l.Mean(), what)
}

func splitKeyStatsOf(st SplitStats, key string) (SplitKeyStats, bool) {
	for _, k := range st.Keys {
		if k.Key == key {
			return k, true
		}
	}
	return SplitKeyStats{}, false
}

// TestSplitStats: calls made concurrently on split and plain keys are
// counted exactly, per operation and per key, as split or passed through;
// each split call's latency is in its operation's distribution, and each
// split read's in its key's, which Prometheus exports under the same
// counts; a key's counters survive a change of factor and a fold that
// lowers it, and the key leaves Stats when a fold after it cooled forgets
// it. On one node and in a cluster.
func TestSplitStats(t *testing.T) {
	splitEnvs(t, func(t *testing.T, e *splitEnv) {
		ctx := splitCtx(t)
		counter, plain := e.prefix+"views", e.prefix+"plain"
		set, board := e.prefix+"members", e.prefix+"board"
		for _, k := range []string{counter, set, board} {
			e.reg.set(k, 8)
		}
		st := e.s.Stats()
		require.Empty(t, st.Keys, "nothing remembered before a call")
		requireLatency(t, st.FanOutReads, 0, "fan-out reads before any")

		before := time.Now()
		// Each goroutine runs one kind of call, so that they overlap.
		calls := []struct {
			n int
			f func(i int) error
		}{
			{100, func(i int) error { return e.s.Incr(ctx, splitTestApp, counter, 1) }},
			{37, func(i int) error { _, err := e.s.Get(ctx, splitTestApp, counter); return err }},
			{5, func(i int) error { _, err := e.s.Get(ctx, splitTestApp, plain); return err }},
			{3, func(i int) error { return e.s.Incr(ctx, splitTestApp, plain, 2) }},
			{11, func(i int) error { return e.s.SAdd(ctx, splitTestApp, set, fmt.Sprint("m", i)) }},
			{6, func(i int) error { _, err := e.s.SMembers(ctx, splitTestApp, set); return err }},
			{2, func(i int) error { return e.s.SRem(ctx, splitTestApp, set, fmt.Sprint("gone", i)) }},
			{9, func(i int) error {
				return e.s.ZAdd(ctx, splitTestApp, board, redis.Z{Score: float64(i), Member: fmt.Sprint("p", i)})
			}},
			{4, func(i int) error {
				_, err := e.s.ZRange(ctx, splitTestApp, redis.ZRangeArgs{Key: board, Start: 0, Stop: -1})
				return err
			}},
			{1, func(i int) error { return e.s.ZRem(ctx, splitTestApp, board, "nobody") }},
		}
		var wg sync.WaitGroup
		errs := make(chan error, len(calls))
		for _, c := range calls {
			wg.Go(func() {
				for i := range c.n {
					if err := c.f(i); err != nil {
						errs <- err
						return
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}

		st = e.s.Stats()
		ops := []struct {
			name          string
			got           SplitOpStats
			split, passed uint64
		}{
			{"incr", st.Incr, 100, 3},
			{"get", st.Get, 37, 5},
			{"sadd", st.SAdd, 11, 0},
			{"smembers", st.SMembers, 6, 0},
			{"srem", st.SRem, 2, 0},
			{"zadd", st.ZAdd, 9, 0},
			{"zrange", st.ZRange, 4, 0},
			{"zrem", st.ZRem, 1, 0},
		}
		for _, o := range ops {
			require.Equal(t, o.split, o.got.Split, "%s split", o.name)
			require.Equal(t, o.passed, o.got.Passed, "%s passed through", o.name)
			requireLatency(t, o.got.Latency, o.split, o.name)
		}
		requireLatency(t, st.FanOutReads, 37+6+4, "fan-out reads")
		require.Equal(t, max(st.Get.Latency.Max, st.SMembers.Latency.Max, st.ZRange.Latency.Max), st.FanOutReads.Max)
		require.Equal(t, st.Get.Latency.Total+st.SMembers.Latency.Total+st.ZRange.Latency.Total, st.FanOutReads.Total)
		require.Zero(t, st.Folds)

		require.Len(t, st.Keys, 3, "the three split keys, not the plain one")
		keys := []struct {
			key           string
			writes, reads uint64
		}{{counter, 100, 37}, {set, 11, 6}, {board, 9, 4}}
		for _, k := range keys {
			ks, ok := splitKeyStatsOf(st, k.key)
			require.True(t, ok, k.key)
			require.Equal(t, splitTestApp, ks.App)
			require.Equal(t, xxh3.HashString(k.key), ks.KeyHash, k.key)
			require.Equal(t, 8, ks.Shards, k.key)
			require.Equal(t, k.writes, ks.Writes, "%s writes", k.key)
			require.Equal(t, k.reads, ks.Reads, "%s reads", k.key)
			requireLatency(t, ks.ReadLatency, k.reads, k.key+" reads")
			require.False(t, ks.Since.Before(before), "%s remembered since its first call", k.key)
			require.False(t, ks.Since.After(time.Now()))
		}
		e.requireExported(t, st, []string{counter, plain, set, board})

		// A raised factor keeps the key's counters.
		first, _ := splitKeyStatsOf(st, counter)
		e.reg.set(counter, 16)
		require.NoError(t, e.s.Incr(ctx, splitTestApp, counter, 1))
		ks, ok := splitKeyStatsOf(e.s.Stats(), counter)
		require.True(t, ok)
		require.Equal(t, 16, ks.Shards, "the factor it reads with")
		require.Equal(t, uint64(101), ks.Writes)
		require.Equal(t, uint64(37), ks.Reads)
		require.Equal(t, first.Since, ks.Since)

		// A fold that lowers the factor of a key still hot keeps it, with
		// its counters.
		e.reg.set(board, 4)
		boardShards := e.shardsHeld(t, board)
		require.Positive(t, boardShards)
		require.NoError(t, e.s.Fold(ctx, splitTestApp, board, 8))
		st = e.s.Stats()
		require.Equal(t, uint64(1), st.Folds)
		require.Equal(t, uint64(boardShards), st.FoldedShards)
		ks, ok = splitKeyStatsOf(st, board)
		require.True(t, ok, "a key still split stays remembered")
		require.Equal(t, 4, ks.Shards)
		require.Equal(t, uint64(9), ks.Writes)
		require.Equal(t, uint64(4), ks.Reads)

		// A ZAdd of a key that cooled but is not folded yet writes to the
		// key: passed through; a read of it still touches the shards.
		e.reg.set(board, 0)
		require.NoError(t, e.s.ZAdd(ctx, splitTestApp, board, redis.Z{Score: 1, Member: "late"}))
		zs, err := e.s.ZRange(ctx, splitTestApp, redis.ZRangeArgs{Key: board, Start: 0, Stop: -1})
		require.NoError(t, err)
		require.Len(t, zs, 10)
		st = e.s.Stats()
		require.Equal(t, uint64(9), st.ZAdd.Split)
		require.Equal(t, uint64(1), st.ZAdd.Passed)
		require.Equal(t, uint64(5), st.ZRange.Split)
		ks, ok = splitKeyStatsOf(st, board)
		require.True(t, ok, "a cooled key stays remembered until a fold")
		require.Equal(t, uint64(5), ks.Reads)

		// The counter cools: the fold forgets it.
		counterShards := e.shardsHeld(t, counter)
		require.Positive(t, counterShards)
		e.reg.set(counter, 0)
		require.NoError(t, e.s.Fold(ctx, splitTestApp, counter, 16))
		st = e.s.Stats()
		_, ok = splitKeyStatsOf(st, counter)
		require.False(t, ok, "a key folded after it cooled leaves Stats")
		require.Len(t, st.Keys, 2)
		require.Equal(t, uint64(2), st.Folds)
		require.Equal(t, uint64(boardShards+counterShards), st.FoldedShards, "the shards that held the board, then the counter")
		require.Zero(t, st.FoldErrors)
		v, err := e.s.Get(ctx, splitTestApp, counter)
		require.NoError(t, err)
		require.Equal(t, int64(101), v)
		st = e.s.Stats()
		require.Equal(t, uint64(37), st.Get.Split, "a forgotten key's Get is passed through")
		require.Equal(t, uint64(6), st.Get.Passed)

		// A fold that fails is counted as such, and keeps the key.
		require.NoError(t, e.rdb.Set(ctx, set, "not a set", 0).Err())
		e.reg.set(set, 0)
		require.Error(t, e.s.Fold(ctx, splitTestApp, set, 8))
		st = e.s.Stats()
		require.Equal(t, uint64(1), st.FoldErrors)
		require.Equal(t, uint64(2), st.Folds)
		_, ok = splitKeyStatsOf(st, set)
		require.True(t, ok, "a key whose fold failed stays remembered")
		e.requireExported(t, st, []string{counter, plain, set, board})

		// Once the fold can run, Reconcile forgets both cooled keys.
		require.NoError(t, e.rdb.Del(ctx, set).Err())
		require.NoError(t, e.s.Reconcile(ctx))
		st = e.s.Stats()
		require.Empty(t, st.Keys)
		require.Equal(t, uint64(4), st.Folds)
		require.Equal(t, uint64(1), st.FoldErrors)
	})
}

// shardsHeld counts the shards of key (among its first 64) that exist.
func (e *splitEnv) shardsHeld(t *testing.T, key string) int {
	t.Helper()
	n := 0
	for _, k := range e.physical(t, splitCtx(t), key) {
		if k != key {
			n++
		}
	}
	return n
}

// requireExported checks the Splitter's Prometheus metrics against st:
// the operation counts and the fan-out histograms agree with it, and no
// label value names a key.
func (e *splitEnv) requireExported(t *testing.T, st SplitStats, keys []string) {
	t.Helper()
	fams, err := e.reg2.Gather()
	require.NoError(t, err)
	byName := map[string]*dto.MetricFamily{}
	for _, f := range fams {
		byName[f.GetName()] = f
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				for _, k := range keys {
					require.NotContains(t, l.GetValue(), k, "label %s of %s", l.GetName(), f.GetName())
				}
			}
		}
	}
	want := map[string]SplitOpStats{
		"incr": st.Incr, "get": st.Get, "sadd": st.SAdd, "srem": st.SRem,
		"smembers": st.SMembers, "zadd": st.ZAdd, "zrem": st.ZRem, "zrange": st.ZRange,
	}
	label := func(m *dto.Metric, name string) string {
		for _, l := range m.GetLabel() {
			if l.GetName() == name {
				return l.GetValue()
			}
		}
		return ""
	}
	ops := byName["keyheat_hotkeys_split_ops_total"]
	require.NotNil(t, ops)
	require.Len(t, ops.GetMetric(), 2*len(want))
	for _, m := range ops.GetMetric() {
		w := want[label(m, "op")]
		n := w.Passed
		if label(m, "split") == "true" {
			n = w.Split
		}
		require.Equal(t, float64(n), m.GetCounter().GetValue(), "ops_total{op=%q,split=%q}", label(m, "op"), label(m, "split"))
	}
	h := byName["keyheat_hotkeys_split_fanout_seconds"]
	require.NotNil(t, h)
	require.Equal(t, dto.MetricType_HISTOGRAM, h.GetType())
	require.Len(t, h.GetMetric(), len(want))
	for _, m := range h.GetMetric() {
		op := label(m, "op")
		w := want[op]
		hist := m.GetHistogram()
		require.Equal(t, w.Split, hist.GetSampleCount(), "fanout_seconds{op=%q} count", op)
		require.InDelta(t, w.Latency.Total.Seconds(), hist.GetSampleSum(), 1e-9, "fanout_seconds{op=%q} sum", op)
		require.Len(t, hist.GetBucket(), len(splitLatencyBounds))
		var cum uint64
		for i, b := range hist.GetBucket() {
			cum += w.Latency.Buckets[i].Count
			require.Equal(t, splitLatencyBounds[i].Seconds(), b.GetUpperBound())
			require.Equal(t, cum, b.GetCumulativeCount(), "fanout_seconds{op=%q} bucket le=%v", op, b.GetUpperBound())
		}
	}
}

// TestSplitLatency: the distribution's counts, sum, maximum and quantiles
// from known latencies, including one beyond every bucket and one below
// the clock's resolution; and joining two.
func TestSplitLatency(t *testing.T) {
	var c splitLatency
	for range 97 {
		c.observe(30 * time.Microsecond) // (25µs, 50µs]
	}
	c.observe(0)                    // counts as 1 ns: the first bucket
	c.observe(3 * time.Millisecond) // (2.5ms, 5ms]
	c.observe(20 * time.Second)     // beyond 10 s
	l := c.snapshot()
	require.Equal(t, uint64(100), l.Count)
	require.Equal(t, uint64(100), c.count())
	require.Equal(t, 97*30*time.Microsecond+time.Nanosecond+3*time.Millisecond+20*time.Second, l.Total)
	require.Equal(t, 20*time.Second, l.Max)
	require.Equal(t, uint64(1), l.Buckets[0].Count)
	require.Equal(t, 10*time.Microsecond, l.Buckets[0].UpperBound)
	require.Equal(t, uint64(97), l.Buckets[2].Count)
	require.Equal(t, uint64(1), l.Buckets[splitBuckets-1].Count)
	require.Equal(t, time.Duration(1<<63-1), l.Buckets[splitBuckets-1].UpperBound)
	require.Equal(t, 10*time.Microsecond, l.Quantile(0.01), "the 1st of 100: the first bucket")
	require.Equal(t, 50*time.Microsecond, l.P50())
	require.Equal(t, 50*time.Microsecond, l.Quantile(0.98))
	require.Equal(t, 5*time.Millisecond, l.P99())
	require.Equal(t, 20*time.Second, l.Quantile(1), "beyond every bucket: the maximum")
	require.Equal(t, l.Total/100, l.Mean())

	var one splitLatency
	one.observe(7 * time.Microsecond)
	o := one.snapshot()
	require.Equal(t, 7*time.Microsecond, o.P50(), "no more than the maximum")
	require.Equal(t, 7*time.Microsecond, o.P99())

	var sum SplitLatency
	sum.add(l)
	sum.add(o)
	require.Equal(t, uint64(101), sum.Count)
	require.Equal(t, uint64(2), sum.Buckets[0].Count)
	require.Equal(t, uint64(1), l.Buckets[0].Count, "joining copies the buckets")
	require.Equal(t, l.Total+o.Total, sum.Total)
	require.Equal(t, 20*time.Second, sum.Max)

	require.Zero(t, SplitLatency{}.P99())
	require.Zero(t, SplitLatency{}.Mean())
}

// TestSplitCountersNoAlloc: counting a call allocates nothing.
func TestSplitCountersNoAlloc(t *testing.T) {
	var c splitCounters
	kc := &splitKeyCounters{}
	allocs := testing.AllocsPerRun(1000, func() {
		c.passed[splitOpGet].Add(1)
		t0 := time.Now()
		d := time.Since(t0)
		c.split[splitOpGet].observe(d)
		kc.reads.observe(d)
	})
	require.Zero(t, allocs)
}

// BenchmarkSplitBookkeeping measures what an Incr or Get costs besides its
// Redis command, without Redis: routing (the registry lookup and the
// remembered keys' map) and counting. "before" counts a call as the
// Splitter did before it kept Stats, with a Prometheus counter's Inc;
// "after" is what it does now: one atomic add for a pass-through call, and
// for a split read a time.Now, a time.Since and two latency observations
// (the operation's and the key's). Both run in one binary, so a busy
// machine skews them alike; the parallel runs have every P calling at
// once.
func BenchmarkSplitBookkeeping(b *testing.B) {
	reg := &splitReg{}
	s, err := NewSplitter(redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}), SplitConfig{Lookup: reg.lookup})
	if err != nil {
		b.Fatal(err)
	}
	// The counters the Splitter had: one Prometheus counter per operation
	// and outcome, from one CounterVec.
	vec := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "before_total", Help: "before"}, []string{"op", "split"})
	var before [splitOps][2]prometheus.Counter
	for op := range splitOps {
		before[op][0] = vec.WithLabelValues(splitOpNames[op], "false")
		before[op][1] = vec.WithLabelValues(splitOpNames[op], "true")
	}
	count := func(op int, split bool) {
		i := 0
		if split {
			i = 1
		}
		before[op][i].Inc()
	}
	const plain, hot = "plain", "hot"
	reg.set(hot, 8)
	_, _ = s.route(splitTestApp, hot)
	calls := []struct {
		name string
		f    func()
	}{
		{"incr/plain/before", func() { n, _ := s.route(splitTestApp, plain); count(splitOpIncr, n > 0) }},
		{"incr/plain/after", func() {
			if n, _ := s.route(splitTestApp, plain); n == 0 {
				s.stats.passed[splitOpIncr].Add(1)
			}
		}},
		{"get/plain/before", func() { _, st := s.route(splitTestApp, plain); count(splitOpGet, st != nil) }},
		{"get/plain/after", func() {
			if _, st := s.route(splitTestApp, plain); st == nil {
				s.stats.passed[splitOpGet].Add(1)
			}
		}},
		{"get/split=8/before", func() { _, st := s.route(splitTestApp, hot); count(splitOpGet, st != nil) }},
		{"get/split=8/after", func() {
			if _, st := s.route(splitTestApp, hot); st != nil {
				t0 := time.Now()
				s.readDone(splitOpGet, st, t0)
			}
		}},
	}
	for _, c := range calls {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				c.f()
			}
		})
		b.Run(c.name+"/parallel", func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					c.f()
				}
			})
		})
	}
}
