package pipeline

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/keyheat/keyheat/schemas"
	"github.com/keyheat/keyheat/sketch"
)

// mergeTestWindow is a keyed summary of one window of 1 s: events of app "a" on
// key "k<partition>", or an empty window.
func mergeTestWindow(topic string, part, parts int32, startMs int64, events uint64) *schemas.PartitionWindow {
	w := &schemas.PartitionWindow{
		Version: schemas.WindowVersion, ID: schemas.PartitionWindowID(topic, part, startMs),
		Topic: topic, Partition: part, Partitions: parts, StartMs: startMs, EndMs: startMs + 1000,
		FirstOffset: -1, LastOffset: -1, Keyed: true, Apps: []schemas.AppWindow{},
	}
	if events > 0 {
		w.Events = events
		w.Apps = []schemas.AppWindow{{App: "a", Events: events, Reads: events,
			Top: []schemas.KeyCount{{App: "a", Key: "k" + strconv.Itoa(int(part)), Count: events, Reads: events, Partition: part}}}}
	}
	return w
}

func newTestMerger(t *testing.T, change func(*MergerConfig)) *Merger {
	t.Helper()
	cfg := MergerConfig{MergerOptions: DefaultMergerOptions(), Window: time.Second, Lateness: 2 * time.Second}
	if change != nil {
		change(&cfg)
	}
	m, err := NewMerger(cfg)
	require.NoError(t, err)
	return m
}

// reportJSON encodes every report of mws, one per line.
func reportJSON(t testing.TB, mws []MergedWindow) []byte {
	t.Helper()
	var b []byte
	for _, mw := range mws {
		for i := range mw.Reports {
			var err error
			b, err = mw.Reports[i].AppendJSON(b)
			require.NoError(t, err)
			b = append(b, '\n')
		}
	}
	return b
}

func windowStarts(mws []MergedWindow) []int64 {
	var out []int64
	for _, mw := range mws {
		out = append(out, mw.StartMs)
	}
	return out
}

func TestMergerCompletesWhenEveryPartitionReported(t *testing.T) {
	m := newTestMerger(t, nil)
	require.NoError(t, m.Add(mergeTestWindow("t", 0, 3, 0, 5), 0, 0))
	require.NoError(t, m.Add(mergeTestWindow("t", 2, 3, 0, 7), 1, 0))
	require.Empty(t, m.Ready(nil), "partition 1 has not reported")
	require.NoError(t, m.Add(mergeTestWindow("t", 1, 3, 0, 0), 2, 0))
	got := m.Ready(nil)
	require.Len(t, got, 1)
	r := got[0].Reports[0]
	require.Equal(t, "cluster/0", r.ID)
	require.False(t, r.Partial)
	require.Equal(t, uint64(12), r.Events)
	require.Equal(t, []schemas.PartitionLoad{
		{Topic: "t", Partition: 0, Events: 5, Share: 5.0 / 12},
		{Topic: "t", Partition: 1, Events: 0, Share: 0},
		{Topic: "t", Partition: 2, Events: 7, Share: 7.0 / 12},
	}, r.Skew.Partitions)
	require.Equal(t, []schemas.KeyCount{
		{App: "a", Key: "k2", Count: 7, Reads: 7, Partition: 2, Share: 7.0 / 12},
		{App: "a", Key: "k0", Count: 5, Reads: 5, Partition: 0, Share: 5.0 / 12},
	}, r.Top)
	require.Equal(t, "app/1:a/0", got[0].Reports[1].ID)
	require.Empty(t, m.Ready(nil), "a window is reported once")
	require.Equal(t, int64(1), m.Stats().Complete.Load())
}

func TestMergerEmptyWindow(t *testing.T) {
	m := newTestMerger(t, nil)
	// Window 0 has events on partition 0 only; window 1000 on none.
	require.NoError(t, m.Add(mergeTestWindow("t", 0, 2, 0, 3), 0, 0))
	require.NoError(t, m.Add(mergeTestWindow("t", 1, 2, 0, 0), 1, 0))
	require.NoError(t, m.Add(mergeTestWindow("t", 0, 2, 1000, 0), 2, 0))
	require.NoError(t, m.Add(mergeTestWindow("t", 1, 2, 1000, 0), 3, 0))
	got := m.Ready(nil)
	require.Equal(t, []int64{0}, windowStarts(got), "a window no partition had an event in is not reported")
	b := reportJSON(t, got)
	require.Contains(t, string(b), `"partitions":[{"topic":"t","partition":0,"events":3,"bytes":0,"share":1},{"topic":"t","partition":1,"events":0,"bytes":0,"share":0}]`,
		"a partition that reported the window empty shows its load, 0")
	require.Equal(t, int64(3), m.Stats().Empty.Load())
	require.Equal(t, int64(1), m.Stats().Accepted.Load())
	require.Zero(t, m.Stats().Pending.Load())
}

// TestMergerGapCostsNothing: a partition that jumps over a gap in event
// time sends the empty windows of the gap; however many, they hold
// nothing and never reach the cap.
func TestMergerGapCostsNothing(t *testing.T) {
	m := newTestMerger(t, func(c *MergerConfig) { c.MaxPendingWindows = 4 })
	off := int64(0)
	add := func(part int32, startMs int64, events uint64) {
		t.Helper()
		require.NoError(t, m.Add(mergeTestWindow("t", part, 2, startMs, events), off, 0))
		off++
	}
	add(0, 0, 5)
	for w := int64(1); w <= 1000; w++ {
		add(0, w*1000, 0) // the gap: 1000 empty windows
	}
	add(0, 1_001_000, 7)
	require.Empty(t, m.Ready(nil), "partition 1 has not reported window 0 yet")
	require.Equal(t, int64(2), m.Stats().Pending.Load(), "only the windows with events are held")
	add(1, 0, 1)
	add(1, 1_001_000, 2)
	got := m.Ready(nil)
	require.Equal(t, []int64{0, 1_001_000}, windowStarts(got))
	for _, mw := range got {
		require.False(t, mw.Reports[0].Partial)
	}
	require.Zero(t, m.Stats().Capped.Load())
}

func TestMergerWindowsInOrder(t *testing.T) {
	m := newTestMerger(t, nil)
	// Window 1000 completes first but waits for window 0.
	require.NoError(t, m.Add(mergeTestWindow("t", 0, 2, 0, 1), 0, 0))
	require.NoError(t, m.Add(mergeTestWindow("t", 0, 2, 1000, 1), 1, 0))
	require.NoError(t, m.Add(mergeTestWindow("t", 1, 2, 1000, 1), 2, 0))
	// Partition 1 reported 1000 without 0: it had nothing in window 0.
	got := m.Ready(nil)
	require.Equal(t, []int64{0, 1000}, windowStarts(got))
	require.False(t, got[0].Reports[0].Partial, "a partition that reported a later window is done with the earlier one")
	require.Equal(t, uint64(0), got[0].Reports[0].Skew.Partitions[1].Events)
}

// silentStatus says the listed partitions of topic t are silent.
func silentStatus(parts ...int32) StatusFunc {
	return func(topic string, p int32) PartitionStatus {
		return PartitionStatus{Silent: topic == "t" && slices.Contains(parts, p)}
	}
}

// TestMergerWaitsForProgress: a window is never reported without a
// partition that is alive, however long it takes; once every missing
// partition is silent, it is reported partial, naming them, and what they
// send for it later is late: in no report, counted with its events.
func TestMergerWaitsForProgress(t *testing.T) {
	m := newTestMerger(t, nil)
	require.NoError(t, m.Add(mergeTestWindow("t", 0, 3, 0, 4), 0, 0))
	require.NoError(t, m.Add(mergeTestWindow("t", 1, 3, 0, 6), 1, 0))
	alive := func(string, int32) PartitionStatus { return PartitionStatus{} }
	for range 1000 {
		require.Empty(t, m.Ready(alive), "partition 2 is slow, not gone")
	}
	require.Empty(t, m.Ready(silentStatus(0, 1)), "silent partitions that reported do not matter")
	got := m.Ready(silentStatus(2))
	require.Len(t, got, 1)
	for _, r := range got[0].Reports {
		require.True(t, r.Partial, r.ID)
		require.Equal(t, []string{"t/2"}, r.Missing, r.ID)
	}
	require.Len(t, got[0].Reports[0].Skew.Partitions, 2, "the missing partition's load is unknown, not 0")
	require.Equal(t, int64(1), m.Stats().Silent.Load())
	require.Equal(t, int64(1), m.Stats().Partial.Load())

	// The straggler is counted and dropped; no second report.
	require.NoError(t, m.Add(mergeTestWindow("t", 2, 3, 0, 9), 2, 0))
	require.Empty(t, m.Ready(alive))
	require.Empty(t, m.Finish())
	require.Equal(t, int64(1), m.Stats().Late.Load())
	require.Equal(t, int64(9), m.Stats().LateEvents.Load())
}

// TestMergerSilentReleasesEarlierWindows: releasing a window for silent
// partitions releases the earlier ones with it, in order.
func TestMergerSilentReleasesEarlierWindows(t *testing.T) {
	m := newTestMerger(t, nil)
	require.NoError(t, m.Add(mergeTestWindow("t", 0, 2, 1000, 1), 0, 0))
	require.NoError(t, m.Add(mergeTestWindow("t", 0, 2, 0, 1), 1, 0))
	got := m.Ready(silentStatus(1))
	require.Equal(t, []int64{0, 1000}, windowStarts(got))
	require.True(t, got[0].Reports[0].Partial)
	require.Equal(t, int64(2), m.Stats().Silent.Load())
}

// TestMergerResentIsNotLate: a restarted partition sends again windows
// already reported with it; they are duplicates, not losses.
func TestMergerResentIsNotLate(t *testing.T) {
	var buf bytes.Buffer
	m := newTestMerger(t, func(c *MergerConfig) {
		c.Logger = slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelWarn}))
	})
	for i, part := range []int32{0, 1} {
		require.NoError(t, m.Add(mergeTestWindow("t", part, 2, 0, 5), int64(i), 0))
	}
	require.Len(t, m.Ready(nil), 1)
	for i := range 3 {
		require.NoError(t, m.Add(mergeTestWindow("t", 0, 2, 0, 5), int64(2+i), 0))
	}
	require.Zero(t, m.Stats().Late.Load())
	require.Zero(t, m.Stats().LateEvents.Load())
	require.Equal(t, int64(3), m.Stats().Duplicates.Load())
	require.Empty(t, logLines(t, &buf), "nothing was lost: no warning")
}

// TestMergerIdlePartitionWithoutEvents: a partition that never had an
// event and follows the wall clock is not waited for in windows that end
// by its clock minus the lateness; its load there is 0.
func TestMergerIdlePartitionWithoutEvents(t *testing.T) {
	m := newTestMerger(t, nil) // lateness 2 s
	require.NoError(t, m.Add(mergeTestWindow("t", 0, 2, 0, 4), 0, 0))
	idle := func(clockMs int64) StatusFunc {
		return func(_ string, p int32) PartitionStatus {
			if p == 1 {
				return PartitionStatus{IdleClockMs: clockMs}
			}
			return PartitionStatus{}
		}
	}
	require.Empty(t, m.Ready(idle(2999)), "window [0, 1000) ends after 2999 − 2000")
	got := m.Ready(idle(3000))
	require.Len(t, got, 1)
	r := got[0].Reports[0]
	require.False(t, r.Partial)
	require.Equal(t, []schemas.PartitionLoad{{Topic: "t", Partition: 0, Events: 4, Share: 1}, {Topic: "t", Partition: 1}},
		r.Skew.Partitions)
}

func TestMergerFinal(t *testing.T) {
	m := newTestMerger(t, nil)
	last := mergeTestWindow("t", 1, 2, 0, 3)
	last.Final = true
	require.NoError(t, m.Add(last, 0, 0))
	require.NoError(t, m.Add(mergeTestWindow("t", 0, 2, 0, 1), 1, 0))
	require.NoError(t, m.Add(mergeTestWindow("t", 0, 2, 1000, 2), 2, 0))
	got := m.Ready(nil)
	require.Equal(t, []int64{0, 1000}, windowStarts(got), "partition 1 ended at window 0; window 1000 does not wait for it")
	require.False(t, got[1].Reports[0].Partial)
	require.Equal(t, []schemas.PartitionLoad{{Topic: "t", Partition: 0, Events: 2, Share: 1}}, got[1].Reports[0].Skew.Partitions,
		"a finished partition is not part of later windows' load")
}

func TestMergerCap(t *testing.T) {
	m := newTestMerger(t, func(c *MergerConfig) { c.MaxPendingWindows = 2 })
	for i, start := range []int64{0, 1000, 2000} {
		require.NoError(t, m.Add(mergeTestWindow("t", 0, 2, start, 1), int64(i), 0))
	}
	require.Equal(t, int64(2), m.Stats().Pending.Load(), "the cap holds at once")
	got := m.Ready(nil)
	require.Equal(t, []int64{0}, windowStarts(got), "the oldest is released by the cap")
	require.Equal(t, []string{"t/1"}, got[0].Reports[0].Missing)
	require.Equal(t, int64(1), m.Stats().Capped.Load())
	got = m.Finish()
	require.Equal(t, []int64{1000, 2000}, windowStarts(got))
	require.Equal(t, int64(2), m.Stats().Finished.Load())
	require.Equal(t, int64(3), m.Stats().Partial.Load())
}

// TestMergerCapWarns: a window released partial by the cap, and the
// summaries then dropped for it, are logged at WARN: they cost events
// that are in no report. The drops are rate-limited on the merger's clock.
func TestMergerCapWarns(t *testing.T) {
	var buf bytes.Buffer
	m := newTestMerger(t, func(c *MergerConfig) {
		c.MaxPendingWindows = 2
		c.Logger = slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelWarn}))
	})
	for i, start := range []int64{0, 1000, 2000} {
		require.NoError(t, m.Add(mergeTestWindow("t", 0, 2, start, 1), int64(i), 0))
	}
	lines := logLines(t, &buf)
	require.Len(t, lines, 1, "one window released by the cap")
	require.Equal(t, "WARN", lines[0]["level"])
	require.Equal(t, float64(0), lines[0]["window_start_ms"])
	require.Equal(t, []any{"t/1"}, lines[0]["missing"])

	// The cap's window missed partition 1: its summary of it is late.
	tests := []struct {
		name   string
		nowMs  int64
		logged bool
	}{
		{"the first drop is logged", 0, true},
		{"a drop within ten seconds is not", 9_999, false},
		{"ten seconds later the next one is, with the count since", 10_000, true},
	}
	var last map[string]any
	for i, tt := range tests {
		require.NoError(t, m.Add(mergeTestWindow("t", 1, 2, 0, 5), int64(10+i), tt.nowMs), tt.name)
		lines := logLines(t, &buf)
		if !tt.logged {
			require.Empty(t, lines, tt.name)
			continue
		}
		require.Len(t, lines, 1, tt.name)
		require.Equal(t, "WARN", lines[0]["level"], tt.name)
		require.Equal(t, schemas.PartitionWindowID("t", 1, 0), lines[0]["id"], tt.name)
		last = lines[0]
	}
	require.Equal(t, int64(3), m.Stats().Late.Load())
	require.Equal(t, int64(15), m.Stats().LateEvents.Load(), "the dropped summaries' events are counted")
	require.Equal(t, float64(2), last["dropped_since_last_log"], "the line says how many went unlogged")
}

func TestMergerDuplicatesAndConflicts(t *testing.T) {
	m := newTestMerger(t, nil)
	require.NoError(t, m.Add(mergeTestWindow("t", 0, 2, 0, 5), 0, 0))
	again := mergeTestWindow("t", 0, 2, 0, 5)
	again.WatermarkMs = 12345
	require.NoError(t, m.Add(again, 1, 0))
	require.Equal(t, int64(1), m.Stats().Duplicates.Load(), "a re-emission may carry another watermark")
	require.NoError(t, m.Add(mergeTestWindow("t", 0, 2, 0, 6), 2, 0))
	require.Equal(t, int64(1), m.Stats().Conflicts.Load())
	require.NoError(t, m.Add(mergeTestWindow("t", 1, 2, 0, 1), 3, 0))
	got := m.Ready(nil)
	require.Len(t, got, 1)
	require.Equal(t, uint64(6), got[0].Reports[0].Events, "the first of two conflicting summaries is kept")
	require.Equal(t, int64(2), m.Stats().Accepted.Load())
}

func TestMergerCommitOffset(t *testing.T) {
	m := newTestMerger(t, nil)
	_, ok := m.CommitOffset()
	require.False(t, ok, "nothing read, nothing to commit")

	require.NoError(t, m.Add(mergeTestWindow("t", 0, 2, 0, 1), 10, 0))
	require.NoError(t, m.Add(mergeTestWindow("t", 0, 2, 1000, 1), 11, 0))
	off, ok := m.CommitOffset()
	require.True(t, ok)
	require.Equal(t, int64(10), off, "window 0 is pending")

	require.NoError(t, m.Add(mergeTestWindow("t", 1, 2, 0, 1), 12, 0))
	require.Equal(t, []int64{0}, windowStarts(m.Ready(nil)))
	off, _ = m.CommitOffset()
	require.Equal(t, int64(10), off, "window 0 is reported but not acknowledged")
	require.Equal(t, int64(0), m.DoneThroughMs())

	m.Acked(0)
	off, _ = m.CommitOffset()
	require.Equal(t, int64(11), off, "window 1000 is pending")
	require.Equal(t, int64(1000), m.DoneThroughMs())

	require.NoError(t, m.Add(mergeTestWindow("t", 1, 2, 0, 1), 13, 0)) // late duplicate
	require.NoError(t, m.Add(mergeTestWindow("t", 1, 2, 1000, 1), 14, 0))
	require.NoError(t, m.Add(mergeTestWindow("t", 0, 2, 2000, 1), 15, 0))
	require.Equal(t, []int64{1000}, windowStarts(m.Ready(nil)))
	off, _ = m.CommitOffset()
	require.Equal(t, int64(11), off)
	m.Acked(1000)
	m.Acked(1000)
	m.Acked(7000) // unknown: ignored
	off, _ = m.CommitOffset()
	require.Equal(t, int64(15), off, "the late duplicate at 13 holds nothing back")
	require.Equal(t, int64(2000), m.DoneThroughMs())

	require.NoError(t, m.Add(mergeTestWindow("t", 1, 2, 2000, 1), 16, 0))
	require.Equal(t, []int64{2000}, windowStarts(m.Ready(nil)))
	m.Acked(2000)
	off, _ = m.CommitOffset()
	require.Equal(t, int64(17), off, "everything acknowledged: the next offset")
}

func TestMergerAcksOutOfOrder(t *testing.T) {
	m := newTestMerger(t, nil)
	for i, start := range []int64{0, 1000, 2000} {
		require.NoError(t, m.Add(mergeTestWindow("t", 0, 1, start, 1), int64(i), 0))
	}
	require.Len(t, m.Ready(nil), 3)
	m.Acked(1000)
	m.Acked(2000)
	require.Equal(t, int64(0), m.DoneThroughMs(), "window 0 is not acknowledged yet")
	off, _ := m.CommitOffset()
	require.Equal(t, int64(0), off)
	m.Acked(0)
	require.Equal(t, int64(3000), m.DoneThroughMs())
	off, _ = m.CommitOffset()
	require.Equal(t, int64(3), off)
}

func TestMergerResume(t *testing.T) {
	// A restart re-reads from the committed offset: summaries of windows
	// the last run reported and saw acknowledged are dropped, not
	// reported again with part of their input.
	m := newTestMerger(t, func(c *MergerConfig) { c.DoneThroughMs = 1000 })
	require.NoError(t, m.Add(mergeTestWindow("t", 1, 2, 0, 1), 5, 0))
	require.NoError(t, m.Add(mergeTestWindow("t", 0, 2, 1000, 1), 6, 0))
	require.NoError(t, m.Add(mergeTestWindow("t", 1, 2, 1000, 1), 7, 0))
	require.Equal(t, []int64{1000}, windowStarts(m.Ready(nil)))
	require.Equal(t, int64(1), m.Stats().Resumed.Load())
	require.Equal(t, int64(1000), m.DoneThroughMs())
	m.Acked(1000)
	require.Equal(t, int64(2000), m.DoneThroughMs())
}

func TestMergerAppFolding(t *testing.T) {
	w := &schemas.PartitionWindow{
		Version: schemas.WindowVersion, ID: schemas.PartitionWindowID("t", 0, 0), Topic: "t", Partitions: 1,
		EndMs: 1000, Keyed: true, Events: 110,
	}
	for _, a := range []struct {
		app    string
		events uint64
	}{{"big", 40}, {"mid", 30}, {"small", 20}, {"tiny", 10}, {schemas.OtherApp, 10}} {
		w.Apps = append(w.Apps, schemas.AppWindow{App: a.app, Events: a.events,
			Top: []schemas.KeyCount{{App: a.app, Key: "key", Count: a.events}}})
	}
	m := newTestMerger(t, func(c *MergerConfig) { c.MaxApps = 2 })
	require.NoError(t, m.Add(w, 0, 0))
	got := m.Ready(nil)
	require.Len(t, got, 1)
	var ids []string
	for _, r := range got[0].Reports {
		ids = append(ids, r.ID)
	}
	require.Equal(t, []string{"cluster/0", "app/6:_other/0", "app/3:big/0", "app/3:mid/0"}, ids,
		"the two heaviest apps report alone, the rest fold into _other; apps by name")
	other := got[0].Reports[1]
	require.Equal(t, uint64(40), other.Events, "small + tiny + the partition's own _other")
	var keys []string
	for _, k := range other.Top {
		keys = append(keys, k.App+"/"+k.Key)
		require.InDelta(t, float64(k.Count)/40, k.Share, 1e-12, "share of the folded report's events")
	}
	require.Equal(t, []string{"small/key", "_other/key", "tiny/key"}, keys, "folded keys keep their app")
	require.Len(t, got[0].Reports[0].Top, 5, "the cluster report ranks every app's keys")
}

func TestMergerAddRefuses(t *testing.T) {
	hll, err := sketch.NewCardinality(sketch.CardinalityConfig{Precision: 10})
	require.NoError(t, err)
	p10, err := hll.MarshalBinary()
	require.NoError(t, err)
	for _, tc := range []struct {
		name   string
		change func(*schemas.PartitionWindow)
		want   string
	}{
		{"no topic", func(w *schemas.PartitionWindow) { w.Topic = "" }, "no topic"},
		{"partition out of range", func(w *schemas.PartitionWindow) { w.Partition = 2 }, "partition 2 of 2"},
		{"no partitions", func(w *schemas.PartitionWindow) { w.Partitions = 0 }, "partition 0 of 0"},
		{"absurd partitions", func(w *schemas.PartitionWindow) { w.Partitions = MaxMergePartitions + 1 }, "partition 0 of 65537"},
		{"end before start", func(w *schemas.PartitionWindow) { w.EndMs = w.StartMs }, "end 0 is not after start 0"},
		{"id", func(w *schemas.PartitionWindow) { w.ID = "t/0/5" }, "id does not match"},
		{"length", func(w *schemas.PartitionWindow) { w.EndMs = w.StartMs + 500 }, "not an aligned window of 1000 ms"},
		{"alignment", func(w *schemas.PartitionWindow) {
			w.StartMs, w.EndMs = 500, 1500
			w.ID = schemas.PartitionWindowID(w.Topic, w.Partition, w.StartMs)
		}, "not an aligned window"},
		{"events", func(w *schemas.PartitionWindow) { w.Events = 99 }, "events 99, but its apps' events add up to 5"},
		{"app twice", func(w *schemas.PartitionWindow) {
			w.Apps = append(w.Apps, schemas.AppWindow{App: "a"})
		}, `app "a" listed twice`},
		{"error above count", func(w *schemas.PartitionWindow) { w.Apps[0].Top[0].Error = 6 }, "error 6 exceeds count 5"},
		{"key twice", func(w *schemas.PartitionWindow) {
			w.Apps[0].Top = append(w.Apps[0].Top, w.Apps[0].Top[0])
		}, `key "k0" listed twice`},
		{"slot", func(w *schemas.PartitionWindow) {
			w.Apps[0].Slots = []schemas.SlotCount{{Slot: RedisSlots, Events: 1}}
		}, "slot 16384 out of range"},
		{"distinct", func(w *schemas.PartitionWindow) { w.Apps[0].Distinct = []byte("junk") }, "distinct"},
		{"sketch", func(w *schemas.PartitionWindow) { w.Apps[0].Sketch = []byte("junk") }, "sketch"},
		{"precision", func(w *schemas.PartitionWindow) { w.Apps[0].Distinct = p10 }, "precision 10, earlier summaries 14"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newTestMerger(t, nil)
			hll14, err := sketch.NewCardinality(sketch.CardinalityConfig{})
			require.NoError(t, err)
			first := mergeTestWindow("t", 1, 2, 0, 1)
			first.Apps[0].Distinct, err = hll14.MarshalBinary()
			require.NoError(t, err)
			require.NoError(t, m.Add(first, 0, 0))

			w := mergeTestWindow("t", 0, 2, 0, 5)
			tc.change(w)
			require.ErrorContains(t, m.Add(w, 1, 0), tc.want)
			require.Equal(t, int64(1), m.Stats().Invalid.Load())
			off, _ := m.CommitOffset()
			require.Equal(t, int64(0), off, "a refused summary holds nothing")
		})
	}
	m := newTestMerger(t, nil)
	require.ErrorContains(t, m.Add(nil, 0, 0), "nil partition window")
}

func TestMergerDeterministic(t *testing.T) {
	// The same summaries in any arrival order a windows topic can show
	// (each partition's summaries in the order it emitted them, partitions
	// interleaved at random, duplicates re-sent any time later) give
	// byte-identical reports.
	events := mergeZipfEvents(7, 20_000, 2000, 1.1, []string{"a", "b", "c"}, 0, 4000)
	for _, f := range []mergeFixture{
		{topic: "k", partitions: 5, windowMs: 1000, keyed: true, capacity: 32, big: 10},
		{topic: "u", partitions: 4, windowMs: 1000, capacity: 32, big: 10},
	} {
		ws := f.build(t, events)
		cfg := testMergerConfig(20)
		cfg.RedisCluster.Shards = 3
		cfg.Threshold = func(string, string) (float64, bool) { return 50, true }
		want := reportJSON(t, mergeInOrder(t, cfg, byWindow(ws)))
		r := rand.New(rand.NewPCG(8, 9))
		for range 8 {
			got := reportJSON(t, mergeInOrder(t, cfg, interleave(r, ws)))
			require.True(t, bytes.Equal(want, got), "topic %s: reports differ with another arrival order", f.topic)
		}
	}
}

// interleave returns ws in a random order that keeps each partition's
// summaries in window order, with about a third of them sent again at a
// random later point.
func interleave(r *rand.Rand, ws []*schemas.PartitionWindow) []*schemas.PartitionWindow {
	queues := map[int32][]*schemas.PartitionWindow{}
	var parts []int32
	for _, w := range byWindow(ws) {
		if queues[w.Partition] == nil {
			parts = append(parts, w.Partition)
		}
		queues[w.Partition] = append(queues[w.Partition], w)
	}
	var out []*schemas.PartitionWindow
	for len(parts) > 0 {
		i := r.IntN(len(parts))
		q := queues[parts[i]]
		out = append(out, q[0])
		queues[parts[i]] = q[1:]
		if len(q) == 1 {
			parts = slices.Delete(parts, i, i+1)
		}
	}
	// Re-send from the back, so the indices before each insertion stay put.
	for i := len(out) - 1; i >= 0; i-- {
		if r.IntN(3) == 0 {
			at := i + 1 + r.IntN(len(out)-i)
			out = slices.Insert(out, at, out[i])
		}
	}
	return out
}

func TestMergerMetrics(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	m := newTestMerger(t, func(c *MergerConfig) { c.Registerer = reg })
	require.NoError(t, m.Add(mergeTestWindow("t", 0, 1, 0, 1), 0, 0))
	require.NoError(t, m.Add(mergeTestWindow("t", 0, 1, 0, 1), 1, 0))
	require.Len(t, m.Ready(nil), 1)
	families, err := reg.Gather()
	require.NoError(t, err)
	got := map[string]float64{}
	for _, f := range families {
		for _, mt := range f.GetMetric() {
			name := f.GetName()
			for _, l := range mt.GetLabel() {
				name += "{" + l.GetName() + "=" + l.GetValue() + "}"
			}
			if c := mt.GetCounter(); c != nil {
				got[name] = c.GetValue()
			} else {
				got[name] = mt.GetGauge().GetValue()
			}
		}
	}
	require.Equal(t, 1.0, got["keyheat_merge_summaries_total{result=accepted}"])
	require.Equal(t, 1.0, got["keyheat_merge_summaries_total{result=duplicate}"])
	require.Equal(t, 1.0, got["keyheat_merge_windows_total{released_by=complete}"])
	require.Equal(t, 0.0, got["keyheat_merge_pending_windows"])

	_, err = NewMerger(MergerConfig{MergerOptions: DefaultMergerOptions(), Window: time.Second, Registerer: reg})
	require.ErrorContains(t, err, "register merger metrics", "a second merger on one registry")
}

// logLines decodes the JSON log lines in buf and empties it.
func logLines(t *testing.T, buf *bytes.Buffer) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range bytes.Split(bytes.TrimSpace(buf.Bytes()), []byte("\n")) {
		if len(l) == 0 {
			continue
		}
		var m map[string]any
		require.NoError(t, json.Unmarshal(l, &m), "log line %s", l)
		out = append(out, m)
	}
	buf.Reset()
	return out
}

func TestMergerWaiting(t *testing.T) {
	m := newTestMerger(t, nil)
	_, _, ok := m.Waiting(nil)
	require.False(t, ok, "nothing held")
	require.NoError(t, m.Add(mergeTestWindow("t", 0, 3, 2000, 4), 0, 0))
	require.NoError(t, m.Add(mergeTestWindow("t", 0, 3, 1000, 4), 1, 0))
	require.Empty(t, m.Ready(nil))
	start, missing, ok := m.Waiting(nil)
	require.True(t, ok)
	require.Equal(t, int64(1000), start, "the oldest window held")
	require.Equal(t, []string{"t/1", "t/2"}, missing)
}

// TestMergerCapCountsCompleteWindows: windows complete already when one
// read brings more than MaxPendingWindows of them are released by the cap
// but counted complete, and none is partial.
func TestMergerCapCountsCompleteWindows(t *testing.T) {
	m := newTestMerger(t, func(c *MergerConfig) { c.MaxPendingWindows = 2 })
	for i := range int64(5) {
		require.NoError(t, m.Add(mergeTestWindow("t", 0, 1, i*1000, 1), i, 0))
	}
	got := m.Ready(nil)
	require.Len(t, got, 5)
	require.Zero(t, m.Stats().Capped.Load())
	require.Equal(t, int64(5), m.Stats().Complete.Load())
	require.Zero(t, m.Stats().Partial.Load())
}

// TestMergerCapHeedsStatus: a window the cap releases does not name
// missing a partition Ready was told is idle without events there.
func TestMergerCapHeedsStatus(t *testing.T) {
	m := newTestMerger(t, func(c *MergerConfig) { c.MaxPendingWindows = 1; c.Lateness = 0 })
	idle := func(_ string, p int32) PartitionStatus {
		if p == 1 {
			return PartitionStatus{IdleClockMs: 1000}
		}
		return PartitionStatus{}
	}
	require.Empty(t, m.Ready(idle))
	require.NoError(t, m.Add(mergeTestWindow("t", 0, 3, 0, 1), 0, 0))
	require.NoError(t, m.Add(mergeTestWindow("t", 0, 3, 1000, 1), 1, 0))
	got := m.Ready(idle)
	require.NotEmpty(t, got)
	require.Equal(t, []string{"t/2"}, got[0].Reports[0].Missing, "partition 1 is idle there, partition 2 missing")
}

// A topic whose summaries come after SetExpected left it out (the group
// was described before the member reading it joined) stays expected: a
// window it had events in waits for it. A later SetExpected that leaves
// it out again (no member reads it any more) drops it.
func TestMergerExpectsTopicSeenAfterDescription(t *testing.T) {
	m := newTestMerger(t, func(c *MergerConfig) { c.Lateness = 0 })
	m.SetExpected(map[string]int32{"a": 1})
	require.NoError(t, m.Add(mergeTestWindow("b", 0, 1, 0, 1), 0, 0))
	require.NoError(t, m.Add(mergeTestWindow("a", 0, 1, 0, 1), 1, 0))
	got := m.Ready(nil)
	require.Len(t, got, 1)
	require.False(t, got[0].Reports[0].Partial)
	require.Equal(t, uint64(2), got[0].Reports[0].Events)

	require.NoError(t, m.Add(mergeTestWindow("a", 0, 1, 1000, 1), 2, 0))
	require.Empty(t, m.Ready(nil), "b/0 is still expected for window 1")
	m.SetExpected(map[string]int32{"a": 1})
	got = m.Ready(nil)
	require.Len(t, got, 1, "described again without b: b is no longer read")
	require.Equal(t, int64(1000), got[0].StartMs)
}

// TestMergerEmptyWindowsRaiseNoWarning: windows without events reported
// partial, and summaries without events dropped for windows already
// reported (what a restart over idle partitions sends), are no data loss
// and raise no warning; the same with events does (TestMergerCapWarns).
func TestMergerEmptyWindowsRaiseNoWarning(t *testing.T) {
	var buf bytes.Buffer
	m := newTestMerger(t, func(c *MergerConfig) {
		c.MaxPendingWindows = 2
		c.Logger = slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelWarn}))
	})
	for i, start := range []int64{0, 1000, 2000} {
		w := mergeTestWindow("t", 0, 2, start, 0)
		w.Late = 1 // not empty, so held; but no event in the window
		require.NoError(t, m.Add(w, int64(i), 0))
	}
	require.Equal(t, int64(1), m.Stats().Partial.Load(), "the cap released window 0 without partition 1")
	late := mergeTestWindow("t", 1, 2, 0, 0)
	late.Late = 2
	require.NoError(t, m.Add(late, 10, 0))
	require.Equal(t, int64(1), m.Stats().Late.Load(), "partition 1's summary of window 0 came too late")
	require.Empty(t, logLines(t, &buf), "no warning about windows without events")

	require.NoError(t, m.Add(mergeTestWindow("t", 1, 2, 0, 5), 11, 20_000))
	lines := logLines(t, &buf)
	require.Len(t, lines, 1, "a dropped summary with events is warned of")
	require.Equal(t, float64(5), lines[0]["events"])
}
