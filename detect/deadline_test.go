package detect_test

import (
	"cmp"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/keyheat/keyheat/internal/testenv"
	"github.com/keyheat/keyheat/schemas"
)

// TestPartitionWithoutInput: live, a partition with nothing to read at
// all does not hold the reports back: it says, on the progress topic,
// that it is idle without events, and the window is reported complete,
// with that partition's load 0.
func TestPartitionWithoutInput(t *testing.T) {
	testenv.EachBroker(t, func(t *testing.T, seeds []string) {
		e := newEnv(t, seeds, 2)
		base := time.Now().Add(-time.Minute).Truncate(time.Second).UnixMilli()
		produce(t, e.seeds, event(e.events, 0, "k", base), event(e.events, 0, "k", base+10), event(e.events, 0, "k", base+1100))
		cfg := e.config(t)
		cfg.Pipeline.IdleTimeout = time.Second
		r := start(t, cfg)
		// Both windows are reported: the second once partition 0 too
		// is idle and its clock follows the wall clock.
		var reps []*schemas.WindowReport
		testenv.Eventually(t, "the windows reported", func() bool {
			reps = nil
			for _, rec := range readAll(t, e.seeds, e.reports) {
				x, err := schemas.DecodeWindowReport(rec.Value)
				require.NoError(t, err)
				if x.Scope == schemas.ScopeCluster {
					reps = append(reps, x)
				}
			}
			return len(reps) == 2
		})
		require.NoError(t, r.stop(t))
		slices.SortFunc(reps, func(a, b *schemas.WindowReport) int { return cmp.Compare(a.StartMs, b.StartMs) })
		for i, rep := range reps {
			require.Equal(t, base+int64(i)*1000, rep.StartMs)
			require.False(t, rep.Partial, "a partition without input is not missing")
		}
		require.Equal(t, []schemas.PartitionLoad{{Topic: e.events, Partition: 0, Events: 2, Share: 1}, {Topic: e.events, Partition: 1}},
			reps[0].Skew.Partitions)
	})
}

// TestSilentPartitionGivenUp: a partition whose instance is gone without
// leaving the group (a crash; here a static member, which does not leave
// when it stops) is still assigned to it, and says nothing more; after
// the partition timeout, long before the group's session timeout, the
// merger reports the windows without it, naming it, with the other
// partitions' counts, and goes on reporting later windows.
func TestSilentPartitionGivenUp(t *testing.T) {
	testenv.EachBroker(t, func(t *testing.T, seeds []string) {
		e := newEnv(t, seeds, 1)
		other := newEnv(t, e.seeds, 1) // a second events topic, read by the instance that goes
		base := time.Now().Add(-time.Hour).Truncate(time.Second).UnixMilli()

		stays := e.config(t)
		stays.PartitionTimeout = 3 * time.Second
		stays.Pipeline.IdleTimeout = time.Hour
		goes := stays
		goes.Options.Topics = []string{other.events}
		goes.Merge = nil // never the merger
		goes.SessionTimeout = 5 * time.Minute
		goes.ClientOpts = append(slices.Clone(stays.ClientOpts), kgo.InstanceID(testenv.UniqueName(t, "static")))
		r := start(t, stays)
		testenv.Eventually(t, "the staying instance holds its partition", func() bool { return r.svc.Assigned() == 1 })
		g := start(t, goes)
		testenv.Eventually(t, "the going instance holds its partition", func() bool { return g.svc.Assigned() == 1 })
		testenv.Eventually(t, "the staying instance heard of it", func() bool { return r.svc.Heard(other.events, 0) })

		// Both topics have events in window 0; the going instance
		// reports it, then stops for good.
		produce(t, e.seeds, event(other.events, 0, "o", base+5), event(other.events, 0, "o", base+1500))
		produce(t, e.seeds, event(e.events, 0, "k", base+10), event(e.events, 0, "k", base+1100))
		first := map[int64]uint64{base: 2}
		got, partial := waitWindows(t, e.seeds, e.reports, first)
		require.Zero(t, partial)
		require.Equal(t, map[int64]uint64{base: 2}, got)
		require.NoError(t, g.stop(t))

		// Window 1 has events of both topics, but only the staying
		// instance reads: once the other topic's partition said
		// nothing for 3 s, window 1 is reported without it.
		produce(t, e.seeds, event(other.events, 0, "o", base+1600))
		produce(t, e.seeds, event(e.events, 0, "k", base+1200), event(e.events, 0, "k", base+2100), event(e.events, 0, "k", base+3100))
		got, _ = waitWindows(t, e.seeds, e.reports, map[int64]uint64{base: 2, base + 1000: 2, base + 2000: 1})
		require.Equal(t, map[int64]uint64{base: 2, base + 1000: 2, base + 2000: 1}, got)
		for _, rec := range readAll(t, e.seeds, e.reports) {
			x, err := schemas.DecodeWindowReport(rec.Value)
			require.NoError(t, err)
			if x.Scope != schemas.ScopeCluster || x.StartMs == base {
				continue
			}
			require.True(t, x.Partial, "window %d", x.StartMs)
			require.Equal(t, []string{other.events + "/0"}, x.Missing, "the silent partition is named")
		}
	})
}
