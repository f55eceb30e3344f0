package detect_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/keyheat/keyheat/detect"
	"github.com/keyheat/keyheat/internal/testenv"
	"github.com/keyheat/keyheat/schemas"
)

// TestExitAtEndUnevenPartitions: an --exit-at-end batch run over a
// backlog reports every window complete with every event, whatever the
// speed at which its partitions are read, on a starved machine.
// Partition 0 holds one event a window and is read in one poll,
// partition 1 holds 300 and takes many: without alignment partition 0
// runs far more than merge.max_pending_windows windows ahead, the merger
// releases the old windows partial and drops partition 1's summaries of
// them when they come.
func TestExitAtEndUnevenPartitions(t *testing.T) {
	testenv.EachBroker(t, func(t *testing.T, seeds []string) {
		e := newEnv(t, seeds, 2)
		const windows = 100
		base := time.Now().Add(-time.Hour).Truncate(time.Second).UnixMilli()
		want := map[int64]uint64{}
		var recs []*kgo.Record
		for w := range int64(windows) {
			// Partition 0: one event a window, read in one poll.
			ev := accessEvent("light", base+w*1000)
			recs = append(recs, &kgo.Record{Topic: e.events, Partition: 0, Key: []byte("light"), Value: schemas.AppendJSON(nil, &ev)})
			want[base+w*1000]++
			// Partition 1: 300 events a window, many polls.
			for i := range 300 {
				key := fmt.Sprintf("heavy:%d", i%50)
				ev := accessEvent(key, base+w*1000+int64(i))
				recs = append(recs, &kgo.Record{Topic: e.events, Partition: 1, Key: []byte(key), Value: schemas.AppendJSON(nil, &ev)})
				want[base+w*1000]++
			}
		}
		produce(t, e.seeds, recs...)
		starveCPU(t)
		cfg := e.config(t)
		cfg.ExitAtEnd = true
		cfg.Options.MaxPollRecords = 1000
		svc, err := detect.New(cfg)
		require.NoError(t, err)
		ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
		defer cancel()
		require.NoError(t, svc.Run(ctx))

		got := map[int64]uint64{}
		partial := 0
		for _, r := range readAll(t, e.seeds, e.reports) {
			x, err := schemas.DecodeWindowReport(r.Value)
			require.NoError(t, err)
			if x.Scope != schemas.ScopeCluster {
				continue
			}
			got[x.StartMs] += x.Events
			if x.Partial {
				partial++
			}
		}
		require.Zero(t, partial, "an --exit-at-end run reports no window partial")
		require.Equal(t, want, got, "every window's cluster total is exact")
	})
}

// TestLiveCatchUpUnevenPartitions: a live run that starts over a backlog
// of more than merge.max_pending_windows windows (a restart after a crash
// or an outage) catches up, on a starved machine, with every window
// complete and every event reported, although one partition holds
// hundreds of times the events of the others: the light partitions wait
// for the dense one instead of running ahead of it, and the merger waits
// for the dense one however slowly it moves.
func TestLiveCatchUpUnevenPartitions(t *testing.T) {
	testenv.EachBroker(t, func(t *testing.T, seeds []string) {
		const parts, windows = 4, 60
		e := newEnv(t, seeds, parts)
		base := time.Now().Add(-5 * time.Minute).Truncate(time.Second).UnixMilli()
		want := map[int64]uint64{}
		var recs []*kgo.Record
		for w := range int64(windows) {
			start := base + w*1000
			for p := int32(1); p < parts; p++ {
				key := fmt.Sprintf("light:%d", p)
				ev := accessEvent(key, start+int64(p))
				recs = append(recs, &kgo.Record{Topic: e.events, Partition: p, Key: []byte(key), Value: schemas.AppendJSON(nil, &ev)})
				want[start]++
			}
			for i := range 300 {
				key := fmt.Sprintf("dense:%d", i%50)
				ev := accessEvent(key, start+int64(i))
				recs = append(recs, &kgo.Record{Topic: e.events, Partition: 0, Key: []byte(key), Value: schemas.AppendJSON(nil, &ev)})
				want[start]++
			}
		}
		produceMany(t, e.seeds, recs)
		starveCPU(t)
		cfg := e.config(t)
		cfg.Options.MaxPollRecords = 1000
		// The backlog's last windows close by the wall clock once the
		// partitions are idle.
		cfg.Pipeline.IdleTimeout = time.Second
		require.Greater(t, windows, cfg.Merge.MaxPendingWindows, "the backlog spans more than max_pending_windows windows")
		start(t, cfg)

		// Once idle, the partitions' clocks move to the wall clock, and
		// the backlog's last windows close.
		got, partial := waitWindows(t, e.seeds, e.reports, want)
		require.Zero(t, partial, "no window is reported partial")
		require.Equal(t, want, got, "every window's cluster total is exact")
	})
}
