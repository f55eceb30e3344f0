package detect

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/keyheat/keyheat/detect/internal/ledger"
	"github.com/keyheat/keyheat/schemas"
	"github.com/keyheat/keyheat/sink/archive"
	"github.com/keyheat/keyheat/sink/clickhouse"
)

// ReplayTo says where a replay's outputs go; each part is optional.
type ReplayTo struct {
	// Print hears every output first, as a terminal's printer does.
	Print ReplaySink
	// Archive takes the reports through Reports and the hot-key events
	// through HotKeys; Close closes the writers, which makes what they
	// took durable, then the archive. ArchiveName names them in the
	// errors of their appends (a flag, "--out-parquet").
	Archive     *archive.Archive
	Reports     *archive.ReportWriter
	HotKeys     *archive.HotKeyWriter
	ArchiveName string
	// ClickHouse takes the outputs and acknowledges each once written.
	ClickHouse *clickhouse.Writer
}

// ReplayOutputs is the ReplaySink that sends a replay's outputs where
// ReplayTo says, and keeps their books in a ledger: an output is done
// once every destination acknowledged it. A refusal, or an
// acknowledgement that failed (ClickHouse refusing a write), stops the
// replay: the next HotKey or Report returns it. The outputs carry the IDs
// the live service would give them, so a replay run again sends the same
// outputs again and the sinks' deduplication by ID applies.
type ReplayOutputs struct {
	to      ReplayTo
	ctx     context.Context
	led     *ledger.Ledger[struct{}]
	hot     *ledger.Fanout[struct{}, *schemas.HotKeyEvent]
	reports *ledger.Fanout[struct{}, *schemas.WindowReport]
	err     error // the first failed acknowledgement
}

var _ ReplaySink = (*ReplayOutputs)(nil)

// NewReplayOutputs returns the sink of a replay sending to to; ctx bounds
// each ClickHouse write's wait for room.
func NewReplayOutputs(ctx context.Context, to ReplayTo) *ReplayOutputs {
	o := &ReplayOutputs{to: to, ctx: ctx}
	o.led = ledger.New(func(struct{}) {}, func(_ struct{}, err error) {
		if o.err == nil {
			o.err = err
		}
	})
	var (
		hotArch []ledger.Appender[*schemas.HotKeyEvent]
		repArch []ledger.Appender[*schemas.WindowReport]
		hotTo   []ledger.Destination[*schemas.HotKeyEvent]
		repTo   []ledger.Destination[*schemas.WindowReport]
	)
	if to.Archive != nil {
		hotArch = append(hotArch, closing[*schemas.HotKeyEvent]{to.ArchiveName, to.HotKeys.Append, to.HotKeys.Close})
		repArch = append(repArch, closing[*schemas.WindowReport]{to.ArchiveName, to.Reports.Append, to.Reports.Close})
	}
	if w := to.ClickHouse; w != nil {
		hotTo = append(hotTo, chDest[*schemas.HotKeyEvent](w.WriteHotKey))
		repTo = append(repTo, chDest[*schemas.WindowReport](w.WriteReport))
	}
	o.hot = ledger.NewFanout(o.led, hotArch, hotTo)
	o.reports = ledger.NewFanout(o.led, repArch, repTo)
	return o
}

// HotKey prints h and sends it on.
func (o *ReplayOutputs) HotKey(h *schemas.HotKeyEvent) error {
	if o.to.Print != nil {
		if err := o.to.Print.HotKey(h); err != nil {
			return err
		}
	}
	return o.sent(o.hot.Send(o.ctx, struct{}{}, h))
}

// Report prints r and sends it on.
func (o *ReplayOutputs) Report(r *schemas.WindowReport) error {
	if o.to.Print != nil {
		if err := o.to.Print.Report(r); err != nil {
			return err
		}
	}
	return o.sent(o.reports.Send(o.ctx, struct{}{}, r))
}

// sent returns a send's refusal, or else the first acknowledgement that
// failed so far.
func (o *ReplayOutputs) sent(err error) error {
	if err != nil {
		return err
	}
	o.led.Apply()
	return o.err
}

// Close makes every output durable (the archive's once its writers
// closed, ClickHouse's once its writer wrote what it holds, waiting up to
// timeout) and says whether all of it got there.
func (o *ReplayOutputs) Close(ctx context.Context, timeout time.Duration) error {
	var errs []error
	if o.to.Archive != nil {
		// Flushing closes the writers (closing), when they took anything;
		// closing them again is a no-op otherwise.
		errs = append(errs, o.reports.Flush(ctx), o.hot.Flush(ctx),
			o.to.Reports.Close(), o.to.HotKeys.Close(), o.to.Archive.Close())
	}
	if o.to.ClickHouse != nil {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
		errs = append(errs, o.to.ClickHouse.Close(cctx))
		cancel()
		o.led.Apply() // Close returns once every write was acknowledged
		errs = append(errs, o.err)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("replay: %w", err)
	}
	return nil
}

// closing is an archive writer as a replay's appender: what it took is
// durable once it is closed, which a replay does once, at its end.
type closing[T any] struct {
	name   string
	append func(T) error
	close  func() error
}

func (c closing[T]) Append(v T) error {
	if err := c.append(v); err != nil {
		return fmt.Errorf("%s: %w", c.name, err)
	}
	return nil
}

func (c closing[T]) Flush(context.Context) error { return c.close() }

// chDest is a ClickHouse writer's write as a destination: it waits for
// room until ctx ends, and acknowledges once the row is written.
type chDest[T any] func(ctx context.Context, v T, ack clickhouse.AckFunc) error

func (d chDest[T]) Send(ctx context.Context, v T, ack func(error)) error {
	err := d(ctx, v, func(err error) {
		if err != nil {
			err = fmt.Errorf("clickhouse: %w", err)
		}
		ack(err)
	})
	if err != nil {
		return fmt.Errorf("clickhouse: %w", err)
	}
	return nil
}
