package demo

import (
	"context"
	"errors"
	"net"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/keyheat/keyheat/internal/testenv"
	"github.com/keyheat/keyheat/schemas"
)

func TestStartChecksOptions(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    Options
		want string
	}{
		{"rate", Options{Keys: 10}, "--rate must be positive"},
		{"hot", Options{Rate: 10, Keys: 10, Hot: []string{"key=x"}}, "share"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := Start(tc.o)
			require.ErrorContains(t, err, tc.want)
			require.Nil(t, d)
		})
	}
}

// TestStartPortTaken: a taken port says what to do.
func TestStartPortTaken(t *testing.T) {
	d, err := Start(Options{Rate: 10, Keys: 10})
	require.NoError(t, err)
	defer d.Close()
	_, port, err := net.SplitHostPort(d.Addr())
	require.NoError(t, err)
	p, err := strconv.Atoi(port)
	require.NoError(t, err)
	_, err = Start(Options{Port: p, Rate: 10, Keys: 10})
	require.ErrorContains(t, err, "port "+port+" is taken (a Kafka running already?): pass --port=0 for a free one")
}

func TestHeader(t *testing.T) {
	d, err := Start(Options{Rate: 10_000, Keys: 100_000})
	require.NoError(t, err)
	defer d.Close()
	require.Equal(t, "keyheat demo: Kafka on "+d.Addr()+", 10000 events/s over 100000 keys, planted product:42 at 5s for 20s (20%), "+
		`cart:7 at 35s for 15s (15%); hot at 1000 events/s (rule "default"). Ctrl-C stops.`, d.Header(1000, "default"))
}

// TestRun: the traffic waits for the service to be ready, then fills the
// events topic Run made (dead letters aside, with the planted key among
// the events); the view prints its header, and both end with ctx.
func TestRun(t *testing.T) {
	d, err := Start(Options{Rate: 2000, Keys: 100, Hot: []string{"key=product:42,share=50%"}})
	require.NoError(t, err)
	defer d.Close()
	codec, err := schemas.CodecByName("json")
	require.NoError(t, err)
	opts := []kgo.Opt{kgo.SeedBrokers(d.Addr())}
	var ready atomic.Bool
	var asked atomic.Int64
	out := &testenv.SyncBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	wait, err := d.Run(ctx, RunConfig{ClientOpts: opts, Events: "keyheat.events", DLQ: "keyheat.events.dlq", Hotkeys: "keyheat.hotkeys",
		Reports: "keyheat.reports", Partitions: 3, ReplicationFactor: 1, Codec: codec, Out: out, Header: "the header",
		Ready: func() error {
			asked.Add(1)
			if !ready.Load() {
				return errors.New("starting")
			}
			return nil
		}})
	require.NoError(t, err)

	cl, err := kgo.NewClient(opts...)
	require.NoError(t, err)
	defer cl.Close()
	adm := kadm.NewClient(cl)
	total := func() int64 {
		ends, err := adm.ListEndOffsets(ctx, "keyheat.events")
		require.NoError(t, err)
		var n int64
		ends.Each(func(o kadm.ListedOffset) { n += o.Offset })
		return n
	}
	testenv.Eventually(t, "the traffic asking three times whether detect is ready", func() bool { return asked.Load() >= 3 })
	require.Zero(t, total(), "no event before the service is ready")
	td, err := adm.ListTopics(ctx, "keyheat.events")
	require.NoError(t, err)
	require.Len(t, td["keyheat.events"].Partitions, 3, "the events topic made by Run")
	ready.Store(true)
	testenv.Eventually(t, "events on the topic", func() bool { return total() > 0 })
	testenv.Eventually(t, "the header", func() bool { return regexpMatch(`^the header$`, out.String()) })

	cons, err := kgo.NewClient(append(opts, kgo.ConsumeTopics("keyheat.events"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))...)
	require.NoError(t, err)
	defer cons.Close()
	var planted bool
	for !planted {
		fs := cons.PollFetches(ctx)
		require.NoError(t, fs.Err())
		fs.EachRecord(func(r *kgo.Record) {
			var e schemas.AccessEvent
			require.NoError(t, schemas.DecodeAny(r.Value, &e))
			require.Equal(t, "shop", e.App)
			require.Equal(t, e.Key, string(r.Key), "keyed by access key")
			planted = planted || e.Key == "product:42"
		})
	}
	cancel()
	wait()
}

// TestWaitReady: a stop ends the wait.
func TestWaitReady(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	require.ErrorIs(t, waitReady(ctx, func() error { return errors.New("starting") }), context.Canceled)
	require.NoError(t, waitReady(ctx, nil))
}
