package pipeline

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/keyheat/keyheat/schemas"
	"github.com/keyheat/keyheat/sketch"
	"github.com/stretchr/testify/require"
)

// winModel is the exact oracle of report windows: the rules of
// ARCHITECTURE.md applied with plain maps.
type winModel struct {
	lengthMs, latenessMs int64
	maxApps, topKeys     int
	started              bool
	maxTs, first         int64
	wins                 map[int64]*modelWin
	rules                *Rules
}

type modelWin struct {
	events, late      uint64
	firstOff, lastOff int64
	apps              map[string]*modelApp
	order             []string // apps in order of first event
}

type modelApp struct {
	events, bytes, reads, writes, lat uint64
	keys                              map[string]*modelKey
	slots                             map[uint16]uint64
}

type modelKey struct{ count, bytes, reads, writes, lat uint64 }

func newWinModel(o Options) *winModel {
	r, _ := NewRules(o)
	return &winModel{lengthMs: o.Window.Milliseconds(), latenessMs: o.Lateness.Milliseconds(),
		maxApps: o.MaxApps, topKeys: o.Summary.TopKeys, wins: map[int64]*modelWin{}, rules: r}
}

func (m *winModel) win(s int64) *modelWin {
	w := m.wins[s]
	if w == nil {
		w = &modelWin{firstOff: -1, lastOff: -1, apps: map[string]*modelApp{}}
		m.wins[s] = w
	}
	return w
}

func (m *winModel) add(e *schemas.AccessEvent, off int64) {
	s := floorDiv(e.TimeMs, m.lengthMs) * m.lengthMs
	if !m.started {
		m.started, m.first, m.maxTs = true, s, e.TimeMs
	}
	oldest := max(m.first, floorDiv(m.maxTs-m.latenessMs, m.lengthMs)*m.lengthMs)
	m.maxTs = max(m.maxTs, e.TimeMs)
	if s < oldest {
		m.win(oldest).late++
		return
	}
	w := m.win(s)
	w.events++
	if w.firstOff < 0 {
		w.firstOff = off
	}
	w.lastOff = off
	app := e.App
	if w.apps[app] == nil && len(w.order) >= m.maxApps {
		app = schemas.OtherApp
	}
	a := w.apps[app]
	if a == nil {
		a = &modelApp{keys: map[string]*modelKey{}, slots: map[uint16]uint64{}}
		w.apps[app] = a
		if app != schemas.OtherApp {
			w.order = append(w.order, app)
		}
	}
	cls := m.rules.ops.classify(e.Op)
	a.events++
	a.bytes += uint64(e.Bytes)
	a.lat += uint64(e.LatencyUs)
	a.slots[Slot(e.Key)]++
	k := a.keys[e.Key]
	if k == nil {
		k = &modelKey{}
		a.keys[e.Key] = k
	}
	k.count++
	k.bytes += uint64(e.Bytes)
	k.lat += uint64(e.LatencyUs)
	switch cls {
	case opRead:
		a.reads++
		k.reads++
	case opWrite:
		a.writes++
		k.writes++
	}
}

// check compares the partition's windows with the model.
func (m *winModel) check(t *testing.T, out Output, keyed bool) {
	t.Helper()
	require.NotEmpty(t, out.Windows)
	for i, w := range out.Windows {
		require.Equal(t, m.first+int64(i)*m.lengthMs, w.StartMs, "windows are contiguous from the first")
		require.Equal(t, w.StartMs+m.lengthMs, w.EndMs)
		require.Equal(t, i == len(out.Windows)-1, w.Final, "only the last is final")
		require.Equal(t, keyed, w.Keyed)
		require.Equal(t, schemas.PartitionWindowID(testSource.Topic, testSource.Partition, w.StartMs), w.ID)
		mw := m.wins[w.StartMs]
		if mw == nil {
			mw = &modelWin{firstOff: -1, lastOff: -1}
		}
		require.Equal(t, mw.events, w.Events, "window %d events", i)
		require.Equal(t, mw.late, w.Late, "window %d late", i)
		require.Equal(t, mw.firstOff, w.FirstOffset)
		require.Equal(t, mw.lastOff, w.LastOffset)
		require.Len(t, w.Apps, len(mw.apps), "window %d apps", i)
		require.True(t, slices.IsSortedFunc(w.Apps, func(a, b schemas.AppWindow) int { return strings.Compare(a.App, b.App) }))
		var sum uint64
		for _, aw := range w.Apps {
			ma := mw.apps[aw.App]
			require.NotNil(t, ma, "window %d: app %q not in the model", i, aw.App)
			checkApp(t, aw, ma, keyed, m.topKeys)
			sum += aw.Events
		}
		require.Equal(t, w.Events, sum)
	}
}

func checkApp(t *testing.T, aw schemas.AppWindow, ma *modelApp, keyed bool, topKeys int) {
	t.Helper()
	require.Equal(t, ma.events, aw.Events, "%s events", aw.App)
	require.Equal(t, ma.bytes, aw.Bytes, "%s bytes", aw.App)
	require.Equal(t, ma.reads, aw.Reads, "%s reads", aw.App)
	require.Equal(t, ma.writes, aw.Writes, "%s writes", aw.App)
	require.Equal(t, ma.lat, aw.LatencyUs, "%s latency", aw.App)
	listed := map[string]bool{}
	for j, kc := range aw.Top {
		listed[kc.Key] = true
		exact := ma.keys[kc.Key]
		require.NotNil(t, exact, "%s: listed key %q never seen", aw.App, kc.Key)
		require.LessOrEqual(t, kc.Count-kc.Error, exact.count, "%s/%s lower bound", aw.App, kc.Key)
		require.GreaterOrEqual(t, kc.Count, exact.count, "%s/%s upper bound", aw.App, kc.Key)
		require.LessOrEqual(t, kc.Bytes, exact.bytes)
		require.LessOrEqual(t, kc.Reads, exact.reads)
		require.LessOrEqual(t, kc.Writes, exact.writes)
		require.LessOrEqual(t, kc.LatencyUs, exact.lat)
		if kc.Error == 0 {
			require.Equal(t, modelKey{exact.count, exact.bytes, exact.reads, exact.writes, exact.lat},
				modelKey{kc.Count, kc.Bytes, kc.Reads, kc.Writes, kc.LatencyUs}, "%s/%s tracked from its first event: exact", aw.App, kc.Key)
		}
		if j > 0 {
			require.GreaterOrEqual(t, aw.Top[j-1].Count, kc.Count, "ranked")
		}
		require.Equal(t, testSource.Partition, kc.Partition)
	}
	for k, mk := range ma.keys {
		if !listed[k] {
			require.LessOrEqual(t, mk.count, aw.Floor, "%s/%s not listed: at most Floor", aw.App, k)
		}
	}
	for _, l := range [][]schemas.KeyCount{aw.Big, aw.TopReads, aw.TopWrites, aw.TopLatency} {
		for _, kc := range l {
			exact := ma.keys[kc.Key]
			require.NotNil(t, exact, "%s: listed key %q never seen", aw.App, kc.Key)
			require.LessOrEqual(t, kc.Count-kc.Error, exact.count, "%s/%s lower bound", aw.App, kc.Key)
			require.GreaterOrEqual(t, kc.Count, exact.count, "%s/%s upper bound", aw.App, kc.Key)
			require.LessOrEqual(t, kc.Bytes-kc.BytesError, exact.bytes, "%s/%s bytes lower bound", aw.App, kc.Key)
			require.LessOrEqual(t, kc.Reads, exact.reads)
			require.LessOrEqual(t, kc.Writes, exact.writes)
			require.LessOrEqual(t, kc.LatencyUs, exact.lat)
			if kc.Error == 0 {
				require.Equal(t, modelKey{exact.count, exact.bytes, exact.reads, exact.writes, exact.lat},
					modelKey{kc.Count, kc.Bytes, kc.Reads, kc.Writes, kc.LatencyUs}, "%s/%s counted from its first event: exact", aw.App, kc.Key)
				require.Zero(t, kc.BytesError)
			}
		}
	}
	for _, kc := range aw.Big {
		exact := ma.keys[kc.Key]
		require.GreaterOrEqual(t, kc.Bytes, exact.bytes, "%s/%s bytes upper bound", aw.App, kc.Key)
	}
	if !aw.Approximate {
		// Every key counted exactly: Top is the app's heaviest keys, and
		// Floor the first count left out.
		var counts []uint64
		for _, mk := range ma.keys {
			counts = append(counts, mk.count)
		}
		slices.SortFunc(counts, func(a, b uint64) int { return cmp.Compare(b, a) })
		require.Len(t, aw.Top, min(len(counts), topKeys))
		for j, kc := range aw.Top {
			require.Zero(t, kc.Error, "%s/%s", aw.App, kc.Key)
			require.Equal(t, counts[j], kc.Count, "%s rank %d", aw.App, j+1)
		}
		if len(counts) > len(aw.Top) {
			require.Equal(t, counts[len(aw.Top)], aw.Floor, "%s floor", aw.App)
		}
	}
	var slots uint64
	for _, sc := range aw.Slots {
		require.Equal(t, ma.slots[sc.Slot], sc.Events, "%s slot %d", aw.App, sc.Slot)
		slots += sc.Events
	}
	require.Equal(t, ma.events, slots)
	var d sketch.Cardinality
	require.NoError(t, d.UnmarshalBinary(aw.Distinct))
	require.InEpsilon(t, float64(len(ma.keys)), float64(d.Estimate()), 0.05, "%s distinct", aw.App)
	if keyed {
		require.Nil(t, aw.Sketch)
		return
	}
	var cms sketch.CountMin
	require.NoError(t, cms.UnmarshalBinary(aw.Sketch))
	require.Equal(t, ma.events, cms.Total())
	for k, mk := range ma.keys {
		require.GreaterOrEqual(t, cms.Estimate(k), mk.count, "%s/%s sketch estimate", aw.App, k)
	}
}

// Window summaries agree with an exact model: totals exact, top keys exact
// where Error is 0 and within their bounds always, unlisted keys under
// Floor, big keys within their bytes bounds, slot counts exact, distinct
// keys within 5%, late events in the oldest open window, and, when the
// topic is not keyed, a Count-Min sketch that bounds every key.
func TestWindowSummariesMatchModel(t *testing.T) {
	for _, tc := range []struct {
		keyed     bool
		exactKeys int // 0: exact counting off; 300: windows overflow it
	}{{true, 65_536}, {false, 65_536}, {true, 300}, {false, 300}, {true, 0}} {
		keyed := tc.keyed
		t.Run(fmt.Sprintf("keyed=%v/exact_keys=%d", keyed, tc.exactKeys), func(t *testing.T) {
			o := DefaultOptions()
			o.Summary.ExactKeys = tc.exactKeys
			o.MaxApps = 3
			o.Summary.TopKeys = 20
			o.Summary.TopCapacity = 64
			o.Summary.TopWidth = 256
			o.Summary.BigKeys = 5
			o.Summary.BigCapacity = 16
			o.Summary.BigWidth = 64
			spec := streamSpec{seed: 11, durationMs: 9000, bgPerMs: 8, bgKeys: 5000,
				bgApps: []string{"shop", "cart", "auth", "feed", "search"}, jitterMs: 3500, jitterEvery: 20,
				planted: []*planted{{app: "cart", key: "{user1000}.basket", op: "SET", bytes: 4096, rate: steady(300, 0, 9000)}}}
			events := generate(spec)
			src := testSource
			src.Keyed = keyed
			p := newPart(t, o, src, Start{})
			out := run(p, events, true)
			m := newWinModel(o)
			for i := range events {
				m.add(&events[i].e, events[i].off)
			}
			m.check(t, out, keyed)
			st := p.Stats()
			require.NotZero(t, st.Late, "the jitter makes late events")
			require.NotZero(t, st.AppsFolded, "five apps, three tracked")
			approximate := 0
			for _, w := range out.Windows {
				for _, a := range w.Apps {
					if a.Approximate {
						approximate++
					}
				}
			}
			if tc.exactKeys == 65_536 {
				require.Zero(t, approximate, "every window fits the exact table")
			} else {
				require.NotZero(t, approximate, "some window overflows the exact table")
			}
			var late uint64
			for _, w := range out.Windows {
				late += w.Late
				require.LessOrEqual(t, len(w.Apps), o.MaxApps+1)
			}
			require.Equal(t, st.Late, late)
		})
	}
}

// ev is a terse event for hand-written streams.
func ev(tsMs int64, key string) *schemas.AccessEvent {
	return &schemas.AccessEvent{TimeMs: t0Ms + tsMs, Key: key, App: "shop", Op: "GET", Bytes: 1}
}

type winBrief struct {
	start        int64 // relative to t0Ms
	events, late uint64
	first, last  int64
	watermark    int64 // relative to t0Ms
	final        bool
}

func brief(ws []schemas.PartitionWindow) []winBrief {
	var b []winBrief
	for _, w := range ws {
		b = append(b, winBrief{w.StartMs - t0Ms, w.Events, w.Late, w.FirstOffset, w.LastOffset, w.WatermarkMs - t0Ms, w.Final})
	}
	return b
}

// The watermark closes windows in order; of empty ones only the last to
// close in one go is emitted (how far the partition came); an event older
// than the oldest open window is late and counted there; End closes the
// rest and marks the last Final.
func TestWatermarkLatenessEnd(t *testing.T) {
	o := DefaultOptions() // 1 s windows, 2 s lateness
	p := newPart(t, o, testSource, Start{Offset: 100})
	var out Output
	p.Process(ev(500, "a"), 100, &out)  // window 0
	p.Process(ev(2400, "b"), 101, &out) // window 2; watermark 400
	p.Process(ev(900, "c"), 102, &out)  // window 0, still open
	p.Process(ev(3100, "d"), 103, &out) // watermark 1100: window 0 closes
	require.Equal(t, []winBrief{{0, 2, 0, 100, 102, 1100, false}}, brief(out.Windows))
	out.Reset()
	p.Process(ev(950, "late"), 104, &out) // window 0 is closed: late, in window 1
	p.Process(ev(7600, "e"), 105, &out)   // watermark 5600: windows 1..4 close, 2..4 empty-ish
	require.Equal(t, []winBrief{
		{1000, 0, 1, -1, -1, 5600, false},
		{2000, 1, 0, 101, 101, 5600, false},
		{3000, 1, 0, 103, 103, 5600, false},
		{4000, 0, 0, -1, -1, 5600, false},
	}, brief(out.Windows))
	out.Reset()
	p.Process(ev(100, "very-late"), 106, &out) // before the first window: late
	p.End(&out)
	require.Equal(t, []winBrief{
		{5000, 0, 1, -1, -1, 5600, false},
		{7000, 1, 0, 105, 105, 5600, true}, // 6000, empty, is not summarised
	}, brief(out.Windows))
	require.EqualValues(t, 2, p.Stats().Late)
	out.Reset()
	p.Process(ev(9000, "x"), 107, &out)
	p.End(&out)
	require.Empty(t, out.Windows, "nothing after End")
}

// Idle closes the windows of a quiet partition once IdleTimeout of wall
// time passed without events, by moving its clock to the wall clock.
func TestIdleClosesQuietWindows(t *testing.T) {
	o := DefaultOptions()
	o.IdleTimeout = 5 * time.Second
	p := newPart(t, o, testSource, Start{})
	var out Output
	p.Idle(t0Ms, &out) // before any event: nothing
	p.Process(ev(500, "a"), 0, &out)
	wall := t0Ms + 1000
	p.Idle(wall, &out) // notices the activity
	p.Idle(wall+4999, &out)
	require.Empty(t, out.Windows, "not idle long enough")
	p.Idle(wall+5000, &out) // clock to wall+5000 = 6000: watermark 4000
	require.Equal(t, []winBrief{
		{0, 1, 0, 0, 0, 4000, false},
		{3000, 0, 0, -1, -1, 4000, false}, // the last to close; 1000 and 2000, empty, are not summarised
	}, brief(out.Windows))
	out.Reset()
	p.Process(ev(3500, "now-late"), 1, &out)
	require.EqualValues(t, 1, p.Stats().Late, "an event behind the idle watermark is late")
}

// IdleTo moves a quiet partition's clock in steps no further than its
// bound, and never past the wall clock.
func TestIdleToSteps(t *testing.T) {
	o := DefaultOptions()
	o.IdleTimeout = 5 * time.Second
	p := newPart(t, o, testSource, Start{})
	var out Output
	p.Process(ev(500, "a"), 0, &out)
	wall := t0Ms + 10_000
	require.False(t, p.IdleTo(wall, wall, &out), "notices the activity")
	later := wall + 5000
	for _, tt := range []struct {
		name     string
		toMs     int64 // from t0Ms
		advanced bool
		starts   []int64 // windows emitted, from t0Ms
	}{
		{"to 3000: watermark 1000", 3000, true, []int64{0}},
		{"not back", 2000, false, nil},
		{"to 5000: watermark 3000", 5000, true, []int64{2000}},
		{"never past the wall clock", later + 100_000 - t0Ms, true, nil},
	} {
		out.Reset()
		require.Equal(t, tt.advanced, p.IdleTo(later, t0Ms+tt.toMs, &out), tt.name)
		var starts []int64
		for _, w := range out.Windows {
			starts = append(starts, w.StartMs-t0Ms)
		}
		if tt.starts != nil {
			require.Equal(t, tt.starts, starts, tt.name)
		}
	}
	last := out.Windows[len(out.Windows)-1]
	require.Equal(t, later-o.Lateness.Milliseconds(), last.WatermarkMs, "the clock stopped at the wall clock")
}

// Apps beyond MaxApps share OtherApp; a key longer than MaxKeyBytes is
// reported as its prefix and hash, the same on every run.
func TestAppsBoundedAndLongKeys(t *testing.T) {
	o := DefaultOptions()
	o.MaxApps = 2
	o.MaxKeyBytes = 40
	p := newPart(t, o, testSource, Start{})
	var out Output
	long := strings.Repeat("é", 30) // 60 bytes
	for i, app := range []string{"b", "a", "c", "d", "a"} {
		e := ev(100, "k")
		e.App = app
		if i == 4 {
			e.Key = long
		}
		p.Process(e, int64(i), &out)
	}
	p.End(&out)
	require.Len(t, out.Windows, 1)
	var apps []string
	for _, a := range out.Windows[0].Apps {
		apps = append(apps, fmt.Sprintf("%s:%d", a.App, a.Events))
	}
	require.Equal(t, []string{"_other:2", "a:2", "b:1"}, apps)
	var top []string
	for _, kc := range out.Windows[0].Apps[1].Top {
		top = append(top, kc.Key)
	}
	tk := truncateKey(long, 40)
	require.Len(t, tk, 40-1, "cut at a character boundary")
	require.True(t, strings.HasPrefix(tk, strings.Repeat("é", 10)+"…"))
	require.Equal(t, []string{"k", tk}, top, "equal counts: by key")
	require.Equal(t, tk, truncateKey(long, 40))
	require.NotEqual(t, tk, truncateKey(long+"x", 40), "distinct long keys stay distinct")
	require.EqualValues(t, 1, p.Stats().TruncatedKeys)
	require.EqualValues(t, 2, p.Stats().AppsFolded)
}

// A gap in event time, however long, costs one summary: the empty
// windows it passes are not summarised one by one.
func TestGapCostsOneSummary(t *testing.T) {
	o := DefaultOptions() // 1 s windows, 2 s lateness
	p := newPart(t, o, testSource, Start{})
	var out Output
	p.Process(ev(500, "a"), 0, &out)
	const tenYears = 10 * 365 * 24 * 3600 * 1000
	p.Process(ev(tenYears, "b"), 1, &out)
	require.Equal(t, []winBrief{
		{0, 1, 0, 0, 0, tenYears - 2000, false},
		{tenYears - 3000, 0, 0, -1, -1, tenYears - 2000, false},
	}, brief(out.Windows))
	for _, w := range out.Windows {
		p.Acked(w.StartMs)
	}
	out.Reset()
	p.End(&out)
	require.Equal(t, []winBrief{{tenYears, 1, 0, 1, 1, tenYears - 2000, true}}, brief(out.Windows))
	meta, err := schemas.ParseCommitMeta(p.CommitPoint().Metadata)
	require.NoError(t, err)
	require.Equal(t, t0Ms+tenYears-2000, meta.NextWindowMs, "the acknowledged marker carried the commit past the gap")
	require.Equal(t, int64(1), meta.ResumeOffset, "only the last window holds the commit point")
}
