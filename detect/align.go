package detect

import (
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/keyheat/keyheat/schemas"
)

// Positions besides a window index.
const (
	// alignUnknown: no event taken yet (or never heard of, for a partition
	// held elsewhere). Such a partition holds every other back, since its
	// first event may be the oldest of all; it is itself never held.
	alignUnknown = math.MinInt64
	// alignFree: the partition ended (ExitAtEnd), is idle (live), or is
	// silent: it holds nothing back.
	alignFree = math.MaxInt64
)

// aligner keeps every events partition of the group, on this instance and
// on the others, within a bounded number of report windows of one another
// in event time, the way Flink's watermark alignment keeps its sources
// (FLIP-182): a partition whose clock (newest event time) lies more than
// drift windows past the slowest other partition's does not move its
// clock further until that one caught up. The merger holds a window until
// every partition reported it, at most merge.max_pending_windows of them;
// a partition running further ahead of another (a backfill over
// partitions of uneven size, a restart over a backlog, an instance on a
// busier machine) would make it release old windows partial. The merger's
// windows span topics, so the alignment does too.
//
// The partitions held here publish their position in memory (alignPos),
// those held elsewhere come from the progress topic (board). The rule is
// on a partition's own position, not its next event's: the partition
// with the lowest position is never held, whatever its next event (one
// past a gap in event time included), so some partition can always go
// on, and as positions only rise and the board's stale ones are replaced
// every beat, the alignment cannot deadlock. A partition past a gap jumps
// ahead with one event and then waits: one window more held by the
// merger, and the empty windows of the gap cost it nothing.
type aligner struct {
	windowMs int64
	drift    int64 // windows a partition may run past the slowest other
	board    *board

	// gen counts the events that may lower a limit already given out (a
	// partition joining, a position falling, the board hearing news):
	// a worker asks again when it changed.
	gen atomic.Uint64

	mu      sync.Mutex
	members map[*partWorker]struct{}
	// counts are the events topics' partition counts: every partition
	// the group reads, here or elsewhere.
	counts map[string]int32
	// moved is closed when a position rose, a member left or the board
	// heard something; nil while no worker waits.
	moved chan struct{}
}

func newAligner(windowMs, drift int64, b *board) *aligner {
	a := &aligner{windowMs: windowMs, drift: drift, board: b, members: map[*partWorker]struct{}{}, counts: map[string]int32{}}
	return a
}

func (a *aligner) join(w *partWorker) {
	a.mu.Lock()
	a.members[w] = struct{}{}
	a.counts[w.tp.topic] = max(a.counts[w.tp.topic], w.parts)
	a.gen.Add(1)
	a.mu.Unlock()
}

func (a *aligner) leave(w *partWorker) {
	a.mu.Lock()
	delete(a.members, w)
	a.wakeLocked()
	a.mu.Unlock()
}

// wake wakes the workers waiting: something they wait on may have moved.
// The board calls it when it heard news, which may be a lower position.
func (a *aligner) wake() {
	a.gen.Add(1)
	a.mu.Lock()
	a.wakeLocked()
	a.mu.Unlock()
}

// set publishes w's position and wakes the workers waiting.
func (a *aligner) set(w *partWorker, pos int64) {
	old := w.alignPos.Swap(pos)
	if old == pos {
		return
	}
	if pos < old {
		a.gen.Add(1) // free → a position: limits given out may be too high
	}
	a.mu.Lock()
	a.wakeLocked()
	a.mu.Unlock()
}

func (a *aligner) wakeLocked() {
	if a.moved != nil {
		close(a.moved)
		a.moved = nil
	}
}

// others returns the partitions of the group not held here; a.mu is held.
func (a *aligner) othersLocked() []tp {
	if a.board == nil {
		return nil
	}
	local := make(map[tp]bool, len(a.members))
	for m := range a.members {
		local[m.tp] = true
	}
	var out []tp
	for topic, n := range a.counts {
		for p := range n {
			if k := (tp{topic, p}); !local[k] {
				out = append(out, k)
			}
		}
	}
	return out
}

// limit returns the highest window w's clock may be in and still move on:
// drift past the lowest position of the other partitions, here and
// elsewhere (math.MaxInt64 when none holds it back, math.MinInt64 while
// one has no position yet). With wait it also returns a channel closed
// once that may have changed.
func (a *aligner) limit(w *partWorker, wait bool) (int64, <-chan struct{}) {
	a.mu.Lock()
	defer a.mu.Unlock()
	low := int64(alignFree)
	for m := range a.members {
		if m != w {
			low = min(low, m.alignPos.Load())
		}
	}
	if others := a.othersLocked(); len(others) > 0 {
		low = min(low, a.board.lowest(others, a.windowOf, false))
	}
	var ch chan struct{}
	if wait {
		if a.moved == nil {
			a.moved = make(chan struct{})
		}
		ch = a.moved
	}
	return a.past(low), ch
}

// lowClock returns the start of the window of the lowest clock among the
// other partitions that have one (reading or idle, here or elsewhere);
// ok is false when none has. A partition that never had an event takes
// it as its clock while idle: it has no event in what the others have
// passed, and its own first events, if older, are late.
func (a *aligner) lowClock(w *partWorker) (ms int64, ok bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	low := int64(alignFree)
	for m := range a.members {
		if c := m.alignClock.Load(); m != w && c != alignUnknown {
			low = min(low, c)
		}
	}
	if others := a.othersLocked(); len(others) > 0 {
		low = min(low, a.board.lowest(others, a.windowOf, true))
	}
	if low == alignFree || low == alignUnknown || low > math.MaxInt64/a.windowMs {
		return 0, false
	}
	return low * a.windowMs, true
}

// past is drift past position low, saturating.
func (a *aligner) past(low int64) int64 {
	switch {
	case low == alignFree || low > math.MaxInt64-a.drift:
		return math.MaxInt64
	case low == alignUnknown:
		return math.MinInt64
	}
	return low + a.drift
}

// windowOf is the index of the window holding tsMs.
func (a *aligner) windowOf(tsMs int64) int64 {
	q := tsMs / a.windowMs
	if tsMs%a.windowMs < 0 {
		q--
	}
	return q
}

// endOf is the start of the window after window i, saturating.
func (a *aligner) endOf(i int64) int64 {
	if i >= math.MaxInt64/a.windowMs-1 {
		return math.MaxInt64
	}
	if i < math.MinInt64/a.windowMs+1 {
		return math.MinInt64
	}
	return (i + 1) * a.windowMs
}

// latest is the newest event time of evs (one record's events).
func latest(evs []schemas.AccessEvent) int64 {
	ts := evs[0].TimeMs
	for i := 1; i < len(evs); i++ {
		ts = max(ts, evs[i].TimeMs)
	}
	return ts
}

// await is called before the worker takes an event at tsMs that moves its
// clock into a later window. While the window its clock is in lies more
// than the drift past the slowest other partition, it waits; then it
// moves the position and publishes it. Meanwhile acknowledgements keep
// coming in and the commit point keeps moving; the worker's queue fills,
// and the poll loop pauses the partition's fetching (enqueue). It
// returns false when the partition is given up while waiting.
//
// A partition with no position yet (its first event, or its first after
// it was idle) is never held: it may be the slowest. A live partition
// whose clock is more than the drift ahead of the wall clock is not held
// either: no partition would catch up with it before the wall clock
// does, and holding it would stall the partition that long.
func (w *partWorker) await(tsMs int64) bool {
	a := w.align
	win := a.windowOf(tsMs)
	if w.alignWin != alignUnknown && !w.alignIdle && (w.alignWin > w.alignLimit || a.gen.Load() != w.alignGen) {
		if !w.waitAligned() {
			return false
		}
	}
	w.alignIdle = false
	w.alignWin = max(w.alignWin, win)
	w.alignNextMs = a.endOf(w.alignWin)
	w.alignClock.Store(w.alignWin)
	w.clockMs = max(w.clockMs, tsMs)
	a.set(w, w.alignPosition())
	w.sendProgress(false)
	return true
}

// alignPosition is the window the partition stands at for the others (what
// it publishes; whether it may go on is judged on its clock's window): its
// clock's, but no further than the lateness past the oldest window whose
// summary Kafka has not acknowledged. The others' summaries written after
// they read this position must come after that one on the windows topic,
// or the merger could hold more than its cap before reading it: when the
// partition's producer lags (a starved machine, a partition just taken
// over and re-sending), the others wait for it. Acknowledged in time, the
// summary of window w is out before the clock passes w + the lateness,
// and the position is the clock's.
func (w *partWorker) alignPosition() int64 {
	pos := w.alignWin
	if len(w.unackedWins) > 0 {
		a := w.align
		lateWins := (w.s.cfg.Pipeline.Lateness.Milliseconds() + a.windowMs - 1) / a.windowMs
		pos = min(pos, a.windowOf(w.unackedWins[0])+lateWins+1)
	}
	return pos
}

// waitAligned waits until the worker's position is within the limit, and
// caches the limit for the events that follow.
func (w *partWorker) waitAligned() bool {
	a := w.align
	gen := a.gen.Load() // before the limit: a change meanwhile asks again
	lim, _ := a.limit(w, false)
	if w.alignWin <= lim {
		w.alignLimit, w.alignGen = lim, gen
		return true
	}
	if !w.s.cfg.ExitAtEnd && w.alignWin > a.windowOf(w.s.now().UnixMilli())+a.drift {
		return true
	}
	w.s.log.Debug("partition ahead of the others; waiting for them", "topic", w.tp.topic, "partition", w.tp.partition,
		"window_start_ms", w.alignWin*a.windowMs, "limit_start_ms", lim*a.windowMs)
	w.s.m.alignWaits.Inc()
	w.sendProgress(true) // the others may be waiting on a stale position of ours
	beat := time.NewTicker(w.s.board.beat)
	defer beat.Stop()
	for {
		gen := a.gen.Load()
		lim, moved := a.limit(w, true)
		if w.alignWin <= lim {
			w.alignLimit, w.alignGen = lim, gen
			return true
		}
		select {
		case <-moved:
		case <-w.led.Ready():
			w.applyAcks()
			w.publish()
		case <-beat.C:
			w.sendProgress(false)
		case <-w.ctx.Done():
			return false
		}
	}
}

// checkIdle stops a live partition that took no event for the idle
// timeout, and has nothing left to read, from holding the others back,
// as Idle stops it from holding its own windows open.
func (w *partWorker) checkIdle(now time.Time) {
	if w.alignIdle || now.Sub(w.lastEventAt) < w.s.cfg.Pipeline.IdleTimeout || !w.caughtUp() {
		return
	}
	w.alignIdle = true
	w.alignNextMs = math.MinInt64 // the next event publishes a position again
	w.align.set(w, alignFree)
	w.sendProgress(true)
}

// idle moves a live partition's clock to the wall clock once it saw no
// event for the idle timeout and has nothing left to read
// (pipeline.Partition.IdleTo), so its windows close. However far that
// is, it costs nothing: the empty windows it passes are not summarised
// one by one, and the merger holds no empty window.
func (w *partWorker) idle(now time.Time) {
	if !w.caughtUp() {
		return // records wait: they, not the wall clock, move the clock
	}
	if !w.core.IdleTo(now.UnixMilli(), now.UnixMilli(), &w.out) {
		return
	}
	w.emit()
	if c, ok := w.core.ClockMs(); ok {
		w.clockMs = max(w.clockMs, c)
		if win := w.align.windowOf(c); win > w.alignWin {
			w.alignWin = win
			w.alignNextMs = w.align.endOf(win)
			w.alignClock.Store(win)
		}
	}
}
