package republish

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/keyheat/keyheat/internal/testenv"
	"github.com/keyheat/keyheat/schemas"
)

// rows yields its events in batches of batch, then io.EOF (or err).
type rows struct {
	all   []schemas.EventRow
	batch int
	err   error
}

func (r *rows) Read(dst []schemas.EventRow) (int, error) {
	if len(r.all) == 0 {
		if r.err != nil {
			return 0, r.err
		}
		return 0, io.EOF
	}
	n := copy(dst[:min(len(dst), r.batch)], r.all)
	r.all = r.all[n:]
	return n, nil
}

func archived(n int) []schemas.EventRow {
	out := make([]schemas.EventRow, n)
	for i := range out {
		e := schemas.AccessEvent{TimeMs: 1767225600000 + int64(i), App: "shop", Key: fmt.Sprintf("k%d", i%7), Op: "GET", Bytes: int64(i)}
		out[i] = schemas.MakeEventRow("keyheat.events", int32(i%3), int64(100+i/3), int32(i%2), &e)
	}
	return out
}

// TestRun: every archived event reaches the topic once, keyed by its
// access key, in the codec asked for, with the keyheat-id of the record
// it was archived from; progress counts what was sent.
func TestRun(t *testing.T) {
	seeds := testenv.KFake(t)
	topic := testenv.UniqueName(t, "replayed")
	codec, err := schemas.CodecByName("binary")
	require.NoError(t, err)
	in := archived(1000)
	var progress []int64
	n, err := Run(context.Background(), &rows{all: in, batch: 300}, Config{ClientOpts: []kgo.Opt{kgo.SeedBrokers(seeds...)},
		Topic: topic, CreateTopic: true, Partitions: 2, ReplicationFactor: 1, Setting: "--to-topic", Codec: codec,
		Progress: func(sent int64) { progress = append(progress, sent) }})
	require.NoError(t, err)
	require.EqualValues(t, len(in), n, "every event acknowledged")
	require.Equal(t, []int64{300, 600, 900, 1000, 1000}, progress, "after every batch read, the last with io.EOF")

	recs := testenv.ReadCommitted(t, seeds, topic)
	require.Len(t, recs, len(in))
	want := map[string]schemas.EventRow{}
	for _, row := range in {
		id := schemas.RecordID{Kind: schemas.IDTopic, Topic: row.Topic, Partition: row.Partition, Offset: row.Offset, Index: int(row.Index)}
		want[id.String()] = row
	}
	for _, r := range recs {
		require.Len(t, r.Headers, 1)
		require.Equal(t, schemas.HeaderRecordID, r.Headers[0].Key)
		row, ok := want[string(r.Headers[0].Value)]
		require.True(t, ok, "the id of an archived record: %s", r.Headers[0].Value)
		delete(want, string(r.Headers[0].Value))
		require.Equal(t, row.Key, string(r.Key))
		var e schemas.AccessEvent
		require.NoError(t, schemas.DecodeAny(r.Value, &e))
		require.Equal(t, row.Event(), e)
	}
	require.Empty(t, want, "each archived record once")
}

// TestRunMissingTopic: without CreateTopic a missing topic is an error
// naming the setting and kafka.create_topics, before anything is read.
func TestRunMissingTopic(t *testing.T) {
	seeds := testenv.KFake(t)
	topic := testenv.UniqueName(t, "replayed")
	codec, err := schemas.CodecByName("json")
	require.NoError(t, err)
	r := &rows{all: archived(10), batch: 10}
	_, err = Run(context.Background(), r, Config{ClientOpts: []kgo.Opt{kgo.SeedBrokers(seeds...)}, Topic: topic, Setting: "--to-topic", Codec: codec})
	require.ErrorContains(t, err, "--to-topic: ")
	require.ErrorContains(t, err, "kafka.create_topics")
	require.Len(t, r.all, 10, "nothing read")
}

// TestRunReadError: a read error stops the run, after what was read is
// acknowledged.
func TestRunReadError(t *testing.T) {
	seeds := testenv.KFake(t)
	codec, err := schemas.CodecByName("json")
	require.NoError(t, err)
	bad := errors.New("truncated file")
	n, err := Run(context.Background(), &rows{all: archived(10), batch: 4, err: bad}, Config{ClientOpts: []kgo.Opt{kgo.SeedBrokers(seeds...)},
		Topic: testenv.UniqueName(t, "replayed"), CreateTopic: true, Partitions: 1, ReplicationFactor: 1, Codec: codec})
	require.ErrorIs(t, err, bad)
	require.EqualValues(t, 10, n, "what was read before the error is acknowledged")
}

// TestPacer: the pacer sleeps until each event's time, scaled by the
// speed, has come since the first event; at max it never sleeps.
func TestPacer(t *testing.T) {
	tests := []struct {
		speed  float64
		tsMs   []int64
		sleeps []time.Duration
	}{
		{0, []int64{0, 10_000, 20_000}, nil},
		{1, []int64{0, 150, 300, 300}, []time.Duration{150 * time.Millisecond, 150 * time.Millisecond}},
		{10, []int64{0, 1500, 3000}, []time.Duration{150 * time.Millisecond, 150 * time.Millisecond}},
		{1, []int64{0, 0, 1}, nil}, // under a millisecond ahead: no sleep
	}
	for _, tc := range tests {
		t.Run(fmt.Sprint(tc.speed, tc.tsMs), func(t *testing.T) {
			clock := time.Unix(1000, 0)
			var slept []time.Duration
			p := newPacer(tc.speed)
			p.now = func() time.Time { return clock }
			p.sleep = func(_ context.Context, d time.Duration) error {
				slept = append(slept, d)
				clock = clock.Add(d)
				return nil
			}
			for _, ts := range tc.tsMs {
				require.NoError(t, p.wait(context.Background(), 1_000_000+ts))
			}
			require.Equal(t, tc.sleeps, slept, "sleeps until each event's scaled time")
		})
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	p := newPacer(1)
	require.NoError(t, p.wait(ctx, 0))
	require.ErrorIs(t, p.wait(ctx, 60_000), context.Canceled, "a stop ends the wait")
}
