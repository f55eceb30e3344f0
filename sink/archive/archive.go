package archive

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Archive writes the Parquet archive under one root: raw events through a
// PartitionWriter per events partition, window reports and hot-key events
// through record writers. It owns one goroutine, which rolls segments and
// record batches that reached Options.SegmentAge.
type Archive struct {
	opts Options
	fs   FS
	log  *slog.Logger
	m    *metrics
	now  func() time.Time

	mu      sync.Mutex
	parts   map[partKey]*PartitionWriter
	records map[string]roller
	closed  bool

	stop      chan struct{}
	done      chan struct{}
	closeOnce sync.Once
	closeErr  error
}

type partKey struct {
	topic     string
	partition int32
}

// roller is anything the background goroutine rolls by age.
type roller interface {
	rollIfOlder(now time.Time, age time.Duration)
}

// Open opens the archive in the local folder opts.Root, which must exist.
// log nil discards logs; reg nil registers no metrics.
func Open(ctx context.Context, opts Options, log *slog.Logger, reg prometheus.Registerer) (*Archive, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	fsys, err := NewDirFS(opts.Root)
	if err != nil {
		return nil, err
	}
	return openFS(ctx, opts, fsys, log, reg, time.Now)
}

func openFS(_ context.Context, opts Options, fsys FS, log *slog.Logger, reg prometheus.Registerer, now func() time.Time) (*Archive, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	a := &Archive{
		opts: opts, fs: fsys, log: log, m: newMetrics(reg), now: now,
		parts: make(map[partKey]*PartitionWriter), records: make(map[string]roller),
		stop: make(chan struct{}), done: make(chan struct{}),
	}
	go a.rollLoop()
	return a, nil
}

// rollLoop rolls what is older than SegmentAge, checking four times per
// SegmentAge (at most every second, at least every 10ms), so a segment
// rolls within a quarter of its age limit late.
func (a *Archive) rollLoop() {
	defer close(a.done)
	tick := min(max(a.opts.SegmentAge/4, 10*time.Millisecond), time.Second)
	t := time.NewTicker(tick)
	defer t.Stop()
	for {
		select {
		case <-a.stop:
			return
		case <-t.C:
			a.rollAged()
		}
	}
}

func (a *Archive) rollAged() {
	a.mu.Lock()
	rs := make([]roller, 0, len(a.parts)+len(a.records))
	for _, p := range a.parts {
		rs = append(rs, p)
	}
	for _, r := range a.records {
		rs = append(rs, r)
	}
	a.mu.Unlock()
	now := a.now()
	for _, r := range rs {
		r.rollIfOlder(now, a.opts.SegmentAge)
	}
}

// ErrClosed is returned by the archive's writers after Close.
var ErrClosed = errors.New("archive is closed")

// Close rolls every open event segment and record batch that can be made
// durable (see PartitionWriter.Close), stops the roll goroutine and
// returns the first errors. Calling it again returns the same result.
func (a *Archive) Close() error {
	a.closeOnce.Do(func() {
		close(a.stop)
		<-a.done
		a.mu.Lock()
		a.closed = true
		parts := make([]*PartitionWriter, 0, len(a.parts))
		for _, p := range a.parts {
			parts = append(parts, p)
		}
		recs := make([]roller, 0, len(a.records))
		for _, r := range a.records {
			recs = append(recs, r)
		}
		a.mu.Unlock()
		var errs []error
		for _, p := range parts {
			errs = append(errs, p.Close())
		}
		for _, r := range recs {
			if c, ok := r.(interface{ Close() error }); ok {
				errs = append(errs, c.Close())
			}
		}
		a.closeErr = errors.Join(errs...)
	})
	return a.closeErr
}

func (a *Archive) register(k partKey, p *PartitionWriter) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return ErrClosed
	}
	if _, ok := a.parts[k]; ok {
		return fmt.Errorf("archive partition %s/%d is open already; Close its writer before opening it again", k.topic, k.partition)
	}
	a.parts[k] = p
	return nil
}

func (a *Archive) unregister(k partKey, p *PartitionWriter) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.parts[k] == p {
		delete(a.parts, k)
	}
}

func (a *Archive) registerRecords(key string, r roller) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return ErrClosed
	}
	if _, ok := a.records[key]; ok {
		return fmt.Errorf("archive writer %s is open already; Close it before opening it again", key)
	}
	a.records[key] = r
	return nil
}

func (a *Archive) unregisterRecords(key string, r roller) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.records[key] == r {
		delete(a.records, key)
	}
}
