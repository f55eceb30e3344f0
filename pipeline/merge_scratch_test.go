package pipeline

import (
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/keyheat/keyheat/schemas"
)

// scratchWindow is one window of a topic keyed by access key whose
// partitions each list keysPer keys of app "a".
func scratchWindow(startMs int64, parts int32, keysPer int) []*schemas.PartitionWindow {
	var ws []*schemas.PartitionWindow
	for p := range parts {
		a := schemas.AppWindow{App: "a"}
		for i := range keysPer {
			kc := schemas.KeyCount{App: "a", Key: "p" + strconv.Itoa(int(p)) + "-k" + strconv.Itoa(i), Count: uint64(keysPer - i), Partition: p}
			a.Top = append(a.Top, kc)
			a.Events += kc.Count
		}
		ws = append(ws, &schemas.PartitionWindow{
			Version: schemas.WindowVersion, ID: schemas.PartitionWindowID("t", p, startMs), Topic: "t", Partition: p, Partitions: parts,
			StartMs: startMs, EndMs: startMs + 1000, Keyed: true, Events: a.Events, Apps: []schemas.AppWindow{a},
		})
	}
	return ws
}

// The merger keeps its key table between windows, so that a steady load
// does not allocate it every second. A spike (a window of many more
// listed keys, as a backlog or a burst of distinct keys brings) must not
// pin its size for good, nor keep its keys' strings, and so the summaries'
// memory, reachable once the window is reported.
func TestMergerScratchShrinksAfterSpike(t *testing.T) {
	m, err := NewMerger(testMergerConfig(10))
	require.NoError(t, err)
	offset := int64(0)
	window := func(startMs int64, parts int32, keysPer int) {
		t.Helper()
		for _, w := range scratchWindow(startMs, parts, keysPer) {
			require.NoError(t, m.Add(w, offset, 0))
			offset++
		}
		out := m.Ready(nil)
		require.Len(t, out, 1)
		require.Len(t, out[0].Reports[0].Top, 10)
	}
	window(0, 64, 2000) // 128,000 keys
	spike := cap(m.scratch.accs)
	require.GreaterOrEqual(t, spike, 128_000)

	window(1000, 64, 1)
	s := &m.scratch
	require.Less(t, cap(s.accs), spike/4, "the key table keeps the spike's size after a small window")
	require.Less(t, len(s.tab), 4*(2<<bitsFor(1<<12)))
	require.Less(t, cap(s.more)+cap(s.cur)+cap(s.cands), spike/4)
	for i, a := range s.accs[:cap(s.accs)] {
		require.Empty(t, a.key, "entry %d of the key table still holds a key once its window is reported", i)
	}
}

// TestMergerPrunedScratchShrinksAfterSpike is the same for an app whose
// keys are ruled out before the fold: the table of slot sums holds no
// spike, nor does the key table, which holds only the keys that may show.
func TestMergerPrunedScratchShrinksAfterSpike(t *testing.T) {
	m, err := NewMerger(testMergerConfig(10))
	require.NoError(t, err)
	m.pruneMin = 0
	offset := int64(0)
	window := func(startMs int64, parts int32, keysPer int) {
		t.Helper()
		ws := scratchWindow(startMs, parts, keysPer)
		for _, w := range ws {
			// Skewed as traffic is: a few heavy keys, a long light tail.
			a := &w.Apps[0]
			a.Events = 0
			for i := range a.Top {
				a.Top[i].Count = uint64(keysPer/(i+1) + 1)
				a.Events += a.Top[i].Count
			}
			w.Events = a.Events
		}
		for _, w := range ws {
			require.NoError(t, m.Add(w, offset, 0))
			offset++
		}
		out := m.Ready(nil)
		require.Len(t, out, 1)
		require.Len(t, out[0].Reports[0].Top, 10)
	}
	window(0, 64, 2000) // 128,000 keys
	s := &m.scratch
	spike := cap(s.sums)
	require.GreaterOrEqual(t, spike, 128_000/8)
	require.Positive(t, m.stats.EntriesPruned.Load(), "the spike's light keys should be ruled out")
	require.Less(t, cap(s.accs), 128_000/4, "every key of the spike was placed")

	window(1000, 64, 1)
	require.Less(t, cap(s.sums), spike/4, "the slot sums keep the spike's size after a small window")
	for i, a := range s.accs[:cap(s.accs)] {
		require.Empty(t, a.key, "entry %d of the key table still holds a key once its window is reported", i)
	}
}
