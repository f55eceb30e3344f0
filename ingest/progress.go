package ingest

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/keyheat/keyheat/internal/progress"
)

// Progress reports s every interval until ctx ends: as one line redrawn
// in place on tty when it is not nil (a terminal; package
// internal/progress draws it, as it draws detect replay's), otherwise as
// a log record, with the dead letters by reason, when a count changed
// since the last one (an idle source logs nothing).
func Progress(ctx context.Context, s *Stats, tty io.Writer, log *slog.Logger, interval time.Duration) {
	now := time.Now()
	p := newProgressLine(s, tty, log, now)
	progress.New(progress.Config{Terminal: p.tty, Every: interval, Text: p.text,
		Report: func(now time.Time, _ bool) { p.report(now) }}, now).Run(ctx)
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

// sample reads the counts as of now, with the events' rate since the
// last sample.
func (p *progressLine) sample(now time.Time) (progressCounts, float64) {
	c := p.s.progressCounts()
	rate := float64(c.events-p.last) / now.Sub(p.lastT).Seconds()
	p.last, p.lastT = c.events, now
	return c, rate
}

// text is the terminal's line as of now.
func (p *progressLine) text(now time.Time, _ bool) string {
	c, rate := p.sample(now)
	return fmt.Sprintf("%10.0f events/s  lines %d  delivered %d  events %d  dlq %d  skipped %d  failed %d",
		rate, c.lines, c.delivered, c.events, c.dlq, c.skipped, c.failed)
}

// report logs the counts as of now when a count changed since the last
// record.
func (p *progressLine) report(now time.Time) {
	c, rate := p.sample(now)
	if c == p.said {
		return
	}
	p.said = c
	attrs := []any{"events_per_s", int64(rate), "lines", c.lines, "delivered", c.delivered, "events", c.events}
	attrs = append(attrs, p.s.DeadLetters().Attrs()...)
	p.log.Info("progress", append(attrs, "skipped", c.skipped, "failed", c.failed)...)
}
