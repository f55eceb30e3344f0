package ingest

import (
	"github.com/keyheat/keyheat/internal/ackseq"
)

// Acker learns the fate of a record: err is nil once Kafka acknowledged
// it. seq is the token the source passed with the record. Ack is called
// from the producer's promise goroutine and must not block.
type Acker interface {
	Ack(seq uint64, err error)
}

// seqAcker acknowledges records into the watermark of their stream (one
// partition of a raw topic) and counts delivered lines.
type seqAcker struct {
	seq   *ackseq.Seq
	stats *Stats
}

func (a seqAcker) Ack(tok uint64, err error) {
	if err == nil {
		a.stats.Delivered.Add(1)
	}
	a.seq.Ack(tok, err)
}
