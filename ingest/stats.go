package ingest

import (
	"math/bits"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/keyheat/keyheat/internal/deadletters"
	"github.com/keyheat/keyheat/logparse"
	"github.com/keyheat/keyheat/schemas"
)

// reasons are the DLQ reasons counted; anything else counts as parse.
var reasons = schemas.Reasons()

// allFields are the optional fields a parser may drop, counted one by one.
const allFields = logparse.FieldOp | logparse.FieldBytes | logparse.FieldApp | logparse.FieldStatus |
	logparse.FieldClient | logparse.FieldNode | logparse.FieldLatencyUs

// Stats are the running totals of one ingest process. They are atomics
// read by the progress line and the summary and exported to Prometheus as
// counter functions, so there is one source of truth and no double
// counting.
//
// Lines and records are counted apart: one line may become several
// records (a redis MGET of three keys makes three events) or none (a
// skipped line). A line is delivered once every record it became is on
// Kafka: acknowledged, or for tail, in a committed transaction. The tail
// counts a transaction's lines and records when it commits, so its totals
// are what readers with read_committed isolation see; the lines of a
// transaction it gives up on at a stop count as read and undelivered.
type Stats struct {
	Lines atomic.Int64 // lines (or raw records, or generated events) read
	Bytes atomic.Int64 // bytes of those lines
	// The reading goroutine writes the counts above, the producer's
	// promise goroutine most of those below; the pad keeps them on
	// different cache lines so the two cores do not bounce one line per
	// record.
	_ [64]byte
	// Delivered counts lines whose every record is on Kafka; skipped lines
	// count as delivered.
	Delivered atomic.Int64
	Events    atomic.Int64 // records on the events topic
	DLQ       atomic.Int64 // dead letters on the DLQ topic
	Skipped   atomic.Int64 // lines that record no access (logparse.ErrSkip)
	Failed    atomic.Int64 // records Kafka refused for good
	// Undelivered counts lines read that were not delivered when the
	// source stopped: left for the next start to read again (tail, topic),
	// written to the spill file (stdin, see Spilled), or lost (gen).
	Undelivered atomic.Int64
	// Spilled counts undelivered lines written to the spill file.
	Spilled   atomic.Int64
	Rotations atomic.Int64 // files followed across a rotation
	Truncates atomic.Int64 // files found truncated
	// UnreadBytes counts bytes of files that disappeared before tail read
	// them (a rotated file deleted while ingest was down).
	UnreadBytes atomic.Int64
	// GoneFiles counts files with a saved position that disappeared
	// before tail read them to their end: what was written to them after
	// the last read is unknown, and lost.
	GoneFiles atomic.Int64
	dlq       [8]atomic.Int64
	dropped   [16]atomic.Int64 // per logparse.Fields bit
}

// DLQByReason returns the number of dead letters counted for r.
func (s *Stats) DLQByReason(r schemas.Reason) int64 { return s.dlq[reasonIndex(r)].Load() }

// DeadLetters sums up the dead letters against the lines read, for the
// progress line and the summary.
func (s *Stats) DeadLetters() deadletters.Summary {
	// The dead letters first: a line counts as read before its dead
	// letter can be acknowledged, so the share stays at most 100%.
	by := map[schemas.Reason]int64{}
	for i, r := range reasons {
		if n := s.dlq[i].Load(); n > 0 {
			by[r] = n
		}
	}
	return deadletters.Summary{Read: s.Lines.Load(), ByReason: by}
}

// DroppedFields returns how often field (one logparse.Fields bit) was
// dropped because it did not parse.
func (s *Stats) DroppedFields(field logparse.Fields) int64 {
	if bits.OnesCount16(uint16(field)) != 1 {
		return 0
	}
	return s.dropped[bits.TrailingZeros16(uint16(field))].Load()
}

// DroppedSummary returns the dropped-field counts as "bytes:3,status:2",
// or "" when no field was dropped.
func (s *Stats) DroppedSummary() string {
	var b strings.Builder
	for f := range allFields.All() {
		n := s.DroppedFields(f)
		if n == 0 {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(f.String())
		b.WriteByte(':')
		b.WriteString(strconv.FormatInt(n, 10))
	}
	return b.String()
}

// countDropped counts each field in f once.
func (s *Stats) countDropped(f logparse.Fields) {
	for one := range f.All() {
		s.dropped[bits.TrailingZeros16(uint16(one))].Add(1)
	}
}

// Waiting returns the lines read and not yet delivered, for sources that
// count lines as they read them and deliveries as Kafka acknowledges.
func (s *Stats) Waiting() int64 {
	return max(0, s.Lines.Load()-s.Delivered.Load()-s.Undelivered.Load())
}

// add adds every count of o to s. The tail keeps a transaction's counts
// apart and adds them when it commits.
func (s *Stats) add(o *Stats) {
	s.Lines.Add(o.Lines.Load())
	s.Bytes.Add(o.Bytes.Load())
	s.Delivered.Add(o.Delivered.Load())
	s.Events.Add(o.Events.Load())
	s.DLQ.Add(o.DLQ.Load())
	s.Skipped.Add(o.Skipped.Load())
	s.Failed.Add(o.Failed.Load())
	s.Undelivered.Add(o.Undelivered.Load())
	s.Spilled.Add(o.Spilled.Load())
	s.Rotations.Add(o.Rotations.Load())
	s.Truncates.Add(o.Truncates.Load())
	s.UnreadBytes.Add(o.UnreadBytes.Load())
	s.GoneFiles.Add(o.GoneFiles.Load())
	for i := range s.dlq {
		s.dlq[i].Add(o.dlq[i].Load())
	}
	for i := range s.dropped {
		s.dropped[i].Add(o.dropped[i].Load())
	}
}

// reset zeroes every count.
func (s *Stats) reset() {
	for _, c := range []*atomic.Int64{&s.Lines, &s.Bytes, &s.Delivered, &s.Events, &s.DLQ, &s.Skipped, &s.Failed,
		&s.Undelivered, &s.Spilled, &s.Rotations, &s.Truncates, &s.UnreadBytes, &s.GoneFiles} {
		c.Store(0)
	}
	for i := range s.dlq {
		s.dlq[i].Store(0)
	}
	for i := range s.dropped {
		s.dropped[i].Store(0)
	}
}

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
		counter("lines_total", "Lines, raw records or generated events read (tail: counted when their transaction commits, or at a stop that gives up on it).", &s.Lines, nil),
		counter("read_bytes_total", "Bytes of input lines read.", &s.Bytes, nil),
		counter("delivered_lines_total", "Lines whose every record is on Kafka (skipped lines included).", &s.Delivered, nil),
		counter("events_total", "Records on the events topic (one line may make several).", &s.Events, nil),
		counter("skipped_lines_total", "Well-formed lines that record no keyed access (MONITOR's OK, PING).", &s.Skipped, nil),
		counter("produce_failures_total", "Records Kafka refused for good.", &s.Failed, nil),
		counter("undelivered_lines_total", "Lines read and not delivered when a source stopped.", &s.Undelivered, nil),
		counter("spilled_lines_total", "Undelivered stdin lines written to the spill file.", &s.Spilled, nil),
		counter("file_rotations_total", "Tailed files followed across a rotation.", &s.Rotations, nil),
		counter("file_truncations_total", "Tailed files found truncated and reread from the start.", &s.Truncates, nil),
		counter("unread_bytes_total", "Bytes of tailed files that disappeared before they were read.", &s.UnreadBytes, nil),
		counter("gone_files_total", "Tailed files that disappeared before they were read to their end.", &s.GoneFiles, nil),
	)
	for i, r := range reasons {
		reg.MustRegister(counter("dead_letters_total", "Dead letters on the DLQ topic, by reason.",
			&s.dlq[i], prometheus.Labels{"reason": string(r)}))
	}
	for f := range allFields.All() {
		reg.MustRegister(counter("dropped_fields_total", "Optional fields left at zero because they did not parse, by field; the event still went out.",
			&s.dropped[bits.TrailingZeros16(uint16(f))], prometheus.Labels{"field": f.String()}))
	}
	return s
}
