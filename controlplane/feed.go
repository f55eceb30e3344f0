package controlplane

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/keyheat/keyheat/schemas"
)

// DefaultFeedBacklog is how many records of each partition Feed reads
// back at start unless FeedConfig.Backlog says otherwise.
const DefaultFeedBacklog = 600

// FeedConfig configures a Feed.
type FeedConfig struct {
	// ClientOpts connect to the brokers (no group: Feed reads as an
	// observer and commits nothing).
	ClientOpts []kgo.Opt
	// Reports is the reports topic (detect's kafka.topics.reports) and
	// Hotkeys the registry (kafka.topics.hotkeys).
	Reports, Hotkeys string
	// History receives every report and detector event read.
	History *History
	// Backlog is how many records of each partition are read back at
	// start, so that a process (re)started in a running cluster shows the
	// recent past at once; 0 means DefaultFeedBacklog.
	Backlog int
	// Logger receives the feed's logs; nil discards them.
	Logger *slog.Logger
	// Registerer receives keyheat_api_feed_records_total; nil registers
	// none.
	Registerer prometheus.Registerer
}

// Feed fills a History from Kafka: the reports topic and the registry as
// detect publishes them, read from Backlog records before each
// partition's end (as the client lists it) and followed from there, and
// tells the History from when its memory is complete (see Run). Every process serving the API
// runs one, whichever instance merges, so every instance answers the same
// reports and alerts; a report re-published after a merger's restart
// replaces the one held (History keeps one per scope and window).
type Feed struct {
	cfg     FeedConfig
	log     *slog.Logger
	cl      *kgo.Client
	records *prometheus.CounterVec
	reg     prometheus.Registerer

	closeOnce sync.Once
	closed    chan struct{} // closed by Close: Run's listing stops retrying
}

// NewFeed builds the feed's consumer; it does not contact the brokers
// until Run.
func NewFeed(cfg FeedConfig) (*Feed, error) {
	var errs []error
	if len(cfg.ClientOpts) == 0 {
		errs = append(errs, errors.New("ClientOpts is empty: give at least kgo.SeedBrokers"))
	}
	if cfg.Reports == "" || cfg.Hotkeys == "" {
		errs = append(errs, errors.New("Reports and Hotkeys name the topics to read"))
	}
	if cfg.History == nil {
		errs = append(errs, errors.New("History is nil"))
	}
	if cfg.Backlog < 0 {
		errs = append(errs, fmt.Errorf("Backlog is %d, want ≥ 0 (0: %d)", cfg.Backlog, DefaultFeedBacklog))
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("controlplane feed config: %w", errors.Join(errs...))
	}
	if cfg.Backlog == 0 {
		cfg.Backlog = DefaultFeedBacklog
	}
	f := &Feed{cfg: cfg, log: cfg.Logger, reg: cfg.Registerer, closed: make(chan struct{})}
	if f.log == nil {
		f.log = slog.New(slog.DiscardHandler)
	}
	opts := append([]kgo.Opt{}, cfg.ClientOpts...)
	// New partitions are read from their start; existing ones from
	// Backlog before their end (clamped to their start).
	opts = append(opts, kgo.ConsumeTopics(cfg.Reports, cfg.Hotkeys),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtEnd().Relative(-int64(cfg.Backlog))),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		// Markers move a partition's position as records do (see backlog).
		kgo.KeepControlRecords())
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("controlplane feed: kafka client: %w", err)
	}
	f.cl = cl
	f.records = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "keyheat_api_feed_records_total",
		Help: "Records the API's feed read, by topic (reports, hotkeys) and result (kept, skipped: tombstones and manual entries, invalid)."},
		[]string{"topic", "result"})
	if f.reg != nil {
		if err := f.reg.Register(f.records); err != nil {
			cl.Close()
			return nil, fmt.Errorf("controlplane feed: metrics: %w", err)
		}
	}
	return f, nil
}

// Run reads until ctx ends or Close; fetch errors are logged (at most once
// a minute per kind) and retried by the client.
//
// Run first lists where each partition starts and ends, and tells History
// from when its memory is complete once it has read up to those ends
// (until then History counts it complete from no time at all, and the
// routes ask the report source for everything):
//
//   - reports: a partition whose backlog does not reach its start is cut,
//     and the windows it held before the backlog are not in memory. As
//     detect keys a report by its ID, a scope's windows are spread over
//     every partition, so memory is complete from the latest start of
//     the first window read from a cut partition (from each scope's
//     oldest window when none is cut).
//   - events: the registry is compacted (a key's older events are gone
//     from it), so memory is complete only for events detected after Run
//     started: every one of those is published after the listing.
func (f *Feed) Run(ctx context.Context) error {
	f.log.Info("api feed: following reports and alerts", "reports", f.cfg.Reports, "hotkeys", f.cfg.Hotkeys,
		"backlog_per_partition", f.cfg.Backlog)
	startMs := time.Now().UnixMilli()
	h := f.cfg.History
	h.setReportsFrom(unknownMs)
	h.setAlertsFrom(unknownMs)
	bl, ok := f.listBacklog(ctx)
	if !ok {
		return nil
	}
	reportsMs, alertsMs := int64(unknownMs), int64(unknownMs)
	var lastWarn time.Time
	for ctx.Err() == nil {
		fs := f.cl.PollFetches(ctx)
		if fs.IsClientClosed() {
			return nil
		}
		fs.EachError(func(t string, p int32, err error) {
			if errors.Is(err, context.Canceled) || time.Since(lastWarn) < time.Minute {
				return
			}
			lastWarn = time.Now()
			f.log.Warn("api feed: fetch failed; retrying (reports and alerts on the dashboard lag meanwhile)",
				"topic", t, "partition", p, "err", err)
		})
		fs.EachRecord(func(r *kgo.Record) {
			bl.read(r)
			if r.Attrs.IsControl() {
				return
			}
			if windowMs, ok := f.record(r); ok {
				bl.report(r.Partition, windowMs)
			}
		})
		if ms := bl.reportsFrom(); ms != reportsMs {
			reportsMs = ms
			h.setReportsFrom(ms)
			if ms != unknownMs {
				f.log.Info("api feed: reports backlog read", "complete_from", time.UnixMilli(ms).UTC())
			}
		}
		if ms := bl.alertsFrom(startMs); ms != alertsMs {
			alertsMs = ms
			h.setAlertsFrom(ms)
			if ms != unknownMs {
				f.log.Info("api feed: alerts backlog read", "complete_after", time.UnixMilli(ms).UTC())
			}
		}
	}
	return nil
}

// listBacklog lists the topics' start and end offsets, retrying until it
// has them; false when ctx ended or the feed was closed first.
func (f *Feed) listBacklog(ctx context.Context) (*backlog, bool) {
	adm := kadm.NewClient(f.cl)
	backoff := 100 * time.Millisecond
	var lastWarn time.Time
	for {
		bl, err := f.tryListBacklog(ctx, adm)
		if err == nil {
			return bl, true
		}
		select {
		case <-ctx.Done():
			return nil, false
		case <-f.closed:
			return nil, false
		default:
		}
		if time.Since(lastWarn) >= time.Minute {
			lastWarn = time.Now()
			f.log.Warn("api feed: list the topics' offsets; retrying (until then the history routes ask the report source for everything)",
				"err", err)
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, false
		case <-f.closed:
			t.Stop()
			return nil, false
		case <-t.C:
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

func (f *Feed) tryListBacklog(ctx context.Context, adm *kadm.Client) (*backlog, error) {
	topics := []string{f.cfg.Reports, f.cfg.Hotkeys}
	starts, err := adm.ListStartOffsets(ctx, topics...)
	if err != nil {
		return nil, fmt.Errorf("start offsets: %w", err)
	}
	// The last stable offsets: the feed reads committed records only.
	ends, err := adm.ListCommittedOffsets(ctx, topics...)
	if err != nil {
		return nil, fmt.Errorf("end offsets: %w", err)
	}
	bl := &backlog{reports: f.cfg.Reports, hotkeys: f.cfg.Hotkeys, start: map[topicPartition]int64{}, want: map[topicPartition]int64{},
		seen: map[topicPartition]bool{}, pending: map[int32]bool{}}
	var errs []error
	ends.Each(func(o kadm.ListedOffset) {
		if o.Err != nil {
			// A topic that does not exist is listed as partition -1 with
			// this error: read from its start once it does.
			if o.Partition != -1 || !errors.Is(o.Err, kerr.UnknownTopicOrPartition) {
				errs = append(errs, fmt.Errorf("%s partition %d: %w", o.Topic, o.Partition, o.Err))
			}
			return
		}
		s, ok := starts.Lookup(o.Topic, o.Partition)
		switch {
		case !ok:
			errs = append(errs, fmt.Errorf("%s partition %d: no start offset listed", o.Topic, o.Partition))
		case s.Err != nil:
			errs = append(errs, fmt.Errorf("%s partition %d start: %w", o.Topic, o.Partition, s.Err))
		default:
			tp := topicPartition{o.Topic, o.Partition}
			bl.start[tp] = s.Offset
			if o.Offset > s.Offset {
				bl.want[tp] = o.Offset
			}
		}
	})
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return bl, nil
}

type topicPartition struct {
	topic     string
	partition int32
}

// backlog follows a Feed's reading of what the topics held when it
// started (see Run).
//
// The client chooses where it starts reading each partition (Backlog
// before its end, when the client lists it, which may be before or after
// the feed's own listing): a partition is cut when the first record read
// comes after the start offset listed, which also counts as cut a
// partition whose first records were compacted away or aborted, so that
// memory is never taken as more complete than it is.
type backlog struct {
	reports string
	hotkeys string
	start   map[topicPartition]int64 // listed start offsets
	want    map[topicPartition]int64 // partitions not read up to their listed end yet: that end
	seen    map[topicPartition]bool  // partitions whose first record came
	// pending are the reports partitions found cut whose first window
	// start is not known yet; fromMs is the latest of those known.
	pending map[int32]bool
	fromMs  int64
}

// read notes record r, a control record included (it moves a partition's
// position as any record does).
func (b *backlog) read(r *kgo.Record) {
	tp := topicPartition{r.Topic, r.Partition}
	if !b.seen[tp] {
		b.seen[tp] = true
		// A partition not listed was created since: read from offset 0.
		if r.Topic == b.reports && r.Offset > b.start[tp] {
			b.pending[r.Partition] = true
		}
	}
	if w, ok := b.want[tp]; ok && r.Offset+1 >= w {
		delete(b.want, tp)
	}
}

// report notes a report of the window starting at startMs read from a
// reports partition.
func (b *backlog) report(partition int32, startMs int64) {
	if b.pending[partition] {
		delete(b.pending, partition)
		b.fromMs = max(b.fromMs, startMs)
	}
}

// reportsFrom is the start from which memory holds every window, or
// unknownMs while the reports' backlog is not read.
func (b *backlog) reportsFrom() int64 {
	if len(b.pending) > 0 || b.waiting(b.reports) {
		return unknownMs
	}
	return b.fromMs
}

// alertsFrom is the time after which memory holds every event (startMs,
// when the feed started), or unknownMs while the registry's backlog is
// not read.
func (b *backlog) alertsFrom(startMs int64) int64 {
	if b.waiting(b.hotkeys) {
		return unknownMs
	}
	return startMs
}

func (b *backlog) waiting(topic string) bool {
	for tp := range b.want {
		if tp.topic == topic {
			return true
		}
	}
	return false
}

// record passes r to History; for a report, it returns its window's start.
func (f *Feed) record(r *kgo.Record) (startMs int64, report bool) {
	switch r.Topic {
	case f.cfg.Reports:
		rep, err := schemas.DecodeWindowReport(r.Value)
		if err != nil {
			f.records.WithLabelValues("reports", "invalid").Inc()
			return 0, false
		}
		f.cfg.History.AddReport(rep)
		f.records.WithLabelValues("reports", "kept").Inc()
		return rep.StartMs, true
	case f.cfg.Hotkeys:
		if r.Value == nil || schemas.IsManualRecordKey(r.Key) {
			f.records.WithLabelValues("hotkeys", "skipped").Inc()
			return 0, false
		}
		h, err := schemas.DecodeHotKeyEvent(r.Value)
		if err != nil {
			f.records.WithLabelValues("hotkeys", "invalid").Inc()
			return 0, false
		}
		f.cfg.History.AddAlert(h)
		f.records.WithLabelValues("hotkeys", "kept").Inc()
	}
	return 0, false
}

// Close stops the consumer (Run returns) and unregisters the metric. It
// may be called more than once.
func (f *Feed) Close() {
	f.closeOnce.Do(func() {
		close(f.closed)
		f.cl.Close()
		if f.reg != nil {
			f.reg.Unregister(f.records)
		}
	})
}
