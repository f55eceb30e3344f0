// Package republish produces archived events back into a Kafka topic,
// paced by their event times: what `detect replay --to-topic` does, so
// that a run of detect (or anything else reading events) can read an
// incident again from Kafka. Each record is keyed by its access key and
// carries the keyheat-id of the record it was archived from
// (schemas.HeaderRecordID), so a consumer can tell a replayed event from
// its original.
//
// It owns neither the archive's layout or reading (package
// sink/archive) nor the event codecs (package schemas).
package republish

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/keyheat/keyheat/internal/topics"
	"github.com/keyheat/keyheat/schemas"
	"github.com/keyheat/keyheat/sink/archive"
)

// Reader yields archived events in order, io.EOF after the last:
// *archive.EventReader.
type Reader interface {
	Read(dst []schemas.EventRow) (int, error)
}

var _ Reader = (*archive.EventReader)(nil)

// Config says where and how fast Run produces.
type Config struct {
	// ClientOpts connect to the brokers; Run adds acks from all in-sync
	// replicas and zstd batches.
	ClientOpts []kgo.Opt
	// Topic receives the events. It is created when missing if
	// CreateTopic, with Partitions and ReplicationFactor; otherwise a
	// missing topic is an error naming kafka.create_topics.
	Topic             string
	CreateTopic       bool
	Partitions        int32
	ReplicationFactor int16
	// Setting names where Topic was set (a flag, a config key) in the
	// errors about it.
	Setting string
	// Codec encodes the events.
	Codec schemas.Codec
	// Speed paces the events against their times: the event at time t is
	// produced (t − t0) / Speed after the first one (t0). 0 produces as
	// fast as Kafka takes them.
	Speed float64
	// Progress, when set, is called after every batch read with how many
	// events were sent so far.
	Progress func(sent int64)
}

// Run produces every event r yields to cfg.Topic and returns how many
// Kafka acknowledged. It stops at the first produce error, the first
// read error or when ctx ends, after waiting for what is in flight.
func Run(ctx context.Context, r Reader, cfg Config) (int64, error) {
	if cfg.Codec == nil {
		return 0, errors.New("no codec")
	}
	setting := cfg.Setting
	if setting == "" {
		setting = "topic " + cfg.Topic
	}
	cl, err := kgo.NewClient(append(cfg.ClientOpts, kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerBatchCompression(kgo.ZstdCompression()))...)
	if err != nil {
		return 0, fmt.Errorf("kafka client: %w", err)
	}
	defer cl.Close()
	// The target topic is created like every topic keyheat writes (or is
	// an error naming kafka.create_topics), before anything is read.
	tctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	err = topics.Ensure(tctx, cl, cfg.CreateTopic, topics.Spec{Name: cfg.Topic, Partitions: cfg.Partitions, ReplicationFactor: cfg.ReplicationFactor})
	cancel()
	if err != nil {
		return 0, fmt.Errorf("%s: %w", setting, err)
	}
	var (
		mu       sync.Mutex
		firstErr error
		acked    int64
		wg       sync.WaitGroup
	)
	failed := func() error {
		mu.Lock()
		defer mu.Unlock()
		return firstErr
	}
	pace := newPacer(cfg.Speed)
	rows := make([]schemas.EventRow, 4096)
	var sent int64
	for {
		n, rerr := r.Read(rows)
		for i := range rows[:n] {
			row := &rows[i]
			if err := pace.wait(ctx, row.TimeMs); err != nil {
				wg.Wait()
				return acked, err
			}
			ev := row.Event()
			rec := &kgo.Record{Topic: cfg.Topic, Key: []byte(row.Key), Value: cfg.Codec.Append(nil, &ev),
				Headers: []kgo.RecordHeader{{Key: schemas.HeaderRecordID, Value: schemas.AppendRecordID(nil,
					schemas.RecordID{Kind: schemas.IDTopic, Topic: row.Topic, Partition: row.Partition}.Prefix(), row.Offset, int(row.Index))}}}
			wg.Add(1)
			cl.Produce(ctx, rec, func(_ *kgo.Record, err error) {
				defer wg.Done()
				mu.Lock()
				defer mu.Unlock()
				if err != nil && firstErr == nil {
					firstErr = err
				}
				if err == nil {
					acked++
				}
			})
		}
		sent += int64(n)
		if cfg.Progress != nil {
			cfg.Progress(sent)
		}
		if err := failed(); err != nil {
			wg.Wait()
			return acked, fmt.Errorf("produce to %s: %w", cfg.Topic, err)
		}
		if errors.Is(rerr, io.EOF) {
			break
		}
		if rerr != nil {
			wg.Wait()
			return acked, rerr // the archive's errors name the file
		}
	}
	if err := cl.Flush(ctx); err != nil {
		return acked, fmt.Errorf("produce to %s: %w", cfg.Topic, err)
	}
	wg.Wait()
	if err := failed(); err != nil {
		return acked, fmt.Errorf("produce to %s: %w", cfg.Topic, err)
	}
	return acked, nil
}

// pacer holds a replay to the events' times scaled by a speed: the event
// at time t is released (t − t0) / speed after the first one (t0).
type pacer struct {
	speed   float64
	firstMs int64
	start   time.Time
	started bool
	now     func() time.Time
	sleep   func(ctx context.Context, d time.Duration) error
}

func newPacer(speed float64) *pacer { return &pacer{speed: speed, now: time.Now, sleep: sleepCtx} }

func (p *pacer) wait(ctx context.Context, tsMs int64) error {
	if p.speed == 0 {
		return nil
	}
	if !p.started {
		p.firstMs, p.start, p.started = tsMs, p.now(), true
		return nil
	}
	due := p.start.Add(time.Duration(float64(tsMs-p.firstMs) / p.speed * float64(time.Millisecond)))
	// Sleeping for less than a millisecond costs more than it paces.
	if d := due.Sub(p.now()); d > time.Millisecond {
		return p.sleep(ctx, d)
	}
	return nil
}

// sleepCtx sleeps for d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
