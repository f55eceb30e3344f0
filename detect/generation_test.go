package detect_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/keyheat/keyheat/internal/testenv"
	"github.com/keyheat/keyheat/schemas"
)

// TestGroupRecreatedGenerationRestarts: a detect group deleted (to read
// the topic again from the start) or expired while detect was stopped
// starts its generations at 1 again, while the progress topic still holds
// the old life's records of higher generations. The board takes the
// newest record whoever sent it, so the one instance of the new life,
// holding every partition, is heard and no window is reported partial.
func TestGroupRecreatedGenerationRestarts(t *testing.T) {
	testenv.EachBroker(t, func(t *testing.T, seeds []string) {
		e := newEnv(t, seeds, 2)
		base := time.Now().Add(-time.Hour).Truncate(time.Second).UnixMilli()

		// A first life of the group, with a rebalance or two: its
		// progress records carry generations above 1.
		cfg := e.config(t)
		cfg.PartitionTimeout = 3 * time.Second
		second := cfg
		second.Merge = nil
		produce(t, e.seeds, event(e.events, 0, "a", base+100), event(e.events, 1, "b", base+200),
			event(e.events, 0, "a", base+1100), event(e.events, 1, "b", base+1200))
		r1 := start(t, cfg)
		testenv.Eventually(t, "assigned", func() bool { return r1.svc.Assigned() == 2 })
		r2 := start(t, second)
		testenv.Eventually(t, "rebalanced", func() bool { return r1.svc.Assigned() == 1 && r2.svc.Assigned() == 1 })
		waitWindows(t, e.seeds, e.reports, map[int64]uint64{base: 2})
		require.NoError(t, r2.stop(t))
		testenv.Eventually(t, "rebalanced back", func() bool { return r1.svc.Assigned() == 2 })
		time.Sleep(time.Second)
		require.NoError(t, r1.stop(t))

		// The operator deletes the group to read the topic again from
		// the start; the same configuration is started again.
		ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard)
		defer cancel()
		_, err := e.admin(t).DeleteGroups(ctx, e.group)
		require.NoError(t, err)
		r := start(t, cfg)
		testenv.Eventually(t, "assigned again", func() bool { return r.svc.Assigned() == 2 })
		time.Sleep(5 * time.Second) // more than the partition timeout; the instance holds both partitions all along

		// Window base+10s: two events on partition 0, then one on
		// partition 1 a moment later.
		produce(t, e.seeds, event(e.events, 0, "a", base+10_100), event(e.events, 0, "a", base+10_200), event(e.events, 0, "a", base+11_100), event(e.events, 0, "a", base+12_100))
		time.Sleep(2 * time.Second)
		produce(t, e.seeds, event(e.events, 1, "b", base+10_300), event(e.events, 1, "b", base+11_200), event(e.events, 1, "b", base+12_100))
		waitWindows(t, e.seeds, e.reports, map[int64]uint64{base + 10_000: 3, base + 11_000: 2})
		for _, rec := range readAll(t, e.seeds, e.reports) {
			x, err := schemas.DecodeWindowReport(rec.Value)
			require.NoError(t, err)
			if x.Scope != schemas.ScopeCluster || x.StartMs < base+10_000 {
				continue
			}
			t.Logf("report %d events=%d partial=%v missing=%v", x.StartMs, x.Events, x.Partial, x.Missing)
			require.False(t, x.Partial, "window %d reported partial while the one instance holding every partition is alive", x.StartMs)
			if x.StartMs == base+10_000 {
				require.Equal(t, uint64(3), x.Events)
			}
		}
	})
}
