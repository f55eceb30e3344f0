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
//
// It also keeps the Kafka floors of the stream (see floors): AckAt tells
// where a record landed, and once its line joins the acknowledged prefix
// its offset raises the floor of its partition.
type ackSeq struct {
	mu      sync.Mutex
	base    uint64     // seq of pending[0]
	pending []ackEntry // outstanding lines in order
	acked   int64      // watermark position
	err     error
	idle    chan struct{} // closed and replaced when pending drains
	floors  floors
}

type ackEntry struct {
	end   int64
	done  bool
	topic int8 // outTopic of the record, or -1: no record (or not told)
	part  int32
	off   int64
}

// newAckSeq starts a stream at position start whose floors are fl (taken
// over, not copied).
func newAckSeq(start int64, fl floors) *ackSeq {
	return &ackSeq{acked: start, idle: make(chan struct{}), floors: fl}
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
func (a *ackSeq) Ack(seq uint64, err error) { a.ack(seq, err, -1, 0, 0) }

// AckAt implements placedAcker: the line's record is at offset off of
// partition part of topic.
func (a *ackSeq) AckAt(seq uint64, topic outTopic, part int32, off int64) {
	a.ack(seq, nil, int8(topic), part, off)
}

func (a *ackSeq) ack(seq uint64, err error, topic int8, part int32, off int64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	i := seq - a.base
	if i >= uint64(len(a.pending)) {
		return // not a seq of ours: never move the watermark on it
	}
	a.pending[i] = ackEntry{end: a.pending[i].end, done: true, topic: topic, part: part, off: off}
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
	for _, e := range a.pending[:n] {
		if e.topic >= 0 {
			a.floors.raise(outTopic(e.topic), e.part, e.off)
		}
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

// snapshot returns the watermark, a copy of the floors, and whether no
// line is outstanding, all as of one moment.
func (a *ackSeq) snapshot() (acked int64, fl floors, idle bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.acked, a.floors.clone(), len(a.pending) == 0 && a.err == nil
}

// takeFloors returns the floors for the stream that follows this one
// (the next file at the same path). Call it once every line is
// acknowledged, so they cover the whole stream.
func (a *ackSeq) takeFloors() floors {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.floors.clone()
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
