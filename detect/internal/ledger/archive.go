package ledger

import "context"

// Appender is a destination that takes outputs at once and makes them
// durable when flushed, as the Parquet archive's writers do.
type Appender[T any] interface {
	Append(v T) error
	Flush(ctx context.Context) error
}

// Archive acknowledges the outputs appended to an Appender once a flush
// made them durable.
type Archive[K, T any] struct {
	w        Appender[T]
	l        *Ledger[K]
	unsynced []Ticket
}

// NewArchive returns an Archive appending to w on l's behalf.
func NewArchive[K, T any](l *Ledger[K], w Appender[T]) *Archive[K, T] {
	return &Archive[K, T]{w: w, l: l}
}

// Append appends v, an output of t; an error means it was not taken.
func (a *Archive[K, T]) Append(t Ticket, v T) error {
	if err := a.w.Append(v); err != nil {
		return err
	}
	a.unsynced = append(a.unsynced, t)
	return nil
}

// Unflushed is how many outputs wait for a flush.
func (a *Archive[K, T]) Unflushed() int { return len(a.unsynced) }

// Flush makes what was appended durable and acknowledges it. On an error
// nothing is acknowledged.
func (a *Archive[K, T]) Flush(ctx context.Context) error {
	if len(a.unsynced) == 0 {
		return nil
	}
	if err := a.w.Flush(ctx); err != nil {
		return err
	}
	for _, t := range a.unsynced {
		a.l.Ack(t)
	}
	a.unsynced = a.unsynced[:0]
	return nil
}
