package hotkeys

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/keyheat/keyheat/schemas"
)

// StatsPublisher defaults.
const (
	// DefaultStatsTopic is the topic client stats are published on unless
	// the config names another. Make it compacted (cleanup.policy
	// compact, or compact,delete with a retention of a day or so, since
	// client IDs that include a pid never come back).
	DefaultStatsTopic = "keyheat.client-stats"
	// DefaultStatsInterval is how often a StatsPublisher publishes unless
	// its config says otherwise.
	DefaultStatsInterval = 5 * time.Second
	// DefaultStatsMaxKeys is how many keys a record lists at most unless
	// the config says otherwise.
	DefaultStatsMaxKeys = 256
)

// statsLogEvery is how often at most a StatsPublisher warns.
const statsLogEvery = 30 * time.Second

// StatsPublisherConfig configures a StatsPublisher. ClientOpts and at
// least one of Cache, Splitter, Follower and Reporter are required; every
// other zero value means the default its field names.
type StatsPublisherConfig struct {
	// ClientOpts connect to the brokers (seed brokers, TLS, SASL). They
	// are applied after the publisher's own producer options.
	ClientOpts []kgo.Opt
	// Topic receives the records; "" means DefaultStatsTopic. The topic
	// must exist.
	Topic string
	// Client is the record key and the records' client ID, unique among
	// the processes publishing to Topic: 1 to
	// schemas.MaxClientStatsNameBytes bytes of UTF-8. "" means the host
	// name and the process ID, "host/pid" (a restarted process is then a
	// new client; its old ID goes stale).
	Client string
	// App is the application the process serves, for people; each key
	// listed names its own app. Optional.
	App string
	// Interval is how often a record is published, from 1ms to a day;
	// 0 means DefaultStatsInterval.
	Interval time.Duration
	// MaxKeys is how many keys a record lists at most, the busiest
	// first, 1 to schemas.MaxClientStatsKeys; 0 means DefaultStatsMaxKeys.
	MaxKeys int

	// The components whose Stats are published; nil ones are left out of
	// the records.
	Cache    *Cache
	Splitter *Splitter
	Follower *Follower
	Reporter *Reporter

	// Logger receives the publisher's warnings (produce errors, at most
	// every 30 s); nil discards them.
	Logger *slog.Logger
	// Registerer receives the publisher's metrics
	// (keyheat_hotkeys_stats_*); nil registers none. Close unregisters
	// them.
	Registerer prometheus.Registerer
}

// Validate returns every unusable field, joined.
func (c StatsPublisherConfig) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if len(c.ClientOpts) == 0 {
		bad("ClientOpts is empty: give at least kgo.SeedBrokers")
	}
	if c.Topic != "" {
		if err := validTopic(c.Topic); err != nil {
			errs = append(errs, err)
		}
	}
	if err := schemas.ValidClientStatsName(c.Client); err != nil {
		bad("Client: %w", err)
	}
	if err := schemas.ValidClientStatsName(c.App); err != nil {
		bad("App: %w", err)
	}
	if c.Interval != 0 && (c.Interval < time.Millisecond || c.Interval.Milliseconds() > schemas.MaxClientStatsIntervalMs) {
		bad("Interval %v: want 1ms to 24h (0: %v)", c.Interval, DefaultStatsInterval)
	}
	if c.MaxKeys < 0 || c.MaxKeys > schemas.MaxClientStatsKeys {
		bad("MaxKeys %d: want 1..%d (0: %d)", c.MaxKeys, schemas.MaxClientStatsKeys, DefaultStatsMaxKeys)
	}
	if c.Cache == nil && c.Splitter == nil && c.Follower == nil && c.Reporter == nil {
		bad("nothing to publish: give at least one of Cache, Splitter, Follower and Reporter")
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("hotkeys stats publisher: %w", err)
	}
	return nil
}

// StatsPublisherStats are a StatsPublisher's counts since it was built.
type StatsPublisherStats struct {
	// Published counts the records Kafka acknowledged; Failed those it
	// refused or that Close gave up on.
	Published, Failed uint64
	// Skipped counts the intervals that published nothing because the
	// previous record was not yet answered by Kafka (a slow or unreachable
	// broker): the next record carries the counters anyway, so nothing
	// but freshness is lost.
	Skipped uint64
	// EncodeErrors counts records that could not be encoded; none is
	// expected.
	EncodeErrors uint64
}

// StatsPublisher publishes, every Interval and once more at Close, one
// schemas.ClientStats record with the Stats of the components it is
// given, on a topic the control plane follows to show what applications
// do about each hot key. The record key is the client ID, so that a
// compacted topic keeps each client's latest record.
//
// The counters are read in the publisher's goroutine, never in the
// application's: a Cache's Stats takes the cache's lock for a walk over
// its keys (a miss waits that long at most, a hit never), a Splitter's
// takes its read lock to list its keys. The record lists the keys the
// cache holds and the splitter remembers, those whose counters grew most
// since the previous record first, at most MaxKeys of them. A record is
// handed to Kafka without waiting; while one is unanswered, the next
// intervals publish nothing (Stats.Skipped), so a broker that is down
// costs one record in memory. Produce errors are counted and logged at
// most every 30 s.
type StatsPublisher struct {
	topic, client, app string
	interval           time.Duration
	maxKeys            int
	started            time.Time
	cache              *Cache
	split              *Splitter
	follower           *Follower
	reporter           *Reporter
	log                *slog.Logger
	cl                 *kgo.Client
	reg                prometheus.Registerer
	metrics            []prometheus.Collector

	// prev holds each key's activity (its counters summed) at the last
	// record, to rank the keys by their growth since. Owned by the
	// goroutine that builds records: the loop, then Close after it ended.
	prev map[statsKeyID]uint64

	// inflight counts the records handed to Kafka and not yet answered;
	// pending is the same, for Close to wait on.
	inflight                                   atomic.Int32
	pending                                    sync.WaitGroup
	published, failed, skipped, encodeErrors   atomic.Uint64
	errMu                                      sync.Mutex
	lastErr                                    error
	warnedAt                                   time.Time // owned as prev is
	warnedFailed, warnedSkipped, warnedEncoded uint64    // the same

	quit      chan struct{}
	loopDone  chan struct{}
	closeOnce sync.Once
	closeDone chan struct{}
	closeErr  error
}

type statsKeyID struct{ app, key string }

// NewStatsPublisher validates cfg, creates the publisher's Kafka client and
// starts publishing every Interval; the first record goes out one Interval
// after it returns. Close it when done; it reads the components' Stats one
// last time then, which they answer closed or not.
func NewStatsPublisher(cfg StatsPublisherConfig) (*StatsPublisher, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Topic == "" {
		cfg.Topic = DefaultStatsTopic
	}
	if cfg.Interval == 0 {
		cfg.Interval = DefaultStatsInterval
	}
	if cfg.MaxKeys == 0 {
		cfg.MaxKeys = DefaultStatsMaxKeys
	}
	if cfg.Client == "" {
		cfg.Client = defaultStatsClient()
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	opts := append([]kgo.Opt{
		kgo.DefaultProduceTopic(cfg.Topic),
		kgo.ProducerLinger(0),
		// One record in flight, one at Close: TryProduce never finds the
		// buffer full.
		kgo.MaxBufferedRecords(4),
		kgo.ProducerBatchMaxBytes(schemas.MaxClientStatsBytes + 64<<10),
		// Close must not wait for a final push of client metrics to
		// brokers that may be gone (see ReporterConfig.ClientOpts).
		kgo.DisableClientMetrics(),
	}, cfg.ClientOpts...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("hotkeys stats publisher: kafka client: %w", err)
	}
	p := &StatsPublisher{
		topic: cfg.Topic, client: cfg.Client, app: cfg.App,
		interval: cfg.Interval, maxKeys: cfg.MaxKeys, started: time.Now(),
		cache: cfg.Cache, split: cfg.Splitter, follower: cfg.Follower, reporter: cfg.Reporter,
		log: log.With("topic", cfg.Topic, "client", cfg.Client), cl: cl,
		prev: map[statsKeyID]uint64{},
		quit: make(chan struct{}), loopDone: make(chan struct{}), closeDone: make(chan struct{}),
	}
	if err := p.register(cfg.Registerer); err != nil {
		cl.Close()
		return nil, err
	}
	go p.loop()
	return p, nil
}

// defaultStatsClient is "host/pid", cut to the longest client ID a record
// takes.
func defaultStatsClient() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown"
	}
	id := host + "/" + strconv.Itoa(os.Getpid())
	if schemas.ValidClientStatsName(id) != nil {
		// Too long: keep its end, where the pid is.
		id = strings.ToValidUTF8(id[len(id)-schemas.MaxClientStatsNameBytes:], "?")
	}
	return id
}

// Client is the publisher's client ID: the record key of its records.
func (p *StatsPublisher) Client() string { return p.client }

// Topic is the topic the publisher writes.
func (p *StatsPublisher) Topic() string { return p.topic }

func (p *StatsPublisher) loop() {
	defer close(p.loopDone)
	t := time.NewTicker(p.interval)
	defer t.Stop()
	for {
		select {
		case <-p.quit:
			return
		case <-t.C:
			p.publish(false)
			p.warn(false)
		}
	}
}

// publish builds a record from the components' Stats and hands it to
// Kafka, unless the previous one is still unanswered (final: anyway).
func (p *StatsPublisher) publish(final bool) {
	if !final && p.inflight.Load() > 0 {
		p.skipped.Add(1)
		return
	}
	s := p.gather(time.Now())
	val, err := s.AppendJSON(nil)
	for err != nil && len(s.Keys) > 0 {
		// Too large (long keys that are not UTF-8 take their bytes
		// twice): drop the least busy half and try again.
		n := len(s.Keys) / 2
		s.KeysOmitted += len(s.Keys) - n
		s.Keys = s.Keys[:n]
		val, err = s.AppendJSON(nil)
	}
	if err != nil {
		p.encodeErrors.Add(1)
		p.setErr(err)
		return
	}
	p.inflight.Add(1)
	p.pending.Add(1)
	p.cl.TryProduce(context.Background(), &kgo.Record{Key: []byte(p.client), Value: val}, func(_ *kgo.Record, err error) {
		if err != nil {
			p.failed.Add(1)
			p.setErr(err)
		} else {
			p.published.Add(1)
		}
		p.inflight.Add(-1)
		p.pending.Done()
	})
}

func (p *StatsPublisher) setErr(err error) {
	p.errMu.Lock()
	p.lastErr = err
	p.errMu.Unlock()
}

// warn logs the failures since the last warning, at most every
// statsLogEvery unless final.
func (p *StatsPublisher) warn(final bool) {
	now := time.Now()
	if !final && now.Sub(p.warnedAt) < statsLogEvery {
		return
	}
	st := p.Stats()
	if st.Failed == p.warnedFailed && st.Skipped == p.warnedSkipped && st.EncodeErrors == p.warnedEncoded {
		return
	}
	p.errMu.Lock()
	err := p.lastErr
	p.errMu.Unlock()
	p.log.Warn("hotkeys stats publisher: records not published (is Kafka slow or unreachable, or the topic missing?)",
		"failed", st.Failed-p.warnedFailed, "skipped", st.Skipped-p.warnedSkipped,
		"encode_errors", st.EncodeErrors-p.warnedEncoded, "published_total", st.Published, "err", err)
	p.warnedAt, p.warnedFailed, p.warnedSkipped, p.warnedEncoded = now, st.Failed, st.Skipped, st.EncodeErrors
}

// gather reads the components' Stats into a record.
func (p *StatsPublisher) gather(now time.Time) *schemas.ClientStats {
	s := &schemas.ClientStats{
		Version: schemas.ClientStatsVersion, Client: p.client, App: p.app,
		TimeMs: now.UnixMilli(), IntervalMs: p.interval.Milliseconds(), StartedMs: p.started.UnixMilli(),
	}
	keys := map[statsKeyID]*schemas.ClientStatsKey{}
	key := func(app, k string) *schemas.ClientStatsKey {
		id := statsKeyID{app, k}
		e := keys[id]
		if e == nil {
			e = &schemas.ClientStatsKey{App: app, Key: k}
			keys[id] = e
		}
		return e
	}
	if p.cache != nil {
		cs := p.cache.Stats()
		s.Cache = &schemas.ClientCacheTotals{
			Hits: cs.Hits, Misses: cs.Misses, Loads: cs.Loads, Coalesced: cs.Coalesced,
			LoadErrors: cs.LoadErrors, ColdLoads: cs.ColdLoads, StaleServed: cs.StaleServed, Timeouts: cs.Timeouts,
			Entries: uint64(cs.Entries), Following: cs.Following,
		}
		for _, k := range cs.Keys {
			e := key(k.App, k.Key)
			e.Hits, e.Misses, e.Loads, e.Coalesced = k.Hits, k.Misses, k.Loads, k.Coalesced
		}
	}
	if p.split != nil {
		ss := p.split.Stats()
		t := &schemas.ClientSplitTotals{Keys: uint64(len(ss.Keys)), Folds: ss.Folds, FoldErrors: ss.FoldErrors}
		for _, o := range []SplitOpStats{ss.Incr, ss.Get, ss.SAdd, ss.SRem, ss.SMembers, ss.ZAdd, ss.ZRem, ss.ZRange} {
			t.SplitCalls += o.Split
			t.PassedCalls += o.Passed
		}
		s.Split = t
		for _, k := range ss.Keys {
			e := key(k.App, k.Key)
			e.SplitShards, e.SplitWrites, e.SplitReads = k.Shards, k.Writes, k.Reads
		}
	}
	if p.follower != nil {
		fs := p.follower.Stats()
		s.Follower = &schemas.ClientFollowerTotals{
			Entries: uint64(max(fs.Entries, 0)), Lag: uint64(max(fs.Lag, 0)),
			Ready: fs.Ready, Failing: fs.Failing, DecodeErrors: fs.DecodeErrors,
		}
	}
	if p.reporter != nil {
		rs := p.reporter.Stats()
		s.Reporter = &schemas.ClientReporterTotals{
			Recorded: uint64(max(rs.Recorded, 0)), Sent: uint64(max(rs.Sent, 0)), Failed: uint64(max(rs.Failed, 0)),
			Dropped: uint64(max(rs.DroppedFull+rs.DroppedInvalid+rs.DroppedClosed, 0)), Pending: uint64(max(rs.Pending, 0)),
		}
	}
	s.Keys, s.KeysOmitted = p.rank(keys)
	return s
}

// rank returns the keys to list, the busiest first, and how many it left
// out; it remembers each key's activity for the next record.
func (p *StatsPublisher) rank(keys map[statsKeyID]*schemas.ClientStatsKey) ([]schemas.ClientStatsKey, int) {
	type ranked struct {
		k               *schemas.ClientStatsKey
		growth, overall uint64
	}
	list := make([]ranked, 0, len(keys))
	next := make(map[statsKeyID]uint64, len(keys))
	omitted := 0
	for id, k := range keys {
		a := k.Hits + k.Misses + k.Loads + k.Coalesced + k.SplitWrites + k.SplitReads
		next[id] = a
		if k.Key == "" || len(k.Key) > schemas.MaxClientStatsKeyBytes || schemas.ValidClientStatsName(k.App) != nil {
			omitted++
			continue
		}
		g := a
		if before, ok := p.prev[id]; ok && before <= a {
			// Otherwise the key left and came back: its counters started
			// again from 0.
			g = a - before
		}
		list = append(list, ranked{k, g, a})
	}
	p.prev = next
	slices.SortFunc(list, func(x, y ranked) int {
		if c := cmp.Compare(y.growth, x.growth); c != 0 {
			return c
		}
		if c := cmp.Compare(y.overall, x.overall); c != 0 {
			return c
		}
		if c := cmp.Compare(x.k.App, y.k.App); c != 0 {
			return c
		}
		return cmp.Compare(x.k.Key, y.k.Key)
	})
	if len(list) > p.maxKeys {
		omitted += len(list) - p.maxKeys
		list = list[:p.maxKeys]
	}
	out := make([]schemas.ClientStatsKey, len(list))
	for i, r := range list {
		out[i] = *r.k
	}
	return out, omitted
}

// Stats returns the publisher's counts so far.
func (p *StatsPublisher) Stats() StatsPublisherStats {
	return StatsPublisherStats{Published: p.published.Load(), Failed: p.failed.Load(),
		Skipped: p.skipped.Load(), EncodeErrors: p.encodeErrors.Load()}
}

// Close stops the publisher, publishes a last record with the counters as
// they are now, and waits until Kafka answered it or ctx ends; then it
// closes the client. It returns nil when every record handed to Kafka was
// acknowledged, an error saying how many were not otherwise. Close is
// idempotent: a later call returns the first one's result once it has one,
// or ctx's error if its own ctx ends first.
func (p *StatsPublisher) Close(ctx context.Context) error {
	first := false
	p.closeOnce.Do(func() { first = true })
	if first {
		p.closeErr = p.close(ctx)
		close(p.closeDone)
		return p.closeErr
	}
	select {
	case <-p.closeDone:
		return p.closeErr
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (p *StatsPublisher) close(ctx context.Context) error {
	close(p.quit)
	<-p.loopDone
	p.publish(true)
	flushErr := p.cl.Flush(ctx)
	p.cl.Close() // fails what Kafka did not answer yet
	p.pending.Wait()
	p.warn(true)
	for _, c := range p.metrics {
		p.reg.Unregister(c)
	}
	if n := p.failed.Load() + p.encodeErrors.Load(); n > 0 {
		err := fmt.Errorf("hotkeys stats publisher: %d of %d records were not published", n, n+p.published.Load())
		if flushErr != nil {
			err = fmt.Errorf("%w (close gave up waiting: %w)", err, flushErr)
		}
		return err
	}
	return nil
}

func (p *StatsPublisher) register(reg prometheus.Registerer) error {
	if reg == nil {
		return nil
	}
	p.reg = reg
	counter := func(name, help string, v *atomic.Uint64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "keyheat_hotkeys_stats_" + name, Help: help},
			func() float64 { return float64(v.Load()) })
	}
	for _, c := range []prometheus.Collector{
		counter("published_total", "Client-stats records Kafka acknowledged.", &p.published),
		counter("failed_total", "Client-stats records Kafka refused, or that Close gave up on.", &p.failed),
		counter("skipped_total", "Intervals that published no client-stats record because the previous one was unanswered.", &p.skipped),
		counter("encode_errors_total", "Client-stats records that could not be encoded.", &p.encodeErrors),
	} {
		if err := reg.Register(c); err != nil {
			for _, r := range p.metrics {
				reg.Unregister(r)
			}
			p.metrics = nil
			return fmt.Errorf("hotkeys stats publisher: register metrics: %w", err)
		}
		p.metrics = append(p.metrics, c)
	}
	return nil
}
