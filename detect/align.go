package detect

import (
	"math"
	"sync"
	"time"

	"github.com/keyheat/keyheat/schemas"
)

// Positions a partition worker publishes besides a window index.
const (
	// alignUnknown: no event taken yet. Such a partition holds every
	// other back, since its first event may be the oldest of all; a live
	// partition with nothing to read when assigned publishes alignFree
	// instead (onFetched).
	alignUnknown = math.MinInt64
	// alignFree: the partition ended (ExitAtEnd) or is idle (live): it
	// holds nothing back.
	alignFree = math.MaxInt64
)

// aligner keeps the partitions this instance holds, of every events
// topic, within a bounded number of report windows of one another, the
// way Flink's watermark alignment keeps its sources (FLIP-182): a worker
// whose next event lies more than drift windows past the slowest other
// partition waits for it. The merger holds a window until every
// partition reported it, at most merge.max_pending_windows of them; a
// partition running further ahead of another (a backfill over partitions
// of uneven size, a restart over a backlog) would make it release the
// oldest windows partial and then drop the slow partition's summaries of
// them. The merger's windows span topics, so the alignment does too.
//
// Each member publishes its position: the window of the newest event
// time it took or is about to take (alignUnknown, alignFree). A worker
// publishes its next event's window before it waits, so the member with
// the lowest position never waits: its event lies at or below every
// other position. Some member can always go on, and the positions only
// rise, so the alignment cannot deadlock; a partition that has nothing
// to read either ends (ExitAtEnd) or turns idle (live) and stops
// counting.
type aligner struct {
	windowMs int64
	drift    int64 // windows a partition may run past the slowest other

	mu      sync.Mutex
	members map[*partWorker]struct{}
	// moved is closed when a position rose or a member left; nil while no
	// worker waits.
	moved chan struct{}
}

func newAligner(windowMs, drift int64) *aligner {
	return &aligner{windowMs: windowMs, drift: drift, members: map[*partWorker]struct{}{}}
}

func (a *aligner) join(w *partWorker) {
	a.mu.Lock()
	a.members[w] = struct{}{}
	a.mu.Unlock()
}

func (a *aligner) leave(w *partWorker) {
	a.mu.Lock()
	delete(a.members, w)
	a.wakeLocked()
	a.mu.Unlock()
}

// set publishes w's position and wakes the workers waiting.
func (a *aligner) set(w *partWorker, pos int64) {
	if w.alignPos.Swap(pos) == pos {
		return
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

// limit returns the highest window w may take an event of now: drift
// past the lowest position of the other members (math.MaxInt64 when none
// holds it back, math.MinInt64 while one has no event yet). With wait it
// also returns a channel closed once that may have changed.
func (a *aligner) limit(w *partWorker, wait bool) (int64, <-chan struct{}) {
	a.mu.Lock()
	defer a.mu.Unlock()
	low := int64(alignFree)
	for m := range a.members {
		if m != w {
			low = min(low, m.alignPos.Load())
		}
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

// idleLimit returns the highest window an idle member's clock may move
// to: drift past the lowest clock of the other members that have one,
// idle or not. Idle partitions do not hold the others back, but they
// move their clocks in steps of at most the drift past one another, so
// partitions going idle together (a backlog read, then no traffic) do
// not hand the merger hundreds of empty windows from one partition
// before the others'.
func (a *aligner) idleLimit(w *partWorker) int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	low := int64(alignFree)
	for m := range a.members {
		if c := m.alignClock.Load(); m != w && c != alignUnknown {
			low = min(low, c)
		}
	}
	return a.past(low)
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

// await publishes that the worker is about to take an event at tsMs and,
// when that is more than the drift past the slowest other partition,
// waits until it is not. Meanwhile acknowledgements keep coming in and
// the commit point keeps moving; the worker's queue fills, and the poll
// loop pauses the partition's fetching (enqueue). It returns false when
// the partition is given up while waiting.
//
// A live partition's event more than the drift ahead of the wall clock
// is not held: no partition would catch up with it before the wall clock
// does, and holding it would stall the partition that long.
func (w *partWorker) await(tsMs int64) bool {
	a := w.align
	win := a.windowOf(tsMs)
	if win > w.alignWin || w.alignIdle {
		w.alignWin = max(w.alignWin, win)
		w.alignIdle = false
		w.alignNextMs = a.endOf(w.alignWin)
		w.alignClock.Store(w.alignWin)
		a.set(w, w.alignWin)
	}
	if tsMs < w.alignUntilMs {
		return true
	}
	lim, _ := a.limit(w, false)
	if win <= lim {
		w.alignUntilMs = a.endOf(lim)
		return true
	}
	if !w.s.cfg.ExitAtEnd && win > a.windowOf(w.s.now().UnixMilli())+a.drift {
		return true
	}
	w.s.log.Debug("partition ahead of the others; waiting for them", "topic", w.tp.topic, "partition", w.tp.partition,
		"window_start_ms", win*a.windowMs, "limit_start_ms", lim*a.windowMs)
	w.s.m.alignWaits.Inc()
	for {
		lim, moved := a.limit(w, true)
		if win <= lim {
			w.alignUntilMs = a.endOf(lim)
			return true
		}
		select {
		case <-moved:
		case <-w.inbox.ready:
			w.applyAcks()
			w.publish()
		case <-w.ctx.Done():
			return false
		}
	}
}

// checkIdle stops a live partition that took no event for the idle
// timeout from holding the others back, as Idle stops it from holding
// its own windows open.
func (w *partWorker) checkIdle(now time.Time) {
	if w.alignIdle || now.Sub(w.lastEventAt) < w.s.cfg.Pipeline.IdleTimeout {
		return
	}
	w.alignIdle = true
	w.alignNextMs = math.MinInt64 // the next event publishes a position again
	w.align.set(w, alignFree)
}

// idle moves a live partition's clock towards the wall clock once it saw
// no event for the idle timeout (pipeline.Partition.IdleTo), as far as
// the aligner lets it.
func (w *partWorker) idle(now time.Time) {
	a := w.align
	toMs := a.endOf(a.idleLimit(w)) - 1
	if !w.core.IdleTo(now.UnixMilli(), toMs, &w.out) {
		return
	}
	w.emit()
	if win := a.windowOf(min(toMs, now.UnixMilli())); win > w.alignWin {
		w.alignWin = win
		w.alignNextMs = a.endOf(win)
		w.alignClock.Store(win)
	}
}
