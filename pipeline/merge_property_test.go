package pipeline

import (
	"cmp"
	"hash/crc32"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/keyheat/keyheat/schemas"
	"github.com/keyheat/keyheat/sketch"
)

// mergeInOrder feeds ws to a new merger in the given order, one offset
// each, calling Ready after every Add, and Finish at the end.
func mergeInOrder(t testing.TB, cfg MergerConfig, ws []*schemas.PartitionWindow) []MergedWindow {
	t.Helper()
	m, err := NewMerger(cfg)
	require.NoError(t, err)
	var out []MergedWindow
	for i, w := range ws {
		require.NoError(t, m.Add(w, int64(i), 0))
		out = append(out, m.Ready(nil)...)
	}
	return append(out, m.Finish()...)
}

// byWindow orders summaries as they reach the windows topic in a steady
// state: window by window, partitions in any order within.
func byWindow(ws []*schemas.PartitionWindow) []*schemas.PartitionWindow {
	out := slices.Clone(ws)
	slices.SortStableFunc(out, func(a, b *schemas.PartitionWindow) int { return cmp.Compare(a.StartMs, b.StartMs) })
	return out
}

func testMergerConfig(topN int) MergerConfig {
	o := DefaultMergerOptions()
	o.TopN = topN
	o.MaxPendingWindows = 1000
	return MergerConfig{MergerOptions: o, Window: time.Second, Lateness: 2 * time.Second}
}

type rankedKey struct {
	exactKey
	count uint64
}

// exactTop ranks a window's exact counts, optionally of one app: count
// descending, then app and key.
func exactTop(counts map[exactKey]uint64, app string) []rankedKey {
	var out []rankedKey
	for k, n := range counts {
		if app == "" || k.app == app {
			out = append(out, rankedKey{k, n})
		}
	}
	slices.SortFunc(out, func(a, b rankedKey) int {
		if c := cmp.Compare(b.count, a.count); c != 0 {
			return c
		}
		if c := strings.Compare(a.app, b.app); c != 0 {
			return c
		}
		return strings.Compare(a.key, b.key)
	})
	return out
}

// requireBounds checks a report against the exact counts of its window:
// every listed key's true count lies within [Count − Error, Count], and
// every key with a true count above Floor is listed.
func requireBounds(t *testing.T, r schemas.WindowReport, counts map[exactKey]uint64) {
	t.Helper()
	listed := map[exactKey]bool{}
	for _, k := range r.Top {
		ek := exactKey{k.App, k.Key}
		listed[ek] = true
		n := counts[ek]
		require.LessOrEqual(t, k.Count-k.Error, n, "%s: %s/%s lower bound %d above true %d", r.ID, k.App, k.Key, k.Count-k.Error, n)
		require.GreaterOrEqual(t, k.Count, n, "%s: %s/%s count %d below true %d", r.ID, k.App, k.Key, k.Count, n)
	}
	for k, n := range counts {
		if r.Scope == schemas.ScopeApp && k.app != r.App {
			continue
		}
		if n > r.Floor {
			require.True(t, listed[k], "%s: %s/%s has %d events, above the floor %d, and is not in Top", r.ID, k.app, k.key, n, r.Floor)
		}
	}
}

func TestMergeKeyedTopIsExact(t *testing.T) {
	apps := []string{"cart", "search", "shop"}
	events := mergeZipfEvents(1, 30_000, 400, 1.1, apps, 1_700_000_000_000, 3000)
	f := mergeFixture{topic: "keyheat.events", partitions: 8, windowMs: 1000, keyed: true, capacity: 1024}
	exact := mergeExactCounts(events, 1000)
	got := mergeInOrder(t, testMergerConfig(50), byWindow(f.build(t, events)))
	require.Len(t, got, 3)
	for _, mw := range got {
		counts := exact[mw.StartMs]
		for _, r := range mw.Reports {
			require.False(t, r.Partial)
			require.True(t, r.Keyed)
			app := r.App
			want := exactTop(counts, app)
			var events uint64
			for _, k := range want {
				events += k.count
			}
			require.Equal(t, events, r.Events, "%s events", r.ID)
			require.Len(t, r.Top, min(50, len(want)), r.ID)
			for i, k := range r.Top {
				require.Equal(t, want[i].exactKey, exactKey{k.App, k.Key}, "%s rank %d", r.ID, i)
				require.Equal(t, want[i].count, k.Count, "%s %s count", r.ID, k.Key)
				require.Zero(t, k.Error, "%s %s: keyed tops that never filled are exact", r.ID, k.Key)
				require.Equal(t, int32(crc32.ChecksumIEEE([]byte(k.Key))%8), k.Partition, "%s %s lives on one partition", r.ID, k.Key)
			}
			if len(want) > 50 {
				require.Equal(t, want[50].count, r.Floor, "%s floor is the first count cut", r.ID)
			}
			requireBounds(t, r, counts)
		}
	}
}

func TestMergeKeyedBounds(t *testing.T) {
	// TopKs far smaller than the keys: partitions list estimates with error
	// bounds and floors, and the union must keep them.
	for _, tc := range []struct {
		name                 string
		capacity, list, topN int
		filter               sketch.CountMinConfig
	}{
		{"full tops", 32, 0, 40, sketch.CountMinConfig{}},
		{"cut lists", 64, 20, 40, sketch.CountMinConfig{}},
		// Nothing cut by the merger: the floor comes from the partitions.
		{"all listed", 32, 0, 1000, sketch.CountMinConfig{}},
		// Admission estimates well above the truth: wide error bounds.
		{"narrow filter", 32, 0, 40, sketch.CountMinConfig{Depth: 1, Width: 8}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			events := mergeZipfEvents(2, 40_000, 5000, 1.05, []string{"a", "b"}, 0, 2000)
			f := mergeFixture{topic: "t", partitions: 4, windowMs: 1000, keyed: true, capacity: tc.capacity, list: tc.list, filter: tc.filter}
			exact := mergeExactCounts(events, 1000)
			got := mergeInOrder(t, testMergerConfig(tc.topN), byWindow(f.build(t, events)))
			require.Len(t, got, 2)
			for _, mw := range got {
				for _, r := range mw.Reports {
					requireBounds(t, r, exact[mw.StartMs])
					require.NotZero(t, r.Floor, "the tops overflowed, so the floor is not 0")
				}
			}
		})
	}
}

func TestMergeUnkeyedBounds(t *testing.T) {
	for _, tc := range []struct {
		name                 string
		capacity, list, topN int
		cms, filter          sketch.CountMinConfig
	}{
		{"default sketch", 64, 0, 25, sketch.CountMinConfig{}, sketch.CountMinConfig{}},
		{"narrow sketch", 32, 0, 25, sketch.CountMinConfig{Depth: 2, Width: 64}, sketch.CountMinConfig{}},
		{"cut lists", 128, 30, 25, sketch.CountMinConfig{Width: 512}, sketch.CountMinConfig{}},
		{"all listed", 32, 0, 5000, sketch.CountMinConfig{}, sketch.CountMinConfig{}},
		{"narrow filter", 32, 0, 25, sketch.CountMinConfig{Width: 256}, sketch.CountMinConfig{Depth: 1, Width: 8}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			events := mergeZipfEvents(3, 40_000, 3000, 1.1, []string{"a", "b", "c"}, 5000, 3000)
			f := mergeFixture{topic: "raw", partitions: 6, windowMs: 1000, capacity: tc.capacity, list: tc.list, cms: tc.cms, filter: tc.filter}
			exact := mergeExactCounts(events, 1000)
			// The partitions each key's events went to, per window.
			parts := map[int64]map[exactKey]map[int32]bool{}
			for i, e := range events {
				start := e.tsMs / 1000 * 1000
				if parts[start] == nil {
					parts[start] = map[exactKey]map[int32]bool{}
				}
				k := exactKey{e.app, e.key}
				if parts[start][k] == nil {
					parts[start][k] = map[int32]bool{}
				}
				parts[start][k][f.partitionOf(e, i)] = true
			}
			got := mergeInOrder(t, testMergerConfig(tc.topN), byWindow(f.build(t, events)))
			require.Len(t, got, 3)
			for _, mw := range got {
				for _, r := range mw.Reports {
					require.False(t, r.Keyed)
					requireBounds(t, r, exact[mw.StartMs])
					for _, k := range r.Top {
						on := parts[mw.StartMs][exactKey{k.App, k.Key}]
						if k.Partition >= 0 {
							require.Equal(t, map[int32]bool{k.Partition: true}, on, "%s %s: a partition is named only when it had every event", r.ID, k.Key)
						}
						if len(on) > 1 {
							require.Equal(t, int32(-1), k.Partition, "%s %s: spread over partitions", r.ID, k.Key)
						}
					}
				}
				// The heaviest keys of Zipf 1.1 stand far above the floor:
				// the merged top must start with the true top 5.
				want := exactTop(exact[mw.StartMs], "")
				for i := range 5 {
					require.Equal(t, want[i].exactKey, exactKey{mw.Reports[0].Top[i].App, mw.Reports[0].Top[i].Key}, "rank %d", i)
				}
			}
		})
	}
}

func TestMergeUnkeyedCountMinTightens(t *testing.T) {
	// A key listed by one partition only: the others contribute their
	// Count-Min estimate, not their whole floor.
	events := mergeZipfEvents(4, 20_000, 2000, 1.1, []string{"a"}, 0, 1000)
	f := mergeFixture{topic: "raw", partitions: 4, windowMs: 1000, capacity: 32}
	withSketch := mergeInOrder(t, testMergerConfig(100), f.build(t, events))
	ws := f.build(t, events)
	for _, w := range ws {
		for i := range w.Apps {
			w.Apps[i].Sketch = nil
		}
	}
	floorsOnly := mergeInOrder(t, testMergerConfig(100), ws)
	var errSketch, errFloor uint64
	for i, k := range withSketch[0].Reports[0].Top {
		errSketch += k.Error
		errFloor += floorsOnly[0].Reports[0].Top[i].Error
	}
	require.Less(t, errSketch, errFloor, "Count-Min estimates bound unlisted partitions tighter than floors")
	requireBounds(t, floorsOnly[0].Reports[0], mergeExactCounts(events, 1000)[0])
}

func TestMergeDistinct(t *testing.T) {
	events := mergeZipfEvents(5, 20_000, 3000, 0.8+0.3, []string{"a", "b"}, 0, 1000)
	distinct := map[string]bool{}
	perApp := map[string]map[string]bool{"a": {}, "b": {}}
	for _, e := range events {
		distinct[e.key] = true
		perApp[e.app][e.key] = true
	}
	for _, keyed := range []bool{true, false} {
		f := mergeFixture{topic: "t", partitions: 5, windowMs: 1000, keyed: keyed, capacity: 64}
		got := mergeInOrder(t, testMergerConfig(10), f.build(t, events))
		require.Len(t, got, 1)
		rs := got[0].Reports
		require.InEpsilon(t, len(distinct), rs[0].Distinct, 0.03, "cluster: distinct key strings, keyed=%v", keyed)
		require.InEpsilon(t, len(perApp["a"]), rs[1].Distinct, 0.03, "app a, keyed=%v", keyed)
		require.InEpsilon(t, len(perApp["b"]), rs[2].Distinct, 0.03, "app b, keyed=%v", keyed)
	}
}

func TestMergeTopicsAddUp(t *testing.T) {
	// One keyed and one round-robin topic share the keys: bounds add up
	// over topics, and a key one topic does not list still gets that
	// topic's floor.
	events := mergeZipfEvents(6, 40_000, 3000, 1.1, []string{"a", "b"}, 0, 2000)
	var toK, toU []mergeEvent
	for i, e := range events {
		if i%3 == 0 {
			toU = append(toU, e)
		} else {
			toK = append(toK, e)
		}
	}
	fk := mergeFixture{topic: "keyed", partitions: 4, windowMs: 1000, keyed: true, capacity: 16}
	fu := mergeFixture{topic: "spread", partitions: 3, windowMs: 1000, capacity: 64, cms: sketch.CountMinConfig{Width: 256}}
	ws := append(fk.build(t, toK), fu.build(t, toU)...)
	exact := mergeExactCounts(events, 1000)

	// Unannounced, the second topic's first summaries come after the first
	// window completed: they are late.
	m, err := NewMerger(testMergerConfig(30))
	require.NoError(t, err)
	var early []MergedWindow
	for i, w := range byWindow(ws) {
		require.NoError(t, m.Add(w, int64(i), 0))
		early = append(early, m.Ready(nil)...)
	}
	require.Equal(t, []string{"keyed"}, early[0].Reports[0].Topics)
	require.Equal(t, int64(3), m.Stats().Late.Load(), "the spread topic's three summaries of the first window")

	for _, topN := range []int{30, 5000} {
		cfg := testMergerConfig(topN)
		cfg.Topics = map[string]int32{"keyed": 4, "spread": 3}
		got := mergeInOrder(t, cfg, byWindow(ws))
		require.Len(t, got, 2)
		for _, mw := range got {
			for _, r := range mw.Reports {
				require.Equal(t, []string{"keyed", "spread"}, r.Topics)
				require.False(t, r.Keyed, "one topic is not keyed")
				requireBounds(t, r, exact[mw.StartMs])
			}
			require.Len(t, mw.Reports[0].Skew.Partitions, 7, "4 + 3 partitions")
		}
	}
}
