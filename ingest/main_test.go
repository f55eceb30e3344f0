package ingest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/goleak"

	"github.com/keyheat/keyheat/internal/testenv"
	"github.com/keyheat/keyheat/logparse"
	"github.com/keyheat/keyheat/schemas"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// kafkaEnv is a cluster with an events, a DLQ and a positions topic for
// one test.
type kafkaEnv struct {
	seeds                  []string
	events, dlq, positions string
	eventsParts            int32
}

func newKafkaEnv(t *testing.T, seeds []string, partitions int32) *kafkaEnv {
	t.Helper()
	return &kafkaEnv{seeds: seeds, events: testenv.NewTopic(t, seeds, partitions), dlq: testenv.NewTopic(t, seeds, 1),
		positions: testenv.NewTopicWithConfigs(t, seeds, 1, PositionsTopicConfigs()), eventsParts: partitions}
}

// tailProducer returns the transactional producer of a tail with opts
// (its TailID and PositionsTopic set), closed when the test ends.
func (k *kafkaEnv) tailProducer(t *testing.T, opts TailOptions, codec schemas.Codec) *Producer {
	t.Helper()
	p, err := NewProducer(ProducerConfig{
		ProducerOptions: ProducerOptions{Compression: "lz4", Linger: 2 * time.Millisecond, MaxBufferedRecords: 5000},
		ClientOpts:      []kgo.Opt{kgo.SeedBrokers(k.seeds...)},
		Topic:           k.events, DLQTopic: k.dlq, Codec: codec,
		TransactionalID: opts.TransactionalID(), PositionsTopic: opts.PositionsTopic, TransactionTimeout: 20 * time.Second,
	})
	require.NoError(t, err)
	t.Cleanup(p.Close)
	return p
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

// readAll returns every committed record of topic (testenv.ReadCommitted).
func readAll(t *testing.T, seeds []string, topic string) []*kgo.Record {
	t.Helper()
	return testenv.ReadCommitted(t, seeds, topic)
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
