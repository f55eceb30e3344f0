package pipeline

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/keyheat/keyheat/schemas"
	"github.com/keyheat/keyheat/sketch"
)

// plannedKey is a key of a golden scenario: count events per window, the
// first writes of them writes, each of bytes bytes and latencyUs µs.
type plannedKey struct {
	app, key         string
	count, writes    int
	bytes, latencyUs uint64
}

// plan spreads the planned keys' events over each window, interleaved so
// no key's events are contiguous, at event times inside the window.
func planMergeEvents(windowStarts []int64, keys []plannedKey) []mergeEvent {
	var out []mergeEvent
	for _, start := range windowStarts {
		left := make([]int, len(keys))
		for i, k := range keys {
			left[i] = k.count
		}
		for n := 0; ; n++ {
			more := false
			for i, k := range keys {
				if left[i] == 0 {
					continue
				}
				more = true
				done := k.count - left[i]
				out = append(out, mergeEvent{app: k.app, key: k.key, tsMs: start + int64(n%1000),
					bytes: k.bytes, write: done < k.writes, latencyUs: k.latencyUs})
				left[i]--
			}
			if !more {
				break
			}
		}
	}
	return out
}

func TestMergeGolden(t *testing.T) {
	shop := []plannedKey{
		{"shop", "product:42", 60, 2, 512, 300},
		{"shop", "product:7", 25, 20, 128, 100},
		{"shop", "cart:user1000:items", 12, 6, 2048, 900},
		{"shop", "cart:user1000:total", 8, 8, 64, 50},
		{"shop", "session:abc", 5, 0, 10_000, 20},
		{"shop", "product:9", 3, 0, 100, 10},
		{"cart", "basket:1", 30, 30, 256, 400},
		{"cart", "basket:2", 4, 1, 256, 400},
		{"search", "q:shoes", 9, 0, 40, 8000},
		{"search", "q:hats", 2, 0, 40, 7000},
		{"ads", "slot:top", 1, 0, 20, 5},
	}
	threshold := func(app, key string) (float64, bool) {
		if strings.HasPrefix(key, "session:") {
			return 0, false // no rule watches sessions
		}
		return 10, true
	}
	for _, tc := range []struct {
		name   string
		f      mergeFixture
		events []mergeEvent
		change func(*MergerConfig)
		// drop removes summaries before the merge, to show a partition
		// that never reports.
		drop func(*schemas.PartitionWindow) bool
	}{
		{
			name:   "keyed",
			f:      mergeFixture{topic: "keyheat.events", partitions: 3, windowMs: 1000, keyed: true, capacity: 16, big: 3, idle: true},
			events: planMergeEvents([]int64{1_767_225_600_000, 1_767_225_601_000}, shop),
			change: func(c *MergerConfig) {
				c.TopN = 5
				c.HotSlots = 3
				c.RedisCluster.Nodes = []string{"redis-a", "redis-b", "redis-c"}
				c.SplitCapacity = 4
				c.Threshold = threshold
			},
		},
		{
			// Tiny tops and a narrow Count-Min sketch: error bounds and the
			// floor show.
			name: "unkeyed",
			f: mergeFixture{topic: "raw.logs", partitions: 3, windowMs: 1000, capacity: 3, big: 2, idle: true,
				cms: sketch.CountMinConfig{Depth: 2, Width: 8}},
			events: planMergeEvents([]int64{1_767_225_600_000}, shop),
			change: func(c *MergerConfig) {
				c.TopN = 4
				c.HotSlots = 2
				c.RedisCluster.Ranges = []NodeSlots{{"r1", 0, 99}, {"r2", 100, 16383}}
			},
		},
		{
			name:   "partial",
			f:      mergeFixture{topic: "keyheat.events", partitions: 3, windowMs: 1000, keyed: true, capacity: 16, idle: true},
			events: planMergeEvents([]int64{1_767_225_600_000}, shop),
			change: func(c *MergerConfig) { c.TopN = 3; c.HotSlots = 0 },
			drop:   func(w *schemas.PartitionWindow) bool { return w.Partition == 1 },
		},
		{
			name:   "folded",
			f:      mergeFixture{topic: "keyheat.events", partitions: 2, windowMs: 1000, keyed: true, capacity: 16, idle: true},
			events: planMergeEvents([]int64{1_767_225_600_000}, shop),
			change: func(c *MergerConfig) { c.TopN = 3; c.HotSlots = 0; c.MaxApps = 2 },
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testMergerConfig(100)
			tc.change(&cfg)
			var ws []*schemas.PartitionWindow
			for _, w := range tc.f.build(t, tc.events) {
				if tc.drop == nil || !tc.drop(w) {
					ws = append(ws, w)
				}
			}
			got := mergeInOrder(t, cfg, byWindow(ws))
			var reports []schemas.WindowReport
			for _, mw := range got {
				reports = append(reports, mw.Reports...)
			}
			b, err := json.MarshalIndent(reports, "", "  ")
			require.NoError(t, err)
			b = append(b, '\n')
			path := filepath.Join("testdata", "merge_"+tc.name+".json")
			if *update {
				require.NoError(t, os.MkdirAll("testdata", 0o755))
				require.NoError(t, os.WriteFile(path, b, 0o644))
			}
			want, err := os.ReadFile(path)
			require.NoError(t, err, "run go test ./pipeline -run TestMergeGolden -update to create it")
			require.Equal(t, string(want), string(b), "reports differ from %s; if the change is intended, rerun with -update and review the diff", path)
		})
	}
}
