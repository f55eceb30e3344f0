package ingest

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"
)

// Progress reports s every interval until ctx ends: as one rewritten line
// on tty when it is not nil (a terminal), otherwise as a log record.
func Progress(ctx context.Context, s *Stats, tty io.Writer, log *slog.Logger, interval time.Duration) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	tick := time.NewTicker(interval)
	defer tick.Stop()
	last, lastT := s.Events.Load(), time.Now()
	for {
		select {
		case <-ctx.Done():
			if tty != nil {
				fmt.Fprintln(tty)
			}
			return
		case now := <-tick.C:
			ev := s.Events.Load()
			rate := float64(ev-last) / now.Sub(lastT).Seconds()
			last, lastT = ev, now
			if tty != nil {
				fmt.Fprintf(tty, "\r%10.0f events/s  lines %d  delivered %d  events %d  dlq %d  skipped %d  failed %d ",
					rate, s.Lines.Load(), s.Delivered.Load(), ev, s.DLQ.Load(), s.Skipped.Load(), s.Failed.Load())
				continue
			}
			log.Info("progress", "events_per_s", int64(rate), "lines", s.Lines.Load(), "delivered", s.Delivered.Load(), "events", ev,
				"dlq", s.DLQ.Load(), "skipped", s.Skipped.Load(), "failed", s.Failed.Load())
		}
	}
}
