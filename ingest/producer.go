package ingest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"
	"unsafe"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/keyheat/keyheat/schemas"
)

// ProducerConfig configures a Producer. Zero values take the defaults.
type ProducerConfig struct {
	// ClientOpts connect to the brokers (config.Kafka.ClientOpts).
	ClientOpts []kgo.Opt
	// Topic receives events, keyed by access key.
	Topic string
	// DLQTopic receives dead letters.
	DLQTopic string
	// Codec encodes events; nil means JSON.
	Codec schemas.Codec
	// Compression is zstd (default), lz4, snappy, gzip or none.
	Compression string
	// Linger is how long a partition's batch waits to fill; default 5ms.
	Linger time.Duration
	// MaxBufferedRecords bounds records produced but not yet
	// acknowledged; producing blocks beyond it (backpressure). Default 100000.
	MaxBufferedRecords int
	// MaxBufferedBytes bounds the same in bytes; default 64 MiB.
	MaxBufferedBytes int
	// Logger receives client errors; nil discards.
	Logger *slog.Logger
}

// Validate reports the first unusable setting.
func (c *ProducerConfig) Validate() error {
	switch {
	case c.Topic == "":
		return errors.New("producer: events topic must be set")
	case c.DLQTopic == "":
		return errors.New("producer: DLQ topic must be set")
	case c.Linger < 0:
		return errors.New("producer: linger must not be negative")
	case c.MaxBufferedRecords < 0 || c.MaxBufferedBytes < 0:
		return errors.New("producer: buffer bounds must not be negative")
	}
	_, err := compressionCodec(c.Compression)
	return err
}

func compressionCodec(name string) (kgo.CompressionCodec, error) {
	switch name {
	case "", "zstd":
		return kgo.ZstdCompression(), nil
	case "lz4":
		return kgo.Lz4Compression(), nil
	case "snappy":
		return kgo.SnappyCompression(), nil
	case "gzip":
		return kgo.GzipCompression(), nil
	case "none":
		return kgo.NoCompression(), nil
	}
	return kgo.NoCompression(), fmt.Errorf("producer: compression %q is not one of zstd, lz4, snappy, gzip, none", name)
}

// Producer writes events and dead letters to Kafka with franz-go's
// idempotent producer (acks=all, so a retried batch is never duplicated by
// the broker and order per partition holds). Produce calls block while
// MaxBufferedRecords or MaxBufferedBytes are outstanding, so a slow broker
// slows reading instead of growing memory.
type Producer struct {
	cl        *kgo.Client
	opts      []kgo.Opt // ProducerConfig.ClientOpts, for the clients that read back
	topic     string
	dlq       string
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
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	comp, _ := compressionCodec(cfg.Compression)
	linger := cfg.Linger
	if linger == 0 {
		linger = 5 * time.Millisecond
	}
	maxRecs := cfg.MaxBufferedRecords
	if maxRecs == 0 {
		maxRecs = 100_000
	}
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
		kgo.ProducerLinger(linger),
		kgo.MaxBufferedRecords(maxRecs),
		kgo.MaxBufferedBytes(maxBytes),
		kgo.ProducerBatchMaxBytes(1 << 20),
	}, cfg.ClientOpts...)
	if cfg.Logger != nil {
		opts = append(opts, kgo.WithLogger(kslog{cfg.Logger}))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("kafka client: %w", err)
	}
	p := &Producer{cl: cl, opts: cfg.ClientOpts, topic: cfg.Topic, dlq: cfg.DLQTopic, codec: codec}
	p.pool.New = func() any { return &record{} }
	p.promiseFn = p.promise
	return p, nil
}

// Client returns the underlying franz-go client (for Ping and admin use).
func (p *Producer) Client() *kgo.Client { return p.cl }

// Event produces e to the events topic with record key e.Key and the
// keyheat-id header of the schemas.RecordID whose Prefix is idPrefix and
// whose offset is idOffset. ack.Ack(seq, err) is called once Kafka
// acknowledged or finally refused the record. It blocks while the buffer
// is full; if ctx ends first the record is not produced, ack hears ctx's
// error, and Event returns it.
func (p *Producer) Event(ctx context.Context, e *schemas.AccessEvent, idPrefix string, idOffset int64, ack Acker, seq uint64) error {
	return p.event(ctx, e, idPrefix, idOffset, ack, seq, nil)
}

func (p *Producer) event(ctx context.Context, e *schemas.AccessEvent, idPrefix string, idOffset int64, ack Acker, seq uint64, stats *Stats) error {
	r := p.get()
	r.stats, r.dlq = stats, -1
	b := r.buf[:0]
	b = append(b, e.Key...)
	kl := len(b)
	b = p.codec.Append(b, e)
	vl := len(b)
	b = schemas.AppendRecordID(b, idPrefix, idOffset)
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
	b = schemas.AppendRecordID(b, idPrefix, idOffset)
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
			s.Failed.Add(1)
		case r.dlq < 0:
			s.Events.Add(1)
		default:
			s.DLQ.Add(1)
			s.dlq[r.dlq].Add(1)
		}
	}
	topic, part, off := topicEvents, kr.Partition, kr.Offset
	if r.dlq >= 0 {
		topic = topicDLQ
	}
	if cap(r.buf) <= 64<<10 {
		p.pool.Put(r)
	}
	if pa, ok := ack.(placedAcker); ok && err == nil {
		pa.AckAt(seq, topic, part, off)
		return
	}
	ack.Ack(seq, err)
}

// Flush waits until every record produced so far is acknowledged or failed.
func (p *Producer) Flush(ctx context.Context) error { return p.cl.Flush(ctx) }

// Close closes the client without flushing: records still buffered fail
// (their Acker sees kgo.ErrClientClosed), which is what a crash does. Call
// Flush first for a clean stop. Close is idempotent.
func (p *Producer) Close() { p.closeOnce.Do(p.cl.Close) }

// kslog adapts slog to kgo.Logger.
type kslog struct{ l *slog.Logger }

func (k kslog) Level() kgo.LogLevel { return kgo.LogLevelWarn }
func (k kslog) Log(level kgo.LogLevel, msg string, keyvals ...any) {
	switch level {
	case kgo.LogLevelError:
		k.l.Error(msg, keyvals...)
	case kgo.LogLevelWarn:
		k.l.Warn(msg, keyvals...)
	default:
		k.l.Debug(msg, keyvals...)
	}
}
