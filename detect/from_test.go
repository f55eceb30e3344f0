package detect_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/keyheat/keyheat/detect"
	"github.com/keyheat/keyheat/internal/testenv"
	"github.com/keyheat/keyheat/schemas"
)

// stamped is event as a record with the given record timestamp.
func stamped(topic, key string, tsMs int64, at time.Time) *kgo.Record {
	r := event(topic, 0, key, tsMs)
	r.Timestamp = at
	return r
}

// windowKeys returns the events and the keys of every window summary on
// the windows topic.
func windowKeys(t *testing.T, e *env) (events uint64, keys map[string]uint64, firstMs int64) {
	t.Helper()
	keys = map[string]uint64{}
	firstMs = -1
	for _, r := range readAll(t, e.seeds, e.windows) {
		w, err := schemas.DecodePartitionWindow(r.Value)
		require.NoError(t, err)
		events += w.Events
		if firstMs < 0 || w.StartMs < firstMs {
			firstMs = w.StartMs
		}
		for _, a := range w.Apps {
			for _, k := range a.Top {
				keys[k.Key] += k.Count
			}
		}
	}
	return events, keys, firstMs
}

// TestFrom: a group with no commit starts where --from says: at an RFC
// 3339 time, the first record stamped at or after it; at latest, only
// records produced after it joined.
func TestFrom(t *testing.T) {
	testenv.EachBroker(t, func(t *testing.T, seeds []string) {
		t.Run("time", func(t *testing.T) {
			e := newEnv(t, seeds, 1)
			base := time.Now().Add(-time.Minute).Truncate(time.Second).UnixMilli()
			old, cut, recent := time.Now().Add(-2*time.Hour), time.Now().Add(-90*time.Minute), time.Now().Add(-time.Hour)
			produce(t, e.seeds,
				stamped(e.events, "old", base, old), stamped(e.events, "old", base+1, old),
				stamped(e.events, "new", base+2, recent), stamped(e.events, "new", base+1500, recent))
			cfg := e.config(t)
			cfg.From = cut.UTC().Format(time.RFC3339)
			runToEnd(t, cfg)
			events, keys, _ := windowKeys(t, e)
			require.EqualValues(t, 2, events, "only the records stamped after %s", cfg.From)
			require.Equal(t, map[string]uint64{"new": 2}, keys)
		})
		t.Run("latest", func(t *testing.T) {
			e := newEnv(t, seeds, 1)
			base := time.Now().Add(-time.Minute).Truncate(time.Second).UnixMilli()
			produce(t, e.seeds, event(e.events, 0, "old", base-5000), event(e.events, 0, "old", base-3000))
			cfg := e.config(t)
			cfg.From = detect.FromLatest
			r := startMember(t, cfg)
			r.waitLog(t, `msg="partitions assigned" partitions="?map\[\S+:\[0\]`)
			// Whether the member has found the end yet is not visible:
			// new events go on until a window of them is summarised.
			next := base
			testenv.Eventually(t, "a window of new events", func() bool {
				produce(t, e.seeds, event(e.events, 0, "new", next))
				next += 1100
				events, _, _ := windowKeys(t, e)
				return events > 0
			})
			require.NoError(t, r.stop(t))
			_, keys, firstMs := windowKeys(t, e)
			require.NotContains(t, keys, "old", "records from before the member joined are not read")
			require.GreaterOrEqual(t, firstMs, base, "no window of the old records")
		})
	})
}
