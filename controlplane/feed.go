package controlplane

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
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
// partition's end and followed from there. Every process serving the API
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
	f := &Feed{cfg: cfg, log: cfg.Logger, reg: cfg.Registerer}
	if f.log == nil {
		f.log = slog.New(slog.DiscardHandler)
	}
	opts := append([]kgo.Opt{}, cfg.ClientOpts...)
	// New partitions are read from their start; existing ones from
	// Backlog before their end (clamped to their start).
	opts = append(opts, kgo.ConsumeTopics(cfg.Reports, cfg.Hotkeys),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtEnd().Relative(-int64(cfg.Backlog))),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()))
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
func (f *Feed) Run(ctx context.Context) error {
	f.log.Info("api feed: following reports and alerts", "reports", f.cfg.Reports, "hotkeys", f.cfg.Hotkeys,
		"backlog_per_partition", f.cfg.Backlog)
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
		fs.EachRecord(f.record)
	}
	return nil
}

func (f *Feed) record(r *kgo.Record) {
	switch r.Topic {
	case f.cfg.Reports:
		rep, err := schemas.DecodeWindowReport(r.Value)
		if err != nil {
			f.records.WithLabelValues("reports", "invalid").Inc()
			return
		}
		f.cfg.History.AddReport(rep)
		f.records.WithLabelValues("reports", "kept").Inc()
	case f.cfg.Hotkeys:
		if r.Value == nil || schemas.IsManualRecordKey(r.Key) {
			f.records.WithLabelValues("hotkeys", "skipped").Inc()
			return
		}
		h, err := schemas.DecodeHotKeyEvent(r.Value)
		if err != nil {
			f.records.WithLabelValues("hotkeys", "invalid").Inc()
			return
		}
		f.cfg.History.AddAlert(h)
		f.records.WithLabelValues("hotkeys", "kept").Inc()
	}
}

// Close stops the consumer (Run returns) and unregisters the metric. It
// may be called more than once.
func (f *Feed) Close() {
	f.closeOnce.Do(func() {
		f.cl.Close()
		if f.reg != nil {
			f.reg.Unregister(f.records)
		}
	})
}
