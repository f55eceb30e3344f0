package pipeline

import (
	"bytes"
	"cmp"
	"slices"
	"strings"

	"github.com/keyheat/keyheat/internal/faststr"
	"github.com/keyheat/keyheat/schemas"
	"github.com/keyheat/keyheat/sketch"
)

// windows is one partition's report windows: tumbling, aligned, closed by
// the watermark in order, each summarised into a PartitionWindow.
//
// A window is "open" from the watermark's window (or the first one the
// partition emits) to the newest event's; events of an older window are
// late. Open windows live in open[i] for the window nextEmit + i·L, nil
// until the window gets an event.
type windows struct {
	p                    *Partition
	lengthMs, latenessMs int64
	active               bool // window mode began (see Partition.Process)
	// lateBelow: windows before it are late whatever the watermark says.
	// emitFrom: the first window this partition emits; windows before it
	// were acknowledged (or never existed), their events are dropped.
	lateBelow, emitFrom int64
	nextEmit            int64 // oldest window not yet emitted
	oldest              int64 // oldest open window: events of earlier ones are late
	sCache              int64 // start of the window judged last
	open                []*winState
	last                *winState // the window of the previous event
	pool                []*winState
	apps                []*appAgg // free app aggregates
	// byApp, lists, sel and items are emit's scratch: the exact table's
	// entries of each app (by appAgg.idx), an app's lists selected from
	// them, the top-K items one list selects, and an app's top-K items.
	byApp [][]int32
	lists [figCount]bestN[exactCand, *exactTable]
	sel   []int32
	items []sketch.Item
	// distinct is summary's scratch for encoding a distinct-key sketch,
	// slotList for gathering an app's slots.
	distinct []byte
	slotList []schemas.SlotCount
	// exactHint is the most keys a window's exact table held so far: a
	// new table starts with room for as many, rather than growing to it.
	exactHint int
}

// winState is an open window.
type winState struct {
	startMs           int64
	tab               *exactTable // nil when exact counting is off
	apps              []*appAgg   // in order of first event; sorted when emitted
	other             *appAgg     // apps beyond MaxApps
	last              *appAgg
	events, late      uint64
	firstOff, lastOff int64 // counted events' offsets, -1 while none
	// minOff is the lowest offset of an event counted in the window or
	// attributed to it as late, -1 while none, and minTs the partition's
	// newest event time before that event: the window's claim on the
	// commit point.
	minOff, minTs int64
}

// appAgg is one app's part of a window. Its keys are counted in the
// window's exact table while it has room; the top-K and big-key trackers
// below count the app's keys that came after it filled (spilled), and are
// built the first time that happens.
type appAgg struct {
	app                                     string
	idx                                     uint16          // the app's number in its window's exact table
	sizes                                   *SummaryOptions // of the trackers, built at the first spill
	events, bytes, reads, writes, latencyUs uint64
	spilled                                 bool // some key went to the trackers below
	top                                     *sketch.TopK
	topAux                                  [][3]uint64 // per top entry ID: bytes, reads, writes…
	topLat                                  []uint64    // …and latency, since tracked…
	topSlot                                 []uint16    // …and the key's Redis slot | slotShortened
	big                                     *sketch.TopK
	bigAux                                  [][4]uint64 // per big entry ID: events, reads, writes, latency since tracked
	bigShort                                []bool      // per big entry ID: the key was shortened
	distinct                                *sketch.Cardinality
	slots                                   []uint32 // events per Redis Cluster slot, saturating
	cms                                     *sketch.CountMin
}

// verdict is what becomes of an event in the windows.
type verdict uint8

const (
	vCount verdict = iota // counted in its window
	vLate                 // late, attributed to a window
	vDrop                 // belongs to (or is attributed to) an acknowledged window
)

func newWindows(p *Partition) *windows {
	return &windows{p: p, lengthMs: p.o.Window.Milliseconds(), latenessMs: p.o.Lateness.Milliseconds()}
}

func (w *windows) start(tsMs int64) int64 { return floorDiv(tsMs, w.lengthMs) * w.lengthMs }

// activate starts window mode at the first event from the resume offset
// (or at End). With an acknowledged window on record the partition
// resumes the windows of the crashed run: it emits from the first window
// not acknowledged, and drops what belongs to earlier ones, as the
// crashed run had counted those. Otherwise windows start at the oldest
// window open at this first event.
func (w *windows) activate(nextWindowMs, firstTsMs int64) {
	w.active = true
	if nextWindowMs != noTime {
		w.lateBelow, w.emitFrom = noTime, nextWindowMs
	} else {
		first := w.start(firstTsMs)
		if w.p.started {
			first = max(first, w.start(w.watermark()))
		}
		w.lateBelow, w.emitFrom = first, first
	}
	w.nextEmit = w.emitFrom
	w.clock()
}

// clock refreshes the oldest open window after the partition's clock
// moved: windows before it are late.
func (w *windows) clock() {
	w.oldest = w.lateBelow
	if wm := w.watermark(); wm != noTime {
		w.oldest = max(w.oldest, w.start(wm))
	}
}

// watermark is the partition's newest event time minus the lateness.
func (w *windows) watermark() int64 {
	if !w.p.started {
		return noTime
	}
	return w.p.maxTs - w.latenessMs
}

// judge decides what becomes of an event at tsMs, given the watermark
// before the event, and in which window.
func (w *windows) judge(tsMs int64) (verdict, int64) {
	// Most events fall in the window of the one before: no division (and
	// counted, which Process tests before calling: counts).
	s := w.sCache
	if tsMs < s || tsMs >= s+w.lengthMs {
		s = w.start(tsMs)
		w.sCache = s
	}
	oldest := w.oldest
	switch {
	case s < oldest:
		if oldest < w.emitFrom {
			return vDrop, oldest
		}
		return vLate, oldest
	case s < w.emitFrom:
		return vDrop, s
	}
	return vCount, s
}

// counts reports whether an event at tsMs is counted in the window of the
// event before, judge's common case, in a test that inlines.
func (w *windows) counts(tsMs int64) bool {
	s := w.sCache
	return tsMs >= s && tsMs < s+w.lengthMs && s >= w.oldest && s >= w.emitFrom
}

// state returns the open window starting at startMs, creating its state.
func (w *windows) state(startMs int64) *winState {
	if l := w.last; l != nil && l.startMs == startMs {
		return l
	}
	i := int((startMs - w.nextEmit) / w.lengthMs)
	for len(w.open) <= i {
		w.open = append(w.open, nil)
	}
	ws := w.open[i]
	if ws == nil {
		if n := len(w.pool); n > 0 {
			ws, w.pool = w.pool[n-1], w.pool[:n-1]
		} else {
			ws = new(winState)
			if s := w.p.o.Summary; s.ExactKeys > 0 {
				ws.tab = newExactTable(s.ExactKeys, s.ExactKeyBytes, w.exactHint)
			}
		}
		*ws = winState{startMs: startMs, tab: ws.tab, apps: ws.apps[:0], firstOff: -1, lastOff: -1, minOff: -1}
		w.open[i] = ws
	}
	w.last = ws
	return ws
}

func (ws *winState) claim(offset, tsBefore int64) {
	if ws.minOff < 0 {
		ws.minOff, ws.minTs = offset, tsBefore
	}
}

// add counts an event in the window starting at startMs; key is e's key,
// or its shortened form when short.
func (w *windows) add(startMs int64, e *schemas.AccessEvent, key string, h uint64, cls opClass, white, short bool) {
	p := w.p
	ws := w.last
	if ws == nil || ws.startMs != startMs {
		ws = w.state(startMs)
	}
	ws.events++
	if ws.firstOff < 0 {
		ws.firstOff = p.curOffset
	}
	ws.lastOff = p.curOffset
	ws.claim(p.curOffset, p.curMaxTsBefore)
	a := ws.last
	if a == nil || !(len(e.App) <= 8 && faststr.EqualShort(a.app, e.App) || len(e.App) > 8 && faststr.Equal(a.app, e.App)) {
		a = w.app(ws, e.App)
		ws.last = a
	}
	a.add(ws.tab, e, key, h, cls, white, short)
}

// touch starts loading what counting an event whose key hashes to h in
// the window starting at startMs will read (see exactTable.touch), when
// that window is the one of the event before, as it nearly always is.
func (w *windows) touch(startMs int64, h uint64) {
	if ws := w.last; ws != nil && ws.startMs == startMs && ws.tab != nil {
		ws.tab.touch(h)
	}
}

// addLate counts a late event in the window starting at startMs.
func (w *windows) addLate(startMs int64) {
	ws := w.state(startMs)
	ws.late++
	ws.claim(w.p.curOffset, w.p.curMaxTsBefore)
}

// app returns the aggregate of app in ws, or of OtherApp once MaxApps
// apps have one.
func (w *windows) app(ws *winState, app string) *appAgg {
	for _, a := range ws.apps {
		if a.app == app {
			return a
		}
	}
	if ws.other != nil && ws.other.app == app {
		return ws.other
	}
	if len(ws.apps) >= w.p.o.MaxApps {
		if ws.other == nil {
			ws.other = w.newApp(schemas.OtherApp, w.p.o.MaxApps)
		}
		w.p.stats.AppsFolded++
		return ws.other
	}
	a := w.newApp(strings.Clone(app), len(ws.apps))
	ws.apps = append(ws.apps, a)
	return a
}

// newApp returns an empty aggregate for app, number idx in its window.
func (w *windows) newApp(app string, idx int) *appAgg {
	var a *appAgg
	if n := len(w.apps); n > 0 {
		a, w.apps = w.apps[n-1], w.apps[:n-1]
	} else {
		a = w.allocApp()
	}
	if !w.p.src.Keyed && a.cms == nil {
		// Pooled while the partition was keyed (see Partition.Unkey).
		a.cms, _ = sketch.NewCountMin(sketch.CountMinConfig{Width: w.p.o.Summary.SketchWidth})
	}
	a.app, a.idx = app, uint16(idx)
	return a
}

// allocApp builds an app aggregate sized by the options; the sizes are
// validated, so the constructors cannot fail. The trackers of keys past
// the exact table come later, if ever (spill).
func (w *windows) allocApp() *appAgg {
	s := w.p.o.Summary
	a := &appAgg{sizes: &w.p.o.Summary, slots: make([]uint32, RedisSlots)}
	a.distinct, _ = sketch.NewCardinality(sketch.CardinalityConfig{Precision: uint8(s.DistinctPrecision)})
	if !w.p.src.Keyed {
		a.cms, _ = sketch.NewCountMin(sketch.CountMinConfig{Width: s.SketchWidth})
	}
	return a
}

// spillSlack is the top-K slack (sketch.TopKConfig.Slack) of the keys
// past the exact table. They are a window's late, mostly light keys: with
// no slack each new one evicts a tracked one, which costs hundreds of
// instructions, for keys whose counts are a few events apart. Four events
// of slack cut that churn about fivefold and raise the app's Floor (and
// the Error of a key admitted late) by at most four.
const spillSlack = 4

// allocTrackers builds the app's top-K and big-key trackers.
func (a *appAgg) allocTrackers(s SummaryOptions) {
	a.top, _ = sketch.NewTopK(sketch.TopKConfig{Capacity: s.TopCapacity, Sketch: sketch.CountMinConfig{Width: s.TopWidth}, Slack: spillSlack})
	a.topAux = make([][3]uint64, s.TopCapacity)
	a.topLat = make([]uint64, s.TopCapacity)
	a.topSlot = make([]uint16, s.TopCapacity)
	if s.BigKeys > 0 {
		a.big, _ = sketch.NewTopK(sketch.TopKConfig{Capacity: s.BigCapacity, Sketch: sketch.CountMinConfig{Width: s.BigWidth}})
		a.bigAux = make([][4]uint64, s.BigCapacity)
		a.bigShort = make([]bool, s.BigCapacity)
	}
}

func (a *appAgg) reset() {
	a.app = ""
	a.events, a.bytes, a.reads, a.writes, a.latencyUs = 0, 0, 0, 0, 0
	if a.spilled {
		a.top.Reset()
		if a.big != nil {
			a.big.Reset()
		}
		a.spilled = false
	}
	a.distinct.Reset()
	clear(a.slots)
	if a.cms != nil {
		a.cms.Reset()
	}
}

// add counts an event of the app: in the exact table t (nil when off) if
// its key is there or fits, else in the trackers.
func (a *appAgg) add(t *exactTable, e *schemas.AccessEvent, key string, h uint64, cls opClass, white, short bool) {
	nb := uint64(max(e.Bytes, 0))
	lat := uint64(max(e.LatencyUs, 0))
	a.events++
	a.bytes += nb
	a.latencyUs += lat
	var rd, wr uint64
	switch cls {
	case opRead:
		rd = 1
	case opWrite:
		wr = 1
	}
	a.reads += rd
	a.writes += wr
	if a.cms != nil {
		a.cms.AddHash(h, 1)
	}
	if white {
		a.distinct.AddHash(h)
		a.addSlot(Slot(e.Key))
		return
	}
	if t != nil {
		x := t.lookup(h, a.idx, key)
		if x == nil && !t.full {
			if x = t.insert(h, a.idx, key); x != nil {
				// The key's first event in the window: its slot and its
				// place in the distinct count, once.
				x.slot = Slot(e.Key)
				if short {
					x.slot |= slotShortened
				}
				a.distinct.AddHash(h)
			}
		}
		if x != nil {
			t.count(x, nb, rd, wr, lat)
			a.addSlot(x.slot & slotMask)
			return
		}
	}
	a.spill(e, key, h, nb, rd, wr, lat, short)
}

// spill counts an event whose key the exact table has no room for, in the
// app's top-K and big-key trackers (their counts carry error bounds).
func (a *appAgg) spill(e *schemas.AccessEvent, key string, h, nb, rd, wr, lat uint64, short bool) {
	if !a.spilled {
		if a.top == nil {
			a.allocTrackers(*a.sizes)
		}
		a.spilled = true
	}
	id, admitted := a.top.AddHash(key, h, 1)
	if id >= 0 && !admitted {
		// Tracked since an earlier event of this window, which added the
		// key's hash to the distinct count (adding it again changes
		// nothing) and found its slot: most events of a skewed stream skip
		// both.
		a.addSlot(a.topSlot[id] & slotMask)
	} else {
		a.distinct.AddHash(h)
		slot := Slot(e.Key)
		a.addSlot(slot)
		if admitted {
			if short {
				slot |= slotShortened
			}
			a.topSlot[id] = slot
		}
	}
	if id >= 0 {
		x := &a.topAux[id]
		if admitted {
			*x = [3]uint64{}
			a.topLat[id] = 0
		}
		x[0] += nb
		x[1] += rd
		x[2] += wr
		a.topLat[id] += lat
	}
	if a.big != nil && nb > 0 {
		if id, admitted := a.big.AddHash(key, h, nb); id >= 0 {
			x := &a.bigAux[id]
			if admitted {
				*x = [4]uint64{}
				a.bigShort[id] = short
			}
			x[0]++
			x[1] += rd
			x[2] += wr
			x[3] += lat
		}
	}
}

// addSlot counts an event in its Redis Cluster slot, saturating.
func (a *appAgg) addSlot(slot uint16) {
	if s := &a.slots[slot]; *s < ^uint32(0) {
		*s++
	}
}

// closeUpTo closes every window that ends at or before the watermark wm,
// in order. A window emitted without events or late events claims the
// commit point with the offset whose processing closed it.
//
// Empty windows are not summarised one by one: of a run of them closing
// together only the last is, if it is the last to close, which tells the
// merger how far the partition has come (a partition that reports a
// window has nothing for the windows before it). A jump over a gap in
// event time, or an idle partition's clock moving to the wall clock,
// therefore costs one summary, however long it is.
func (w *windows) closeUpTo(wm int64, out *Output) {
	for w.nextEmit+w.lengthMs <= wm {
		if w.nextEmit+2*w.lengthMs <= wm && w.emptyNext() {
			w.skipEmpty(wm)
			continue
		}
		w.emit(false, out)
	}
}

// closeAll closes every window up to the newest event's, marking the last
// Final: the end of the input. Empty windows before the last are skipped
// as in closeUpTo.
func (w *windows) closeAll(out *Output) {
	if !w.p.started {
		return
	}
	lastStart := w.start(w.p.maxTs)
	for w.nextEmit <= lastStart {
		if w.nextEmit < lastStart && w.emptyNext() {
			w.skipEmpty(lastStart + w.lengthMs)
			continue
		}
		w.emit(w.nextEmit == lastStart, out)
	}
}

// emptyNext reports whether the next window to close had no event and no
// late event.
func (w *windows) emptyNext() bool { return len(w.open) == 0 || w.open[0] == nil }

// skipEmpty passes the empty next window without a summary; when no open
// window follows, it passes every window before the last that closes by
// wm at once.
func (w *windows) skipEmpty(wm int64) {
	if len(w.open) == 0 {
		w.nextEmit = max(w.nextEmit+w.lengthMs, w.start(wm)-w.lengthMs)
		return
	}
	copy(w.open, w.open[1:])
	w.open[len(w.open)-1] = nil
	w.open = w.open[:len(w.open)-1]
	w.nextEmit += w.lengthMs
}

// emit summarises the oldest open window into a PartitionWindow.
func (w *windows) emit(final bool, out *Output) {
	p := w.p
	var ws *winState
	if len(w.open) > 0 {
		ws = w.open[0]
		copy(w.open, w.open[1:])
		w.open[len(w.open)-1] = nil
		w.open = w.open[:len(w.open)-1]
	}
	pw := schemas.PartitionWindow{
		Version:     schemas.WindowVersion,
		ID:          schemas.PartitionWindowID(p.src.Topic, p.src.Partition, w.nextEmit),
		Topic:       p.src.Topic,
		Partition:   p.src.Partition,
		Partitions:  p.src.Partitions,
		StartMs:     w.nextEmit,
		EndMs:       w.nextEmit + w.lengthMs,
		FirstOffset: -1,
		LastOffset:  -1,
		WatermarkMs: w.watermark(),
		Keyed:       p.src.Keyed,
		Final:       final,
		Apps:        []schemas.AppWindow{},
	}
	minOff, minTs := p.curOffset, p.curMaxTsBefore
	if ws != nil {
		pw.FirstOffset, pw.LastOffset = ws.firstOff, ws.lastOff
		pw.Events, pw.Late = ws.events, ws.late
		if ws.minOff >= 0 {
			minOff, minTs = ws.minOff, ws.minTs
		}
		apps := ws.apps
		if ws.other != nil {
			apps = append(apps, ws.other)
		}
		slices.SortFunc(apps, func(a, b *appAgg) int { return strings.Compare(a.app, b.app) })
		w.groupByApp(ws)
		for _, a := range apps {
			aw := w.summary(ws.tab, a)
			pw.Approximate = pw.Approximate || aw.Approximate
			pw.Apps = append(pw.Apps, aw)
			a.reset()
			w.apps = append(w.apps, a)
		}
		if w.last == ws {
			w.last = nil
		}
		if ws.tab != nil {
			w.exactHint = max(w.exactHint, len(ws.tab.ents))
			ws.tab.reset()
		}
		clear(ws.apps)
		ws.apps, ws.other, ws.last = ws.apps[:0], nil, nil
		w.pool = append(w.pool, ws)
	}
	p.commit.emitted(w.nextEmit, minOff, minTs)
	p.stats.Windows++
	out.Windows = append(out.Windows, pw)
	w.nextEmit += w.lengthMs
}

// groupByApp lists the exact table's entries of each app in w.byApp, by
// the apps' numbers, in order of first event.
func (w *windows) groupByApp(ws *winState) {
	for i := range w.byApp {
		w.byApp[i] = w.byApp[i][:0]
	}
	if ws.tab == nil {
		return
	}
	if len(w.byApp) == 0 {
		w.byApp = make([][]int32, w.p.o.MaxApps+1)
	}
	for i := range ws.tab.ents {
		a := ws.tab.ents[i].app
		w.byApp[a] = append(w.byApp[a], int32(i))
	}
}

// summary is an app's part of a PartitionWindow: its lists drawn from the
// exact table t (exact figures, Error 0) and, for keys that spilled past
// it, from the trackers (with their bounds). The two hold disjoint keys.
func (w *windows) summary(t *exactTable, a *appAgg) schemas.AppWindow {
	s := w.p.o.Summary
	part := w.p.src.Partition
	aw := schemas.AppWindow{App: a.app, Events: a.events, Bytes: a.bytes, Reads: a.reads,
		Writes: a.writes, LatencyUs: a.latencyUs, Top: []schemas.KeyCount{}, Approximate: a.spilled}
	var entries []int32
	if t != nil && int(a.idx) < len(w.byApp) {
		entries = w.byApp[a.idx]
	}
	exact := func(i int32) schemas.KeyCount {
		e := &t.ents[i]
		reads, writes := t.readsWrites(i)
		return schemas.KeyCount{App: a.app, Key: strings.Clone(t.key(e)), Count: e.events, Bytes: e.bytes,
			Reads: reads, Writes: writes, LatencyUs: e.latencyUs, Partition: part, Shortened: e.slot&slotShortened != 0}
	}
	var lists [figCount][]exactCand
	if t != nil {
		lists = t.exactLists(&w.lists, entries, s.TopKeys+1, s.BigKeys)
	}
	pick := func(by exactFigure) []schemas.KeyCount {
		if t == nil {
			return nil
		}
		out := make([]schemas.KeyCount, 0, len(lists[by]))
		for _, c := range lists[by] {
			out = append(out, exact(c.i))
		}
		return out
	}

	top := pick(figEvents)
	if a.spilled {
		// The top-K's tracked keys, not copied: only the listed ones are.
		w.items = a.top.AppendTracked(w.items[:0])
		slices.SortFunc(w.items, itemOrder)
		for _, it := range w.items[:min(len(w.items), s.TopKeys+1)] {
			top = append(top, a.trackedKey(it, part))
		}
		aw.Floor = a.top.Floor()
		slices.SortFunc(top, byCount)
	}
	if len(top) > s.TopKeys {
		// A key left out of the list is bounded by the first one cut.
		aw.Floor = max(aw.Floor, top[s.TopKeys].Count)
		top = top[:s.TopKeys]
	}
	if top != nil {
		aw.Top = top // else the empty list it started as: a summary's Top is never nil
	}

	if s.BigKeys > 0 {
		aw.Big = pick(figBytes)
		if a.spilled {
			for _, it := range a.big.AppendTop(nil, s.BigKeys) {
				aw.Big = append(aw.Big, a.bigKey(it, part))
			}
			slices.SortFunc(aw.Big, byBytes.order)
			aw.Big = aw.Big[:min(len(aw.Big), s.BigKeys)]
		}
		aw.TopReads = w.rankBy(pick(figReads), a, byReads, s.BigKeys, part)
		aw.TopWrites = w.rankBy(pick(figWrites), a, byWrites, s.BigKeys, part)
		aw.TopLatency = w.rankBy(pick(figLatency), a, byLatency, s.BigKeys, part)
		for _, l := range []*[]schemas.KeyCount{&aw.Big, &aw.TopReads, &aw.TopWrites, &aw.TopLatency} {
			if len(*l) == 0 {
				*l = nil // as the JSON form decodes it
			}
		}
	}
	// Encoded into a buffer kept for the next window, then copied: the
	// encoding passes through the whole dense register array, most often
	// to keep a short list of it.
	w.distinct, _ = a.distinct.AppendBinary(w.distinct[:0])
	aw.Distinct = bytes.Clone(w.distinct)
	// A quiet window touches a few hundred of the 16,384 slots: eight
	// at a time, the others cost one test. Gathered in a buffer kept
	// for the next window, the list is then copied at its size.
	w.slotList = w.slotList[:0]
	for i := 0; i < len(a.slots); i += 8 {
		c := (*[8]uint32)(a.slots[i : i+8])
		if c[0]|c[1]|c[2]|c[3]|c[4]|c[5]|c[6]|c[7] == 0 {
			continue
		}
		for j, n := range c {
			if n > 0 {
				w.slotList = append(w.slotList, schemas.SlotCount{Slot: uint16(i + j), Events: uint64(n)})
			}
		}
	}
	if len(w.slotList) > 0 {
		aw.Slots = slices.Clone(w.slotList)
	}
	if a.cms != nil {
		aw.Sketch, _ = a.cms.AppendBinary(nil)
	}
	return aw
}

// rankBy adds to the table's heaviest keys by figure f the heaviest of
// the top-K's tracked keys (w.items, summary's), by their lower bound, and
// keeps the n heaviest.
func (w *windows) rankBy(fromTable []schemas.KeyCount, a *appAgg, f keyFigure, n int, part int32) []schemas.KeyCount {
	if !a.spilled {
		return fromTable
	}
	fig := func(it *sketch.Item) uint64 {
		switch f {
		case byReads:
			return a.topAux[it.ID][1]
		case byWrites:
			return a.topAux[it.ID][2]
		default:
			return a.topLat[it.ID]
		}
	}
	w.sel = w.sel[:0]
	for i := range w.items {
		if fig(&w.items[i]) > 0 {
			w.sel = append(w.sel, int32(i))
		}
	}
	slices.SortFunc(w.sel, func(i, j int32) int {
		a, b := &w.items[i], &w.items[j]
		return cmp.Or(cmp.Compare(fig(b), fig(a)), strings.Compare(a.Key, b.Key))
	})
	out := fromTable
	for _, i := range w.sel[:min(len(w.sel), n)] {
		out = append(out, a.trackedKey(w.items[i], part))
	}
	slices.SortFunc(out, f.order)
	return out[:min(len(out), n)]
}

// itemOrder orders the top-K's items as Top lists keys: by Count, then by
// Count − Error, then by key.
func itemOrder(a, b sketch.Item) int {
	return cmp.Or(cmp.Compare(b.Count, a.Count), cmp.Compare(b.Count-b.Error, a.Count-a.Error), strings.Compare(a.Key, b.Key))
}

// trackedKey is a top-K item as a summary lists it, its key copied.
func (a *appAgg) trackedKey(it sketch.Item, part int32) schemas.KeyCount {
	x := a.topAux[it.ID]
	return schemas.KeyCount{App: a.app, Key: strings.Clone(it.Key), Count: it.Count, Error: it.Error,
		Bytes: x[0], Reads: x[1], Writes: x[2], LatencyUs: a.topLat[it.ID], Partition: part,
		Shortened: a.topSlot[it.ID]&slotShortened != 0}
}

// byCount orders a Top list: by Count, then by Count − Error, then by key.
func byCount(a, b schemas.KeyCount) int {
	if c := cmp.Compare(b.Count, a.Count); c != 0 {
		return c
	}
	if c := cmp.Compare(b.Count-b.Error, a.Count-a.Error); c != 0 {
		return c
	}
	return strings.Compare(a.Key, b.Key)
}

// order sorts a summary's list ranked by f: largest figure first, for
// bytes then the larger lower bound (Bytes − BytesError), then by key.
func (f keyFigure) order(a, b schemas.KeyCount) int {
	if c := cmp.Compare(f.of(&b), f.of(&a)); c != 0 {
		return c
	}
	if f == byBytes {
		if c := cmp.Compare(b.Bytes-b.BytesError, a.Bytes-a.BytesError); c != 0 {
			return c
		}
	}
	return strings.Compare(a.Key, b.Key)
}

// bigKey is a big-key tracker's item as a summary lists it. Its count
// bounds come from the top-K, which saw every event of the key (both
// track only keys past the exact table); a key the top-K counted from its
// first event has every figure exact there.
func (a *appAgg) bigKey(it sketch.Item, part int32) schemas.KeyCount {
	bx := a.bigAux[it.ID]
	kc := schemas.KeyCount{App: a.app, Key: it.Key, Partition: part, Shortened: a.bigShort[it.ID]}
	upper, lower := a.top.Estimate(it.Key)
	id, _ := a.top.AddHash(it.Key, sketch.Hash(it.Key), 0) // a lookup: weight 0 adds nothing
	if id >= 0 && upper == lower {
		x := a.topAux[id]
		kc.Count, kc.Bytes, kc.Reads, kc.Writes, kc.LatencyUs = upper, x[0], x[1], x[2], a.topLat[id]
		return kc
	}
	// Lower bounds: the big tracker's sums since it tracked the key, or
	// the top-K's since it did, whichever is larger.
	kc.Count, kc.Error = upper, upper-min(max(lower, bx[0]), upper)
	kc.Bytes, kc.BytesError = it.Count, it.Error
	kc.Reads, kc.Writes, kc.LatencyUs = bx[1], bx[2], bx[3]
	if id >= 0 {
		x := a.topAux[id]
		kc.BytesError = it.Count - max(it.Count-it.Error, min(x[0], it.Count))
		kc.Reads, kc.Writes, kc.LatencyUs = max(kc.Reads, x[1]), max(kc.Writes, x[2]), max(kc.LatencyUs, a.topLat[id])
	}
	return kc
}

// openClaim returns the lowest commit claim of the open windows.
func (w *windows) openClaim() (off, ts int64, ok bool) {
	for _, ws := range w.open {
		if ws != nil && ws.minOff >= 0 && (!ok || ws.minOff < off) {
			off, ts, ok = ws.minOff, ws.minTs, true
		}
	}
	return off, ts, ok
}
