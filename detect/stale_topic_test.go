package detect_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/keyheat/keyheat/internal/testenv"
	"github.com/keyheat/keyheat/schemas"
)

// TestTopicDroppedFromConfig: a topic the group read and reads no more
// (taken out of detect.topics) is not waited for or named missing by a
// later run, although the progress topic and the windows topic still hold
// records of it: the merger expects what the group is assigned.
func TestTopicDroppedFromConfig(t *testing.T) {
	testenv.EachBroker(t, func(t *testing.T, seeds []string) {
		e := newEnv(t, seeds, 1)
		old := newEnv(t, e.seeds, 1) // a second events topic, read by the first run only
		base := time.Now().Add(-time.Hour).Truncate(time.Second).UnixMilli()

		cfg := e.config(t)
		cfg.PartitionTimeout = 2 * time.Second
		both := cfg
		both.Options.Topics = []string{e.events, old.events}
		produce(t, e.seeds, event(e.events, 0, "a", base+100), event(old.events, 0, "o", base+200),
			event(e.events, 0, "a", base+1100), event(old.events, 0, "o", base+1200))
		r := start(t, both)
		waitWindows(t, e.seeds, e.reports, map[int64]uint64{base: 2})
		require.NoError(t, r.stop(t))

		// The operator stops reading the old topic.
		one := cfg
		one.Options.Topics = []string{e.events}
		r = start(t, one)
		produce(t, e.seeds, event(e.events, 0, "a", base+10_100), event(e.events, 0, "a", base+11_100), event(e.events, 0, "a", base+12_100))
		got, _ := waitWindows(t, e.seeds, e.reports, map[int64]uint64{base + 10_000: 1, base + 11_000: 1})
		require.Equal(t, uint64(1), got[base+10_000])
		for _, rec := range readAll(t, e.seeds, e.reports) {
			x, err := schemas.DecodeWindowReport(rec.Value)
			require.NoError(t, err)
			if x.Scope != schemas.ScopeCluster || x.StartMs < base+10_000 {
				continue
			}
			t.Logf("report %d events=%d partial=%v missing=%v", x.StartMs, x.Events, x.Partial, x.Missing)
			require.False(t, x.Partial, "window %d partial, missing a topic no instance is configured to read", x.StartMs)
		}
		require.NoError(t, r.stop(t))
	})
}
