package ingest

import (
	"context"
	"sync"
)

// Acker learns the fate of a record: err is nil once Kafka acknowledged
// it. seq is the token the source passed with the record. Ack is called
// from the producer's promise goroutine and must not block.
type Acker interface {
	Ack(seq uint64, err error)
}

// ackSeq tracks "every line up to position P is acknowledged" for one
// ordered stream of lines (one file, one partition) whose acks arrive in
// any order, like pebble's internal/ackseq. Add registers the next line
// and its end position; Ack marks one done; Acked returns the end position
// of the longest acknowledged prefix. A failed ack freezes the watermark
// for good: nothing after an unacknowledged line may ever be saved.
type ackSeq struct {
	mu      sync.Mutex
	base    uint64     // seq of pending[0]
	pending []ackEntry // outstanding lines in order
	acked   int64      // watermark position
	err     error
	idle    chan struct{} // closed and replaced when pending drains
}

type ackEntry struct {
	end  int64
	done bool
}

func newAckSeq(start int64) *ackSeq {
	return &ackSeq{acked: start, idle: make(chan struct{})}
}

// Add registers the next line, ending at end, and returns its seq.
func (a *ackSeq) Add(end int64) uint64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	seq := a.base + uint64(len(a.pending))
	a.pending = append(a.pending, ackEntry{end: end})
	return seq
}

// Ack implements Acker.
func (a *ackSeq) Ack(seq uint64, err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	i := seq - a.base
	if i >= uint64(len(a.pending)) {
		return // not a seq of ours: never move the watermark on it
	}
	a.pending[i].done = true
	if err != nil && a.err == nil {
		a.err = err
	}
	if a.err != nil {
		// Frozen: the failed line stays unacknowledged forever, so no
		// position past it is ever saved; the source stops on the error.
		// Waiters are released so shutdown does not hang.
		if a.allDone() {
			close(a.idle)
			a.idle = make(chan struct{})
		}
		return
	}
	n := 0
	for n < len(a.pending) && a.pending[n].done {
		n++
	}
	if n == 0 {
		return
	}
	a.acked = a.pending[n-1].end
	a.base += uint64(n)
	a.pending = a.pending[n:]
	if len(a.pending) == 0 {
		a.pending = nil // let the backing array go; it only grows under load
		close(a.idle)
		a.idle = make(chan struct{})
	}
}

func (a *ackSeq) allDone() bool {
	for _, p := range a.pending {
		if !p.done {
			return false
		}
	}
	return true
}

// Acked returns the watermark and the first produce error, if any.
func (a *ackSeq) Acked() (int64, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.acked, a.err
}

// Wait blocks until every added line is acknowledged (or failed).
func (a *ackSeq) Wait(ctx context.Context) error {
	for {
		a.mu.Lock()
		n, idle, err := len(a.pending), a.idle, a.err
		a.mu.Unlock()
		if n == 0 {
			return nil
		}
		if err != nil && a.allDoneLocked() {
			return err
		}
		select {
		case <-idle:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (a *ackSeq) allDoneLocked() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.allDone()
}
