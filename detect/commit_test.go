package detect_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/keyheat/keyheat/detect"
	"github.com/keyheat/keyheat/internal/testenv"
	"github.com/keyheat/keyheat/pipeline"
	"github.com/keyheat/keyheat/schemas"
)

// TestCommitFollowsTheCore: a live partition commits what its core's
// commit point says, with its metadata, never the last polled offset; a
// stop commits it too, and a restart from it publishes no window a second
// time and re-publishes hot-key events only under the IDs they had.
func TestCommitFollowsTheCore(t *testing.T) {
	testenv.EachBroker(t, func(t *testing.T, seeds []string) {
		e := newEnv(t, seeds, 1)
		base := time.Now().Add(-time.Minute).Truncate(time.Second).UnixMilli()
		evs := []at{
			{accessEvent("k1", base), 0},
			{accessEvent("k1", base+1), 1},    // k1 hot: 2 events in 10 ms
			{accessEvent("k2", base+1100), 2}, // closes window base
			{accessEvent("k3", base+1200), 3},
		}
		for _, ev := range evs {
			produce(t, e.seeds, event(e.events, 0, ev.e.Key, ev.e.TimeMs))
		}
		want := oracle(t, pipeline.Source{Topic: e.events, Partitions: 1, Keyed: true}, pipeline.Start{}, false, evs...)
		require.Less(t, want.Offset, int64(4), "the test needs a commit point behind the last record read")
		cfg := e.config(t)
		var out testenv.SyncBuffer
		cfg.Print, cfg.PrintFormat = &out, detect.PrintText
		r := start(t, cfg)
		testenv.Eventually(t, "the commit of the core's point", func() bool {
			c := committed(t, e.seeds, e.group, e.events)[0]
			return c.At == want.Offset && c.Metadata == want.Metadata
		})
		require.NoError(t, r.stop(t), "a stop is a clean end")
		c := committed(t, e.seeds, e.group, e.events)[0]
		require.Equal(t, want, pipeline.CommitPoint{Offset: c.At, Metadata: c.Metadata}, "after the stop")

		// k1 turned hot, then cooled (no cool-down in the test rules).
		hotIDs := func() []string {
			var ids []string
			recs := readAll(t, e.seeds, e.hotkeys)
			for _, rec := range recs {
				require.Equal(t, string(schemas.HotKeyRecordKey("a", "k1")), string(rec.Key))
			}
			for _, h := range registryEvents(t, recs) { // a tombstone after each cooled
				require.Positive(t, h.DetectedMs, "the service stamps the publish time")
				ids = append(ids, h.Type+" "+h.ID)
			}
			require.Nil(t, recs[len(recs)-1].Value, "k1 cooled: its last record is a tombstone")
			return ids
		}
		published := hotIDs()
		require.Len(t, published, 2)
		require.Contains(t, published[0], "hot ")
		require.Contains(t, out.String(), `HOT    a "k1"`)

		// A restart resumes from the commit with its metadata.
		r = start(t, cfg)
		produce(t, e.seeds, event(e.events, 0, "k4", base+2500))
		testenv.Eventually(t, "window base+1000 published", func() bool {
			for _, rec := range readAll(t, e.seeds, e.windows) {
				if w, _ := schemas.DecodePartitionWindow(rec.Value); w.StartMs == base+1000 {
					return true
				}
			}
			return false
		})
		require.NoError(t, r.stop(t))
		counts := map[int64]uint64{}
		n := map[int64]int{}
		for _, rec := range readAll(t, e.seeds, e.windows) {
			w, err := schemas.DecodePartitionWindow(rec.Value)
			require.NoError(t, err)
			counts[w.StartMs] += w.Events
			n[w.StartMs]++
		}
		require.Equal(t, map[int64]int{base: 1, base + 1000: 1}, n, "each window published once")
		require.Equal(t, map[int64]uint64{base: 2, base + 1000: 2}, counts)
		// What the restart re-emits (events at or after the resume
		// offset: the cooled) carries the ID it had; the hot before
		// the resume offset is not published again.
		again := hotIDs()
		require.Equal(t, published, slices.Compact(again), "nothing new, nothing under another ID")
	})
}

// TestRevokeCommitsLostDoesNot: a partition moving to another member in
// a rebalance is committed, with its metadata, before the new owner
// starts it; a lost partition is dropped without a commit.
func TestRevokeCommitsLostDoesNot(t *testing.T) {
	testenv.EachBroker(t, func(t *testing.T, seeds []string) {
		e := newEnv(t, seeds, 2)
		base := time.Now().Add(-time.Minute).Truncate(time.Second).UnixMilli()
		evs := []at{{accessEvent("k", base), 0}, {accessEvent("k", base+1100), 1}}
		for p := range int32(2) {
			produce(t, e.seeds, event(e.events, p, "k", base), event(e.events, p, "k", base+1100))
		}
		cfg := e.config(t)
		cfg.CommitInterval = time.Hour // commits only when a partition is given up
		a := start(t, cfg)
		// Both window summaries acknowledged: the commit points are the
		// open windows'.
		testenv.Eventually(t, "window summaries published", func() bool { return len(readAll(t, e.seeds, e.windows)) == 2 })
		require.Empty(t, committed(t, e.seeds, e.group, e.events))

		b2 := start(t, cfg)
		testenv.Eventually(t, "a partition moved and committed", func() bool { return len(committed(t, e.seeds, e.group, e.events)) == 1 })
		c := committed(t, e.seeds, e.group, e.events)
		var moved int32
		for p := range c {
			moved = p
		}
		want := oracle(t, pipeline.Source{Topic: e.events, Partition: moved, Partitions: 2, Keyed: true}, pipeline.Start{}, false, evs...)
		require.Equal(t, want, pipeline.CommitPoint{Offset: c[moved].At, Metadata: c[moved].Metadata})

		// The first member loses its remaining partition: no commit,
		// neither then nor when it stops.
		kept := 1 - moved
		a.svc.Lose(context.Background(), map[string][]int32{e.events: {kept}})
		require.NoError(t, a.stop(t))
		require.NotContains(t, committed(t, e.seeds, e.group, e.events), kept, "a lost partition is never committed")
		require.NoError(t, b2.stop(t))
	})
}
