package pipeline

import (
	"bytes"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/keyheat/keyheat/schemas"
	"github.com/keyheat/keyheat/sketch"
)

// These tests hold the merge stage to its previous form
// (merge_prev_test.go) on generated windows of many shapes, and hold
// every report handed out unchanged while the merger goes on to the next
// windows: the merger reuses its key slices, its rankings' buffers and
// guarantee's scratch across windows, and a report handed out goes on to
// Kafka, ClickHouse and the archive while it does.

// renameApp renames app from to to in the summaries ws, keys included,
// so a partition can send OtherApp itself (an app it folded).
func renameApp(ws []*schemas.PartitionWindow, from, to string) {
	for _, w := range ws {
		for i := range w.Apps {
			a := &w.Apps[i]
			if a.App != from {
				continue
			}
			a.App = to
			for _, l := range [][]schemas.KeyCount{a.Top, a.Big, a.TopReads, a.TopWrites, a.TopLatency} {
				for j := range l {
					l[j].App = to
				}
			}
		}
	}
}

// heldReport is a report as it was handed out: its JSON and the report
// the previous merge stage built of the same window.
type heldReport struct {
	json []byte
	prev schemas.WindowReport
	cur  *schemas.WindowReport
}

// mergeBothWays feeds windows (each a slice of summaries) to one merger
// and merges every window it would report both ways, the previous merge
// stage first; drop leaves some summaries out, so windows are reported
// partial at the end. It requires the two ways' reports equal as they are
// handed out, and returns them to be checked again later.
func mergeBothWays(t *testing.T, cfg MergerConfig, pruneMin int, drop func(*schemas.PartitionWindow) bool, windows ...[]*schemas.PartitionWindow) []heldReport {
	t.Helper()
	m, err := NewMerger(cfg)
	require.NoError(t, err)
	m.pruneMin = pruneMin
	var held []heldReport
	emit := func(finish bool) {
		for len(m.order) > 0 {
			p := m.pending[m.order[0]]
			missingParts, idle := m.missingParts(p, nil)
			if len(missingParts) > 0 && !finish {
				return
			}
			var missing []string
			for _, k := range missingParts {
				missing = append(missing, k.topic+"/"+strconv.Itoa(int(k.partition)))
			}
			prev := m.mergePrev(p, missing, idle)
			cur := m.emitOldest(&m.stats.Complete, nil)
			require.Equal(t, len(prev.Reports), len(cur.Reports), "window %d", p.startMs)
			require.Equal(t, prev.StartMs, cur.StartMs)
			for i := range cur.Reports {
				require.Equal(t, prev.Reports[i], cur.Reports[i], "window %d report %d", p.startMs, i)
				pb, err := prev.Reports[i].AppendJSON(nil)
				require.NoError(t, err)
				cb, err := cur.Reports[i].AppendJSON(nil)
				require.NoError(t, err)
				require.Equal(t, string(pb), string(cb), "window %d report %d", p.startMs, i)
				held = append(held, heldReport{json: cb, prev: prev.Reports[i], cur: &cur.Reports[i]})
			}
		}
	}
	offset := int64(0)
	for _, ws := range windows {
		for _, w := range ws {
			if drop != nil && drop(w) {
				continue
			}
			require.NoError(t, m.Add(w, offset, 0))
			offset++
		}
		emit(false)
	}
	emit(true)
	return held
}

// requireHeld requires every report handed out unchanged since.
func requireHeld(t *testing.T, held []heldReport) {
	t.Helper()
	for i, h := range held {
		require.Equal(t, h.prev, *h.cur, "report %d (%s) changed after it was handed out", i, h.cur.ID)
		b, err := h.cur.AppendJSON(nil)
		require.NoError(t, err)
		require.Equal(t, string(h.json), string(b), "report %d (%s) changed after it was handed out", i, h.cur.ID)
	}
}

func TestMergeMatchesPrevious(t *testing.T) {
	r := rand.New(rand.NewPCG(31, 32))
	rounds := 200
	if raceEnabled {
		rounds = 40
	}
	for round := range rounds {
		base := randomFoldShape(r)
		cfg := testMergerConfig(1 + r.IntN(30))
		if r.IntN(4) == 0 {
			cfg.TopN = 1 + r.IntN(3)
		}
		cfg.MaxApps = 1 + r.IntN(4)
		cfg.RedisCluster.Shards = 3
		// Windows of different shapes over the same partitions: big then
		// small, one app then many, ties, keys without figures.
		var windows [][]*schemas.PartitionWindow
		for w := range 1 + r.IntN(5) {
			s := base
			s.apps = 1 + r.IntN(6)
			s.pool = 1 + r.IntN(600)
			s.capacity = 1 + r.IntN(60)
			s.big = r.IntN(8)
			s.ties = r.IntN(3) == 0
			s.longKeys = r.IntN(5) == 0
			s.emptyApp = r.IntN(3) == 0
			if r.IntN(5) == 0 {
				s.apps = 1
			}
			ws := s.build(t, r, int64(w)*1000)
			if r.IntN(4) == 0 {
				renameApp(ws, "a"+strconv.Itoa(r.IntN(s.apps)), schemas.OtherApp)
			}
			if r.IntN(4) == 0 {
				// Keys without figures.
				for _, pw := range ws {
					for i := range pw.Apps {
						for _, l := range [][]schemas.KeyCount{pw.Apps[i].Top, pw.Apps[i].Big, pw.Apps[i].TopLatency} {
							for j := range l {
								if r.IntN(2) == 0 {
									l[j].Reads, l[j].Writes, l[j].LatencyUs = 0, 0, 0
								}
							}
						}
					}
				}
			}
			for _, pw := range ws {
				if r.IntN(5) == 0 {
					pw.Late = uint64(r.IntN(10))
				}
			}
			windows = append(windows, ws)
		}
		var drop func(*schemas.PartitionWindow) bool
		if r.IntN(4) == 0 {
			dr := rand.New(rand.NewPCG(uint64(round), 1))
			drop = func(*schemas.PartitionWindow) bool { return dr.IntN(8) == 0 }
		}
		t.Run(strconv.Itoa(round), func(t *testing.T) {
			for _, pruneMin := range []int{0, 64, 1 << 30} {
				held := mergeBothWays(t, cfg, pruneMin, drop, windows...)
				requireHeld(t, held)
			}
		})
	}
}

// TestMergeReportsHeldAcrossWindows merges a long run of windows whose
// sizes swing, holding every report, and requires each unchanged at the
// end and its lists not sharing memory with any other report's.
func TestMergeReportsHeldAcrossWindows(t *testing.T) {
	r := rand.New(rand.NewPCG(41, 42))
	base := randomFoldShape(r)
	base.topics, base.keyedTopic, base.parts = 2, []bool{true, false}, []int32{4, 3}
	cfg := testMergerConfig(10)
	cfg.MaxApps = 2
	var windows [][]*schemas.PartitionWindow
	for w := range 40 {
		s := base
		s.apps = 1 + r.IntN(5)
		s.pool, s.capacity = 5, 3
		if w%3 == 0 {
			s.pool, s.capacity = 2000, 80
		}
		windows = append(windows, s.build(t, r, int64(w)*1000))
	}
	held := mergeBothWays(t, cfg, 0, nil, windows...)
	requireHeld(t, held)
	// No two reports' lists share an element.
	owner := map[*schemas.KeyCount]string{}
	for _, h := range held {
		rep := h.cur
		for _, l := range [][]schemas.KeyCount{rep.Top, rep.TopBytes, rep.TopReads, rep.TopWrites, rep.TopLatency} {
			l = l[:cap(l)]
			for i := range l {
				if o, ok := owner[&l[i]]; ok && o != rep.ID {
					t.Fatalf("reports %s and %s share a key list", o, rep.ID)
				}
				owner[&l[i]] = rep.ID
			}
		}
	}
	require.True(t, slices.ContainsFunc(held, func(h heldReport) bool { return len(h.cur.Top) > 5 }))
}

// TestSumSlotsMatchesPrevious holds sumSlots to its previous form on
// lists whose sums wrap around (a summary's slot counts are not checked
// against its events), to zero among them.
func TestSumSlotsMatchesPrevious(t *testing.T) {
	r := rand.New(rand.NewPCG(51, 52))
	m, err := NewMerger(testMergerConfig(10))
	require.NoError(t, err)
	for i := range 300 {
		var lists [][]schemas.SlotCount
		for range 1 + r.IntN(4) {
			var l []schemas.SlotCount
			for slot := uint16(r.IntN(8)); slot < RedisSlots; slot += uint16(1 + r.IntN(3000)) {
				events := uint64(r.IntN(3))
				if r.IntN(2) == 0 {
					events = 1 << 63 // two make 0
				}
				l = append(l, schemas.SlotCount{Slot: slot, Events: events})
			}
			lists = append(lists, l)
		}
		require.Equal(t, m.sumSlotsPrev(lists), m.sumSlots(lists), "case %d", i)
	}
}

// FuzzMergeMatchesPrevious feeds decoded windows-topic records, whatever
// they hold, to a merger, and holds each window it reports to the
// previous merge stage's reports of it.
func FuzzMergeMatchesPrevious(f *testing.F) {
	events := planMergeEvents([]int64{0, 1000}, []plannedKey{
		{"a", "k1", 5, 2, 10, 1}, {"a", "k2", 3, 0, 20, 2}, {"b", "k1", 2, 2, 30, 3}, {"_other", "k3", 2, 1, 0, 0},
	})
	for _, fx := range []mergeFixture{
		{topic: "t", partitions: 2, windowMs: 1000, keyed: true, capacity: 2, big: 1},
		{topic: "t", partitions: 2, windowMs: 1000, capacity: 1, big: 1, cms: sketch.CountMinConfig{Depth: 1, Width: 4}},
	} {
		var seed []byte
		for _, w := range fx.build(f, events) {
			b, err := w.AppendJSON(nil)
			if err != nil {
				f.Fatal(err)
			}
			seed = append(append(seed, b...), '\n')
		}
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, maxApps := range []int{1, 3} {
			cfg := testMergerConfig(2)
			cfg.MaxApps = maxApps
			cfg.RedisCluster.Shards = 2
			var ws []*schemas.PartitionWindow
			for _, line := range bytes.Split(data, []byte("\n")) {
				if w, err := schemas.DecodePartitionWindow(line); err == nil {
					ws = append(ws, w)
				}
			}
			m, err := NewMerger(cfg)
			require.NoError(t, err)
			var held []heldReport
			emit := func(finish bool) {
				for len(m.order) > 0 {
					p := m.pending[m.order[0]]
					missingParts, idle := m.missingParts(p, nil)
					if len(missingParts) > 0 && !finish {
						return
					}
					var missing []string
					for _, k := range missingParts {
						missing = append(missing, k.topic+"/"+strconv.Itoa(int(k.partition)))
					}
					prev := m.mergePrev(p, missing, idle)
					cur := m.emitOldest(&m.stats.Complete, nil)
					require.Equal(t, len(prev.Reports), len(cur.Reports))
					for i := range cur.Reports {
						pb, _ := prev.Reports[i].AppendJSON(nil)
						cb, _ := cur.Reports[i].AppendJSON(nil)
						require.Equal(t, string(pb), string(cb), "window %d report %d", p.startMs, i)
						held = append(held, heldReport{json: cb, prev: prev.Reports[i], cur: &cur.Reports[i]})
					}
				}
			}
			for i, w := range ws {
				_ = m.Add(w, int64(i), 0) // refusals are fine
				emit(false)
			}
			emit(true)
			for _, h := range held {
				b, _ := h.cur.AppendJSON(nil)
				require.Equal(t, string(h.json), string(b), "report %s changed after it was handed out", h.cur.ID)
			}
		}
	})
}
