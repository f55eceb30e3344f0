package ledger

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

type book struct {
	done   []string
	failed []string
}

func newBook() (*Ledger[string], *book) {
	b := &book{}
	return New(func(k string) { b.done = append(b.done, k) },
		func(k string, err error) { b.failed = append(b.failed, k+": "+err.Error()) }), b
}

func TestDoneOnceEveryDestinationAcknowledged(t *testing.T) {
	l, b := newBook()
	t1 := l.Add("hot", 3)
	kafka, tomb, ch := l.Sent(t1), l.Sent(t1), l.Sent(t1)
	require.Equal(t, 3, l.Pending())
	kafka(nil)
	tomb(nil)
	l.Apply()
	require.Empty(t, b.done, "two of three acknowledged")
	require.Equal(t, 1, l.Pending())
	ch(nil)
	select {
	case <-l.Ready():
	default:
		t.Fatal("an acknowledgement posted leaves a token")
	}
	l.Apply()
	require.Equal(t, []string{"hot"}, b.done)
	require.Zero(t, l.Pending())

	// None to wait for: done at once.
	l.Add("empty window", 0)
	require.Equal(t, []string{"hot", "empty window"}, b.done)
}

// Two outputs for the same thing are two outputs: each is done on its own.
func TestSameKeyTwice(t *testing.T) {
	l, b := newBook()
	a, c := l.Add("w", 1), l.Add("w", 1)
	ackA, ackC := l.Sent(a), l.Sent(c)
	ackC(nil)
	l.Apply()
	require.Equal(t, []string{"w"}, b.done)
	ackA(nil)
	l.Apply()
	require.Equal(t, []string{"w", "w"}, b.done)
}

func TestFailedAckHoldsForGood(t *testing.T) {
	l, b := newBook()
	t1 := l.AddHeld("dlq 10", 1, 10)
	t2 := l.AddHeld("dlq 12", 1, 12)
	ack1, ack2 := l.Sent(t1), l.Sent(t2)
	ack1(errors.New("refused"))
	ack2(nil)
	l.Apply()
	require.Equal(t, []string{"dlq 10: refused"}, b.failed)
	require.Equal(t, []string{"dlq 12"}, b.done)
	require.Zero(t, l.Pending(), "a failure is no longer in flight")
	f, ok := l.Floor()
	require.True(t, ok)
	require.EqualValues(t, 10, f, "a failed output still holds its offset")
	l.Ack(t1) // nothing completes it but a real acknowledgement
	f, ok = l.Floor()
	require.False(t, ok, "held no more once acknowledged: %d", f)
}

func TestFloorFollowsTheOldestNotDone(t *testing.T) {
	l, _ := newBook()
	var acks []func(error)
	for _, off := range []int64{3, 5, 9} {
		acks = append(acks, l.Sent(l.AddHeld("d", 1, off)))
	}
	l.Add("window", 1) // holds nothing
	f, _ := l.Floor()
	require.EqualValues(t, 3, f)
	acks[1](nil)
	l.Apply()
	f, _ = l.Floor()
	require.EqualValues(t, 3, f, "out of order: the oldest still holds")
	acks[0](nil)
	l.Apply()
	f, _ = l.Floor()
	require.EqualValues(t, 9, f)

	// Holds added out of order still give the lowest.
	l.AddHeld("late", 1, 4)
	f, _ = l.Floor()
	require.EqualValues(t, 4, f)
}

func TestUnsentStaysOpen(t *testing.T) {
	l, b := newBook()
	t1 := l.AddHeld("hot", 2, 7)
	l.Sent(t1)(nil)
	l.Sent(t1) // the write was refused before it was taken
	l.Unsent()
	require.Equal(t, 1, l.Pending())
	l.Apply()
	require.Zero(t, l.Pending())
	require.Empty(t, b.done)
	f, ok := l.Floor()
	require.True(t, ok)
	require.EqualValues(t, 7, f)
}

func TestResetIgnoresLateAcknowledgements(t *testing.T) {
	l, b := newBook()
	ack := l.Sent(l.AddHeld("old", 1, 1))
	l.Reset()
	_, ok := l.Floor()
	require.False(t, ok)
	require.Equal(t, 1, l.Pending(), "still in flight after a reset")
	ack(nil)
	l.Apply()
	require.Empty(t, b.done)
	require.Zero(t, l.Pending())
}

// Acknowledgements come from other goroutines while the owner applies.
func TestWaitDrainsConcurrentAcks(t *testing.T) {
	l, b := newBook()
	var wg sync.WaitGroup
	for range 100 {
		ack := l.Sent(l.Add("x", 1))
		wg.Go(func() { ack(nil) })
	}
	require.True(t, l.Wait(context.Background()))
	wg.Wait()
	require.Len(t, b.done, 100)

	l.Sent(l.Add("never", 1))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	require.False(t, l.Wait(ctx), "ctx ended with one in flight")
}

type fakeAppender struct {
	appended, durable []string
	fail              error // of Flush
	refuse            error // of Append
}

func (a *fakeAppender) Append(v string) error {
	if a.refuse != nil {
		return a.refuse
	}
	a.appended = append(a.appended, v)
	return nil
}
func (a *fakeAppender) Flush(context.Context) error {
	if a.fail != nil {
		return a.fail
	}
	a.durable = append(a.durable, a.appended...)
	a.appended = nil
	return nil
}

func TestArchiveAcknowledgesOnFlush(t *testing.T) {
	l, b := newBook()
	w := &fakeAppender{}
	a := NewArchive(l, w)
	t1 := l.Add("hot", 2)
	l.Sent(t1)(nil)
	require.NoError(t, a.Append(t1, "h1"))
	l.Apply()
	require.Empty(t, b.done, "appended is not durable")
	require.Zero(t, l.Pending(), "an archive's output is not in flight: a drain does not wait for it")

	w.fail = errors.New("disk full")
	require.Error(t, a.Flush(context.Background()))
	require.Empty(t, b.done, "a failed flush acknowledges nothing")
	require.Equal(t, 1, a.Unflushed())

	w.fail = nil
	require.NoError(t, a.Flush(context.Background()))
	require.Equal(t, []string{"hot"}, b.done)
	require.Equal(t, []string{"h1"}, w.durable)
	require.Zero(t, a.Unflushed())
}

// A merger given up with reports in flight is elected again and emits
// the same window anew: the late acknowledgements of the first copies
// must not count for the second, or the window would be done (and
// committed past) before the new copies are out. The inbox this ledger
// replaced counted by window start and had exactly that hole.
func TestResetLateAcksNeverCompleteANewOutput(t *testing.T) {
	l, b := newBook()
	t1 := l.AddHeld("window 1000", 2, 4)
	stale1, stale2 := l.Sent(t1), l.Sent(t1)
	l.Reset()

	t2 := l.AddHeld("window 1000", 2, 4) // the same window, emitted again
	fresh := l.Sent(t2)
	stale1(nil)
	stale2(errors.New("cancelled by the give-up"))
	l.Apply()
	require.Empty(t, b.done, "the first copies' acknowledgements complete nothing")
	require.Empty(t, b.failed, "nor fail the new owner's output")
	f, ok := l.Floor()
	require.True(t, ok)
	require.EqualValues(t, 4, f, "the new copy still holds its offset")

	fresh(nil)
	l.Sent(t2)(nil)
	l.Apply()
	require.Equal(t, []string{"window 1000"}, b.done)
	_, ok = l.Floor()
	require.False(t, ok)
	require.Zero(t, l.Pending())
}
