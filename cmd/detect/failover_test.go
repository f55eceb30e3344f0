package main

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/keyheat/keyheat/internal/testenv"
	"github.com/keyheat/keyheat/schemas"
)

// produceNginx writes combined-format access lines for seconds [from,
// to) after base, round-robin to 2 partitions with no record key: 300/s
// spread over 500 URLs, and /hot at 1,200/s over [hotFrom, hotTo).
func produceNginx(t *testing.T, seeds []string, topic string, base time.Time, from, to, hotFrom, hotTo int) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ProducerLinger(5*time.Millisecond))
	require.NoError(t, err)
	defer cl.Close()
	rng := rand.New(rand.NewPCG(uint64(from), 3))
	n := 0
	for s := from; s < to; s++ {
		ts := base.Add(time.Duration(s) * time.Second).Format("02/Jan/2006:15:04:05 -0700")
		var urls []string
		for range 300 {
			urls = append(urls, fmt.Sprintf("/p/%d", rng.IntN(500)))
		}
		if s >= hotFrom && s < hotTo {
			for range 1200 {
				urls = append(urls, "/hot")
			}
		}
		rng.Shuffle(len(urls), func(i, j int) { urls[i], urls[j] = urls[j], urls[i] })
		batch := make([]*kgo.Record, 0, len(urls))
		for _, u := range urls {
			line := fmt.Sprintf("10.0.0.%d - - [%s] \"GET %s HTTP/1.1\" 200 512 \"-\" \"curl/8\"\n", n%250, ts, u)
			batch = append(batch, &kgo.Record{Topic: topic, Partition: int32(n % 2), Value: []byte(line)})
			n++
		}
		require.NoError(t, cl.ProduceSync(ctx(t), batch...).FirstErr())
	}
}

// TestMergerFailoverUnkeyed: on a topic not keyed by access key, the
// instance that is the merger is killed (SIGKILL: nothing flushed or
// committed) while /hot has been hot for longer than the cluster
// stage's warm-up span. The other instance takes over the merge group
// and the partitions, re-reads the windows topic from the killed one's
// commit and goes on. The registry must say hot while the key is hot
// and cooled after; every hot the new merger publishes for the crossing
// has the old one's ID, and so has every cooled (destinations dedupe by
// ID): a merger re-raising the key with a later onset would be a second
// alert.
func TestMergerFailoverUnkeyed(t *testing.T) {
	testenv.EachBroker(t, func(t *testing.T, seeds []string) {
		events := testenv.NewTopic(t, seeds, 2)
		env := newRunEnv(t, seeds, events)
		args := append([]string{"run", "--pipeline.idle_timeout=1h", "--detect.format=combined", "--detect.app=web",
			"--merge.max_pending_windows=1000"}, env.flags()...)
		base := time.Now().Add(-time.Hour).Truncate(time.Second)
		key := string(schemas.HotKeyRecordKey("web", "/hot"))
		// last is the key's last event; gone, that a tombstone (which
		// registryEvents checks follows a cooled) is its last record.
		registry := func() (hot, cooled map[string]int, last *schemas.HotKeyEvent, gone bool) {
			hot, cooled = map[string]int{}, map[string]int{}
			recs := readTopic(t, seeds, env.hotkeys)
			for _, r := range recs {
				require.Equal(t, key, string(r.Key), "an alert for another key")
			}
			for _, h := range registryEvents(t, recs) {
				require.Equal(t, int32(schemas.ClusterPartition), h.Partition, "a partition alerted by itself: %+v", h)
				switch h.Type {
				case schemas.HotKeyHot:
					hot[h.ID]++
				case schemas.HotKeyCooled:
					cooled[h.ID]++
				}
				last = h
			}
			return hot, cooled, last, len(recs) > 0 && recs[len(recs)-1].Value == nil
		}

		a := start(t, nil, args...)
		a.WaitStderr(`msg="elected merger"`)
		a.WaitStderr(`msg="partitions assigned" partitions="map\[\S+:\[0 1\]\]"`)
		b2 := start(t, nil, args...)
		b2.WaitStderr(`msg="partitions assigned" partitions="?map\[\S+:\[\d\]\]`)

		// /hot from second 5 on, still hot at second 40: longer than
		// the warm-up span (2 × 1 s + 10 s cool-down + 5 s suppression).
		produceNginx(t, seeds, events, base, 0, 40, 5, 50)
		var hotID string
		testenv.Eventually(t, "the key's hot on the registry", func() bool {
			hot, _, _, _ := registry()
			for id := range hot {
				hotID = id
			}
			return len(hot) > 0
		})
		// The killed merger has committed the windows topic after the
		// hot (a commit every 100 ms, the hot acknowledged): without
		// the episode hold its commit passes the onset.
		testenv.Eventually(t, "the merger's commit", func() bool {
			return len(committedOffsets(t, seeds, env.mergeGroup, env.windows)) > 0
		})
		time.Sleep(time.Second) // more commits; not a pass/fail deadline
		a.Kill()

		b2.WaitStderr(`msg="elected merger"`)
		b2.WaitStderr(`msg="partitions assigned" partitions="?map\[\S+:\[`)
		hot, cooled, last, gone := registry()
		require.Len(t, hot, 1, "one hot: %v", hot)
		require.Empty(t, cooled)
		require.False(t, gone)
		require.Contains(t, []string{schemas.HotKeyHot, schemas.HotKeyUpdate}, last.Type, "the registry says hot while the key is hot")

		// Seconds 40-60: hot until 50, then background only; cooled
		// 10 s after it fell below.
		produceNginx(t, seeds, events, base, 40, 62, 5, 50)
		testenv.Eventually(t, "the key's cooled and tombstone on the registry", func() bool {
			_, cooled, _, gone := registry()
			return len(cooled) > 0 && gone
		})
		hot, cooled, last, gone = registry()
		require.Equal(t, map[string]int{hotID: hot[hotID]}, hot, "every hot has the first merger's ID")
		require.Len(t, cooled, 1, "one cooled ID: %v", cooled)
		require.Equal(t, schemas.HotKeyCooled, last.Type, "the registry's last event for the key is its cooled")
		require.True(t, gone, "then the key's tombstone: compaction drops it")
		require.Greater(t, last.OnsetMs, base.Add(50*time.Second).UnixMilli(), "cooled after the burst ended")
		b2.Stop()
	})
}
