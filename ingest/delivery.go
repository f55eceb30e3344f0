package ingest

import (
	"context"
	"fmt"
	"time"
)

// DeliveryOptions say how long a source waits for Kafka to take what it
// read, as a config file sets them (under ingest:, by their mapstructure
// tags). Kafka being unreachable is always waited for while reading; these
// bound the wait at the end.
type DeliveryOptions struct {
	// StopTimeout is how long a source that was told to stop (SIGINT,
	// SIGTERM) still waits for Kafka to take the lines it read. Past it,
	// or at a second signal, it gives up on them: tail and topic read them
	// again at the next start, stdin writes them to its spill file.
	StopTimeout time.Duration `mapstructure:"stop_timeout"`
	// EndTimeout is how long stdin waits for Kafka after its input ended;
	// 0 waits as long as it takes. Past it the lines not taken go to the
	// spill file.
	EndTimeout time.Duration `mapstructure:"end_timeout"`
	// SpillFile is where stdin writes the lines Kafka did not take when it
	// gives up on them, one per line as they were read, so that
	// `ingest stdin < FILE` sends them later; empty picks a new file in
	// the temporary folder. Its path is logged. ingest stdin refuses to
	// start when it cannot be written.
	SpillFile string `mapstructure:"spill_file"`
}

// DefaultDeliveryOptions: a stop waits 10s, the end of stdin as long as it
// takes, spill files go to the temporary folder.
func DefaultDeliveryOptions() DeliveryOptions {
	return DeliveryOptions{StopTimeout: 10 * time.Second}
}

// Validate returns every unusable option, each an *OptionError, joined.
func (o DeliveryOptions) Validate() error {
	var p optionErrors
	if o.StopTimeout < 0 {
		p.add("stop_timeout", "must not be negative; 0 gives up at once when told to stop")
	}
	if o.EndTimeout < 0 {
		p.add("end_timeout", "must not be negative; 0 waits as long as it takes")
	}
	return p.err()
}

// UndeliveredError is returned by a source that stopped while lines it had
// read were not on Kafka. Lines counts them (also in
// Stats.Undelivered); Resume says what becomes of them.
type UndeliveredError struct {
	Lines  int64
	Resume string
}

func (e *UndeliveredError) Error() string {
	return fmt.Sprintf("%d lines read were not delivered to Kafka; %s", e.Lines, e.Resume)
}

// giveUpContext returns a context that ends timeout after stop ends, or as
// soon as force is closed: how long a stopping source may still wait for
// Kafka. Call cancel when done with it.
func giveUpContext(stop context.Context, timeout time.Duration, force <-chan struct{}) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.WithoutCancel(stop))
	go func() {
		select {
		case <-ctx.Done():
			return
		case <-force:
			cancel()
			return
		case <-stop.Done():
		}
		t := time.NewTimer(timeout)
		defer t.Stop()
		select {
		case <-ctx.Done():
		case <-force:
		case <-t.C:
		}
		cancel()
	}()
	return ctx, cancel
}
