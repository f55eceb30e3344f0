package hotkeys

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/keyheat/keyheat/internal/testenv"
	"github.com/keyheat/keyheat/schemas"
)

func TestStatsPublisherConfigValidate(t *testing.T) {
	c, err := NewCache(CacheConfig{Registry: &StaticRegistry{}, SharedTTL: time.Minute, LocalOnly: true})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	ok := StatsPublisherConfig{ClientOpts: []kgo.Opt{kgo.SeedBrokers("x:9092")}, Cache: c}
	require.NoError(t, ok.Validate())
	for _, tc := range []struct {
		name string
		edit func(*StatsPublisherConfig)
		want string
	}{
		{"no client opts", func(c *StatsPublisherConfig) { c.ClientOpts = nil }, "ClientOpts is empty"},
		{"bad topic", func(c *StatsPublisherConfig) { c.Topic = "a b" }, "not a valid Kafka topic"},
		{"long client", func(c *StatsPublisherConfig) { c.Client = strings.Repeat("c", 257) }, "Client: 257 bytes"},
		{"client not utf-8", func(c *StatsPublisherConfig) { c.Client = "\xff" }, "Client: not UTF-8"},
		{"app not utf-8", func(c *StatsPublisherConfig) { c.App = "\xff" }, "App: not UTF-8"},
		{"negative interval", func(c *StatsPublisherConfig) { c.Interval = -time.Second }, "Interval -1s"},
		{"sub-ms interval", func(c *StatsPublisherConfig) { c.Interval = time.Microsecond }, "Interval 1µs"},
		{"long interval", func(c *StatsPublisherConfig) { c.Interval = 25 * time.Hour }, "Interval 25h"},
		{"negative max keys", func(c *StatsPublisherConfig) { c.MaxKeys = -1 }, "MaxKeys -1"},
		{"too many keys", func(c *StatsPublisherConfig) { c.MaxKeys = schemas.MaxClientStatsKeys + 1 }, "MaxKeys 1025"},
		{"nothing to publish", func(c *StatsPublisherConfig) { c.Cache = nil }, "nothing to publish"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := ok
			tc.edit(&cfg)
			require.ErrorContains(t, cfg.Validate(), tc.want)
			_, err := NewStatsPublisher(cfg)
			require.ErrorContains(t, err, tc.want, "NewStatsPublisher must validate")
		})
	}
}

func TestDefaultStatsClient(t *testing.T) {
	id := defaultStatsClient()
	require.NoError(t, schemas.ValidClientStatsName(id))
	require.True(t, strings.HasSuffix(id, fmt.Sprintf("/%d", os.Getpid())), "%q ends with the pid", id)
}

// TestStatsPublisherRank: keys are listed by how much their counters grew
// since the previous record, then by their totals; a key whose counters
// went down (it left and came back) counts them all as growth; keys that
// cannot be listed are counted as omitted.
func TestStatsPublisherRank(t *testing.T) {
	p := &StatsPublisher{maxKeys: 2, prev: map[statsKeyID]uint64{}}
	set := func(hits map[string]uint64) map[statsKeyID]*schemas.ClientStatsKey {
		m := map[statsKeyID]*schemas.ClientStatsKey{}
		for k, h := range hits {
			m[statsKeyID{"a", k}] = &schemas.ClientStatsKey{App: "a", Key: k, Hits: h}
		}
		return m
	}
	names := func(keys []schemas.ClientStatsKey) []string {
		var out []string
		for _, k := range keys {
			out = append(out, k.Key)
		}
		return out
	}
	keys, omitted := p.rank(set(map[string]uint64{"a": 100, "b": 50, "c": 10}))
	require.Equal(t, []string{"a", "b"}, names(keys))
	require.Equal(t, 1, omitted)
	keys, omitted = p.rank(set(map[string]uint64{"a": 100, "b": 60, "c": 40}))
	require.Equal(t, []string{"c", "b"}, names(keys), "c grew 30, b 10, a not at all")
	require.Equal(t, 1, omitted)
	keys, _ = p.rank(set(map[string]uint64{"a": 25, "b": 70, "c": 45}))
	require.Equal(t, []string{"a", "b"}, names(keys), "a came back with 25, b grew 10, c 5")

	m := set(map[string]uint64{"ok": 1, "": 5, strings.Repeat("k", schemas.MaxClientStatsKeyBytes+1): 9})
	m[statsKeyID{"\xff", "x"}] = &schemas.ClientStatsKey{App: "\xff", Key: "x", Hits: 7}
	p.maxKeys = 10
	keys, omitted = p.rank(m)
	require.Equal(t, []string{"ok"}, names(keys))
	require.Equal(t, 3, omitted, "an empty key, a key too long and an app not UTF-8")
}

// statsEnv is a cache and a splitter serving hot keys of app "shop", the
// cache's loads reading the real Redis.
type statsEnv struct {
	rdb    *redis.Client
	prefix string
	reg    *StaticRegistry
	cache  *Cache
	split  *Splitter
}

func newStatsEnv(t *testing.T) *statsEnv {
	t.Helper()
	rdb, prefix := testenv.RedisClient(t)
	e := &statsEnv{rdb: rdb, prefix: prefix, reg: &StaticRegistry{}}
	for _, k := range []string{"k1", "k2", "k3"} {
		e.reg.Set(Entry{App: "shop", Key: prefix + k, Mitigation: MitigationLocalCache})
		require.NoError(t, rdb.Set(t.Context(), prefix+k, "value of "+k, 0).Err())
	}
	e.reg.Set(Entry{App: "shop", Key: prefix + "views", Mitigation: MitigationSplit, SplitFactor: 4})
	e.cache = newTestCache(t, CacheConfig{Registry: e.reg, SharedTTL: time.Hour})
	var err error
	e.split, err = NewSplitter(rdb, SplitConfig{Lookup: e.reg.Get})
	require.NoError(t, err)
	return e
}

// get reads key n times through the cache, its loads reading Redis.
func (e *statsEnv) get(t *testing.T, key string, n int) {
	t.Helper()
	load := func(ctx context.Context) ([]byte, error) { return e.rdb.Get(ctx, e.prefix+key).Bytes() }
	for range n {
		v, err := e.cache.Get(t.Context(), "shop", e.prefix+key, load)
		require.NoError(t, err)
		require.Equal(t, "value of "+key, string(v))
	}
}

// TestStatsPublisherRecord: the record Close publishes holds the cache's
// and the splitter's Stats as they are, its keys the busiest first and at
// most MaxKeys, under the client ID as record key; on kfake and the real
// broker.
func TestStatsPublisherRecord(t *testing.T) {
	for _, tc := range []struct {
		name  string
		seeds func(t *testing.T) []string
	}{
		{"kfake", func(t *testing.T) []string { return testenv.KFake(t) }},
		{"real_kafka", func(t *testing.T) []string { return testenv.KafkaSeeds(t) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			noLeaks(t)
			seeds := tc.seeds(t)
			topic := testenv.NewTopic(t, seeds, 2)
			e := newStatsEnv(t)
			e.get(t, "k1", 30)
			e.get(t, "k2", 20)
			e.get(t, "k3", 10)
			ctx := t.Context()
			for range 5 {
				require.NoError(t, e.split.Incr(ctx, "shop", e.prefix+"views", 1))
			}
			for range 2 {
				n, err := e.split.Get(ctx, "shop", e.prefix+"views")
				require.NoError(t, err)
				require.EqualValues(t, 5, n)
			}

			reg := prometheus.NewRegistry()
			p, err := NewStatsPublisher(StatsPublisherConfig{
				ClientOpts: []kgo.Opt{kgo.SeedBrokers(seeds...)}, Topic: topic, Client: "web-1", App: "shop",
				Interval: time.Hour, MaxKeys: 3, Cache: e.cache, Splitter: e.split, Registerer: reg,
			})
			require.NoError(t, err)
			closeCtx, cancel := context.WithTimeout(ctx, hangGuard)
			defer cancel()
			require.NoError(t, p.Close(closeCtx))
			require.NoError(t, p.Close(closeCtx), "Close is idempotent")
			require.Equal(t, StatsPublisherStats{Published: 1}, p.Stats())
			n, err := testutil.GatherAndCount(reg)
			require.NoError(t, err)
			require.Zero(t, n, "Close unregisters the metrics")

			recs := testenv.ReadCommitted(t, seeds, topic)
			require.Len(t, recs, 1, "an Interval of an hour: the record Close publishes only")
			require.Equal(t, "web-1", string(recs[0].Key))
			s, err := schemas.DecodeClientStats(recs[0].Value)
			require.NoError(t, err)

			cs, ss := e.cache.Stats(), e.split.Stats()
			require.Equal(t, "web-1", s.Client)
			require.Equal(t, "shop", s.App)
			require.EqualValues(t, time.Hour.Milliseconds(), s.IntervalMs)
			require.Equal(t, &schemas.ClientCacheTotals{Hits: cs.Hits, Misses: cs.Misses, Loads: cs.Loads, Coalesced: cs.Coalesced,
				ColdLoads: cs.ColdLoads, Entries: 3, Following: true}, s.Cache)
			require.EqualValues(t, 57, cs.Hits, "each key's first Get missed")
			require.Equal(t, &schemas.ClientSplitTotals{SplitCalls: 7, Keys: 1}, s.Split)
			require.Nil(t, s.Follower)
			require.Nil(t, s.Reporter)
			require.Len(t, ss.Keys, 1)
			require.Equal(t, []schemas.ClientStatsKey{
				{App: "shop", Key: e.prefix + "k1", Hits: 29, Misses: 1, Loads: 1},
				{App: "shop", Key: e.prefix + "k2", Hits: 19, Misses: 1, Loads: 1},
				{App: "shop", Key: e.prefix + "k3", Hits: 9, Misses: 1, Loads: 1},
			}, s.Keys, "the busiest three of four")
			require.Equal(t, 1, s.KeysOmitted, "views, the least busy, is left out")
		})
	}
}

// TestStatsPublisherSplitKey: a split key's record entry carries its
// shards, writes and reads.
func TestStatsPublisherSplitKey(t *testing.T) {
	seeds := testenv.KFake(t)
	topic := testenv.NewTopic(t, seeds, 1)
	e := newStatsEnv(t)
	ctx := t.Context()
	for range 3 {
		require.NoError(t, e.split.Incr(ctx, "shop", e.prefix+"views", 2))
	}
	_, err := e.split.Get(ctx, "shop", e.prefix+"views")
	require.NoError(t, err)
	p, err := NewStatsPublisher(StatsPublisherConfig{ClientOpts: []kgo.Opt{kgo.SeedBrokers(seeds...)}, Topic: topic,
		Interval: time.Hour, Splitter: e.split})
	require.NoError(t, err)
	require.NoError(t, p.Close(ctx))
	recs := testenv.ReadCommitted(t, seeds, topic)
	require.Len(t, recs, 1)
	s, err := schemas.DecodeClientStats(recs[0].Value)
	require.NoError(t, err)
	require.Equal(t, p.Client(), s.Client, "the default client ID")
	require.Nil(t, s.Cache)
	require.Equal(t, []schemas.ClientStatsKey{{App: "shop", Key: e.prefix + "views", SplitShards: 4, SplitWrites: 3, SplitReads: 1}}, s.Keys)
}

// TestStatsPublisherPublishesEveryInterval: records keep coming while the
// publisher runs, each with the counters of its moment, and the metrics
// count them.
func TestStatsPublisherPublishesEveryInterval(t *testing.T) {
	noLeaks(t)
	seeds := testenv.KFake(t)
	topic := testenv.NewTopic(t, seeds, 1)
	e := newStatsEnv(t)
	reg := prometheus.NewRegistry()
	p, err := NewStatsPublisher(StatsPublisherConfig{ClientOpts: []kgo.Opt{kgo.SeedBrokers(seeds...)}, Topic: topic,
		Client: "c", Interval: 5 * time.Millisecond, Cache: e.cache, Registerer: reg})
	require.NoError(t, err)
	e.get(t, "k1", 4)
	testenv.Eventually(t, "three records published", func() bool { return p.Stats().Published >= 3 })
	require.EqualValues(t, float64(p.Stats().Published), metricValue(t, reg, "keyheat_hotkeys_stats_published_total"))
	e.get(t, "k1", 6)
	require.NoError(t, p.Close(t.Context()))

	recs := testenv.ReadCommitted(t, seeds, topic)
	require.Len(t, recs, int(p.Stats().Published))
	var hits []uint64
	for _, r := range recs {
		s, err := schemas.DecodeClientStats(r.Value)
		require.NoError(t, err)
		hits = append(hits, s.Cache.Hits)
	}
	require.IsNonDecreasing(t, hits)
	require.EqualValues(t, 9, hits[len(hits)-1], "the last record, Close's, has every hit")
}

// TestStatsPublisherUnreachable: with no broker to take them, records are
// skipped while one is unanswered, the application is not held up, Close
// returns when its ctx ends with an error, and the failure is logged.
func TestStatsPublisherUnreachable(t *testing.T) {
	noLeaks(t)
	e := newStatsEnv(t)
	var logs testenv.SyncBuffer
	p, err := NewStatsPublisher(StatsPublisherConfig{
		ClientOpts: []kgo.Opt{kgo.SeedBrokers(testenv.FreeAddr(t))}, Interval: time.Millisecond, Cache: e.cache,
		Logger: slog.New(slog.NewTextHandler(&logs, nil)),
	})
	require.NoError(t, err)
	testenv.Eventually(t, "intervals skipped while the first record is unanswered", func() bool { return p.Stats().Skipped >= 5 })
	e.get(t, "k1", 3) // the application goes on

	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	err = p.Close(ctx)
	require.ErrorContains(t, err, "records were not published")
	st := p.Stats()
	require.Zero(t, st.Published)
	require.GreaterOrEqual(t, st.Failed, uint64(2), "the first record and Close's at least")
	require.Equal(t, err, p.Close(t.Context()), "a second Close returns the first one's result")
	require.Contains(t, logs.String(), "records not published")
}

// TestStatsPublisherFollowerAndReporter: a record carries the follower's
// and the reporter's figures when they are given.
func TestStatsPublisherFollowerAndReporter(t *testing.T) {
	noLeaks(t)
	seeds := testenv.KFake(t)
	statsTopic := testenv.NewTopic(t, seeds, 1)
	registry := testenv.NewTopicWithConfigs(t, seeds, 1, map[string]string{"cleanup.policy": "compact"})
	ctx, cancel := context.WithTimeout(t.Context(), hangGuard)
	defer cancel()

	f, err := NewFollower(FollowerConfig{ClientOpts: []kgo.Opt{kgo.SeedBrokers(seeds...)}, Topic: registry})
	require.NoError(t, err)
	defer f.Close()
	require.NoError(t, f.WaitReady(ctx))
	r, err := NewReporter(ReporterConfig{ClientOpts: []kgo.Opt{kgo.SeedBrokers(seeds...)}, Topic: testenv.NewTopic(t, seeds, 1)})
	require.NoError(t, err)
	for range 3 {
		r.Record("shop", "product:42", "get", 10)
	}
	r.Record("shop", "", "get", 10) // dropped: no key
	require.NoError(t, r.Close(ctx))

	p, err := NewStatsPublisher(StatsPublisherConfig{ClientOpts: []kgo.Opt{kgo.SeedBrokers(seeds...)}, Topic: statsTopic,
		Interval: time.Hour, Follower: f, Reporter: r})
	require.NoError(t, err)
	require.NoError(t, p.Close(ctx))
	recs := testenv.ReadCommitted(t, seeds, statsTopic)
	require.Len(t, recs, 1)
	s, err := schemas.DecodeClientStats(recs[0].Value)
	require.NoError(t, err)
	require.Equal(t, &schemas.ClientFollowerTotals{Ready: true}, s.Follower)
	require.Equal(t, &schemas.ClientReporterTotals{Recorded: 4, Sent: 3, Dropped: 1}, s.Reporter)
	require.Nil(t, s.Cache)
	require.Empty(t, s.Keys)
}
