package detect_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"regexp"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/keyheat/keyheat/detect"
	"github.com/keyheat/keyheat/internal/testenv"
	"github.com/keyheat/keyheat/pipeline"
	"github.com/keyheat/keyheat/schemas"
	"github.com/keyheat/keyheat/sink/archive"
)

// nginxLines is the access log: 200,000 combined-format lines
// over 60 s, one URL at 1,502 requests/s in seconds [10, 30), one at
// 600/s (under the 1,000/s rule) in [35, 45), the rest spread over 2,000
// URLs; each line to partition i mod parts with no record key, as a
// shipper producing round-robin does. It returns the records and the
// first second's time.
func nginxLines(topic string, parts int32) ([]*kgo.Record, int64) {
	base := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	rng := rand.New(rand.NewPCG(16, 6))
	var recs []*kgo.Record
	const bgPerS = (200_000 - 1502*20 - 600*10) / 60
	for s := range 60 {
		ts := base.Add(time.Duration(s) * time.Second).Format("02/Jan/2006:15:04:05 -0700")
		var urls []string
		for range bgPerS {
			urls = append(urls, fmt.Sprintf("/p/%d", rng.IntN(2000)))
		}
		if s >= 10 && s < 30 {
			for range 1502 {
				urls = append(urls, "/hot")
			}
		}
		if s >= 35 && s < 45 {
			for range 600 {
				urls = append(urls, "/warm")
			}
		}
		rng.Shuffle(len(urls), func(i, j int) { urls[i], urls[j] = urls[j], urls[i] })
		for _, u := range urls {
			line := fmt.Sprintf("10.0.0.%d - - [%s] \"GET %s HTTP/1.1\" 200 512 \"-\" \"curl/8\"\n", len(recs)%250, ts, u)
			recs = append(recs, raw(topic, int32(len(recs))%parts, []byte(line)))
		}
	}
	for len(recs) < 200_000 { // the integer division's rest, background
		line := fmt.Sprintf("10.0.0.1 - - [%s] \"GET /p/0 HTTP/1.1\" 200 512 \"-\" \"curl/8\"\n",
			base.Add(59*time.Second).Format("02/Jan/2006:15:04:05 -0700"))
		recs = append(recs, raw(topic, int32(len(recs))%parts, []byte(line)))
	}
	return recs, base.UnixMilli()
}

func clusterPipeline() pipeline.Options {
	o := pipeline.DefaultOptions()
	o.Lateness = 0
	o.IdleTimeout = time.Hour
	return o // the default rule: 1,000 events/s over 1 s; cool-down 10 s
}

// hotRecords decodes the registry topic (see registryEvents) and returns
// its events and each record key's last record.
func hotRecords(t *testing.T, seeds []string, topic string) ([]schemas.HotKeyEvent, map[string]*kgo.Record) {
	t.Helper()
	recs := readAll(t, seeds, topic)
	last := map[string]*kgo.Record{}
	for _, r := range recs {
		last[string(r.Key)] = r
	}
	return registryEvents(t, recs), last
}

// TestClusterAlertNginx: an nginx log produced
// round-robin to 6 partitions, no record key. Per partition the hot URL
// is at about 250/s, under the rule; the cluster stage sums the
// partitions' candidates and raises one alert.
func TestClusterAlertNginx(t *testing.T) {
	testenv.EachBroker(t, func(t *testing.T, seeds []string) {
		e := newEnv(t, seeds, 6)
		recs, baseMs := nginxLines(e.events, 6)
		produce(t, e.seeds, recs...)
		cfg := e.config(t)
		cfg.ExitAtEnd = true
		cfg.Parse.Format, cfg.Parse.App = "combined", "web"
		cfg.Pipeline = clusterPipeline()
		svc, err := detect.New(cfg)
		require.NoError(t, err)
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
		defer cancel()
		require.NoError(t, svc.Run(ctx))
		checkNginxAlerts(t, e, baseMs)
	})
}

func checkNginxAlerts(t *testing.T, e *env, baseMs int64) {
	t.Helper()
	evs, last := hotRecords(t, e.seeds, e.hotkeys)
	var hot, cooled []schemas.HotKeyEvent
	for _, h := range evs {
		require.Equal(t, "/hot", h.Key, "an alert for a key under the threshold: %+v", h)
		require.Equal(t, int32(schemas.ClusterPartition), h.Partition, "a partition alerted by itself: %+v", h)
		switch h.Type {
		case schemas.HotKeyHot:
			hot = append(hot, h)
		case schemas.HotKeyCooled:
			cooled = append(cooled, h)
		}
	}
	require.Len(t, hot, 1, "hot events: %+v", hot)
	require.Len(t, cooled, 1, "cooled events: %+v", cooled)
	h := hot[0]
	truth := baseMs + 10_000 // every line of a second has that second's time
	require.InDelta(t, truth, h.OnsetMs, 100, "onset %d, truth %d: more than one slot apart", h.OnsetMs, truth)
	require.InEpsilon(t, 1502, h.Rate, 0.05, "rate")
	require.Equal(t, []int32{0, 1, 2, 3, 4, 5}, h.Partitions)
	require.Greater(t, cooled[0].OnsetMs, baseMs+30_000, "cooled before the burst ended")
	reg := last[string(schemas.HotKeyRecordKey("web", "/hot"))]
	require.NotNil(t, reg)
	require.Nil(t, reg.Value, "the registry's last record for the key is a tombstone, after the cluster's cooled (registryEvents)")
}

// TestClusterAlertTwoInstances: two live instances of one group share
// the 6 partitions of the nginx case; the merger (one of them) still
// raises one hot and one cooled for the URL, from both instances'
// candidates.
func TestClusterAlertTwoInstances(t *testing.T) {
	testenv.EachBroker(t, func(t *testing.T, seeds []string) {
		e := newEnv(t, seeds, 6)
		recs, baseMs := nginxLines(e.events, 6)
		cfg := e.config(t)
		cfg.Parse.Format, cfg.Parse.App = "combined", "web"
		cfg.Pipeline = clusterPipeline()
		cfg.Limits.MaxSkew = 0 // the log is from March
		cfg.Merge.MaxPendingWindows = 1000
		assigned := `msg="partitions assigned" partitions="?map\[` + regexp.QuoteMeta(e.events) + `:\[\d`
		m1 := startMember(t, cfg)
		m1.waitLog(t, assigned)
		m2 := startMember(t, cfg)
		m2.waitLog(t, assigned)
		require.Regexp(t, `msg="elected merger"`, m1.log.String()+m2.log.String())
		produceMany(t, e.seeds, recs)
		testenv.Eventually(t, "the URL's cooled", func() bool {
			evs, _ := hotRecords(t, e.seeds, e.hotkeys)
			for _, h := range evs {
				if h.Type == schemas.HotKeyCooled {
					return true
				}
			}
			return false
		})
		require.NoError(t, m1.stop(t))
		require.NoError(t, m2.stop(t))
		checkNginxAlerts(t, e, baseMs)
	})
}

// gather reads reg as name{label=value,…} → value.
func gather(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	fams, err := reg.Gather()
	require.NoError(t, err)
	got := map[string]float64{}
	for _, f := range fams {
		for _, m := range f.GetMetric() {
			name := f.GetName()
			for _, l := range m.GetLabel() {
				name += "{" + l.GetName() + "=" + l.GetValue() + "}"
			}
			switch {
			case m.GetCounter() != nil:
				got[name] = m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				got[name] = m.GetGauge().GetValue()
			}
		}
	}
	return got
}

// TestClusterMetrics: a live instance runs the nginx case; once the
// URL's cooled is on the registry topic the merger's cluster metrics say
// what the registry holds (one hot, one cooled), that every partition's
// batches were used and rounds evaluated, and that no key was refused.
func TestClusterMetrics(t *testing.T) {
	testenv.EachBroker(t, func(t *testing.T, seeds []string) {
		const parts = 3
		e := newEnv(t, seeds, parts)
		recs, _ := nginxLines(e.events, parts)
		cfg := e.config(t)
		cfg.Parse.Format, cfg.Parse.App = "combined", "web"
		cfg.Pipeline = clusterPipeline()
		cfg.Limits.MaxSkew = 0 // the log is from March
		cfg.Merge.MaxPendingWindows = 1000
		reg := prometheus.NewPedanticRegistry()
		cfg.Registerer = reg
		m := startMember(t, cfg)
		m.waitLog(t, `msg="elected merger"`)
		produceMany(t, e.seeds, recs)
		testenv.Eventually(t, "the URL's cooled", func() bool {
			evs, _ := hotRecords(t, e.seeds, e.hotkeys)
			return len(evs) > 0 && evs[len(evs)-1].Type == schemas.HotKeyCooled
		})
		// The log spans 60 s of 1 s rule windows: a round per slot end
		// the partitions' clocks all passed (the last second stays open
		// live), each partition sending a batch for every one.
		var got map[string]float64
		testenv.Eventually(t, "58 rounds", func() bool {
			got = gather(t, reg)
			return got["keyheat_cluster_rounds_total"] >= 58
		})
		require.NoError(t, m.stop(t))

		require.Equal(t, 1.0, got["keyheat_cluster_hotkeys_total{type=hot}"], "one hot for the URL")
		require.Equal(t, 1.0, got["keyheat_cluster_hotkeys_total{type=cooled}"], "one cooled for the URL")
		require.Equal(t, 0.0, got["keyheat_cluster_keys_refused_total"])
		rounds := got["keyheat_cluster_rounds_total"]
		require.LessOrEqual(t, rounds, 59.0, "a round per slot end, once")
		require.GreaterOrEqual(t, got["keyheat_cluster_batches_total"], parts*rounds, "a batch per partition per round")
		require.Contains(t, got, "keyheat_cluster_stale_batches_total")
		keys, ok := got["keyheat_cluster_keys"]
		require.True(t, ok, "keys tracked is exported")
		require.LessOrEqual(t, keys, float64(cfg.Pipeline.Detect.ClusterKeys))
		lag, ok := got["keyheat_cluster_round_lag_seconds"]
		require.True(t, ok, "round lag is exported")
		require.GreaterOrEqual(t, lag, 0.0)
		require.Equal(t, 1.0, got["keyheat_detect_merger"])
	})
}

// TestClusterAlertArchived: with the archive on, the nginx case's cluster
// hot and cooled are in the Parquet hot-key archive, as published, by the
// time the run ends. A second run with a new merge group re-reads the
// windows topic and archives them again; read back, each ID is there
// once, and none of a partition.
func TestClusterAlertArchived(t *testing.T) {
	testenv.EachBroker(t, func(t *testing.T, seeds []string) {
		e := newEnv(t, seeds, 6)
		recs, _ := nginxLines(e.events, 6)
		produceMany(t, e.seeds, recs)
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
		defer cancel()
		arOpts := archive.DefaultOptions()
		arOpts.Root, arOpts.SegmentAge = t.TempDir(), time.Hour // only the merger's flushes make it durable
		run := func(mergeGroup string) {
			ar, err := archive.Open(ctx, arOpts, testLogger(t), nil)
			require.NoError(t, err)
			cfg := e.config(t)
			cfg.ExitAtEnd = true
			cfg.Parse.Format, cfg.Parse.App = "combined", "web"
			cfg.Pipeline = clusterPipeline()
			cfg.Archive, cfg.ArchiveFlush = ar, time.Hour
			cfg.MergeGroup = mergeGroup
			svc, err := detect.New(cfg)
			require.NoError(t, err)
			require.NoError(t, svc.Run(ctx))
			require.NoError(t, ar.Close())
		}
		read := func() []*schemas.HotKeyEvent {
			fsys, err := archive.NewDirFS(arOpts.Root)
			require.NoError(t, err)
			hs, bad, err := archive.ReadHotKeys(ctx, fsys, archive.Query{}, testLogger(t))
			require.NoError(t, err)
			require.Empty(t, bad)
			return hs
		}
		run(e.mergeGroup)
		published := map[string]schemas.HotKeyEvent{}
		evs, _ := hotRecords(t, e.seeds, e.hotkeys)
		for _, h := range evs {
			published[h.ID] = h
		}
		require.Len(t, published, 2, "the URL's hot and cooled: %+v", evs)
		check := func() {
			t.Helper()
			hs := read()
			require.Len(t, hs, len(published), "each published cluster event archived, once")
			for _, h := range hs {
				p, ok := published[h.ID]
				require.True(t, ok, "archived %+v was not published", h)
				require.Equal(t, int32(schemas.ClusterPartition), h.Partition)
				require.Equal(t, p.Type, h.Type)
				require.Equal(t, p.Key, h.Key)
				require.Equal(t, p.OnsetMs, h.OnsetMs)
				require.Equal(t, p.Count, h.Count)
				require.Equal(t, p.Topic, h.Topic)
				require.Equal(t, p.Partitions, h.Partitions)
				require.Equal(t, p.Error, h.Error)
			}
		}
		check()
		run(e.mergeGroup + "-again")
		evs, _ = hotRecords(t, e.seeds, e.hotkeys)
		require.Greater(t, len(evs), len(published), "the second merger published again")
		for _, h := range evs {
			require.Contains(t, published, h.ID, "the second merger raised %+v, not the first's", h)
		}
		check()
	})
}

// TestClusterCapsWarned: when the cluster stage is full
// (pipeline.detect.cluster_keys) or partitions cap their candidate
// batches (max_candidates), alerts can be lost or late; the log says so,
// naming the setting, and the capped keys are counted.
func TestClusterCapsWarned(t *testing.T) {
	testenv.EachBroker(t, func(t *testing.T, seeds []string) {
		e := newEnv(t, seeds, 6)
		recs, _ := nginxLines(e.events, 6)
		produce(t, e.seeds, recs[:60_000]...) // the first 13 s, the hot URL's first 3 included
		cfg := e.config(t)
		log := logTo(t, &cfg)
		cfg.Parse.Format, cfg.Parse.App = "combined", "web"
		cfg.Pipeline = clusterPipeline()
		// Every key is a candidate: far more than either cap holds.
		cfg.Pipeline.Detect.PreThreshold = 0.001
		cfg.Pipeline.Detect.ClusterKeys = 1
		cfg.Pipeline.Detect.MaxCandidates = 1
		require.NoError(t, runExitAtEnd(t, cfg))
		out := log.String()
		require.Contains(t, out, `msg="cluster stage full`)
		require.Contains(t, out, "raise pipeline.detect.cluster_keys")
		require.Contains(t, out, `msg="candidate batches capped`)
		require.Contains(t, out, "raise pipeline.detect.max_candidates")
	})
}
