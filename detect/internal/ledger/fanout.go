package ledger

import "context"

// Destination takes outputs of type T and acknowledges each later, from
// any goroutine: a Kafka topic (a produce's promise), ClickHouse (its
// acknowledgement function), a printer (at once).
type Destination[T any] interface {
	// Send hands v over; ack hears, once, whether it got there. An error
	// means v was not taken, and ack is never called.
	Send(ctx context.Context, v T, ack func(error)) error
}

// Fanout sends outputs of type T to destinations and appenders, and
// counts each in a Ledger: an output is done once every one of them
// acknowledged it (an appender once flushed, see Archive). Like the
// ledger's, its methods belong to the owner.
type Fanout[K, T any] struct {
	l    *Ledger[K]
	to   []Destination[T]
	arch []*Archive[K, T]
}

// NewFanout returns a Fanout appending to the appenders of arch, then
// sending to the destinations of to, on l's behalf.
func NewFanout[K, T any](l *Ledger[K], arch []Appender[T], to []Destination[T]) *Fanout[K, T] {
	f := &Fanout[K, T]{l: l, to: to}
	for _, w := range arch {
		f.arch = append(f.arch, NewArchive(l, w))
	}
	return f
}

// Send records an output for k and hands v to every appender in order,
// then to every destination. It stops at the first that refuses v and
// returns its error: the output is never done then (whatever it holds
// stays held), though those before took it.
func (f *Fanout[K, T]) Send(ctx context.Context, k K, v T) error {
	t := f.l.Add(k, len(f.arch)+len(f.to))
	for _, a := range f.arch {
		if err := a.Append(t, v); err != nil {
			return err
		}
	}
	for _, d := range f.to {
		if err := d.Send(ctx, v, f.l.Sent(t)); err != nil {
			f.l.Unsent()
			return err
		}
	}
	return nil
}

// Flush flushes every appender in order, acknowledging what each took,
// and returns the first error.
func (f *Fanout[K, T]) Flush(ctx context.Context) error {
	for _, a := range f.arch {
		if err := a.Flush(ctx); err != nil {
			return err
		}
	}
	return nil
}
