package detect_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/keyheat/keyheat/internal/testenv"
	"github.com/keyheat/keyheat/schemas"
)

// TestBacklogIntoRunningDetect: TestLiveCatchUpUnevenPartitions with
// detect running before the backlog lands (a service started first, then
// the producer or a backfill). Every partition is empty when assigned;
// the light partitions' records come first. An empty partition holds the
// others back until its idle timeout, as one that has not taken its first
// event does, and a worker asks the aligner again whenever a limit it was
// given may have fallen (a partition joined or took its first event, the
// board heard news): the light partitions never run more than the drift
// past the dense one while it reads, and every window is complete.
func TestBacklogIntoRunningDetect(t *testing.T) {
	testenv.EachBroker(t, func(t *testing.T, seeds []string) {
		const parts, windows = 4, 120
		e := newEnv(t, seeds, parts)
		cfg := e.config(t)
		cfg.Options.MaxPollRecords = 1000
		// Idling does not matter here: the backlog's windows are all
		// closed by its own events but the last two, which are not
		// checked.
		r := start(t, cfg)
		testenv.Eventually(t, "assigned", func() bool { return r.svc.Assigned() == parts })
		time.Sleep(2 * time.Second)

		base := time.Now().Add(-5 * time.Minute).Truncate(time.Second).UnixMilli()
		want := map[int64]uint64{}
		// Every partition's records go out together, the light ones
		// first (one produce call; each partition a few batches).
		var recs []*kgo.Record
		for w := range int64(windows + 2) {
			start := base + w*1000
			for p := int32(1); p < parts; p++ {
				key := fmt.Sprintf("light:%d", p)
				ev := accessEvent(key, start+int64(p))
				recs = append(recs, &kgo.Record{Topic: e.events, Partition: p, Key: []byte(key), Value: schemas.AppendJSON(nil, &ev)})
				if w < windows {
					want[start]++
				}
			}
		}
		for w := range int64(windows + 2) {
			start := base + w*1000
			for i := range 300 {
				key := fmt.Sprintf("dense:%d", i%50)
				ev := accessEvent(key, start+int64(i))
				recs = append(recs, &kgo.Record{Topic: e.events, Partition: 0, Key: []byte(key), Value: schemas.AppendJSON(nil, &ev)})
				if w < windows {
					want[start]++
				}
			}
		}
		produce(t, e.seeds, recs...)
		got, partial := waitWindows(t, e.seeds, e.reports, want)
		// The progress records say where each partition was. A
		// partition sends one when its window moves, at most every
		// 100 ms, so the dense partition's clock while a light one
		// sent lies between its record before and its record after:
		// measured against the one after, a light partition more than
		// the cap past it certainly was.
		type rec struct {
			part  int32
			clock int64
		}
		var recs2 []rec
		for _, r := range readAll(t, e.seeds, e.progress) {
			p, err := schemas.DecodeProgress(r.Value)
			if err != nil || p.IsMember() || p.State != schemas.ProgressReading {
				continue
			}
			recs2 = append(recs2, rec{p.Partition, p.ClockMs})
		}
		worst := int64(0)
		for i, r := range recs2 {
			if r.part == 0 {
				continue
			}
			for _, d := range recs2[i+1:] {
				if d.part == 0 {
					worst = max(worst, r.clock/1000-d.clock/1000)
					break
				}
			}
		}
		for w := range got {
			if _, ok := want[w]; !ok {
				delete(got, w)
			}
		}
		require.LessOrEqual(t, worst, int64(cfg.Merge.MaxPendingWindows),
			"a light partition ran more than max_pending_windows windows past the dense one while that one was reading")
		require.Zero(t, partial, "no window is reported partial")
		require.Equal(t, want, got, "every window's cluster total is exact")
	})
}
