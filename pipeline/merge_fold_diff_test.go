package pipeline

import (
	"cmp"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/keyheat/keyheat/schemas"
	"github.com/keyheat/keyheat/sketch"
)

// The merger folds every listed key of an app, or, for an app of many
// listed entries, first rules out the keys that cannot reach a report
// and folds the others (prune). These tests hold the two ways to the
// same reports, byte for byte, and both to the model of
// merge_candidates_test.go, on generated windows of many shapes.

// foldShape is what a generated window looks like.
type foldShape struct {
	topics     int     // 1..3, named t0, t1, …
	keyedTopic []bool  // by topic
	parts      []int32 // partitions, by topic
	apps       int     // apps a0, a1, …; a partition may have none of an app's events
	pool       int     // distinct keys per app
	capacity   int     // keys a partition lists in Top; past it, a Floor and errors
	big        int     // keys a partition lists in Big (by bytes), with BytesError
	ties       bool    // counts from a tiny range
	longKeys   bool    // some keys of a kilobyte
	cmsWidth   int     // unkeyed topics' Count-Min width; 0 for none
	emptyApp   bool    // an app listed with no key and no event on some partitions
}

func randomFoldShape(r *rand.Rand) foldShape {
	s := foldShape{topics: 1 + r.IntN(3), apps: 1 + r.IntN(4), pool: 5 + r.IntN(400), capacity: 1 + r.IntN(40),
		big: r.IntN(6), ties: r.IntN(3) == 0, longKeys: r.IntN(5) == 0, emptyApp: r.IntN(3) == 0}
	switch r.IntN(3) {
	case 0:
		s.cmsWidth = 0
	case 1:
		s.cmsWidth = 8 + r.IntN(32) // narrow: estimates above the floors
	default:
		s.cmsWidth = 4096 // wide: estimates exact, below the floors
	}
	for range s.topics {
		s.keyedTopic = append(s.keyedTopic, r.IntN(2) == 0)
		n := int32(1 + r.IntN(12))
		if r.IntN(6) == 0 {
			n = int32(100 + r.IntN(200))
		}
		s.parts = append(s.parts, n)
	}
	return s
}

// build returns one window's summaries of the shape, starting at startMs.
func (s foldShape) build(t testing.TB, r *rand.Rand, startMs int64) []*schemas.PartitionWindow {
	keyName := func(app, k int) string {
		name := "a" + strconv.Itoa(app) + ":k" + strconv.Itoa(k)
		if s.longKeys && k%7 == 3 {
			name += ":" + strings.Repeat("x", 1000)
		}
		if k%11 == 5 {
			name += "\"\\\u2028\xff" // keys are bytes, not text
		}
		return name
	}
	var ws []*schemas.PartitionWindow
	for ti := range s.topics {
		topic := "t" + strconv.Itoa(ti)
		for p := range s.parts[ti] {
			w := &schemas.PartitionWindow{Version: schemas.WindowVersion, ID: schemas.PartitionWindowID(topic, p, startMs),
				Topic: topic, Partition: p, Partitions: s.parts[ti], StartMs: startMs, EndMs: startMs + 1000,
				Keyed: s.keyedTopic[ti]}
			for app := range s.apps {
				type kv struct {
					key                       string
					count, bytes, rd, wr, lat uint64
				}
				var keys []kv
				seen := map[int]bool{}
				n := r.IntN(2 * s.capacity)
				if s.emptyApp && app == 0 && p%2 == 1 {
					n = 0
				}
				for range n {
					k := r.IntN(s.pool)
					if s.keyedTopic[ti] && int32(k)%s.parts[ti] != p {
						continue // keyed: a key lives on one partition
					}
					if seen[k] {
						continue
					}
					seen[k] = true
					c := uint64(1 + r.IntN(1000))
					if s.ties {
						c = uint64(1 + r.IntN(3))
					}
					keys = append(keys, kv{keyName(app, k), c, uint64(r.IntN(5000)), uint64(r.IntN(int(c) + 1)), 0, uint64(r.IntN(100))})
					keys[len(keys)-1].wr = c - keys[len(keys)-1].rd
				}
				aw := schemas.AppWindow{App: "a" + strconv.Itoa(app)}
				var cms *sketch.CountMin
				if !s.keyedTopic[ti] && s.cmsWidth > 0 {
					var err error
					cms, err = sketch.NewCountMin(sketch.CountMinConfig{Depth: 2, Width: s.cmsWidth})
					require.NoError(t, err)
				}
				for _, k := range keys {
					aw.Events += k.count
					aw.Bytes += k.bytes
					aw.Reads += k.rd
					aw.Writes += k.wr
					aw.LatencyUs += k.lat
					if cms != nil {
						cms.AddN(k.key, k.count)
					}
				}
				slices.SortFunc(keys, func(a, b kv) int { return cmp.Or(cmp.Compare(b.count, a.count), strings.Compare(a.key, b.key)) })
				listed := keys[:min(len(keys), s.capacity)]
				for _, k := range keys[len(listed):] {
					aw.Floor = max(aw.Floor, k.count)
				}
				if aw.Floor > 0 {
					aw.Floor += uint64(r.IntN(3)) // a top-K's floor is loose
					aw.Approximate = r.IntN(2) == 0
				}
				for _, k := range listed {
					kc := schemas.KeyCount{App: aw.App, Key: k.key, Count: k.count, Bytes: k.bytes, Reads: k.rd, Writes: k.wr,
						LatencyUs: k.lat, Partition: p}
					if aw.Floor > 0 && r.IntN(2) == 0 {
						e := uint64(r.IntN(int(aw.Floor) + 1))
						kc.Count += e
						kc.Error = e
					}
					kc.Shortened = len(k.key) > 1000
					aw.Top = append(aw.Top, kc)
				}
				slices.SortFunc(keys, func(a, b kv) int { return cmp.Or(cmp.Compare(b.bytes, a.bytes), strings.Compare(a.key, b.key)) })
				for _, k := range keys[:min(len(keys), s.big)] {
					e := uint64(r.IntN(10))
					aw.Big = append(aw.Big, schemas.KeyCount{App: aw.App, Key: k.key, Count: k.count, Bytes: k.bytes + e, BytesError: e, Partition: p})
				}
				if len(keys) > 0 && r.IntN(3) == 0 {
					k := keys[r.IntN(len(keys))]
					aw.TopLatency = append(aw.TopLatency, schemas.KeyCount{App: aw.App, Key: k.key, Count: k.count, LatencyUs: k.lat, Partition: p})
				}
				if cms != nil {
					var err error
					aw.Sketch, err = cms.MarshalBinary()
					require.NoError(t, err)
				}
				if len(keys) > 0 {
					aw.Slots = []schemas.SlotCount{{Slot: uint16(p % RedisSlots), Events: aw.Events}}
				}
				if len(keys) > 0 || (s.emptyApp && app == 0) {
					w.Apps = append(w.Apps, aw)
					w.Events += aw.Events
				}
			}
			if len(w.Apps) == 0 {
				// A partition without events says so with an empty summary.
				w.Apps = nil
			}
			ws = append(ws, w)
		}
	}
	return ws
}

// mergeWith merges windows (each a slice of summaries, in order) with
// one merger whose apps of pruneMin listed entries or more rule keys out
// before the fold, and returns the reports and the merger's stats.
func mergeWith(t testing.TB, cfg MergerConfig, pruneMin int, windows ...[]*schemas.PartitionWindow) ([]MergedWindow, *Merger) {
	t.Helper()
	m, err := NewMerger(cfg)
	require.NoError(t, err)
	m.pruneMin = pruneMin
	var out []MergedWindow
	offset := int64(0)
	for _, ws := range windows {
		for _, w := range ws {
			require.NoError(t, m.Add(w, offset, 0))
			offset++
		}
		out = append(out, m.Ready(nil)...)
	}
	return append(out, m.Finish()...), m
}

// requireSameReports compares two runs' reports, struct and bytes.
func requireSameReports(t *testing.T, want, got []MergedWindow, what string) {
	t.Helper()
	require.Equal(t, len(want), len(got), what)
	for i := range want {
		require.Equal(t, len(want[i].Reports), len(got[i].Reports), what)
		for j := range want[i].Reports {
			require.Equal(t, want[i].Reports[j], got[i].Reports[j], "%s: window %d report %d", what, i, j)
			wb, err := want[i].Reports[j].AppendJSON(nil)
			require.NoError(t, err)
			gb, err := got[i].Reports[j].AppendJSON(nil)
			require.NoError(t, err)
			require.Equal(t, string(wb), string(gb), what)
		}
	}
}

func TestMergePrunedFoldMatchesWhole(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	pruned := int64(0)
	rounds := 150
	if raceEnabled {
		rounds = 30 // the merger owns no goroutine; the race detector only slows it
	}
	for round := range rounds {
		shape := randomFoldShape(r)
		cfg := testMergerConfig(1 + r.IntN(20))
		cfg.MaxApps = 1 + r.IntN(3) // so apps fold into OtherApp
		cfg.RedisCluster.Shards = 3
		var windows [][]*schemas.PartitionWindow
		for w := range 1 + r.IntN(3) {
			windows = append(windows, shape.build(t, r, int64(w)*1000))
		}
		t.Run(strconv.Itoa(round), func(t *testing.T) {
			whole, _ := mergeWith(t, cfg, math.MaxInt, windows...)
			require.NotEmpty(t, whole)
			for _, pruneMin := range []int{0, 64} {
				got, m := mergeWith(t, cfg, pruneMin, windows...)
				requireSameReports(t, whole, got, "pruning from "+strconv.Itoa(pruneMin))
				pruned += m.stats.EntriesPruned.Load()
			}
			// One merger over the windows, recycling its sketches, reports
			// each as a merger of that window alone does.
			for i, ws := range windows {
				alone, _ := mergeWith(t, cfg, 0, ws)
				var same []MergedWindow // none when the window had no event
				for _, mw := range whole {
					if mw.StartMs == int64(i)*1000 {
						same = append(same, mw)
					}
				}
				requireSameReports(t, same, alone, "window "+strconv.Itoa(i)+" alone")
			}
			// And the keys each way keeps are the model's.
			for _, pruneMin := range []int{0, math.MaxInt} {
				for _, ws := range windows {
					if slices.ContainsFunc(ws, func(w *schemas.PartitionWindow) bool { return w.Events > 0 }) {
						requireCandidatesWith(t, cfg.TopN, ws, pruneMin)
					}
				}
			}
		})
	}
	require.Positive(t, pruned, "no generated window had keys ruled out")
}

// TestMergePrunedFoldBenchShape is the benchmark's shape, smaller: a
// Zipf stream over many partitions, keyed (every key on one partition)
// and not, each partition's top-K overflowing.
func TestMergePrunedFoldBenchShape(t *testing.T) {
	events := mergeZipfEvents(3, 60_000, 30_000, 1.01, []string{"shop", "cart"}, 0, 1000)
	for _, keyed := range []bool{true, false} {
		f := mergeFixture{topic: "keyheat.events", partitions: 40, windowMs: 1000, keyed: keyed, capacity: 256, big: 20}
		ws := f.build(t, events)
		cfg := testMergerConfig(100)
		cfg.RedisCluster.Shards = 6
		whole, _ := mergeWith(t, cfg, math.MaxInt, ws)
		got, m := mergeWith(t, cfg, 0, ws)
		requireSameReports(t, whole, got, "keyed "+strconv.FormatBool(keyed))
		if keyed {
			// Not keyed, every key may have the Floors of the many
			// partitions not listing it: none can be ruled out.
			require.Positive(t, m.stats.EntriesPruned.Load())
		}
		requireCandidatesWith(t, 100, ws, 0)
	}
}
