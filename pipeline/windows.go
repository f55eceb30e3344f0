package pipeline

import (
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
}

// winState is an open window.
type winState struct {
	startMs           int64
	apps              []*appAgg // in order of first event; sorted when emitted
	other             *appAgg   // apps beyond MaxApps
	last              *appAgg
	events, late      uint64
	firstOff, lastOff int64 // counted events' offsets, -1 while none
	// minOff is the lowest offset of an event counted in the window or
	// attributed to it as late, -1 while none, and minTs the partition's
	// newest event time before that event: the window's claim on the
	// commit point.
	minOff, minTs int64
}

// appAgg is one app's part of a window.
type appAgg struct {
	app                                     string
	events, bytes, reads, writes, latencyUs uint64
	top                                     *sketch.TopK
	topAux                                  [][3]uint64 // per top entry ID: bytes, reads, writes…
	topLat                                  []uint64    // …and latency, since tracked…
	topSlot                                 []uint16    // …and the key's Redis slot
	big                                     *sketch.TopK
	bigAux                                  [][4]uint64 // per big entry ID: events, reads, writes, latency since tracked
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
		}
		*ws = winState{startMs: startMs, apps: ws.apps[:0], firstOff: -1, lastOff: -1, minOff: -1}
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

// add counts an event in the window starting at startMs.
func (w *windows) add(startMs int64, e *schemas.AccessEvent, key string, h uint64, cls opClass, white bool) {
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
	a.add(e, key, h, cls, white)
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
			ws.other = w.newApp(schemas.OtherApp)
		}
		w.p.stats.AppsFolded++
		return ws.other
	}
	a := w.newApp(strings.Clone(app))
	ws.apps = append(ws.apps, a)
	return a
}

func (w *windows) newApp(app string) *appAgg {
	var a *appAgg
	if n := len(w.apps); n > 0 {
		a, w.apps = w.apps[n-1], w.apps[:n-1]
	} else {
		a = w.allocApp()
	}
	a.app = app
	return a
}

// allocApp builds an app aggregate sized by the options; the sizes are
// validated, so the constructors cannot fail.
func (w *windows) allocApp() *appAgg {
	s := w.p.o.Summary
	a := &appAgg{slots: make([]uint32, RedisSlots)}
	a.top, _ = sketch.NewTopK(sketch.TopKConfig{Capacity: s.TopCapacity, Sketch: sketch.CountMinConfig{Width: s.TopWidth}})
	a.topAux = make([][3]uint64, s.TopCapacity)
	a.topLat = make([]uint64, s.TopCapacity)
	a.topSlot = make([]uint16, s.TopCapacity)
	if s.BigKeys > 0 {
		a.big, _ = sketch.NewTopK(sketch.TopKConfig{Capacity: s.BigCapacity, Sketch: sketch.CountMinConfig{Width: s.BigWidth}})
		a.bigAux = make([][4]uint64, s.BigCapacity)
	}
	a.distinct, _ = sketch.NewCardinality(sketch.CardinalityConfig{Precision: uint8(s.DistinctPrecision)})
	if !w.p.src.Keyed {
		a.cms, _ = sketch.NewCountMin(sketch.CountMinConfig{Width: s.SketchWidth})
	}
	return a
}

func (a *appAgg) reset() {
	a.app = ""
	a.events, a.bytes, a.reads, a.writes, a.latencyUs = 0, 0, 0, 0, 0
	a.top.Reset()
	if a.big != nil {
		a.big.Reset()
	}
	a.distinct.Reset()
	clear(a.slots)
	if a.cms != nil {
		a.cms.Reset()
	}
}

func (a *appAgg) add(e *schemas.AccessEvent, key string, h uint64, cls opClass, white bool) {
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
	if white {
		a.distinct.AddHash(h)
		a.addSlot(Slot(key))
		return
	}
	id, admitted := a.top.AddHash(key, h, 1)
	if id >= 0 && !admitted {
		// Tracked since an earlier event of this window, which added the
		// key's hash to the distinct count (adding it again changes
		// nothing) and found its slot: most events of a skewed stream skip
		// both.
		a.addSlot(a.topSlot[id])
	} else {
		a.distinct.AddHash(h)
		slot := Slot(key)
		a.addSlot(slot)
		if admitted {
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
			}
			x[0]++
			x[1] += rd
			x[2] += wr
			x[3] += lat
		}
	}
	if a.cms != nil {
		a.cms.AddHash(h, 1)
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
		for _, a := range apps {
			pw.Apps = append(pw.Apps, w.summary(a))
			a.reset()
			w.apps = append(w.apps, a)
		}
		if w.last == ws {
			w.last = nil
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

// summary is an app's part of a PartitionWindow.
func (w *windows) summary(a *appAgg) schemas.AppWindow {
	s := w.p.o.Summary
	part := w.p.src.Partition
	aw := schemas.AppWindow{App: a.app, Events: a.events, Bytes: a.bytes, Reads: a.reads,
		Writes: a.writes, LatencyUs: a.latencyUs, Top: []schemas.KeyCount{}}
	items := a.top.AppendTop(nil, s.TopKeys+1)
	aw.Floor = a.top.Floor()
	if len(items) > s.TopKeys {
		// A tracked key left out of the list is bounded by the last one in.
		aw.Floor = max(aw.Floor, items[s.TopKeys].Count)
		items = items[:s.TopKeys]
	}
	for _, it := range items {
		x := a.topAux[it.ID]
		aw.Top = append(aw.Top, schemas.KeyCount{App: a.app, Key: it.Key, Count: it.Count, Error: it.Error,
			Bytes: x[0], Reads: x[1], Writes: x[2], LatencyUs: a.topLat[it.ID], Partition: part})
	}
	if a.big != nil {
		for _, it := range a.big.AppendTop(nil, s.BigKeys) {
			x := a.bigAux[it.ID]
			aw.Big = append(aw.Big, schemas.KeyCount{App: a.app, Key: it.Key, Bytes: it.Count, BytesError: it.Error,
				Count: x[0], Reads: x[1], Writes: x[2], LatencyUs: x[3], Partition: part})
		}
	}
	aw.Distinct, _ = a.distinct.AppendBinary(nil)
	for slot, n := range a.slots {
		if n > 0 {
			aw.Slots = append(aw.Slots, schemas.SlotCount{Slot: uint16(slot), Events: uint64(n)})
		}
	}
	if a.cms != nil {
		aw.Sketch, _ = a.cms.AppendBinary(nil)
	}
	return aw
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
