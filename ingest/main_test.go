package ingest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/goleak"

	"github.com/keyheat/keyheat/internal/testenv"
	"github.com/keyheat/keyheat/logparse"
	"github.com/keyheat/keyheat/schemas"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// kafkaEnv is a cluster with an events and a DLQ topic for one test.
type kafkaEnv struct {
	seeds       []string
	events, dlq string
	eventsParts int32
}

func newKafkaEnv(t *testing.T, seeds []string, partitions int32) *kafkaEnv {
	t.Helper()
	return &kafkaEnv{seeds: seeds, events: testenv.NewTopic(t, seeds, partitions), dlq: testenv.NewTopic(t, seeds, 1), eventsParts: partitions}
}

func (k *kafkaEnv) producer(t *testing.T, codec schemas.Codec) *Producer {
	t.Helper()
	p, err := NewProducer(ProducerConfig{
		ProducerOptions: ProducerOptions{Compression: "lz4", Linger: 2 * time.Millisecond, MaxBufferedRecords: 5000},
		ClientOpts:      []kgo.Opt{kgo.SeedBrokers(k.seeds...)},
		Topic:           k.events, DLQTopic: k.dlq, Codec: codec,
	})
	require.NoError(t, err)
	t.Cleanup(p.Close)
	return p
}

// lineSender sends through p with parser, without the time-skew check
// (tests write fixed times), and with opts (zero: the defaults).
func lineSender(t *testing.T, p *Producer, parser logparse.Parser, opts LineOptions) *LineSender {
	t.Helper()
	pl, err := NewLineSender(LineSenderConfig{LineOptions: opts, Parser: parser, Producer: p, Limits: schemas.Limits{}})
	require.NoError(t, err)
	return pl
}

// readAll returns every record of topic up to its end offsets now.
func readAll(t *testing.T, seeds []string, topic string) []*kgo.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	adm, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	require.NoError(t, err)
	defer adm.Close()
	ends, err := kadm.NewClient(adm).ListEndOffsets(ctx, topic)
	require.NoError(t, err)
	want := int64(0)
	ends.Each(func(o kadm.ListedOffset) { want += o.Offset })
	if want == 0 {
		return nil
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond))
	require.NoError(t, err)
	defer cl.Close()
	var out []*kgo.Record
	for int64(len(out)) < want {
		fs := cl.PollFetches(ctx)
		require.NoError(t, ctx.Err(), "read %d of %d records of %s", len(out), want, topic)
		fs.EachError(func(_ string, _ int32, err error) { require.NoError(t, err) })
		out = append(out, fs.Records()...)
	}
	return out
}

func header(r *kgo.Record, key string) string {
	for _, h := range r.Headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}

func seqOf(t *testing.T, r *kgo.Record) int {
	t.Helper()
	var e schemas.AccessEvent
	require.NoError(t, schemas.DecodeAny(r.Value, &e))
	return int(e.Bytes)
}
