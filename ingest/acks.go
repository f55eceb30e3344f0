package ingest

import (
	"context"
	"sync"

	"github.com/keyheat/keyheat/internal/ackseq"
)

// Acker learns the fate of a record: err is nil once Kafka acknowledged
// it. seq is the token the source passed with the record. Ack is called
// from the producer's promise goroutine and must not block.
type Acker interface {
	Ack(seq uint64, err error)
}

// seqAcker acknowledges records into the watermark of their stream (stdin,
// one partition of a raw topic).
type seqAcker struct{ seq *ackseq.Seq }

func (a seqAcker) Ack(tok uint64, err error) { a.seq.Ack(tok, err) }

// tailAcks is the watermark of one tailed file with the Kafka floors of
// readback.go on top: AckAt tells where a line's record landed, and once
// the line joins the acknowledged prefix its offset raises the floor of
// its partition. Everything happens under mu, so the watermark and the
// floors always describe the same prefix.
type tailAcks struct {
	mu     sync.Mutex
	seq    *ackseq.Seq
	base   uint64      // token of placed[0]
	placed []placement // per outstanding token: where its record is; topic -1 for none (or not told)
	floors floors
}

// newTailAcks starts a file at position start whose floors are fl (taken
// over, not copied).
func newTailAcks(start int64, fl floors) *tailAcks {
	return &tailAcks{seq: ackseq.New(start), floors: fl}
}

// Add registers the next line, ending at end, and returns its token.
func (a *tailAcks) Add(end int64) uint64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	tok := a.seq.Add(end)
	a.placed = append(a.placed, placement{topic: noTopic})
	return tok
}

// Ack implements Acker.
func (a *tailAcks) Ack(tok uint64, err error) { a.ack(tok, err, placement{topic: noTopic}) }

// AckAt implements placedAcker: the line's record is at offset off of
// partition part of topic.
func (a *tailAcks) AckAt(tok uint64, topic outTopic, part int32, off int64) {
	a.ack(tok, nil, placement{topic: topic, part: part, off: off})
}

func (a *tailAcks) ack(tok uint64, err error, pl placement) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if i := tok - a.base; i < uint64(len(a.placed)) {
		a.placed[i] = pl
	}
	r := a.seq.Ack(tok, err)
	if r.Len() == 0 {
		return
	}
	for _, p := range a.placed[:r.Len()] {
		if p.topic != noTopic {
			a.floors.raise(p.topic, p.part, p.off)
		}
	}
	a.base = r.To
	a.placed = a.placed[r.Len():]
	if len(a.placed) == 0 {
		a.placed = nil // let the backing array go; it only grows under load
	}
}

// Acked returns the watermark and the first produce error, if any.
func (a *tailAcks) Acked() (int64, error) { return a.seq.Acked() }

// Wait blocks until every added line is acknowledged (or failed).
func (a *tailAcks) Wait(ctx context.Context) error { return a.seq.Wait(ctx) }

// snapshot returns the watermark, a copy of the floors, and whether no
// line is outstanding, all as of one moment.
func (a *tailAcks) snapshot() (acked int64, fl floors, idle bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	acked, pending, err := a.seq.State()
	return acked, a.floors.clone(), pending == 0 && err == nil
}

// takeFloors returns the floors for the file that follows this one at the
// same path. Call it once every line is acknowledged, so they cover the
// whole file.
func (a *tailAcks) takeFloors() floors {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.floors.clone()
}
