package detect

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/keyheat/keyheat/internal/deadletters"
	"github.com/keyheat/keyheat/logparse"
	"github.com/keyheat/keyheat/schemas"
)

// dlqLogEvery is how often a run says what went to the DLQ since it last
// said so; it says nothing while nothing more went there.
const dlqLogEvery = 5 * time.Second

// readTally is what a partition worker read since it last handed its
// counts to the service (readStats.add). It is worker-owned, so counting
// a record costs no atomic operation.
type readTally struct {
	records, events, skipped int64
}

// count counts a record that decode turned into n events, or refused with
// err (logparse.ErrSkip: a line with no keyed access).
func (t *readTally) count(n int, err error) {
	t.records++
	switch {
	case err == nil:
		t.events += int64(n)
	case errors.Is(err, logparse.ErrSkip):
		t.skipped++
	}
}

// readStats are the totals of what this instance's partitions read: the
// records, the events they gave, the records skipped, and the dead
// letters the DLQ topic acknowledged, by reason. Workers add to them
// after each batch and on each dead letter's acknowledgement; the logs
// read them.
type readStats struct {
	records, events, skipped atomic.Int64

	mu  sync.Mutex
	dlq map[schemas.Reason]int64
}

// add takes a worker's tally and zeroes it.
func (r *readStats) add(t *readTally) {
	if *t == (readTally{}) {
		return
	}
	r.records.Add(t.records)
	r.events.Add(t.events)
	r.skipped.Add(t.skipped)
	*t = readTally{}
}

// deadLetter counts a dead letter the DLQ topic acknowledged.
func (r *readStats) deadLetter(reason schemas.Reason) {
	r.mu.Lock()
	if r.dlq == nil {
		r.dlq = map[schemas.Reason]int64{}
	}
	r.dlq[reason]++
	r.mu.Unlock()
}

// readCounts is a snapshot of readStats.
type readCounts struct {
	records, events, skipped int64
	dlq                      deadletters.Summary
}

func (r *readStats) snapshot() readCounts {
	r.mu.Lock()
	by := maps.Clone(r.dlq)
	r.mu.Unlock()
	// The dead letters first: a worker hands over its records before it
	// counts their dead letters (applyAcks), so the records loaded after
	// include every record of a dead letter loaded, and the share is at
	// most 100%.
	c := readCounts{events: r.events.Load(), skipped: r.skipped.Load(), records: r.records.Load()}
	c.dlq = deadletters.Summary{Read: c.records, ByReason: by}
	return c
}

func (c readCounts) attrs(dlqTopic string) []any {
	return append([]any{"records", c.records, "events", c.events, "skipped", c.skipped}, append(c.dlq.Attrs(), "dlq_topic", dlqTopic)...)
}

// logDeadLetters says every dlqLogEvery what went to the DLQ so far, when
// more did since it last said so, until ctx ends or stop is called: at
// WARN, with the setting that fixes it, while most of what was read went
// there. stop returns once it stopped; calling it again does nothing.
func (s *Service) logDeadLetters(ctx context.Context) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(dlqLogEvery)
		defer t.Stop()
		var said int64
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			c := s.read.snapshot()
			n := c.dlq.Total()
			if n == said {
				continue
			}
			said = n
			if c.dlq.Most() {
				r, _ := c.dlq.Dominant()
				s.log.Warn("records sent to the DLQ so far; most of what was read", append(c.attrs(s.cfg.Topics.DLQ),
					"fix", s.fix(r))...)
				continue
			}
			s.log.Info("records sent to the DLQ so far", c.attrs(s.cfg.Topics.DLQ)...)
		}
	}()
	return func() {
		cancel()
		<-done
	}
}

// logRead says, at the end of a run, what it read and what of it went to
// the DLQ, and warns when that was most of it. It returns, for an
// ExitAtEnd run whose records gave no event while some went to the DLQ,
// a *NothingDetectedError.
func (s *Service) logRead() error {
	c := s.read.snapshot()
	s.log.Info("records read", c.attrs(s.cfg.Topics.DLQ)...)
	c.dlq.WarnIfMost(s.log, s.cfg.Topics.DLQ, s.fix)
	if !s.cfg.ExitAtEnd || c.records == 0 || c.events > 0 || c.dlq.Total() == 0 {
		return nil
	}
	r, _ := c.dlq.Dominant()
	return &NothingDetectedError{Group: s.cfg.Group, DLQ: s.cfg.Topics.DLQ, Records: c.records, DeadLetters: c.dlq.ByReason,
		Fix: s.fix(r)}
}

// NothingDetectedError is Run's error in an ExitAtEnd run that read
// records and took no event from them, sending some (often all) to the
// DLQ: nothing was detected or reported, which in a batch run is almost
// always a setting that does not fit the input. The run committed its
// offsets all the same (the dead letters carry the records), so the
// group reads those records again only once its offsets are reset.
type NothingDetectedError struct {
	// Group is the detect group that committed past the records.
	Group string
	// DLQ is the topic the dead letters went to.
	DLQ string
	// Records counts the records this instance read.
	Records int64
	// DeadLetters counts those that went to the DLQ, by reason; the rest
	// were skipped (lines with no keyed access).
	DeadLetters map[schemas.Reason]int64
	// Fix says what most likely fixes the dominant reason.
	Fix string
}

func (e *NothingDetectedError) Error() string {
	s := deadletters.Summary{Read: e.Records, ByReason: e.DeadLetters}
	var by []string
	for _, r := range schemas.Reasons() {
		if n := e.DeadLetters[r]; n > 0 {
			by = append(by, fmt.Sprintf("%s %d", r, n))
		}
	}
	return fmt.Sprintf("none of the %d records read gave an event, so nothing was detected: %d went to the DLQ %s (%s); %s. "+
		"Group %s has committed past them: run again with another detect.group, or reset its offsets",
		e.Records, s.Total(), e.DLQ, strings.Join(by, ", "), e.Fix, e.Group)
}
