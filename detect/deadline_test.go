package detect_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/keyheat/keyheat/schemas"
)

// TestMergerNamesMissingPartitions: live, a partition that never reports
// a window (no input at all) does not hold the reports back for ever: once
// the deadline after the window's first summary passes, the window is
// reported once, Partial, naming the silent partition, with the other
// partition's counts.
func TestMergerNamesMissingPartitions(t *testing.T) {
	for _, b := range brokers {
		t.Run(b.name, func(t *testing.T) {
			e := newEnv(t, b.seeds(t), 2)
			base := time.Now().Add(-time.Minute).Truncate(time.Second).UnixMilli()
			produce(t, e.seeds, event(e.events, 0, "k", base), event(e.events, 0, "k", base+10), event(e.events, 0, "k", base+1100))
			cfg := e.config(t)
			cfg.Merge.ExtraWait = 100 * time.Millisecond
			r := start(t, cfg)
			var rep *schemas.WindowReport
			eventually(t, "the window reported after the deadline", func() bool {
				for _, rec := range readAll(t, e.seeds, e.reports) {
					x, err := schemas.DecodeWindowReport(rec.Value)
					require.NoError(t, err)
					if x.Scope == schemas.ScopeCluster {
						rep = x
					}
				}
				return rep != nil
			})
			require.NoError(t, r.stop(t))
			require.Equal(t, base, rep.StartMs)
			require.True(t, rep.Partial)
			require.Equal(t, []string{e.events + "/1"}, rep.Missing, "the silent partition is named")
			require.EqualValues(t, 2, rep.Events)
			n := 0
			for _, rec := range readAll(t, e.seeds, e.reports) {
				if x, _ := schemas.DecodeWindowReport(rec.Value); x.Scope == schemas.ScopeCluster {
					n++
				}
			}
			require.Equal(t, 1, n, "the window is reported once; the open one is not")
		})
	}
}
