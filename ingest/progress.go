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
	progress(ctx, s, tty, log, tick.C)
}

// progressCounts are the counts a progress line shows.
type progressCounts struct {
	lines, delivered, events, dlq, skipped, failed int64
}

func (s *Stats) progressCounts() progressCounts {
	return progressCounts{lines: s.Lines.Load(), delivered: s.Delivered.Load(), events: s.Events.Load(), dlq: s.DLQ.Load(),
		skipped: s.Skipped.Load(), failed: s.Failed.Load()}
}

// progress is Progress on the ticks of tick.
func progress(ctx context.Context, s *Stats, tty io.Writer, log *slog.Logger, tick <-chan time.Time) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	var said progressCounts
	last, lastT := s.Events.Load(), time.Now()
	for {
		select {
		case <-ctx.Done():
			if tty != nil {
				fmt.Fprintln(tty)
			}
			return
		case now := <-tick:
			c := s.progressCounts()
			rate := float64(c.events-last) / now.Sub(lastT).Seconds()
			last, lastT = c.events, now
			if tty != nil {
				fmt.Fprintf(tty, "\r%10.0f events/s  lines %d  delivered %d  events %d  dlq %d  skipped %d  failed %d ",
					rate, c.lines, c.delivered, c.events, c.dlq, c.skipped, c.failed)
				continue
			}
			if c == said {
				continue
			}
			said = c
			attrs := []any{"events_per_s", int64(rate), "lines", c.lines, "delivered", c.delivered, "events", c.events}
			attrs = append(attrs, s.DeadLetters().Attrs()...)
			log.Info("progress", append(attrs, "skipped", c.skipped, "failed", c.failed)...)
		}
	}
}
