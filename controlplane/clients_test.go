package controlplane_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/keyheat/keyheat/controlplane"
	"github.com/keyheat/keyheat/hotkeys"
	"github.com/keyheat/keyheat/internal/testenv"
	"github.com/keyheat/keyheat/schemas"
)

// testClock is a clock a test sets by hand; until it is set it reads the
// wall clock.
type testClock struct{ ms atomic.Int64 }

func (c *testClock) now() time.Time {
	if ms := c.ms.Load(); ms != 0 {
		return time.UnixMilli(ms)
	}
	return time.Now()
}

func (c *testClock) set(t time.Time) { c.ms.Store(t.UnixMilli()) }
func (c *testClock) real()           { c.ms.Store(0) }

// statsTopic makes a client-stats topic that takes records up to 4 MiB, so
// that records over schemas.MaxClientStatsBytes can be written to it.
func statsTopic(t *testing.T, seeds []string, partitions int32) string {
	t.Helper()
	return testenv.NewTopicWithConfigs(t, seeds, partitions, map[string]string{"cleanup.policy": "compact", "max.message.bytes": "4194304"})
}

func newTestClients(t *testing.T, seeds []string, topic string, clk *testClock, edit func(*controlplane.ClientsConfig)) *controlplane.Clients {
	t.Helper()
	cfg := controlplane.ClientsConfig{ClientOpts: []kgo.Opt{kgo.SeedBrokers(seeds...)}, Topic: topic}
	if edit != nil {
		edit(&cfg)
	}
	c, err := controlplane.NewClientsWithClock(cfg, clk.now)
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return c
}

func statsProducer(t *testing.T, seeds []string, topic string) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(0),
		kgo.ProducerBatchMaxBytes(4<<20))
	require.NoError(t, err)
	t.Cleanup(cl.Close)
	return cl
}

func produceSync(t *testing.T, cl *kgo.Client, recs ...*kgo.Record) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	require.NoError(t, cl.ProduceSync(ctx, recs...).FirstErr())
}

func statsRecord(t *testing.T, s *schemas.ClientStats) *kgo.Record {
	t.Helper()
	v, err := s.AppendJSON(nil)
	require.NoError(t, err)
	return &kgo.Record{Key: []byte(s.Client), Value: v}
}

func clientStats(client string, time time.Time, keys ...schemas.ClientStatsKey) *schemas.ClientStats {
	return &schemas.ClientStats{Version: schemas.ClientStatsVersion, Client: client, TimeMs: time.UnixMilli(),
		IntervalMs: 5000, StartedMs: time.UnixMilli(), Keys: keys,
		Cache: &schemas.ClientCacheTotals{Hits: 10, Misses: 2, Loads: 1, Coalesced: 1}}
}

// waitClients waits until c has read n records.
func waitClients(t *testing.T, c *controlplane.Clients, n uint64) {
	t.Helper()
	testenv.EventuallyExplained(t, fmt.Sprintf("%d records read", n), 0, func() (bool, string) {
		got := c.Stats().Records
		return got >= n, fmt.Sprintf("read %d records of %d", got, n)
	})
}

func TestClientsConfigValidate(t *testing.T) {
	ok := controlplane.ClientsConfig{ClientOpts: []kgo.Opt{kgo.SeedBrokers("x:9092")}}
	require.NoError(t, ok.Validate())
	for _, tc := range []struct {
		name string
		edit func(*controlplane.ClientsConfig)
		want string
	}{
		{"no client opts", func(c *controlplane.ClientsConfig) { c.ClientOpts = nil }, "ClientOpts is empty"},
		{"negative staleness", func(c *controlplane.ClientsConfig) { c.Staleness = -time.Second }, "Staleness is -1s"},
		{"negative max clients", func(c *controlplane.ClientsConfig) { c.MaxClients = -1 }, "MaxClients is -1"},
		{"negative max bytes", func(c *controlplane.ClientsConfig) { c.MaxBytes = -1 }, "MaxBytes is -1"},
		{"consumer group", func(c *controlplane.ClientsConfig) {
			c.ClientOpts = append(c.ClientOpts, kgo.ConsumerGroup("g"), kgo.ConsumeTopics("x"))
		}, "remove the group"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := ok
			tc.edit(&cfg)
			_, err := controlplane.NewClients(cfg)
			require.ErrorContains(t, err, tc.want)
		})
	}
}

// statsApp is one application process: a cache whose loads read the real
// Redis, a splitter on the same Redis, and a publisher of their Stats.
type statsApp struct {
	cache *hotkeys.Cache
	split *hotkeys.Splitter
	pub   *hotkeys.StatsPublisher
}

func newStatsApp(t *testing.T, seeds []string, topic, client string, rdb *redis.Client, reg *hotkeys.StaticRegistry) *statsApp {
	t.Helper()
	a := &statsApp{}
	var err error
	// A local TTL of a millisecond: the hot key is loaded again and again,
	// by Gets that share each load.
	a.cache, err = hotkeys.NewCache(hotkeys.CacheConfig{Registry: reg, LocalTTL: time.Millisecond, LocalOnly: true})
	require.NoError(t, err)
	t.Cleanup(a.cache.Close)
	a.split, err = hotkeys.NewSplitter(rdb, hotkeys.SplitConfig{Lookup: reg.Get})
	require.NoError(t, err)
	a.pub, err = hotkeys.NewStatsPublisher(hotkeys.StatsPublisherConfig{
		ClientOpts: []kgo.Opt{kgo.SeedBrokers(seeds...)}, Topic: topic, Client: client, App: "shop",
		Interval: 10 * time.Millisecond, Cache: a.cache, Splitter: a.split,
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = a.pub.Close(context.Background()) })
	return a
}

// serve runs the application's traffic: goroutines reading the hot key
// through the cache (its loads reading Redis) and writing and reading the
// split key, n rounds each.
func (a *statsApp) serve(t *testing.T, rdb *redis.Client, hot, split string, n int) {
	t.Helper()
	ctx := t.Context()
	load := func(ctx context.Context) ([]byte, error) { return rdb.Get(ctx, hot).Bytes() }
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 4 {
		wg.Go(func() {
			for range n {
				if v, err := a.cache.Get(ctx, "shop", hot, load); err != nil || string(v) != "the hot value" {
					errs <- fmt.Errorf("get %q: %q, %v", hot, v, err)
					return
				}
			}
		})
	}
	wg.Go(func() {
		for i := range n / 10 {
			if err := a.split.Incr(ctx, "shop", split, 1); err != nil {
				errs <- err
				return
			}
			if i%5 == 0 {
				if _, err := a.split.Get(ctx, "shop", split); err != nil {
					errs <- err
					return
				}
			}
		}
	})
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
}

func keyStats(cs hotkeys.CacheStats, key string) hotkeys.KeyStats {
	for _, k := range cs.Keys {
		if k.Key == key {
			return k
		}
	}
	return hotkeys.KeyStats{}
}

func splitKeyStats(ss hotkeys.SplitStats, key string) hotkeys.SplitKeyStats {
	for _, k := range ss.Keys {
		if k.Key == key {
			return k
		}
	}
	return hotkeys.SplitKeyStats{}
}

// TestClientsRoundTrip: two application processes serve a hot key from
// their caches over the real Redis and split another; what Clients sums
// from their published records is what their caches and splitters count,
// and a client that stops publishing drops out while the other stays.
func TestClientsRoundTrip(t *testing.T) {
	testenv.EachBroker(t, func(t *testing.T, seeds []string) {
		topic := statsTopic(t, seeds, 3)
		rdb, prefix := testenv.RedisClient(t)
		hot, split := prefix+"product:42", prefix+"views:product:42"
		require.NoError(t, rdb.Set(t.Context(), hot, "the hot value", 0).Err())
		reg := &hotkeys.StaticRegistry{}
		reg.Set(hotkeys.Entry{App: "shop", Key: hot, Mitigation: hotkeys.MitigationLocalCache})
		reg.Set(hotkeys.Entry{App: "shop", Key: split, Mitigation: hotkeys.MitigationSplit, SplitFactor: 4})

		// Until the clock is released, every record counts as read
		// at t0 and so as fresh, however slow the machine.
		clk := &testClock{}
		clk.set(time.Now())
		promReg := prometheus.NewRegistry()
		clients := newTestClients(t, seeds, topic, clk, func(c *controlplane.ClientsConfig) {
			c.Staleness = 2 * time.Second
			c.Registerer = promReg
		})

		a := newStatsApp(t, seeds, topic, "web-a", rdb, reg)
		b := newStatsApp(t, seeds, topic, "web-b", rdb, reg)
		var wg sync.WaitGroup
		wg.Go(func() { a.serve(t, rdb, hot, split, 400) })
		wg.Go(func() { b.serve(t, rdb, hot, split, 300) })
		wg.Wait()

		ctx, cancel := context.WithTimeout(t.Context(), hangGuard)
		defer cancel()
		require.NoError(t, a.pub.Close(ctx))
		require.NoError(t, b.pub.Close(ctx))
		pa, pb := a.pub.Stats(), b.pub.Stats()
		require.Zero(t, pa.Failed+pb.Failed+pa.EncodeErrors+pb.EncodeErrors)
		waitClients(t, clients, pa.Published+pb.Published)
		require.NoError(t, clients.WaitReady(ctx))

		csA, csB := a.cache.Stats(), b.cache.Stats()
		ssA, ssB := a.split.Stats(), b.split.Stats()
		kA, kB := keyStats(csA, hot), keyStats(csB, hot)
		require.NotZero(t, kA.Hits, "the hot key was served from the cache")
		require.NotZero(t, kA.Loads, "and loaded from Redis")
		got := clients.Key("shop", hot)
		require.Equal(t, 2, got.Clients)
		require.Equal(t, kA.Hits+kB.Hits, got.Hits)
		require.Equal(t, kA.Misses+kB.Misses, got.Misses)
		require.Equal(t, kA.Loads+kB.Loads, got.Loads)
		require.Equal(t, kA.Coalesced+kB.Coalesced, got.Coalesced)
		require.InDelta(t, float64(got.Hits)/float64(got.Hits+got.Misses), got.HitRatio, 1e-12)
		require.InDelta(t, float64(got.Loads+got.Coalesced)/float64(got.Loads), got.CollapseRatio, 1e-12)
		require.Zero(t, got.SplitClients)

		sA, sB := splitKeyStats(ssA, split), splitKeyStats(ssB, split)
		gotSplit := clients.Key("shop", split)
		require.Equal(t, controlplane.ClientKeyStats{Clients: 2, SplitClients: 2, SplitShards: 4,
			SplitWrites: sA.Writes + sB.Writes, SplitReads: sA.Reads + sB.Reads}, gotSplit)
		require.EqualValues(t, 70, gotSplit.SplitWrites, "40 + 30 increments")

		tot := clients.Totals()
		require.Equal(t, 2, tot.Clients)
		require.Equal(t, 2, tot.CacheClients)
		require.Equal(t, csA.Hits+csB.Hits, tot.Hits)
		require.Equal(t, csA.Misses+csB.Misses, tot.Misses)
		require.Equal(t, csA.Loads+csB.Loads, tot.Loads)
		require.Equal(t, csA.Coalesced+csB.Coalesced, tot.Coalesced)
		require.Equal(t, csA.ColdLoads+csB.ColdLoads, tot.ColdLoads)
		require.Equal(t, 2, tot.SplitClients)
		require.EqualValues(t, 2, tot.SplitKeys)
		require.Zero(t, tot.FollowerClients)
		require.Zero(t, clients.Key("shop", prefix+"cold"), "a key no client lists")
		require.Zero(t, clients.Key("other", hot), "the same key of another app")

		st := clients.Stats()
		require.Equal(t, controlplane.ClientsStats{Records: st.Records, Applied: st.Records, Held: 2, Live: 2, Bytes: st.Bytes, Ready: true}, st)
		require.EqualValues(t, 2, metricValue(t, promReg, "keyheat_api_client_stats_clients_live"))
		require.EqualValues(t, st.Records, metricValue(t, promReg, "keyheat_api_client_stats_records_total", "applied"))

		// web-b starts publishing again; web-a stays stopped and goes
		// stale once its last record is 2 s old by the real clock.
		b2, err := hotkeys.NewStatsPublisher(hotkeys.StatsPublisherConfig{
			ClientOpts: []kgo.Opt{kgo.SeedBrokers(seeds...)}, Topic: topic, Client: "web-b",
			Interval: 10 * time.Millisecond, Cache: b.cache, Splitter: b.split,
		})
		require.NoError(t, err)
		defer func() { require.NoError(t, b2.Close(ctx)) }()
		clk.real()
		testenv.Eventually(t, "web-a stale and web-b live", func() bool {
			k := clients.Key("shop", hot)
			return k.Clients == 1 && k.Hits == kB.Hits && clients.Totals().Clients == 1
		})
		require.Equal(t, kB.Loads, clients.Key("shop", hot).Loads, "web-b's counts alone")
	})
}

// metricValue returns the value of the metric named name with the given
// label values in order (none for an unlabelled one), in what g gathers.
func metricValue(t *testing.T, g prometheus.Gatherer, name string, labels ...string) float64 {
	t.Helper()
	mfs, err := g.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	metrics:
		for _, m := range mf.GetMetric() {
			for i, l := range m.GetLabel() {
				if i >= len(labels) || l.GetValue() != labels[i] {
					continue metrics
				}
			}
			return m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	t.Fatalf("no metric %s %v", name, labels)
	return 0
}

// TestClientsSkipsBadRecords: records that do not decode, are invalid,
// are over the size or key limits, or whose record key is not their
// client are skipped and counted, and the records after them are read;
// on kfake and the real broker.
func TestClientsSkipsBadRecords(t *testing.T) {
	testenv.EachBroker(t, func(t *testing.T, seeds []string) {
		topic := statsTopic(t, seeds, 3)
		clk := &testClock{}
		now := time.Now()
		clk.set(now)
		promReg := prometheus.NewRegistry()
		var logs testenv.SyncBuffer
		clients := newTestClients(t, seeds, topic, clk, func(c *controlplane.ClientsConfig) {
			c.Registerer = promReg
			c.Logger = slog.New(slog.NewTextHandler(&logs, nil))
		})
		prod := statsProducer(t, seeds, topic)

		good := clientStats("good", now, schemas.ClientStatsKey{App: "shop", Key: "k", Hits: 5, Misses: 1, Loads: 1})
		huge := clientStats("huge", now, schemas.ClientStatsKey{App: "shop", Key: "k", Hits: 1})
		hugeVal, err := huge.AppendJSON(nil)
		require.NoError(t, err)
		hugeVal = append(hugeVal[:len(hugeVal)-1], `,"pad":"`+strings.Repeat("x", schemas.MaxClientStatsBytes)+`"}`...)
		flood := clientStats("flood", now)
		for i := range 5000 {
			flood.Keys = append(flood.Keys, schemas.ClientStatsKey{App: "shop", Key: fmt.Sprint(i), Hits: 1})
		}
		floodVal, err := json.Marshal(flood)
		require.NoError(t, err)
		require.Less(t, len(floodVal), schemas.MaxClientStatsBytes, "within the size limit, over the key limit")
		dup := clientStats("dup", now, schemas.ClientStatsKey{App: "shop", Key: "k", Hits: 1}, schemas.ClientStatsKey{App: "shop", Key: "k", Hits: 1})
		dupVal, err := json.Marshal(dup)
		require.NoError(t, err)
		v2 := clientStats("v2", now)
		v2.Version = 2
		v2Val, err := json.Marshal(v2)
		require.NoError(t, err)
		wrongKey := statsRecord(t, clientStats("someone", now, schemas.ClientStatsKey{App: "shop", Key: "k", Hits: 100}))
		wrongKey.Key = []byte("someone-else")

		bad := []*kgo.Record{
			{Key: []byte("garbage"), Value: []byte("not json at all")},
			{Key: []byte("empty"), Value: []byte{}},
			{Key: []byte("huge"), Value: hugeVal},
			{Key: []byte("flood"), Value: floodVal},
			{Key: []byte("dup"), Value: dupVal},
			{Key: []byte("v2"), Value: v2Val},
			wrongKey,
		}
		for _, r := range append(bad, statsRecord(t, good)) {
			produceSync(t, prod, r)
		}
		waitClients(t, clients, uint64(len(bad))+1)
		st := clients.Stats()
		require.EqualValues(t, len(bad), st.Malformed)
		require.EqualValues(t, 1, st.Applied)
		require.Equal(t, 1, st.Held)
		require.LessOrEqual(t, st.Bytes, int64(1024), "only the good record is held")
		require.Equal(t, controlplane.ClientKeyStats{Clients: 1, Hits: 5, Misses: 1, HitRatio: 5.0 / 6, Loads: 1, CollapseRatio: 1}, clients.Key("shop", "k"))
		require.EqualValues(t, len(bad), metricValue(t, promReg, "keyheat_api_client_stats_records_total", "malformed"))
		require.Contains(t, logs.String(), "client stats: record skipped")
		require.NotContains(t, logs.String(), "someone", "logs carry no record content")
	})
}

// TestClientsStaleness: a client counts until its latest record is older
// than the staleness (by default three of its own intervals), measured
// from the time it states or from when it was read if that is earlier; a
// record stale when read is not kept and removes its client; a tombstone
// removes its client.
func TestClientsStaleness(t *testing.T) {
	seeds := testenv.KFake(t)
	topic := statsTopic(t, seeds, 3)
	clk := &testClock{}
	t0 := time.Now()
	clk.set(t0.Add(10 * time.Second)) // the records are read then
	clients := newTestClients(t, seeds, topic, clk, nil)
	prod := statsProducer(t, seeds, topic)
	k := schemas.ClientStatsKey{App: "shop", Key: "k", Hits: 1}

	slow := clientStats("slow", t0, k)
	slow.IntervalMs = 60_000 // stale after 3 minutes
	ahead := clientStats("ahead", t0.Add(time.Hour), k)
	produceSync(t, prod,
		statsRecord(t, clientStats("a", t0, k)),
		statsRecord(t, clientStats("b", t0.Add(10*time.Second), k)),
		statsRecord(t, slow), statsRecord(t, ahead),
		statsRecord(t, clientStats("old", t0.Add(-time.Minute), k)),
	)
	waitClients(t, clients, 5)
	require.EqualValues(t, 1, clients.Stats().Stale, "old was stale when read")
	require.Equal(t, 4, clients.Key("shop", "k").Clients, "a, b, slow and ahead")

	clk.set(t0.Add(14 * time.Second))
	require.Equal(t, 4, clients.Key("shop", "k").Clients, "a is 14 s old, within 3 × 5 s")
	clk.set(t0.Add(16 * time.Second))
	require.Equal(t, 3, clients.Key("shop", "k").Clients, "a is 16 s old")
	require.Equal(t, 3, clients.Totals().Clients)
	require.EqualValues(t, 30, clients.Totals().Hits, "the live clients' cache totals")
	clk.set(t0.Add(26 * time.Second))
	require.Equal(t, 1, clients.Key("shop", "k").Clients, "b is 16 s old, and so is ahead, read at t0+10s and not an hour later")
	clk.set(t0.Add(3*time.Minute + time.Second))
	require.Zero(t, clients.Key("shop", "k").Clients, "slow is over 3 of its minutes old")
	require.Equal(t, controlplane.ClientTotals{}, clients.Totals())

	// A fresh record brings a client back; a stale one, read later, takes
	// it out again; a tombstone removes one.
	now := t0.Add(3*time.Minute + time.Second)
	produceSync(t, prod, statsRecord(t, clientStats("a", now, k)), statsRecord(t, clientStats("b", now, k)))
	waitClients(t, clients, 7)
	require.Equal(t, 2, clients.Key("shop", "k").Clients)
	produceSync(t, prod, statsRecord(t, clientStats("a", t0, k)), &kgo.Record{Key: []byte("b")})
	waitClients(t, clients, 9)
	require.Zero(t, clients.Key("shop", "k").Clients)
	st := clients.Stats()
	require.EqualValues(t, 2, st.Stale)
	require.EqualValues(t, 1, st.Tombstones)
	require.Equal(t, 2, st.Held, "slow and ahead, stale but held until room is needed")

	t.Run("configured", func(t *testing.T) {
		topic := statsTopic(t, seeds, 3)
		clients := newTestClients(t, seeds, topic, clk, func(c *controlplane.ClientsConfig) { c.Staleness = time.Minute })
		clk.set(t0)
		produceSync(t, statsProducer(t, seeds, topic), statsRecord(t, slow), statsRecord(t, clientStats("a", t0, k)))
		waitClients(t, clients, 2)
		clk.set(t0.Add(59 * time.Second))
		require.Equal(t, 2, clients.Key("shop", "k").Clients, "both within the minute, a beyond its 3 intervals")
		clk.set(t0.Add(61 * time.Second))
		require.Zero(t, clients.Key("shop", "k").Clients, "slow beyond the minute, within its 3 intervals")
	})
}

// TestClientsBounds: a new client beyond MaxClients or MaxBytes is refused
// and counted, unless dropping the stale clients makes room; a client
// already held is updated.
func TestClientsBounds(t *testing.T) {
	seeds := testenv.KFake(t)
	topic := statsTopic(t, seeds, 1) // one partition: records are read in the order written
	clk := &testClock{}
	t0 := time.Now()
	clk.set(t0.Add(10 * time.Second)) // the records are read then
	clients := newTestClients(t, seeds, topic, clk, func(c *controlplane.ClientsConfig) { c.MaxClients = 2 })
	prod := statsProducer(t, seeds, topic)
	k := schemas.ClientStatsKey{App: "shop", Key: "k", Hits: 1}
	produceSync(t, prod, statsRecord(t, clientStats("a", t0, k)),
		statsRecord(t, clientStats("b", t0.Add(10*time.Second), k)),
		statsRecord(t, clientStats("c", t0, k)))
	waitClients(t, clients, 3)
	require.EqualValues(t, 1, clients.Stats().Refused)
	require.Equal(t, 2, clients.Key("shop", "k").Clients)

	k.Hits = 7
	produceSync(t, prod, statsRecord(t, clientStats("a", t0, k)))
	waitClients(t, clients, 4)
	require.EqualValues(t, 8, clients.Key("shop", "k").Hits, "a updated in place")

	clk.set(t0.Add(20 * time.Second)) // a is stale, b is not
	produceSync(t, prod, statsRecord(t, clientStats("c", t0.Add(20*time.Second), k)))
	waitClients(t, clients, 5)
	st := clients.Stats()
	require.EqualValues(t, 1, st.Refused)
	require.Equal(t, 2, st.Held, "a dropped for c")
	require.EqualValues(t, 8, clients.Key("shop", "k").Hits, "b's 1 and c's 7")

	t.Run("bytes", func(t *testing.T) {
		topic := statsTopic(t, seeds, 3)
		one := statsRecord(t, clientStats("a", t0, k))
		clients := newTestClients(t, seeds, topic, clk, func(c *controlplane.ClientsConfig) { c.MaxBytes = int64(len(one.Value)) + 10 })
		clk.set(t0)
		produceSync(t, statsProducer(t, seeds, topic), one, statsRecord(t, clientStats("b", t0, k)))
		waitClients(t, clients, 2)
		st := clients.Stats()
		require.EqualValues(t, 1, st.Refused)
		require.Equal(t, int64(len(one.Value)), st.Bytes)
	})
}

// TestClientsLifecycle: a Clients of a topic that does not exist is ready
// at once and answers zeros; WaitReady after Close says so; Close is
// idempotent and unregisters the metrics.
func TestClientsLifecycle(t *testing.T) {
	seeds := testenv.KFake(t)
	promReg := prometheus.NewRegistry()
	clients, err := controlplane.NewClients(controlplane.ClientsConfig{ClientOpts: []kgo.Opt{kgo.SeedBrokers(seeds...)},
		Topic: testenv.UniqueName(t, "missing"), Registerer: promReg})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(t.Context(), hangGuard)
	defer cancel()
	require.NoError(t, clients.WaitReady(ctx))
	require.Equal(t, controlplane.ClientTotals{}, clients.Totals())
	require.Equal(t, controlplane.ClientKeyStats{}, clients.Key("shop", "k"))
	require.EqualValues(t, 1, metricValue(t, promReg, "keyheat_api_client_stats_ready"))
	clients.Close()
	clients.Close()
	n, err := testutil.GatherAndCount(promReg)
	require.NoError(t, err)
	require.Zero(t, n)

	c2, err := controlplane.NewClients(controlplane.ClientsConfig{ClientOpts: []kgo.Opt{kgo.SeedBrokers(testenv.FreeAddr(t))}})
	require.NoError(t, err)
	c2.Close()
	require.ErrorIs(t, c2.WaitReady(ctx), controlplane.ErrClientsClosed)
	require.Equal(t, hotkeys.DefaultStatsTopic, c2.Topic())
}
