package ingest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/keyheat/keyheat/internal/kgolog"
	"github.com/keyheat/keyheat/schemas"
)

// ProducerOptions are the producer's settings a config file sets (under
// ingest:, by their mapstructure tags). DefaultProducerOptions has the
// defaults; NewProducer takes a zero Compression or MaxBufferedRecords as
// the default, while Linger 0 sends batches without waiting.
type ProducerOptions struct {
	// Compression of produced batches, one of Compressions.
	Compression string `mapstructure:"compression"`
	// Linger is how long a partition's batch waits to fill.
	Linger time.Duration `mapstructure:"linger"`
	// MaxBufferedRecords bounds records produced but not yet
	// acknowledged; producing blocks beyond it (backpressure).
	MaxBufferedRecords int `mapstructure:"max_buffered_records"`
}

// DefaultProducerOptions: zstd, 5ms linger, 100,000 records in flight.
func DefaultProducerOptions() ProducerOptions {
	return ProducerOptions{Compression: compressions[0].name, Linger: 5 * time.Millisecond, MaxBufferedRecords: 100_000}
}

// compressions are the batch compressions by name, in the order
// Compressions lists them; the first is the default. Never written after
// initialisation: a table, not state.
var compressions = []struct {
	name  string
	codec func() kgo.CompressionCodec
}{
	{"zstd", kgo.ZstdCompression},
	{"lz4", kgo.Lz4Compression},
	{"snappy", kgo.SnappyCompression},
	{"gzip", kgo.GzipCompression},
	{"none", kgo.NoCompression},
}

// Compressions returns the names ProducerOptions.Compression accepts, the
// default first.
func Compressions() []string {
	names := make([]string, len(compressions))
	for i, c := range compressions {
		names[i] = c.name
	}
	return names
}

// Validate returns every unusable option, each an *OptionError, joined.
// Zero values are checked as they are, not as NewProducer would fill them.
func (o ProducerOptions) Validate() error {
	var p optionErrors
	if _, ok := compressionCodec(o.Compression); !ok {
		p.add("compression", "%q is not one of %s", o.Compression, strings.Join(Compressions(), ", "))
	}
	if o.Linger < 0 {
		p.add("linger", "must not be negative; 0 sends batches without waiting")
	}
	if o.MaxBufferedRecords < 1 {
		p.add("max_buffered_records", "must be at least 1, e.g. 100000")
	}
	return p.err()
}

// withDefaults fills the zero values that have no meaning of their own.
func (o ProducerOptions) withDefaults() ProducerOptions {
	def := DefaultProducerOptions()
	if o.Compression == "" {
		o.Compression = def.Compression
	}
	if o.MaxBufferedRecords == 0 {
		o.MaxBufferedRecords = def.MaxBufferedRecords
	}
	return o
}

func compressionCodec(name string) (kgo.CompressionCodec, bool) {
	for _, c := range compressions {
		if c.name == name {
			return c.codec(), true
		}
	}
	return kgo.NoCompression(), false
}

// ProducerConfig configures a Producer: its options and what it runs with.
type ProducerConfig struct {
	ProducerOptions
	// ClientOpts connect to the brokers (config.Kafka.ClientOpts).
	ClientOpts []kgo.Opt
	// Topic receives events, keyed by access key.
	Topic string
	// DLQTopic receives dead letters.
	DLQTopic string
	// Codec encodes events; nil means JSON.
	Codec schemas.Codec
	// MaxBufferedBytes bounds the records in flight in bytes, besides
	// MaxBufferedRecords; default 64 MiB.
	MaxBufferedBytes int
	// TransactionalID makes a transactional producer (the tail's, see
	// TailOptions.TransactionalID); empty makes an idempotent one.
	TransactionalID string
	// TransactionTimeout is how long the broker lets a transaction stay
	// open before it aborts it; default 60s. A tail that dies with a
	// transaction open holds back read_committed readers of the
	// partitions it wrote for at most this long (its restart ends the
	// transaction at once).
	TransactionTimeout time.Duration
	// PositionsTopic is the tail's positions topic: its records always go
	// to partition 0, so one partition holds every position in order.
	PositionsTopic string
	// Health, when set, learns from the client whether Kafka answers.
	Health *KafkaHealth
	// Logger receives client errors; nil discards.
	Logger *slog.Logger
}

// validate checks c as NewProducer will use it: its options' zero values
// filled.
func (c *ProducerConfig) validate() error {
	var errs []error
	if c.Topic == "" {
		errs = append(errs, errors.New("events topic must be set"))
	}
	if c.DLQTopic == "" {
		errs = append(errs, errors.New("DLQ topic must be set"))
	}
	if c.MaxBufferedBytes < 0 || c.TransactionTimeout < 0 {
		errs = append(errs, errors.New("max buffered bytes and transaction timeout must not be negative"))
	}
	errs = append(errs, c.ProducerOptions.withDefaults().Validate())
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("producer: %w", err)
	}
	return nil
}

// Producer writes events and dead letters to Kafka with franz-go's
// idempotent producer (acks=all, so a retried batch is never duplicated by
// the broker and order per partition holds), or with its transactional
// producer when ProducerConfig.TransactionalID is set. Produce calls block
// while MaxBufferedRecords or MaxBufferedBytes are outstanding, so a slow
// broker slows reading instead of growing memory. Records are retried
// without a deadline: an unreachable broker is waited for.
type Producer struct {
	cl        *kgo.Client
	opts      []kgo.Opt // ProducerConfig.ClientOpts, for the clients that read positions
	topic     string
	dlq       string
	positions string
	txnID     string
	codec     schemas.Codec
	pool      sync.Pool
	promiseFn func(*kgo.Record, error) // p.promise, bound once
	closeOnce sync.Once
}

// record is a kgo.Record with what its promise needs. kgo.Record is the
// first field, so the *kgo.Record franz-go hands back to the promise is a
// pointer to our record: promise converts it back instead of allocating a
// closure per record. Records come from and return to a pool.
type record struct {
	kgo.Record
	hdr [1]kgo.RecordHeader
	buf []byte
	ack Acker
	seq uint64
	// stats, when set, is counted in once Kafka answered: as an event, or
	// as a dead letter of reason index dlq (>= 0). Carried here instead of
	// in a wrapping Acker, which would allocate per record.
	stats *Stats
	dlq   int
}

// NewProducer connects a producer. It does not contact the brokers yet.
func NewProducer(cfg ProducerConfig) (*Producer, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	opt := cfg.ProducerOptions.withDefaults()
	comp, _ := compressionCodec(opt.Compression)
	maxBytes := cfg.MaxBufferedBytes
	if maxBytes == 0 {
		maxBytes = 64 << 20
	}
	codec := cfg.Codec
	if codec == nil {
		codec = schemas.JSON
	}
	opts := append([]kgo.Opt{
		kgo.RequiredAcks(kgo.AllISRAcks()), // the idempotent producer requires it; stated for the reader
		kgo.ProducerBatchCompression(comp),
		kgo.ProducerLinger(opt.Linger),
		kgo.MaxBufferedRecords(opt.MaxBufferedRecords),
		kgo.MaxBufferedBytes(maxBytes),
		kgo.ProducerBatchMaxBytes(1 << 20),
	}, cfg.ClientOpts...)
	if cfg.TransactionalID != "" {
		timeout := cfg.TransactionTimeout
		if timeout == 0 {
			timeout = 60 * time.Second
		}
		opts = append(opts, kgo.TransactionalID(cfg.TransactionalID), kgo.TransactionTimeout(timeout))
	}
	if cfg.PositionsTopic != "" {
		opts = append(opts, kgo.RecordPartitioner(pinnedPartitioner{topic: cfg.PositionsTopic,
			base: kgo.UniformBytesPartitioner(64<<10, true, true, nil)}))
	}
	opts = append(opts, clientLogOpts(cfg.Logger, cfg.Health)...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("kafka client: %w", err)
	}
	p := &Producer{cl: cl, opts: append(slices.Clone(cfg.ClientOpts), clientLogOpts(cfg.Logger, cfg.Health)...), topic: cfg.Topic,
		dlq: cfg.DLQTopic, positions: cfg.PositionsTopic, txnID: cfg.TransactionalID, codec: codec}
	p.pool.New = func() any { return &record{} }
	p.promiseFn = p.promise
	return p, nil
}

// Client returns the underlying franz-go client (for Ping and admin use).
func (p *Producer) Client() *kgo.Client { return p.cl }

// clientLogOpts are the options that give a client our logger and health
// hooks.
func clientLogOpts(log *slog.Logger, h *KafkaHealth) []kgo.Opt {
	var opts []kgo.Opt
	if log != nil {
		var quiet []kgolog.Option
		if h != nil {
			quiet = append(quiet, kgolog.Quiet(h.Unreachable))
		}
		opts = append(opts, kgo.WithLogger(kgolog.New(log, quiet...)))
	}
	if h != nil {
		opts = append(opts, kgo.WithHooks(h.hook()))
	}
	return opts
}

// Event produces e to the events topic with record key e.Key and the
// keyheat-id header of the schemas.RecordID whose Prefix is idPrefix,
// whose offset is idOffset and whose Index is 0. ack.Ack(seq, err) is
// called once Kafka acknowledged or finally refused the record. It blocks
// while the buffer is full; if ctx ends first the record is not produced,
// ack hears ctx's error, and Event returns it.
func (p *Producer) Event(ctx context.Context, e *schemas.AccessEvent, idPrefix string, idOffset int64, ack Acker, seq uint64) error {
	return p.event(ctx, e, idPrefix, idOffset, 0, ack, seq, nil)
}

func (p *Producer) event(ctx context.Context, e *schemas.AccessEvent, idPrefix string, idOffset int64, index int, ack Acker, seq uint64, stats *Stats) error {
	r := p.get()
	r.stats, r.dlq = stats, -1
	b := r.buf[:0]
	b = append(b, e.Key...)
	kl := len(b)
	b = p.codec.Append(b, e)
	vl := len(b)
	b = schemas.AppendRecordID(b, idPrefix, idOffset, index)
	r.buf = b
	r.Topic = p.topic
	r.Key = b[:kl:kl]
	r.Value = b[kl:vl:vl]
	r.hdr[0] = kgo.RecordHeader{Key: schemas.HeaderRecordID, Value: b[vl:]}
	return p.produce(ctx, r, ack, seq)
}

// DeadLetter produces d to the DLQ topic, like Event.
func (p *Producer) DeadLetter(ctx context.Context, d *schemas.DeadLetter, idPrefix string, idOffset int64, ack Acker, seq uint64) error {
	return p.deadLetter(ctx, d, idPrefix, idOffset, ack, seq, nil)
}

func (p *Producer) deadLetter(ctx context.Context, d *schemas.DeadLetter, idPrefix string, idOffset int64, ack Acker, seq uint64, stats *Stats) error {
	r := p.get()
	r.stats, r.dlq = stats, reasonIndex(d.Reason)
	b := schemas.AppendDeadLetter(r.buf[:0], d)
	vl := len(b)
	b = schemas.AppendRecordID(b, idPrefix, idOffset, 0)
	r.buf = b
	r.Topic = p.dlq
	r.Key = nil
	r.Value = b[:vl:vl]
	r.hdr[0] = kgo.RecordHeader{Key: schemas.HeaderRecordID, Value: b[vl:]}
	return p.produce(ctx, r, ack, seq)
}

func (p *Producer) get() *record {
	r := p.pool.Get().(*record)
	buf := r.buf
	*r = record{buf: buf}
	r.Headers = r.hdr[:]
	return r
}

func (p *Producer) produce(ctx context.Context, r *record, ack Acker, seq uint64) error {
	r.ack, r.seq = ack, seq
	// The record's own context is not ctx: ctx bounds only the wait for
	// buffer space. Were it the record's, cancelling reading on SIGINT
	// would fail records already buffered instead of letting Flush deliver
	// them. When ctx ends during the wait, franz-go fails the record with
	// ctx's error through the promise, so ack still hears of it.
	r.Context = context.Background()
	p.cl.Produce(ctx, &r.Record, p.promiseFn)
	return ctx.Err()
}

// promise runs on franz-go's promise goroutine.
func (p *Producer) promise(kr *kgo.Record, err error) {
	r := (*record)(unsafe.Pointer(kr)) //nolint:gosec // kr is &record.Record, see record
	ack, seq := r.ack, r.seq
	if s := r.stats; s != nil {
		// Counted once Kafka answered, so totals are what is on Kafka.
		switch {
		case err != nil:
			if refused(err) {
				s.Failed.Add(1)
			}
		case r.dlq < 0:
			s.Events.Add(1)
		default:
			s.DLQ.Add(1)
			s.dlq[r.dlq].Add(1)
		}
	}
	if cap(r.buf) <= 64<<10 {
		p.pool.Put(r)
	}
	ack.Ack(seq, err)
}

// refused reports whether err is Kafka refusing a record, rather than
// ingest not sending it (stopping, giving up).
func refused(err error) bool {
	return !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) &&
		!errors.Is(err, kgo.ErrAborting) && !errors.Is(err, kgo.ErrClientClosed)
}

// Flush waits until every record produced so far is acknowledged or failed.
func (p *Producer) Flush(ctx context.Context) error { return p.cl.Flush(ctx) }

// abandon fails every record not yet acknowledged at once, without
// waiting for requests in flight: what a source that gives up on Kafka
// does before it writes down what was not delivered. A record in flight
// may still have reached the broker; its Acker hears an error anyway.
func (p *Producer) abandon() { p.cl.UnsafeAbortBufferedRecords() }

// Close closes the client without flushing: records still buffered fail
// (their Acker sees kgo.ErrClientClosed), which is what a crash does. Call
// Flush first for a clean stop. Close is idempotent.
func (p *Producer) Close() { p.closeOnce.Do(p.cl.Close) }

// pinnedPartitioner sends every record of one topic to its partition 0
// and partitions the others with base.
type pinnedPartitioner struct {
	topic string
	base  kgo.Partitioner
}

func (p pinnedPartitioner) ForTopic(topic string) kgo.TopicPartitioner {
	if topic == p.topic {
		return partitionZero{}
	}
	return p.base.ForTopic(topic)
}

type partitionZero struct{}

func (partitionZero) RequiresConsistency(*kgo.Record) bool { return true }
func (partitionZero) Partition(*kgo.Record, int) int       { return 0 }
