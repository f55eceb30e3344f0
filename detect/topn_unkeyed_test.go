package detect_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/keyheat/keyheat/detect"
	"github.com/keyheat/keyheat/internal/testenv"
	"github.com/keyheat/keyheat/schemas"
)

// TestTopNUnkeyedWithinBounds: on a topic written round-robin (a key's
// events on every partition, records without a key), the merged reports
// sum the partitions' sketches: every listed key's true count, as a map
// of every event counts it, lies in [Count − Error, Count], every key not
// listed has at most the report's Floor, and the heaviest keys are listed.
func TestTopNUnkeyedWithinBounds(t *testing.T) {
	testenv.EachBroker(t, func(t *testing.T, seeds []string) {
		e := newEnv(t, seeds, 4)
		base := time.Now().Add(-time.Minute).Truncate(time.Second).UnixMilli()
		exact := map[int64]map[string]uint64{}
		var recs []*kgo.Record
		const n = 30_000
		for i := range n {
			r := 1 + (i*7919)%3000
			if i%2 == 0 {
				r = 1 + (i/2*31)%40
			}
			ev := accessEvent(fmt.Sprintf("key:%d", r), base+int64(i)*1900/n)
			w := ev.TimeMs - ev.TimeMs%1000
			if exact[w] == nil {
				exact[w] = map[string]uint64{}
			}
			exact[w][ev.Key]++
			recs = append(recs, &kgo.Record{Topic: e.events, Partition: int32(i % 4), Value: schemas.AppendJSON(nil, &ev)})
		}
		produceMany(t, e.seeds, recs)
		cfg := e.config(t)
		cfg.Keyed = detect.KeyedFalse
		runToEnd(t, cfg)

		seen := 0
		for _, r := range readAll(t, e.seeds, e.reports) {
			rep, err := schemas.DecodeWindowReport(r.Value)
			require.NoError(t, err)
			if rep.Scope != schemas.ScopeCluster {
				continue
			}
			truth := exact[rep.StartMs]
			require.NotNil(t, truth, "window %d has no events", rep.StartMs)
			require.False(t, rep.Keyed)
			require.False(t, rep.Partial)
			seen++
			listed := map[string]bool{}
			for _, k := range rep.Top {
				listed[k.Key] = true
				require.LessOrEqual(t, k.Count-k.Error, truth[k.Key], "%s: count %d error %d, true %d", k.Key, k.Count, k.Error, truth[k.Key])
				require.GreaterOrEqual(t, k.Count, truth[k.Key], "%s: count %d below true %d", k.Key, k.Count, truth[k.Key])
			}
			for k, c := range truth {
				if !listed[k] {
					require.LessOrEqual(t, c, rep.Floor, "%s: true %d, not listed, above the floor", k, c)
				}
			}
			for r := 1; r <= 40; r++ {
				require.True(t, listed[fmt.Sprintf("key:%d", r)], "window %d: heavy key:%d listed", rep.StartMs, r)
			}
		}
		require.Equal(t, 2, seen, "both windows reported")
	})
}
