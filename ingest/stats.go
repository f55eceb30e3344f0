package ingest

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/keyheat/keyheat/schemas"
)

// reasons are the DLQ reasons counted; anything else counts as parse.
var reasons = []schemas.Reason{schemas.ReasonParse, schemas.ReasonEmptyKey, schemas.ReasonKeyTooLong,
	schemas.ReasonKeyNotUTF8, schemas.ReasonTimeSkew, schemas.ReasonMissingTime, schemas.ReasonLineTooLong}

// Stats are the running totals of one ingest process. They are atomics
// read by the progress line and exported to Prometheus as counter
// functions, so there is one source of truth and no double counting.
type Stats struct {
	Lines atomic.Int64 // lines (or records, or generated events) read
	Bytes atomic.Int64 // bytes of those lines
	// The reading goroutine writes the counts above, the producer's
	// promise goroutine those below; the pad keeps them on different
	// cache lines so the two cores do not bounce one line per record.
	_         [64]byte
	Events    atomic.Int64 // events acknowledged on the events topic
	DLQ       atomic.Int64 // dead letters acknowledged on the DLQ topic
	Skipped   atomic.Int64 // lines that record no access (logparse.ErrSkip)
	Failed    atomic.Int64 // records Kafka finally refused
	Rotations atomic.Int64 // files followed across a rotation
	Truncates atomic.Int64 // files found truncated
	// Deduplicated counts lines a tail restart did not send again because
	// the read-back found their records on Kafka already.
	Deduplicated atomic.Int64
	dlq          [8]atomic.Int64
}

// DLQByReason returns the number of dead letters acknowledged for r.
func (s *Stats) DLQByReason(r schemas.Reason) int64 { return s.dlq[reasonIndex(r)].Load() }

func reasonIndex(r schemas.Reason) int {
	for i, x := range reasons {
		if x == r {
			return i
		}
	}
	return 0
}

// NewStats returns zeroed Stats registered with reg; nil reg registers
// nothing.
func NewStats(reg prometheus.Registerer) *Stats {
	s := &Stats{}
	if reg == nil {
		return s
	}
	counter := func(name, help string, v *atomic.Int64, labels prometheus.Labels) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{
			Namespace: "keyheat", Subsystem: "ingest", Name: name, Help: help, ConstLabels: labels,
		}, func() float64 { return float64(v.Load()) })
	}
	reg.MustRegister(
		counter("lines_total", "Lines, records or generated events read.", &s.Lines, nil),
		counter("read_bytes_total", "Bytes of input lines read.", &s.Bytes, nil),
		counter("events_total", "Events acknowledged by Kafka on the events topic.", &s.Events, nil),
		counter("skipped_lines_total", "Well-formed lines that record no keyed access (MONITOR's OK, PING).", &s.Skipped, nil),
		counter("produce_failures_total", "Records Kafka refused after all retries.", &s.Failed, nil),
		counter("file_rotations_total", "Tailed files followed across a rotation.", &s.Rotations, nil),
		counter("file_truncations_total", "Tailed files found truncated and reread from the start.", &s.Truncates, nil),
		counter("deduplicated_lines_total", "Lines a tail restart found on Kafka already and did not send again.", &s.Deduplicated, nil),
	)
	for i, r := range reasons {
		reg.MustRegister(counter("dead_letters_total", "Dead letters acknowledged on the DLQ topic, by reason.",
			&s.dlq[i], prometheus.Labels{"reason": string(r)}))
	}
	return s
}
