package controlplane

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/keyheat/keyheat/hotkeys"
	"github.com/keyheat/keyheat/schemas"
)

// Clients defaults.
const (
	// DefaultMaxClients bounds the clients a Clients holds unless its
	// config says otherwise.
	DefaultMaxClients = 4096
	// DefaultClientsMaxBytes bounds the bytes of the records a Clients
	// holds unless its config says otherwise.
	DefaultClientsMaxBytes = 64 << 20
	// DefaultStaleIntervals is how many of its own intervals a client may
	// go without a record before it counts as gone, unless
	// ClientsConfig.Staleness says otherwise.
	DefaultStaleIntervals = 3
)

// ErrClientsClosed is returned by WaitReady when the Clients was closed
// before it was ready.
var ErrClientsClosed = errors.New("controlplane: clients closed")

// ClientsConfig configures a Clients. ClientOpts is required; the zero
// value of every other field is usable.
type ClientsConfig struct {
	// ClientOpts connect to the brokers: kgo.SeedBrokers at least, and
	// TLS or SASL options if the cluster needs them. Clients adds its own
	// consuming options (the topic from its start, no consumer group).
	ClientOpts []kgo.Opt
	// Topic is the client-stats topic the applications' StatsPublishers
	// write; "" means hotkeys.DefaultStatsTopic.
	Topic string
	// Staleness is how old a client's latest record may be before the
	// client counts as gone. 0 means DefaultStaleIntervals times the
	// interval the record itself states (15 s for the default 5 s), so
	// that clients publishing at different rates are each judged by
	// their own.
	Staleness time.Duration
	// MaxClients bounds the clients held; 0 means DefaultMaxClients.
	MaxClients int
	// MaxBytes bounds the bytes of the records held (their encoded
	// values; what they take decoded is of the same order); 0 means
	// DefaultClientsMaxBytes.
	MaxBytes int64
	// Logger receives the logs (records skipped, fetch errors, each at
	// most every 30 s); nil discards them. They never carry a key.
	Logger *slog.Logger
	// Registerer receives the metrics (keyheat_api_client_stats_*); nil
	// registers none. Close unregisters them.
	Registerer prometheus.Registerer
}

// Validate reports what makes c unusable, or nil.
func (c *ClientsConfig) Validate() error {
	var errs []error
	if len(c.ClientOpts) == 0 {
		errs = append(errs, errors.New("ClientOpts is empty: give at least kgo.SeedBrokers"))
	}
	if c.Staleness < 0 {
		errs = append(errs, fmt.Errorf("Staleness is %v, want ≥ 0 (0: %d of each client's intervals)", c.Staleness, DefaultStaleIntervals))
	}
	if c.MaxClients < 0 {
		errs = append(errs, fmt.Errorf("MaxClients is %d, want ≥ 0 (0: %d)", c.MaxClients, DefaultMaxClients))
	}
	if c.MaxBytes < 0 {
		errs = append(errs, fmt.Errorf("MaxBytes is %d, want ≥ 0 (0: %d)", c.MaxBytes, DefaultClientsMaxBytes))
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("controlplane clients config: %w", errors.Join(errs...))
}

// ClientKeyStats is what the live clients say of one key: the sums, over
// every live client whose latest record lists the key, of that client's
// counters for it. A client's counters for a key are cumulative since its
// cache took the key in or its splitter began to remember it, so the sums
// mix periods that start at different moments; the ratios are what they
// are over those periods. A client lists only the keys it holds now, and
// at most its publisher's MaxKeys of them (the busiest), so a key it
// stopped holding, or one too quiet to make its list, is not in its sums.
type ClientKeyStats struct {
	// Clients counts the live clients whose latest record lists the key.
	Clients int `json:"clients"`
	// Hits are Gets served from a client's local cache; Misses Gets of the
	// key, while it asked for the local cache, that found no fresh value
	// and waited for a load.
	Hits   uint64 `json:"local_hits"`
	Misses uint64 `json:"local_misses"`
	// HitRatio is Hits / (Hits + Misses), 0 when both are 0.
	HitRatio float64 `json:"hit_ratio"`
	// Loads are the loads of the key the clients' caches started: the
	// upstream calls. Coalesced are the Gets that joined a load another
	// Get had started instead of making an upstream call of their own.
	Loads     uint64 `json:"loads"`
	Coalesced uint64 `json:"coalesced"`
	// CollapseRatio is (Loads + Coalesced) / Loads: the Gets that waited
	// for a load per upstream call, as hotkeys.CacheStats.CollapseRatio
	// defines it; 1 means no miss was shared, 0 means no load. The share
	// of waiting Gets that made no upstream call is 1 - 1/CollapseRatio.
	CollapseRatio float64 `json:"collapse_ratio"`
	// SplitClients counts the live clients whose splitter remembers the
	// key; SplitShards is the largest number of shards one of them reads
	// it with (clients may differ while a factor changes).
	SplitClients int `json:"split_clients"`
	SplitShards  int `json:"split_shards"`
	// SplitWrites are the split writes (to a shard) Redis acknowledged;
	// SplitReads the split reads (of the key and its shards) that
	// returned.
	SplitWrites uint64 `json:"split_writes"`
	SplitReads  uint64 `json:"split_reads"`
}

// ClientTotals are the whole-process counters of the live clients, each
// summed over the clients that have the component it comes from (the
// *Clients fields count them), since each client's publisher started.
type ClientTotals struct {
	// Clients counts the live clients.
	Clients int `json:"clients"`

	// CacheClients count the clients with a hotkeys.Cache, whose
	// counters (schemas.ClientCacheTotals) the fields below sum;
	// CacheEntries are the keys they held.
	CacheClients int    `json:"cache_clients"`
	Hits         uint64 `json:"local_hits"`
	Misses       uint64 `json:"local_misses"`
	Loads        uint64 `json:"loads"`
	Coalesced    uint64 `json:"coalesced"`
	LoadErrors   uint64 `json:"load_errors"`
	ColdLoads    uint64 `json:"cold_loads"`
	StaleServed  uint64 `json:"stale_served"`
	Timeouts     uint64 `json:"timeouts"`
	CacheEntries uint64 `json:"cache_entries"`
	// HitRatio and CollapseRatio are as in ClientKeyStats, over every
	// key.
	HitRatio      float64 `json:"hit_ratio"`
	CollapseRatio float64 `json:"collapse_ratio"`

	// SplitClients count the clients with a hotkeys.Splitter: their calls
	// on split keys, their calls passed through, the keys they remember,
	// and their folds completed and failed.
	SplitClients int    `json:"split_clients"`
	SplitCalls   uint64 `json:"split_calls"`
	PassedCalls  uint64 `json:"passed_calls"`
	SplitKeys    uint64 `json:"split_keys"`
	Folds        uint64 `json:"folds"`
	FoldErrors   uint64 `json:"fold_errors"`

	// FollowerClients count the clients with a registry follower.
	// Summing their sets means nothing (they follow one registry), so:
	// FollowersNotReady counts those not ready or failing,
	// FollowerLagMax is the largest lag (offsets behind the registry),
	// and FollowerEntriesMin and FollowerEntriesMax bound the sizes of
	// their sets (a gap is a follower behind).
	FollowerClients    int    `json:"follower_clients"`
	FollowersNotReady  int    `json:"followers_not_ready"`
	FollowerLagMax     uint64 `json:"follower_lag_max"`
	FollowerEntriesMin uint64 `json:"follower_entries_min"`
	FollowerEntriesMax uint64 `json:"follower_entries_max"`

	// ReporterClients count the clients with a hotkeys.Reporter: the
	// events they recorded, Kafka acknowledged, Kafka did not, and they
	// dropped before buffering.
	ReporterClients  int    `json:"reporter_clients"`
	ReporterRecorded uint64 `json:"reporter_recorded"`
	ReporterSent     uint64 `json:"reporter_sent"`
	ReporterFailed   uint64 `json:"reporter_failed"`
	ReporterDropped  uint64 `json:"reporter_dropped"`

	// KeysOmitted sums the keys the clients held and left out of their
	// records: non-zero means some key's ClientKeyStats miss clients.
	KeysOmitted uint64 `json:"keys_omitted"`
}

// ClientsStats are a Clients' own counters.
type ClientsStats struct {
	// Records counts the records read and handled: once it reached n,
	// Key and Totals show the effect of the first n. Each is exactly one
	// of: Applied
	// (it became its client's latest), Malformed (undecodable, invalid,
	// over schemas.MaxClientStatsBytes, or its record key not its client
	// ID), Stale (older than the staleness when read: its client is gone,
	// and the client's earlier record with it), Refused (MaxClients or
	// MaxBytes reached even without the stale clients), or Tombstones (a
	// nil value, removing its client).
	Records, Applied, Malformed, Stale, Refused, Tombstones uint64
	// FetchErrors counts the partition errors fetches returned.
	FetchErrors uint64
	// Held counts the clients held, Live those of them not stale now;
	// Bytes is what their records take (see ClientsConfig.MaxBytes).
	Held, Live int
	Bytes      int64
	// Ready is what Ready returns.
	Ready bool
}

// Clients follows the client-stats topic that applications'
// hotkeys.StatsPublishers write, and answers what the live clients say
// about a key (Key) and overall (Totals).
//
// It reads every partition of the topic from its start, without a
// consumer group, and keeps the latest record of each client (by record
// key; a tombstone removes the client). A client is live while its latest
// record is younger than the staleness (ClientsConfig.Staleness). A
// record's age is measured from the time it states, by the client's
// clock, or from when it was read if that is earlier: a client whose
// clock runs ahead stays no longer than one whose clock is right, one
// whose clock runs behind goes stale early, so the clocks must agree to
// well under the staleness. A record already stale when read is not kept.
// Stale clients are left out of every answer and dropped to make room.
//
// A record that cannot be decoded or is invalid (see
// schemas.DecodeClientStats: sizes are bounded before anything is
// allocated for them) is skipped and counted; so is a record of a new
// client when MaxClients or MaxBytes is reached. None stops the reading.
//
// All methods are safe for concurrent use. Key and Totals take a read
// lock and walk the held clients.
type Clients struct {
	topic      string
	staleness  time.Duration
	maxClients int
	maxBytes   int64
	log        *slog.Logger
	cl         *kgo.Client
	now        func() time.Time
	reg        prometheus.Registerer
	collector  prometheus.Collector

	mu      sync.RWMutex
	clients map[string]*clientRecord
	bytes   int64

	records, applied, malformed, stale, refused, tombstones, fetchErrors atomic.Uint64

	readyOnce sync.Once
	readyCh   chan struct{}
	ready     atomic.Bool

	ctx       context.Context
	cancel    context.CancelFunc
	wg        sync.WaitGroup
	closeOnce sync.Once

	// Owned by the fetch loop.
	badLog, fetchLog logEvery
}

// clientRecord is a client's latest record as held.
type clientRecord struct {
	s *schemas.ClientStats
	// seenMs is the record's time for staleness: its TimeMs, or when it
	// was read if earlier (Unix ms).
	seenMs int64
	// staleMs is how old seenMs may get before the client is gone.
	staleMs int64
	size    int64
	index   map[clientKeyID]int // (app, key) → position in s.Keys
}

type clientKeyID struct{ app, key string }

// NewClients validates cfg, creates its Kafka client and starts reading the
// topic in the background; it does not wait for the brokers (see
// WaitReady). Close it when done.
func NewClients(cfg ClientsConfig) (*Clients, error) {
	return newClients(cfg, time.Now)
}

func newClients(cfg ClientsConfig, now func() time.Time) (*Clients, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Topic == "" {
		cfg.Topic = hotkeys.DefaultStatsTopic
	}
	if cfg.MaxClients == 0 {
		cfg.MaxClients = DefaultMaxClients
	}
	if cfg.MaxBytes == 0 {
		cfg.MaxBytes = DefaultClientsMaxBytes
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	opts := append(slices.Clip(cfg.ClientOpts),
		kgo.ConsumeTopics(cfg.Topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		// Markers move the position that readiness compares.
		kgo.KeepControlRecords(),
		kgo.FetchMaxPartitionBytes(2*schemas.MaxClientStatsBytes),
	)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("controlplane clients: kafka client: %w", err)
	}
	if g, _ := cl.OptValue(kgo.ConsumerGroup).(string); g != "" {
		cl.Close()
		return nil, fmt.Errorf("controlplane clients: ClientOpts set consumer group %q; Clients reads every partition itself, remove the group", g)
	}
	c := &Clients{
		topic: cfg.Topic, staleness: cfg.Staleness, maxClients: cfg.MaxClients, maxBytes: cfg.MaxBytes,
		log: log.With("topic", cfg.Topic), cl: cl, now: now,
		clients: map[string]*clientRecord{}, readyCh: make(chan struct{}),
		badLog: logEvery{every: 30 * time.Second}, fetchLog: logEvery{every: 30 * time.Second},
	}
	if cfg.Registerer != nil {
		col := &clientsCollector{c: c}
		if err := cfg.Registerer.Register(col); err != nil {
			cl.Close()
			return nil, fmt.Errorf("controlplane clients: register metrics: %w", err)
		}
		c.reg, c.collector = cfg.Registerer, col
	}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	c.wg.Add(1)
	go c.run()
	return c, nil
}

// Topic is the client-stats topic the Clients reads.
func (c *Clients) Topic() string { return c.topic }

// Ready reports whether the Clients has read the topic up to where it
// ended when the Clients started, so that its answers include every
// client that was publishing then.
func (c *Clients) Ready() bool { return c.ready.Load() }

// WaitReady waits until the Clients is ready, ctx ends (ctx's error) or
// the Clients is closed (ErrClientsClosed).
func (c *Clients) WaitReady(ctx context.Context) error {
	select {
	case <-c.readyCh:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-c.ctx.Done():
		return ErrClientsClosed
	}
}

func (c *Clients) markReady() {
	c.readyOnce.Do(func() {
		c.ready.Store(true)
		close(c.readyCh)
	})
}

// run lists where the topic ends, then reads it until Close.
func (c *Clients) run() {
	defer c.wg.Done()
	ends, ok := c.listEnds()
	if !ok {
		return
	}
	pos := map[int32]int64{}
	caughtUp := func() bool {
		for p, end := range ends {
			if pos[p] < end {
				return false
			}
		}
		return true
	}
	if caughtUp() {
		c.markReady()
	}
	for {
		fs := c.cl.PollFetches(c.ctx)
		if c.ctx.Err() != nil {
			return
		}
		fs.EachError(func(_ string, p int32, err error) {
			if errors.Is(err, context.Canceled) {
				return
			}
			c.fetchErrors.Add(1)
			if ok, skipped := c.fetchLog.allow(time.Now()); ok {
				c.log.Warn("client stats: fetch failed; retrying", "partition", p, "err", err, "errors_not_logged", skipped)
			}
		})
		fs.EachRecord(func(r *kgo.Record) {
			pos[r.Partition] = r.Offset + 1
			if !r.Attrs.IsControl() {
				c.apply(r)
			}
		})
		if !c.ready.Load() && caughtUp() {
			c.markReady()
		}
	}
}

// listEnds returns, per partition, the offset the topic ends at for the
// partitions that hold records (end above start): readiness waits for
// those. A topic that does not exist yet has none. It retries until the
// listing succeeds, or reports false when Close came first.
func (c *Clients) listEnds() (map[int32]int64, bool) {
	adm := kadm.NewClient(c.cl)
	wait := 100 * time.Millisecond
	for {
		starts, err := adm.ListStartOffsets(c.ctx, c.topic)
		var ends kadm.ListedOffsets
		if err == nil {
			ends, err = adm.ListEndOffsets(c.ctx, c.topic)
		}
		if err == nil {
			err = errors.Join(starts.Error(), ends.Error())
		}
		if err == nil || errors.Is(err, kerr.UnknownTopicOrPartition) {
			out := map[int32]int64{}
			ends.Each(func(o kadm.ListedOffset) {
				if s, ok := starts.Lookup(c.topic, o.Partition); o.Err == nil && ok && o.Offset > s.Offset {
					out[o.Partition] = o.Offset
				}
			})
			return out, true
		}
		if c.ctx.Err() != nil {
			return nil, false
		}
		if ok, skipped := c.fetchLog.allow(time.Now()); ok {
			c.log.Warn("client stats: listing the topic's offsets failed; retrying", "err", err, "errors_not_logged", skipped)
		}
		select {
		case <-time.After(wait):
		case <-c.ctx.Done():
			return nil, false
		}
		wait = min(2*wait, 5*time.Second)
	}
}

// apply makes r its client's latest record, or counts why not.
func (c *Clients) apply(r *kgo.Record) {
	// Counted once the record's outcome is visible to Key and Totals
	// (the deferred Unlock below runs first), so that a reader who saw
	// Records reach n sees the first n records' effect.
	defer c.records.Add(1)
	id := string(r.Key)
	if r.Value == nil {
		c.tombstones.Add(1)
		c.mu.Lock()
		c.removeLocked(id)
		c.mu.Unlock()
		return
	}
	s, err := schemas.DecodeClientStats(r.Value)
	if err == nil && s.Client != id {
		err = errors.New("the record key is not the record's client ID")
	}
	if err != nil {
		c.malformed.Add(1)
		if ok, skipped := c.badLog.allow(time.Now()); ok {
			c.log.Warn("client stats: record skipped", "partition", r.Partition, "offset", r.Offset,
				"bytes", len(r.Value), "err", err, "skipped_not_logged", skipped)
		}
		return
	}
	nowMs := c.now().UnixMilli()
	cr := &clientRecord{s: s, seenMs: min(s.TimeMs, nowMs), staleMs: c.staleMsOf(s), size: int64(len(r.Value))}
	c.mu.Lock()
	defer c.mu.Unlock()
	if cr.staleAt(nowMs) {
		// The client's latest record says it is gone.
		c.stale.Add(1)
		c.removeLocked(id)
		return
	}
	if !c.fitsLocked(id, cr.size) {
		c.pruneLocked(nowMs)
		if !c.fitsLocked(id, cr.size) {
			c.refused.Add(1)
			if ok, skipped := c.badLog.allow(time.Now()); ok {
				c.log.Warn("client stats: record refused: MaxClients or MaxBytes reached",
					"clients", len(c.clients), "bytes", c.bytes, "skipped_not_logged", skipped)
			}
			return
		}
	}
	cr.index = make(map[clientKeyID]int, len(s.Keys))
	for i, k := range s.Keys {
		cr.index[clientKeyID{k.App, k.Key}] = i
	}
	c.removeLocked(id)
	c.clients[id] = cr
	c.bytes += cr.size
	c.applied.Add(1)
}

// staleMsOf is how old s may get before its client is gone.
func (c *Clients) staleMsOf(s *schemas.ClientStats) int64 {
	if c.staleness > 0 {
		return c.staleness.Milliseconds()
	}
	return DefaultStaleIntervals * s.IntervalMs
}

func (cr *clientRecord) staleAt(nowMs int64) bool { return nowMs-cr.seenMs > cr.staleMs }

// fitsLocked reports whether a record of size bytes for client id fits
// within the bounds, in place of the client's current one.
func (c *Clients) fitsLocked(id string, size int64) bool {
	n, b := len(c.clients)+1, c.bytes+size
	if old := c.clients[id]; old != nil {
		n, b = n-1, b-old.size
	}
	return n <= c.maxClients && b <= c.maxBytes
}

func (c *Clients) removeLocked(id string) {
	if old := c.clients[id]; old != nil {
		c.bytes -= old.size
		delete(c.clients, id)
	}
}

// pruneLocked drops the stale clients.
func (c *Clients) pruneLocked(nowMs int64) {
	for id, cr := range c.clients {
		if cr.staleAt(nowMs) {
			c.removeLocked(id)
		}
	}
}

// Key returns what the live clients say of app's key (see ClientKeyStats):
// all zero when none lists it.
func (c *Clients) Key(app, key string) ClientKeyStats {
	nowMs := c.now().UnixMilli()
	id := clientKeyID{app, key}
	var out ClientKeyStats
	c.mu.RLock()
	for _, cr := range c.clients {
		i, ok := cr.index[id]
		if !ok || cr.staleAt(nowMs) {
			continue
		}
		k := &cr.s.Keys[i]
		out.Clients++
		out.Hits = addSat(out.Hits, k.Hits)
		out.Misses = addSat(out.Misses, k.Misses)
		out.Loads = addSat(out.Loads, k.Loads)
		out.Coalesced = addSat(out.Coalesced, k.Coalesced)
		if k.SplitShards > 0 {
			out.SplitClients++
			out.SplitShards = max(out.SplitShards, k.SplitShards)
		}
		out.SplitWrites = addSat(out.SplitWrites, k.SplitWrites)
		out.SplitReads = addSat(out.SplitReads, k.SplitReads)
	}
	c.mu.RUnlock()
	out.HitRatio = share(out.Hits, out.Misses)
	out.CollapseRatio = perLoad(out.Loads, out.Coalesced)
	return out
}

// Totals returns the live clients' whole-process counters (see
// ClientTotals).
func (c *Clients) Totals() ClientTotals {
	nowMs := c.now().UnixMilli()
	var t ClientTotals
	c.mu.RLock()
	for _, cr := range c.clients {
		if cr.staleAt(nowMs) {
			continue
		}
		s := cr.s
		t.Clients++
		t.KeysOmitted = addSat(t.KeysOmitted, uint64(s.KeysOmitted))
		if x := s.Cache; x != nil {
			t.CacheClients++
			t.Hits = addSat(t.Hits, x.Hits)
			t.Misses = addSat(t.Misses, x.Misses)
			t.Loads = addSat(t.Loads, x.Loads)
			t.Coalesced = addSat(t.Coalesced, x.Coalesced)
			t.LoadErrors = addSat(t.LoadErrors, x.LoadErrors)
			t.ColdLoads = addSat(t.ColdLoads, x.ColdLoads)
			t.StaleServed = addSat(t.StaleServed, x.StaleServed)
			t.Timeouts = addSat(t.Timeouts, x.Timeouts)
			t.CacheEntries = addSat(t.CacheEntries, x.Entries)
		}
		if x := s.Split; x != nil {
			t.SplitClients++
			t.SplitCalls = addSat(t.SplitCalls, x.SplitCalls)
			t.PassedCalls = addSat(t.PassedCalls, x.PassedCalls)
			t.SplitKeys = addSat(t.SplitKeys, x.Keys)
			t.Folds = addSat(t.Folds, x.Folds)
			t.FoldErrors = addSat(t.FoldErrors, x.FoldErrors)
		}
		if x := s.Follower; x != nil {
			if t.FollowerClients == 0 || x.Entries < t.FollowerEntriesMin {
				t.FollowerEntriesMin = x.Entries
			}
			t.FollowerClients++
			if !x.Ready || x.Failing {
				t.FollowersNotReady++
			}
			t.FollowerLagMax = max(t.FollowerLagMax, x.Lag)
			t.FollowerEntriesMax = max(t.FollowerEntriesMax, x.Entries)
		}
		if x := s.Reporter; x != nil {
			t.ReporterClients++
			t.ReporterRecorded = addSat(t.ReporterRecorded, x.Recorded)
			t.ReporterSent = addSat(t.ReporterSent, x.Sent)
			t.ReporterFailed = addSat(t.ReporterFailed, x.Failed)
			t.ReporterDropped = addSat(t.ReporterDropped, x.Dropped)
		}
	}
	c.mu.RUnlock()
	t.HitRatio = share(t.Hits, t.Misses)
	t.CollapseRatio = perLoad(t.Loads, t.Coalesced)
	return t
}

// addSat is a + b, or the largest uint64 where that would wrap: one
// client's counter near the top (a hostile or broken record) must not
// turn a sum into a small number.
func addSat(a, b uint64) uint64 {
	if s := a + b; s >= a {
		return s
	}
	return math.MaxUint64
}

// share is a / (a + b), 0 when both are 0, in floating point so that the
// sum cannot wrap.
func share(a, b uint64) float64 {
	if a == 0 && b == 0 {
		return 0
	}
	return float64(a) / (float64(a) + float64(b))
}

// perLoad is (loads + coalesced) / loads, 0 without loads.
func perLoad(loads, coalesced uint64) float64 {
	if loads == 0 {
		return 0
	}
	return (float64(loads) + float64(coalesced)) / float64(loads)
}

// Stats returns the Clients' own counters.
func (c *Clients) Stats() ClientsStats {
	nowMs := c.now().UnixMilli()
	st := ClientsStats{
		Records: c.records.Load(), Applied: c.applied.Load(), Malformed: c.malformed.Load(),
		Stale: c.stale.Load(), Refused: c.refused.Load(), Tombstones: c.tombstones.Load(),
		FetchErrors: c.fetchErrors.Load(), Ready: c.ready.Load(),
	}
	c.mu.RLock()
	st.Held, st.Bytes = len(c.clients), c.bytes
	for _, cr := range c.clients {
		if !cr.staleAt(nowMs) {
			st.Live++
		}
	}
	c.mu.RUnlock()
	return st
}

// Close stops reading, waits for the reading goroutine and closes the
// Kafka client; the answers stay available, frozen but for staleness.
// Calling it again does nothing.
func (c *Clients) Close() {
	c.closeOnce.Do(func() {
		c.cancel()
		c.wg.Wait()
		c.cl.Close()
		if c.reg != nil {
			c.reg.Unregister(c.collector)
		}
	})
}

// logEvery rate-limits a kind of log line.
type logEvery struct {
	every   time.Duration
	last    time.Time
	skipped int
}

func (l *logEvery) allow(now time.Time) (ok bool, skipped int) {
	if !l.last.IsZero() && now.Sub(l.last) < l.every {
		l.skipped++
		return false, 0
	}
	l.last, skipped, l.skipped = now, l.skipped, 0
	return true, skipped
}

// clientsCollector exports a Clients' counters at scrape time. Its labels
// are a fixed set; a client ID or a key is never one.
type clientsCollector struct{ c *Clients }

var clientsDescs = struct {
	records, fetchErrors, held, live, bytes, ready *prometheus.Desc
}{
	records: prometheus.NewDesc("keyheat_api_client_stats_records_total",
		"Client-stats records read, by what became of them: applied, malformed, stale, refused (bounds reached), tombstone.", []string{"result"}, nil),
	fetchErrors: prometheus.NewDesc("keyheat_api_client_stats_fetch_errors_total",
		"Partition errors the client-stats follower's fetches returned.", nil, nil),
	held:  prometheus.NewDesc("keyheat_api_client_stats_clients_held", "Clients whose latest record is held, live or stale.", nil, nil),
	live:  prometheus.NewDesc("keyheat_api_client_stats_clients_live", "Clients whose latest record is younger than the staleness.", nil, nil),
	bytes: prometheus.NewDesc("keyheat_api_client_stats_bytes", "Bytes of the client-stats records held.", nil, nil),
	ready: prometheus.NewDesc("keyheat_api_client_stats_ready", "1 once the client-stats topic was read up to its end at start.", nil, nil),
}

func (cc *clientsCollector) Describe(ch chan<- *prometheus.Desc) {
	prometheus.DescribeByCollect(cc, ch)
}

func (cc *clientsCollector) Collect(ch chan<- prometheus.Metric) {
	st := cc.c.Stats()
	d := &clientsDescs
	for _, r := range []struct {
		v    uint64
		name string
	}{{st.Applied, "applied"}, {st.Malformed, "malformed"}, {st.Stale, "stale"}, {st.Refused, "refused"}, {st.Tombstones, "tombstone"}} {
		ch <- prometheus.MustNewConstMetric(d.records, prometheus.CounterValue, float64(r.v), r.name)
	}
	ch <- prometheus.MustNewConstMetric(d.fetchErrors, prometheus.CounterValue, float64(st.FetchErrors))
	ch <- prometheus.MustNewConstMetric(d.held, prometheus.GaugeValue, float64(st.Held))
	ch <- prometheus.MustNewConstMetric(d.live, prometheus.GaugeValue, float64(st.Live))
	ch <- prometheus.MustNewConstMetric(d.bytes, prometheus.GaugeValue, float64(st.Bytes))
	ready := 0.0
	if st.Ready {
		ready = 1
	}
	ch <- prometheus.MustNewConstMetric(d.ready, prometheus.GaugeValue, ready)
}
