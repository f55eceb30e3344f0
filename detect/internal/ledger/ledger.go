package ledger

import (
	"context"
	"sync"
)

// Ticket names one output recorded in a Ledger.
type Ticket uint64

// Ledger counts the outputs of one owner (a partition's worker, the
// merger) by what each is for, K. Sent's acknowledgement functions may be
// called from any goroutine; every other method belongs to the owner.
type Ledger[K any] struct {
	mu       sync.Mutex
	posted   []posted
	inFlight int           // handed to a destination, acknowledgement not applied yet
	ready    chan struct{} // holds a token while acknowledgements wait

	done   func(K)
	failed func(K, error)
	open   map[Ticket]*entry[K]
	next   Ticket
	taken  []posted
	// holds are the tickets added with a hold, in the order added, done
	// ones trimmed from the front; unordered: a hold was added below an
	// earlier one, so the front is not the lowest.
	holds     []Ticket
	lastHold  int64
	unordered bool
}

type entry[K any] struct {
	key  K
	left int // acknowledgements still to come
	hold int64
	held bool
}

type posted struct {
	t   Ticket
	err error
}

// New returns an empty ledger. done hears each output once every one of
// its destinations acknowledged it, failed each failed acknowledgement;
// both run on the owner's goroutine, inside Apply, Ack or Add.
func New[K any](done func(K), failed func(K, error)) *Ledger[K] {
	return &Ledger[K]{ready: make(chan struct{}, 1), done: done, failed: failed, open: map[Ticket]*entry[K]{}}
}

// Add records an output for k that is done once n destinations
// acknowledged it. With n 0 it is done at once.
func (l *Ledger[K]) Add(k K, n int) Ticket {
	return l.add(k, n, 0, false)
}

// AddHeld is Add for an output that holds offset hold back: Floor is at
// most hold until the output is done. Holds are expected in the order
// the offsets were read (any order works; that one is cheapest).
func (l *Ledger[K]) AddHeld(k K, n int, hold int64) Ticket {
	return l.add(k, n, hold, true)
}

func (l *Ledger[K]) add(k K, n int, hold int64, held bool) Ticket {
	l.next++
	t := l.next
	if n <= 0 {
		l.done(k)
		return t
	}
	l.open[t] = &entry[K]{key: k, left: n, hold: hold, held: held}
	if held {
		if len(l.holds) > 0 && hold < l.lastHold {
			l.unordered = true
		}
		l.holds = append(l.holds, t)
		l.lastHold = hold
	}
	return t
}

// Sent counts one of t's destinations as having taken its copy and
// returns the function that destination calls, once, from any goroutine,
// with the outcome. It never blocks.
func (l *Ledger[K]) Sent(t Ticket) func(error) {
	l.mu.Lock()
	l.inFlight++
	l.mu.Unlock()
	return func(err error) {
		l.mu.Lock()
		l.posted = append(l.posted, posted{t, err})
		l.mu.Unlock()
		select {
		case l.ready <- struct{}{}:
		default:
		}
	}
}

// Unsent takes back the last Sent whose destination refused the output
// before taking it: its acknowledgement will never come. The output
// stays open (it holds what it holds).
func (l *Ledger[K]) Unsent() {
	l.mu.Lock()
	l.inFlight--
	l.mu.Unlock()
}

// Ack acknowledges t on the owner's goroutine, for a destination that
// knows at once (the archive, once flushed).
func (l *Ledger[K]) Ack(t Ticket) { l.apply(posted{t: t}) }

// Apply hands the acknowledgements posted since the last Apply to done
// and failed, in the order they were posted.
func (l *Ledger[K]) Apply() {
	l.mu.Lock()
	l.taken = append(l.taken[:0], l.posted...)
	clear(l.posted)
	l.posted = l.posted[:0]
	l.inFlight -= len(l.taken)
	l.mu.Unlock()
	for _, p := range l.taken {
		l.apply(p)
	}
	clear(l.taken)
}

func (l *Ledger[K]) apply(p posted) {
	e := l.open[p.t]
	if e == nil {
		return // from before a Reset
	}
	if p.err != nil {
		l.failed(e.key, p.err)
		return
	}
	if e.left--; e.left > 0 {
		return
	}
	delete(l.open, p.t)
	l.done(e.key)
}

// Pending is the number of acknowledgements sent for and not applied
// yet; any goroutine may ask.
func (l *Ledger[K]) Pending() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.inFlight
}

// Ready holds a token while acknowledgements wait for Apply.
func (l *Ledger[K]) Ready() <-chan struct{} { return l.ready }

// Wait applies acknowledgements as they come until none is pending, and
// reports true, or until ctx ends first, and reports false.
func (l *Ledger[K]) Wait(ctx context.Context) bool {
	for l.Pending() > 0 {
		select {
		case <-l.ready:
			l.Apply()
		case <-ctx.Done():
			l.Apply()
			return false
		}
	}
	l.Apply()
	return true
}

// Floor is the lowest hold of an output not done; ok is false when none
// holds anything.
func (l *Ledger[K]) Floor() (hold int64, ok bool) {
	n := 0
	for n < len(l.holds) && l.open[l.holds[n]] == nil {
		n++
	}
	l.holds = l.holds[:copy(l.holds, l.holds[n:])]
	if len(l.holds) == 0 {
		l.unordered = false
		return 0, false
	}
	hold = l.open[l.holds[0]].hold
	if l.unordered {
		for _, t := range l.holds[1:] {
			if e := l.open[t]; e != nil {
				hold = min(hold, e.hold)
			}
		}
	}
	return hold, true
}

// Each calls f with what each output not done is for.
func (l *Ledger[K]) Each(f func(K)) {
	for _, e := range l.open {
		f(e.key)
	}
}

// Reset forgets every open output, as when a partition is given up: the
// acknowledgements of those still in flight are counted as they come
// (Pending) and otherwise ignored.
func (l *Ledger[K]) Reset() {
	clear(l.open)
	l.holds, l.unordered = l.holds[:0], false
}
