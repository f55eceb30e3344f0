package hotkeys

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/keyheat/keyheat/internal/testenv"
)

// closeGuard bounds a wait that must end by itself in a moment; it is a
// hang guard, not a measure: on the slowest machine the condition comes
// in milliseconds or not at all.
const closeGuard = testenv.HangGuard

// TestReporterSecondCloseKeepsToItsCtx: Close waits until Kafka answered
// every event or ctx ends. A second Close, called while a first one waits
// (the broker down, the first's ctx long), keeps to its own ctx: a
// shutdown path that gives Close one second is not held for as long as
// another caller's ctx lasts.
func TestReporterSecondCloseKeepsToItsCtx(t *testing.T) {
	verifyNoLeaks(t)
	b := testenv.RestartableKFake(t)
	topic := testenv.NewTopic(t, b.Seeds(), 1)
	r := newTestReporter(t, b.Seeds(), topic, ReporterConfig{})
	b.Stop(t)
	for i := range 10 {
		r.Record("shop", reportedKey(i), "GET", 0)
	}

	// The first Close waits for a broker that is down, under a ctx only
	// the test ends.
	ctx1, cancel1 := context.WithCancel(context.Background())
	defer cancel1()
	first := make(chan error, 1)
	go func() { first <- r.Close(ctx1) }()
	testenv.Eventually(t, "the first Close to begin", func() bool {
		select {
		case <-r.quit:
			return true
		default:
			return false
		}
	})

	// The second Close has a ctx that has already ended: it has nothing
	// to wait for.
	ctx2, cancel2 := context.WithCancel(context.Background())
	cancel2()
	second := make(chan error, 1)
	go func() { second <- r.Close(ctx2) }()
	var returned bool
	select {
	case <-second:
		returned = true
	case <-time.After(closeGuard):
	}
	cancel1() // lets the first Close, and then the second, return
	<-first
	if !returned {
		<-second
	}
	b.Start(t) // for the topic's deletion
	require.True(t, returned, "a Close whose ctx had ended was still waiting %v later, for the first Close's ctx", closeGuard)
}

// TestReporterCloseKeepsToCtxWithKgoBound: an option in
// ReporterConfig.ClientOpts overrides the reporter's own, and a common
// producer setting, kgo.MaxBufferedRecords, then bounds franz-go's buffer
// below what the reporter holds. With the broker down, Close's own
// produce of the stripes' buffers waits in kgo.Produce for room that
// never comes: it gives up when Close's ctx ends, not when the broker
// comes back.
func TestReporterCloseKeepsToCtxWithKgoBound(t *testing.T) {
	verifyNoLeaks(t)
	b := testenv.RestartableKFake(t)
	topic := testenv.NewTopic(t, b.Seeds(), 1)
	r := newTestReporter(t, b.Seeds(), topic, ReporterConfig{
		FlushInterval: time.Hour, // only Close produces
		ClientOpts:    []kgo.Opt{kgo.MaxBufferedRecords(100)},
	})
	b.Stop(t)
	const n = 1000
	for i := range n {
		r.Record("shop", reportedKey(i), "GET", 0)
	}
	require.Equal(t, int64(n), r.Stats().Pending)

	// The context's end is the point of the test, not a bound on a wait.
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- r.Close(ctx) }()
	var err error
	var returned bool
	select {
	case err = <-done:
		returned = true
	case <-time.After(closeGuard):
	}
	b.Start(t) // lets a stuck Close go on, and the topic be deleted
	if !returned {
		err = <-done
	}
	require.True(t, returned, "Close was still waiting %v after its ctx ended, for the broker", closeGuard)
	require.ErrorIs(t, err, context.DeadlineExceeded)
}

// TestReporterFailedMayHaveReachedKafka: an event Close gives up on may
// be in a produce request the broker is handling: the broker here holds
// the reporter's first produce request until Close has given up, then
// writes it. Failed counts it (not acknowledged), and says it may have
// been written: a reader of the topic finds between Sent and Sent +
// Failed of the events, here all of them.
func TestReporterFailedMayHaveReachedKafka(t *testing.T) {
	verifyNoLeaks(t)
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	require.NoError(t, err)
	t.Cleanup(c.Close)
	seeds := c.ListenAddrs()
	topic := testenv.NewTopic(t, seeds, 1)

	held, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	c.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		once.Do(func() {
			close(held)
			c.SleepControl(func() { <-release })
		})
		return nil, nil, false // then the broker handles the request as ever
	})

	r := newTestReporter(t, seeds, topic, ReporterConfig{FlushInterval: time.Millisecond})
	const n = 10
	for i := range n {
		r.Record("shop", reportedKey(i), "GET", 0)
	}
	<-held
	// The context's end is the point of the test, not a bound on a wait.
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	err = r.Close(ctx)
	require.ErrorContains(t, err, "10 of 10 events buffered were not acknowledged by kafka (refused, or given up on: those may still have been written)")
	st := r.Stats()
	require.Equal(t, ReporterStats{Recorded: n, Failed: n}, st)
	close(release)

	// Give the broker until the hang guard to write what it was sent.
	var recs []*kgo.Record
	deadline := time.Now().Add(closeGuard)
	for len(recs) == 0 && time.Now().Before(deadline) {
		recs = testenv.ReadCommitted(t, seeds, topic)
		time.Sleep(50 * time.Millisecond)
	}
	require.Len(t, recs, int(st.Sent+st.Failed), "the events given up on were written after all")
}
