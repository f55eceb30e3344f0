package pipeline

import (
	"cmp"
	"math"
	"slices"

	"github.com/keyheat/keyheat/hotring"
	"github.com/keyheat/keyheat/internal/faststr"
	"github.com/keyheat/keyheat/schemas"
)

// alertState is what the detector remembers about a key that is hot, is
// cooling down, or was published cooled less than Suppress ago. Keys with
// no state are not hot.
type alertState struct {
	hr       uint64
	next     *alertState // same hr, another key (a 64-bit collision)
	ns       string
	app, key string
	keyHash  uint64 // xxh3 of key, for HotKeyEvent.KeyHash
	short    bool   // key is a longer key's shortened form
	rule     string // the rule it is hot under
	hot      bool
	belowMs  int64 // first time seen below threshold while hot; noTime while above
	cooledMs int64 // when it was published cooled; noTime if never
	deferred bool  // crossed again less than Suppress after cooling
	ep       epState
}

// epState is what the records of a hot key's episode (its hot, updates
// and cooled) carry over from one to the next, for refresh.
type epState struct {
	onsetMs int64 // the hot's OnsetMs
	// lastMs is the event time of the episode's last record: the clock at
	// its hot, the slot boundary of an update. lastRate and lastBytesRate
	// are its Rate and BytesRate, what the next update is measured from.
	lastMs                  int64
	lastRate, lastBytesRate float64
	peak                    float64 // the highest Rate published in the episode
}

// start begins an episode with its hot event.
func (e *epState) start(ev *schemas.HotKeyEvent, clockMs int64) {
	ev.PeakRate = ev.Rate
	*e = epState{onsetMs: ev.OnsetMs, lastMs: clockMs, lastRate: ev.Rate, lastBytesRate: ev.BytesRate, peak: ev.Rate}
}

// due reports whether an update at atMs is due for a key whose rule
// window is windowMs and whose rule has an events threshold (eventsRule),
// a bytes one (bytesRule) or both, at the rates given: at least a window
// after the episode's last record, and a rate the rule watches moved by
// change × its last published value or more. change 0 turns updates off.
func (e *epState) due(atMs, windowMs int64, eventsRule, bytesRule bool, rate, bytesRate, change float64) bool {
	if change <= 0 || atMs-e.lastMs < windowMs {
		return false
	}
	return eventsRule && moved(rate, e.lastRate, change) || bytesRule && moved(bytesRate, e.lastBytesRate, change)
}

// moved reports whether cur differs from last by change × last or more
// (by anything, when last is 0).
func moved(cur, last, change float64) bool {
	if last == 0 {
		return cur > 0
	}
	return math.Abs(cur-last) >= change*last
}

// update makes ev, an update at atMs, the episode's last record, setting
// its OnsetMs and PeakRate.
func (e *epState) update(ev *schemas.HotKeyEvent, atMs int64) {
	e.peak = max(e.peak, ev.Rate)
	ev.OnsetMs, ev.PeakRate = e.onsetMs, e.peak
	e.lastMs, e.lastRate, e.lastBytesRate = atMs, ev.Rate, ev.BytesRate
}

// noTime marks an unset time; the same value as schemas.NoTimeMs.
const noTime = schemas.NoTimeMs

// level is a key's window as one alert decision sees it: its counts over
// the window's slots after the oldest, up to now (see windowCount), all
// inside (now − W, now]; oldest is the oldest slot's events, which the
// counts leave out and of which some may lie inside too.
type level struct {
	events, bytes, reads, writes uint64
	oldest                       uint64
	above                        bool
}

// above reports whether a key whose ring window is win reaches rule x's
// thresholds (see windowCount): the one question asked of every event of
// a tracked key, so it computes no more than it needs.
func (g *group) above(x *rule, win *hotring.Window) bool {
	if x.needEvents > 0 {
		if hi, lo := g.windowCount(win.Sum[laneEvents], win.Oldest[laneEvents]); hi > 0 || lo >= x.needEvents {
			return true
		}
	}
	if x.needBytes > 0 {
		if hi, lo := g.windowCount(win.Sum[laneBytes], win.Oldest[laneBytes]); hi > 0 || lo >= x.needBytes {
			return true
		}
	}
	return false
}

// measure turns a ring window into the key's level and whether it
// reaches rule x's thresholds.
func (g *group) measure(x *rule, win *hotring.Window) level {
	return level{
		events: win.Sum[laneEvents] - win.Oldest[laneEvents], bytes: win.Sum[laneBytes] - win.Oldest[laneBytes],
		reads: win.Sum[laneReads] - win.Oldest[laneReads], writes: win.Sum[laneWrites] - win.Oldest[laneWrites],
		oldest: win.Oldest[laneEvents],
		above:  x != nil && g.above(x, win),
	}
}

// observe updates the alert state of a key just counted (or admitted) by
// the ring, whose window is win. A key crossing its threshold is published
// hot at once.
func (p *Partition) observe(g *group, x *rule, ad *appDet, key string, h, hr uint64, win *hotring.Window, tsMs int64, out *Output) {
	nowMs := p.maxTs
	above := g.above(x, win)
	if above && x.alert && win.Tag == g.steady {
		return // steady (see group.steady): nothing to update
	}
	if (!above || !x.alert) && g.alertBits[alertBucket(hr)] == 0 {
		return // the common case: not crossing, and no state to update
	}
	st := g.lookup(hr, ad.ns, key)
	if !above || !x.alert {
		// Below, or under a rule that only watches (since a reload): an
		// episode already published still ends with "cooled".
		if st != nil && above {
			st.belowMs = noTime
			return
		}
		if st != nil {
			if st.hot && st.belowMs == noTime {
				st.belowMs = nowMs
				g.unsteady()
			}
			st.deferred = false
		}
		return
	}
	switch {
	case st == nil:
		if g.alerts.len() >= 2*p.o.Detect.RingNodes {
			p.stats.AlertsDropped++
			return
		}
		st = &alertState{hr: hr, ns: ad.ns, app: ad.app, key: cloneString(key), keyHash: h, short: p.curShortened,
			belowMs: noTime, cooledMs: noTime}
		g.insert(st)
		p.hot(g, x, st, g.measure(x, win), tsMs, out)
	case st.hot:
		st.belowMs = noTime
		st.rule = x.name
	case nowMs >= st.cooledMs+p.o.Detect.Suppress.Milliseconds():
		p.hot(g, x, st, g.measure(x, win), tsMs, out)
	default:
		st.deferred = true
		st.rule = x.name
		return
	}
	// Hot, above, under x: steady until a key leaves that state.
	g.ring.SetTagHash(hr, ad.ns, key, g.steady)
}

// tickAlerts re-reads the window of every key with alert state, in a fixed
// order: a hot key below its threshold for CoolDown is published cooled, a
// deferred one still hot after Suppress is published hot, and state that
// matters no more is dropped.
func (p *Partition) tickAlerts(g *group, out *Output) {
	if g.alerts.len() == 0 {
		return
	}
	nowMs := p.maxTs
	sts := g.alerts.all(p.det.sts[:0])
	defer func() { clear(sts); p.det.sts = sts[:0] }()
	slices.SortFunc(sts, func(a, b *alertState) int {
		return cmp.Or(cmp.Compare(a.rule, b.rule), cmp.Compare(a.app, b.app), cmp.Compare(a.key, b.key))
	})
	suppressMs, coolMs := p.o.Detect.Suppress.Milliseconds(), p.o.Detect.CoolDown.Milliseconds()
	for _, st := range sts {
		x := g.rules[st.rule]
		var win hotring.Window
		if !g.ring.WindowHash(st.hr, st.ns, st.key, nowMs, &win) {
			win = hotring.Window{} // untracked: it passed no gate for a window, so it is below
		}
		lv := g.measure(x, &win)
		switch {
		case st.hot && lv.above:
			st.belowMs = noTime
		case st.hot:
			if st.belowMs == noTime {
				st.belowMs = nowMs
				g.unsteady()
			}
			if nowMs-st.belowMs >= coolMs {
				if !g.retired {
					p.cooled(g, x, st, lv, st.belowMs+coolMs, out)
				} else if handed, readyMs := p.det.handedOver(g, st); handed {
					// The window the key's rule uses now holds it hot:
					// that episode speaks for the key in the registry.
					st.hot, st.cooledMs = false, st.belowMs+coolMs
					g.unsteady()
					p.stats.HandedOver++
				} else if nowMs >= readyMs {
					p.cooled(g, x, st, lv, max(st.belowMs+coolMs, readyMs), out)
				}
			}
		case st.deferred && !lv.above:
			st.deferred = false
		case st.deferred && nowMs >= st.cooledMs+suppressMs && x != nil && x.alert:
			p.hot(g, x, st, lv, nowMs, out)
		}
		if st.hot && x != nil && x.alert && !p.cluster {
			p.refresh(g, x, st, &win, out)
		}
		if !st.hot && !st.deferred && nowMs >= st.cooledMs+suppressMs {
			g.remove(st)
		}
	}
}

func (p *Partition) hot(g *group, x *rule, st *alertState, lv level, onsetMs int64, out *Output) {
	st.hot, st.deferred, st.belowMs, st.rule = true, false, noTime, x.name
	ev := p.hotKeyEvent(g, x, st, schemas.HotKeyHot, lv, onsetMs)
	ev.Mitigation = p.mitigation(lv, g.windowMs)
	st.ep.start(&ev, p.maxTs)
	p.publish(ev, out)
}

// refresh publishes an update of hot key st, watched by rule x, when one
// is due (see epState.due) at the slot boundary the tick just crossed,
// g.epochMs, and the key's count over the rule window ending there
// reaches a threshold of x: a key falling below its rule is left to cool.
//
// win is the key's ring window as of the tick, which runs before the
// event that moved the clock into the new slot is counted: its sums are
// the key's counts over exactly the Slots slots before the boundary,
// [epochMs − W, epochMs), so the update's Count leaves nothing out (Error
// 0, credits aside) and its Rate is the key's rate over the rule window
// ending at the boundary. That is not the alert's count, which leaves
// the oldest slot out (see windowCount) and which, at a tick, says
// "below" for a key whose events all fall on whole seconds. Both depend
// only on the events and the boundary's event time, and so does the
// decision: a restart or replay makes the same one.
func (p *Partition) refresh(g *group, x *rule, st *alertState, win *hotring.Window, out *Output) {
	if p.o.Detect.RefreshChange <= 0 {
		return
	}
	n, by := win.Sum[laneEvents], win.Sum[laneBytes]
	if !(x.needEvents > 0 && mulGE(n, uint64(g.slotMs), x.needEvents) || x.needBytes > 0 && mulGE(by, uint64(g.slotMs), x.needBytes)) {
		return
	}
	atMs, ws := g.epochMs, float64(g.windowMs)/1000
	rate, bytesRate := float64(n)/ws, float64(by)/ws
	if !st.ep.due(atMs, g.windowMs, x.needEvents > 0, x.needBytes > 0, rate, bytesRate, p.o.Detect.RefreshChange) {
		return
	}
	lv := level{events: win.Sum[laneEvents], bytes: win.Sum[laneBytes], reads: win.Sum[laneReads], writes: win.Sum[laneWrites]}
	ev := p.hotKeyEvent(g, x, st, schemas.HotKeyUpdate, lv, atMs)
	ev.Mitigation = p.mitigation(lv, g.windowMs)
	st.ep.update(&ev, atMs)
	p.publish(ev, out)
}

func (p *Partition) cooled(g *group, x *rule, st *alertState, lv level, onsetMs int64, out *Output) {
	st.hot, st.cooledMs = false, onsetMs
	g.unsteady()
	ev := p.hotKeyEvent(g, x, st, schemas.HotKeyCooled, lv, onsetMs)
	ev.PeakRate = st.ep.peak
	p.publish(ev, out)
}

// hotKeyEvent builds a hot-key event of type typ from the key's level,
// its ID and OnsetMs from atMs (an update's caller sets OnsetMs to the
// episode's onset after).
func (p *Partition) hotKeyEvent(g *group, x *rule, st *alertState, typ string, lv level, atMs int64) schemas.HotKeyEvent {
	ws := float64(g.windowMs) / 1000
	ev := schemas.HotKeyEvent{
		Version: schemas.HotKeyVersion,
		ID:      schemas.HotKeyID(p.src.Topic, p.src.Partition, st.rule, typ, st.app, st.key, atMs),
		Type:    typ, App: st.app, Key: st.key, KeyHash: string(hexHash(nil, st.keyHash)), Rule: st.rule,
		Rate: float64(lv.events) / ws, Count: lv.events, Error: lv.oldest, WindowMs: g.windowMs,
		BytesRate: float64(lv.bytes) / ws,
		Topic:     p.src.Topic, Partition: p.src.Partition, OnsetMs: atMs,
		Reads: lv.reads, Writes: lv.writes, Bytes: lv.bytes, Shortened: st.short,
	}
	if x != nil {
		ev.Threshold, ev.BytesThreshold = x.rate, x.bytes
	}
	return ev
}

// mitigation is the remedy advised for a key at a level (see suggest).
func (p *Partition) mitigation(lv level, windowMs int64) *schemas.Mitigation {
	m := suggest(lv.reads, lv.writes, float64(lv.writes)/(float64(windowMs)/1000), p.o.Detect.SplitCapacity)
	return &m
}

// publish hands ev out, except during warm-up, where the crashed run
// already published it (see doc.go); either way the commit point keeps it
// until it is acknowledged.
func (p *Partition) publish(ev schemas.HotKeyEvent, out *Output) {
	if p.cluster {
		return // the cluster stage decides; the partition lists candidates
	}
	if !p.windowMode {
		p.stats.AlertsWarmUp++
		return
	}
	out.HotKeys = append(out.HotKeys, ev)
	p.commit.alert(ev.ID, p.curOffset, p.curMaxTsBefore)
	switch ev.Type {
	case schemas.HotKeyHot:
		p.stats.Hot++
	case schemas.HotKeyUpdate:
		p.stats.Updates++
	default:
		p.stats.Cooled++
	}
}

func alertBucket(hr uint64) uint64 { return hr >> (64 - 12) }

// alertTable holds a group's alert states: open addressing on the ring
// hash (already uniform), linear probing, at most half full. Hot keys look
// their state up on every event, so this is on the hot path; a Go map
// costs about three times as much here.
type alertTable struct {
	slots []*alertState
	n     int
}

func (t *alertTable) len() int { return t.n }

func (t *alertTable) get(hr uint64, ns, key string) *alertState {
	if t.n == 0 {
		return nil
	}
	mask := uint64(len(t.slots) - 1)
	for i := hr & mask; ; i = (i + 1) & mask {
		st := t.slots[i]
		if st == nil {
			return nil
		}
		if st.hr == hr && faststr.Equal(st.key, key) && st.ns == ns {
			return st
		}
	}
}

func (t *alertTable) put(st *alertState) {
	if 2*(t.n+1) > len(t.slots) {
		old := t.slots
		t.slots = make([]*alertState, max(64, 2*len(old)))
		t.n = 0
		for _, o := range old {
			if o != nil {
				t.put(o)
			}
		}
	}
	mask := uint64(len(t.slots) - 1)
	i := st.hr & mask
	for t.slots[i] != nil {
		i = (i + 1) & mask
	}
	t.slots[i] = st
	t.n++
}

// del removes st, shifting later members of its probe run back so that
// lookups never stop early at the hole.
func (t *alertTable) del(st *alertState) {
	mask := uint64(len(t.slots) - 1)
	i := st.hr & mask
	for t.slots[i] != st {
		i = (i + 1) & mask
	}
	t.n--
	for {
		t.slots[i] = nil
		j := i
		for {
			j = (j + 1) & mask
			o := t.slots[j]
			if o == nil {
				return
			}
			home := o.hr & mask
			// o may move to the hole at i unless its home lies cyclically in (i, j].
			if (i <= j && (home <= i || home > j)) || (i > j && home <= i && home > j) {
				t.slots[i] = o
				i = j
				break
			}
		}
	}
}

func (t *alertTable) all(dst []*alertState) []*alertState {
	for _, st := range t.slots {
		if st != nil {
			dst = append(dst, st)
		}
	}
	return dst
}

func (g *group) lookup(hr uint64, ns, key string) *alertState {
	if g.alertBits[alertBucket(hr)] == 0 {
		return nil
	}
	return g.alerts.get(hr, ns, key)
}

func (g *group) insert(st *alertState) {
	g.alertBits[alertBucket(st.hr)]++
	g.alerts.put(st)
}

func (g *group) remove(st *alertState) {
	g.alertBits[alertBucket(st.hr)]--
	g.alerts.del(st)
}
