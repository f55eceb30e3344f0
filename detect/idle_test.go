package detect_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/keyheat/keyheat/internal/testenv"
	"github.com/keyheat/keyheat/schemas"
)

// TestIdleWithoutEventsThenOlderEvents: live, a partition that never had
// an event and went idle says, on the progress topic, that it has no event
// in any window ending by its wall clock minus the lateness, and the
// merger reports those windows without it. Its first events, with older
// times (a backfill started after detect, a producer whose batches for
// this partition come later than the others'), are then late in the
// partition too, counted in a report's late: every event is in a report's
// events or late, none vanishes.
func TestIdleWithoutEventsThenOlderEvents(t *testing.T) {
	testenv.EachBroker(t, func(t *testing.T, seeds []string) {
		e := newEnv(t, seeds, 2)
		cfg := e.config(t)
		cfg.Pipeline.IdleTimeout = time.Second
		r := start(t, cfg)
		testenv.Eventually(t, "both partitions assigned", func() bool { return r.svc.Assigned() == 2 })
		time.Sleep(3 * time.Second) // both idle, without events: their clocks follow the wall clock

		base := time.Now().Add(-time.Minute).Truncate(time.Second).UnixMilli()
		// Partition 0 takes events of windows base and base+1s.
		produce(t, e.seeds, event(e.events, 0, "a", base+100), event(e.events, 0, "a", base+200), event(e.events, 0, "a", base+1100))
		waitWindows(t, e.seeds, e.reports, map[int64]uint64{base: 2})

		// Partition 1's first events, of the same windows.
		produce(t, e.seeds, event(e.events, 1, "b", base+300), event(e.events, 1, "b", base+400), event(e.events, 1, "b", base+1200))
		time.Sleep(6 * time.Second) // idle timeout and more: every window closes

		var events, late uint64
		for _, rec := range readAll(t, e.seeds, e.reports) {
			x, err := schemas.DecodeWindowReport(rec.Value)
			require.NoError(t, err)
			if x.Scope == schemas.ScopeCluster {
				t.Logf("report %d events=%d late=%d partial=%v missing=%v", x.StartMs, x.Events, x.Late, x.Partial, x.Missing)
				events += x.Events
				late += x.Late
			}
		}
		require.NoError(t, r.stop(t))
		require.Equal(t, uint64(6), events+late,
			"every event is in a report's events or late (README: events that reach an idle partition later with older times are late, counted in the report's late)")
	})
}
