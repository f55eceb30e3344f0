package cli

import (
	"context"
	"log/slog"
	"time"
)

// SayWhileWaiting logs msg at INFO a second into a wait that ends with
// ctx's deadline (or stop), and every five seconds after, with the
// deadline and the time left, so a stop that waits for a sink that is
// down does not sit silent. stop ends it and returns once it logs no
// more.
func SayWhileWaiting(ctx context.Context, log *slog.Logger, msg string) (stop func()) {
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		deadline, _ := ctx.Deadline()
		wait := time.Second
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
			wait = 5 * time.Second
			log.Info(msg, "deadline", deadline.Format(time.RFC3339), "left", max(0, time.Until(deadline)).Round(time.Second))
		}
	}()
	return func() {
		close(done)
		<-finished
	}
}
