package detect

import (
	"sync"
	"time"
)

// drainSayEvery is how often a stop that waits for outputs says so.
const drainSayEvery = 5 * time.Second

// sayDraining logs, at once and then every drainSayEvery until the
// returned stop is called, what a stop or revoke waits for before its
// commit: left reports the outputs still unacknowledged and the
// partitions holding them (none: nothing is said). Each line names the
// sinks that are not ready, and how long is left before the wait gives
// up at deadline; a stop with ClickHouse down would otherwise sit silent
// for the flush timeout.
func (s *Service) sayDraining(what string, deadline time.Time, left func() (outputs, parts int)) (stop func()) {
	say := func() {
		n, parts := left()
		if n == 0 {
			return
		}
		attrs := []any{"outputs", n}
		if parts > 0 {
			attrs = append(attrs, "partitions", parts)
		}
		attrs = append(attrs, "deadline", deadline.Format(time.RFC3339), "left", max(0, time.Until(deadline)).Round(time.Second))
		if ch := s.cfg.ClickHouse; ch != nil {
			if err := ch.Ready(); err != nil {
				attrs = append(attrs, "clickhouse", err.Error())
			} else {
				attrs = append(attrs, "clickhouse", "ok")
			}
		}
		if s.cfg.Archive != nil {
			attrs = append(attrs, "archive", "on")
		}
		s.log.Info(what+": waiting for outputs in flight to be acknowledged (Kafka and the sinks) before the commit; past the deadline a restart publishes them again", attrs...)
	}
	say()
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(drainSayEvery)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				say()
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			close(done)
			wg.Wait()
		})
	}
}
