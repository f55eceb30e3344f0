package ledger

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
)

// later is a destination that acknowledges when the test says, as a
// producer's promise does; refuse makes it refuse what it is sent.
type later struct {
	acks   []func(error)
	refuse error
}

func (d *later) Send(_ context.Context, _ string, ack func(error)) error {
	if d.refuse != nil {
		return d.refuse
	}
	d.acks = append(d.acks, ack)
	return nil
}

func TestFanoutDoneOnceEveryDestinationAndAppenderAcknowledged(t *testing.T) {
	ctx := context.Background()
	l, b := newBook()
	kafka, ch, arch := &later{}, &later{}, &fakeAppender{}
	f := NewFanout(l, []Appender[string]{arch}, []Destination[string]{kafka, ch})

	require.NoError(t, f.Send(ctx, "r1", "v1"))
	require.Equal(t, []string{"v1"}, arch.appended)
	require.Equal(t, 2, l.Pending(), "the destinations' acknowledgements are in flight; the appender's is not")
	kafka.acks[0](nil)
	ch.acks[0](nil)
	l.Apply()
	require.Empty(t, b.done, "appended, not flushed")
	require.NoError(t, f.Flush(ctx))
	require.Equal(t, []string{"r1"}, b.done)

	// A refusal: the output is never done, though the appender and the
	// destinations before the one that refused took it.
	ch.refuse = errors.New("full")
	require.ErrorIs(t, f.Send(ctx, "r2", "v2"), ch.refuse)
	require.Equal(t, []string{"v2"}, arch.appended, "appended before the refusal")
	require.Len(t, kafka.acks, 2, "sent before the refusal")
	require.Equal(t, 1, l.Pending(), "the refusing destination's acknowledgement is taken back")
	kafka.acks[1](nil)
	l.Apply()
	require.NoError(t, f.Flush(ctx))
	require.Equal(t, []string{"r1"}, b.done, "a refused output is never done")

	// An appender's refusal: no destination is sent it.
	ch.refuse = nil
	arch.refuse = errors.New("disk full")
	require.ErrorIs(t, f.Send(ctx, "r2b", "v2b"), arch.refuse)
	require.Len(t, kafka.acks, 2, "not sent after an appender refused")
	require.Zero(t, l.Pending())
	arch.refuse = nil

	// A failed acknowledgement is heard as such.
	require.NoError(t, f.Send(ctx, "r3", "v3"))
	kafka.acks[2](nil)
	ch.acks[1](errors.New("table gone"))
	l.Apply()
	require.Equal(t, []string{"r3: table gone"}, b.failed)
	require.NoError(t, f.Flush(ctx))
	require.Equal(t, []string{"r1"}, b.done)

	// No destination at all: done at once.
	none := NewFanout[string, string](l, nil, nil)
	require.NoError(t, none.Send(ctx, "r4", "v4"))
	require.Equal(t, []string{"r1", "r4"}, b.done)
}
