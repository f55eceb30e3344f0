package ingest

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"
)

// Progress reports s every interval until ctx ends: as one rewritten line
// on tty when it is not nil (a terminal), otherwise as a log record, with
// the dead letters by reason, when a count changed since the last one
// (an idle source logs nothing).
func Progress(ctx context.Context, s *Stats, tty io.Writer, log *slog.Logger, interval time.Duration) {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	p := newProgressLine(s, tty, log, time.Now())
	for {
		select {
		case <-ctx.Done():
			if tty != nil {
				fmt.Fprintln(tty)
			}
			return
		case now := <-tick.C:
			p.report(now)
		}
	}
}

// progressCounts are the counts a progress line shows.
type progressCounts struct {
	lines, delivered, events, dlq, skipped, failed int64
}

func (s *Stats) progressCounts() progressCounts {
	return progressCounts{lines: s.Lines.Load(), delivered: s.Delivered.Load(), events: s.Events.Load(), dlq: s.DLQ.Load(),
		skipped: s.Skipped.Load(), failed: s.Failed.Load()}
}

// progressLine is what Progress remembers from one report to the next.
type progressLine struct {
	s     *Stats
	tty   io.Writer
	log   *slog.Logger
	said  progressCounts
	last  int64 // events at lastT
	lastT time.Time
}

func newProgressLine(s *Stats, tty io.Writer, log *slog.Logger, now time.Time) *progressLine {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &progressLine{s: s, tty: tty, log: log, last: s.Events.Load(), lastT: now}
}

// report writes the counts as of now: always on a terminal, otherwise a log
// record when a count changed since the last record.
func (p *progressLine) report(now time.Time) {
	c := p.s.progressCounts()
	rate := float64(c.events-p.last) / now.Sub(p.lastT).Seconds()
	p.last, p.lastT = c.events, now
	if p.tty != nil {
		fmt.Fprintf(p.tty, "\r%10.0f events/s  lines %d  delivered %d  events %d  dlq %d  skipped %d  failed %d ",
			rate, c.lines, c.delivered, c.events, c.dlq, c.skipped, c.failed)
		return
	}
	if c == p.said {
		return
	}
	p.said = c
	attrs := []any{"events_per_s", int64(rate), "lines", c.lines, "delivered", c.delivered, "events", c.events}
	attrs = append(attrs, p.s.DeadLetters().Attrs()...)
	p.log.Info("progress", append(attrs, "skipped", c.skipped, "failed", c.failed)...)
}
