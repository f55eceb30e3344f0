package hotkeys

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// DefaultTopic is the registry topic a Follower reads unless its config
// names another.
const DefaultTopic = "keyheat.hotkeys"

// DefaultOnChangeQueue is the number of changes a Follower holds for its
// OnChange callbacks unless its config says otherwise.
const DefaultOnChangeQueue = 1024

// ErrFollowerClosed is returned by WaitReady when the follower was closed
// before it was ready.
var ErrFollowerClosed = errors.New("hotkeys: follower closed")

// FollowerConfig configures a Follower. The zero value of every field but
// ClientOpts is usable.
type FollowerConfig struct {
	// ClientOpts connect to the brokers: kgo.SeedBrokers at least, and
	// TLS or SASL options if the cluster needs them. The follower adds its
	// own consuming options (the topic from its start, read_committed,
	// no consumer group); ClientOpts must not set a consumer group.
	ClientOpts []kgo.Opt
	// Topic is the registry topic; "" means DefaultTopic.
	Topic string
	// OnChangeQueue is how many changes wait for the OnChange callbacks
	// before further ones are dropped (and counted); 0 means
	// DefaultOnChangeQueue.
	OnChangeQueue int
	// Logger receives the follower's logs; nil discards them. They name a
	// key by its hash only.
	Logger *slog.Logger
	// Registerer receives the follower's metrics
	// (keyheat_hotkeys_follower_*); nil registers none. Close unregisters
	// them.
	Registerer prometheus.Registerer
}

// Validate reports what makes c unusable, or nil.
func (c *FollowerConfig) Validate() error {
	var errs []error
	if len(c.ClientOpts) == 0 {
		errs = append(errs, errors.New("ClientOpts is empty: give at least kgo.SeedBrokers"))
	}
	if c.Topic != "" {
		if err := validTopic(c.Topic); err != nil {
			errs = append(errs, err)
		}
	}
	if c.OnChangeQueue < 0 {
		errs = append(errs, fmt.Errorf("OnChangeQueue is %d, want ≥ 0 (0: %d)", c.OnChangeQueue, DefaultOnChangeQueue))
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("hotkeys follower config: %w", errors.Join(errs...))
}

// validTopic checks a Kafka topic name: 1 to 249 of [a-zA-Z0-9._-], not
// "." or "..".
func validTopic(t string) error {
	if len(t) > 249 || t == "." || t == ".." {
		return fmt.Errorf("topic %q is not a valid Kafka topic name", t)
	}
	for i := 0; i < len(t); i++ {
		c := t[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("topic %q is not a valid Kafka topic name: only letters, digits, '.', '_' and '-'", t)
		}
	}
	return nil
}

// FollowerStats is a snapshot of a Follower's state and counters.
type FollowerStats struct {
	// Entries is the number of keys IsHot reports hot: Detector of them
	// from the detector, Manual promoted by hand.
	Entries, Detector, Manual int
	// Demoted is the number of manual demotes in force, each hiding a key
	// whatever the detector says.
	Demoted int
	// RecordsRead counts the registry records read (transaction markers
	// not counted); DecodeErrors those of them skipped as undecodable or
	// inconsistent.
	RecordsRead, DecodeErrors uint64
	// OnChangeDropped counts the changes the OnChange callbacks did not
	// get because their queue was full.
	OnChangeDropped uint64
	// StaleManual counts manual entries read after a newer one of their
	// key (by created_ms) and not applied: a change retried through
	// another server while the first attempt was still on its way.
	StaleManual uint64
	// Ready is what Ready returns.
	Ready bool
	// Lag is the number of offsets between the follower's position and
	// the partitions' high watermarks, summed, as of the last fetch that
	// returned each partition.
	Lag int64
	// FetchErrors counts the partition errors fetches returned.
	FetchErrors uint64
	// Failing is true while the follower's latest fetch returned errors,
	// or listing the topic's offsets fails (as while a resync waits for
	// the topic to exist): the set is then the last one read, and Lag is
	// as of the last fetch that succeeded.
	Failing bool
	// Resyncs counts the times the follower started reading the topic
	// again from its start because it was recreated; Resyncing is true
	// while it does, IsHot answering from the set before it meanwhile.
	Resyncs   uint64
	Resyncing bool
}

// Follower keeps the live set of hot keys of the registry topic in memory
// and answers IsHot and Get from it without locks or allocation.
//
// It reads every partition of the compacted topic from its start, without
// a consumer group, with read_committed isolation (records of aborted
// transactions are never applied), then follows new records until Close.
// The set is what the latest record of each key says:
//
//   - detector records (record key schemas.HotKeyRecordKey): "hot" puts
//     the key in the set with the record's rate, onset and mitigation;
//     "update" refreshes its rate, peak rate and mitigation and keeps the
//     onset (an update for a key not in the set, whose hot record was
//     compacted away, puts it there with the update's onset); "cooled" and
//     a tombstone take it out;
//   - manual records (record key schemas.ManualRecordKey) override the
//     detector for their key until CreatedMs + TTLMs: a promote puts the
//     key in the set with the entry's mitigation whatever the detector
//     says, a demote keeps it out whatever the detector says. When the
//     override ends (by the wall clock, no new record needed; within a
//     timer's precision) or a tombstone removes it, the detector's state
//     for the key rules again. Of a key's manual records the one made
//     last (the greatest CreatedMs; of equal ones, the one read last)
//     rules, whatever order they are read in: one made before the key's
//     latest is skipped and counted (StaleManual), so a change retried
//     through another writer, or written to another partition, does not
//     undo a later one. A manual record read after its end changes
//     nothing but ending the key's previous override.
//
// A record that cannot be decoded, or whose value names another key than
// its record key, is skipped and counted (Stats, metrics); the follower
// never stops on one. Keys may hold any bytes.
//
// The follower is ready (Ready, WaitReady) once it has read every partition
// up to the last stable offset it listed when it started (read_committed
// reads no further), so the set WaitReady returns to reflects every record
// committed to the registry before the follower started. A
// partition counts as read when the follower's position passed that offset,
// transaction markers included, not when a record at the offset before it
// arrived. A topic that does not exist yet makes the follower ready at once
// with an empty set; it starts reading the topic when it appears (the
// client looks for it every few seconds). A transaction open on the topic
// at start can delay readiness until it ends.
//
// When the topic is deleted and created again, the follower reads the new
// topic from its start and then holds what a follower started on the new
// topic would: it notices by the fetch errors the client returns for the
// old topic (the topic's ID in the cluster is no longer the one it reads),
// or, on a broker without topic IDs, by offsets starting again below its
// position. Meanwhile it answers from the set it had: the new topic's set
// is built aside and replaces it once read up to the offsets listed when
// the resync began, each key's answer changing at once, and OnChange
// reports the difference (StatusCooled for a key the new topic does not
// hold, StatusHot for one it holds anew or differently). A topic deleted
// and not created again leaves the set as it was (a registry gone is not
// "no key is hot"; Stats.Failing says the set is not being followed) until
// the topic comes back. On fetch errors the follower waits before
// fetching again, from 100ms up to 5s as the errors go on.
//
// All methods are safe for concurrent use.
type Follower struct {
	topic string
	log   *slog.Logger
	m     *followerMetrics
	cl    *kgo.Client
	clock clock
	set   *entrySet

	ctx       context.Context
	cancel    context.CancelFunc
	wg        sync.WaitGroup
	closeOnce sync.Once

	readyOnce sync.Once
	readyCh   chan struct{}
	ready     atomic.Bool

	events chan Entry
	cbMu   sync.Mutex
	cbs    atomic.Pointer[[]func(Entry)]
	rearm  chan struct{} // wakes the expiry loop when an override is added

	records, decodeErrors, dropped atomic.Uint64
	staleManual                    atomic.Uint64 // manual entries older than the key's, not applied
	lag                            atomic.Int64
	nDetector, nManual, nDemoted   atomic.Int64

	// mu serializes the writers (the fetch loop and the expiry loop) over
	// the registry's state; readers never take it.
	mu sync.Mutex
	st registryState

	// aside is the state a resync builds, nil when none is under way;
	// guarded by mu, replaced (set) by the fetch loop only.
	aside *registryState

	fetchErrors, resyncs atomic.Uint64
	failing, resyncing   atomic.Bool

	// Owned by the fetch loop.
	progress progress
	topicID  [16]byte // the ID of the topic being read; zero: not known
	badLog   logLimit
	fetchLog logLimit
}

// The cache asks the follower whether a key is hot.
var _ Registry = (*Follower)(nil)

// NewFollower validates cfg, creates the follower's Kafka client and starts
// reading the registry in the background; it does not wait for the brokers
// (see WaitReady). Close it when done.
func NewFollower(cfg FollowerConfig) (*Follower, error) {
	return newFollower(cfg, wallClock{})
}

func newFollower(cfg FollowerConfig, clk clock) (*Follower, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Topic == "" {
		cfg.Topic = DefaultTopic
	}
	if cfg.OnChangeQueue == 0 {
		cfg.OnChangeQueue = DefaultOnChangeQueue
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	opts := append(slices.Clip(cfg.ClientOpts),
		kgo.ConsumeTopics(cfg.Topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		// Markers move the position that readiness compares (see progress).
		kgo.KeepControlRecords(),
	)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("hotkeys follower: kafka client: %w", err)
	}
	if g, _ := cl.OptValue(kgo.ConsumerGroup).(string); g != "" {
		cl.Close()
		return nil, fmt.Errorf("hotkeys follower: ClientOpts set consumer group %q; the follower reads every partition itself, remove the group", g)
	}
	m, err := newFollowerMetrics(cfg.Registerer)
	if err != nil {
		cl.Close()
		return nil, fmt.Errorf("hotkeys follower: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	f := &Follower{
		topic: cfg.Topic, log: log.With("topic", cfg.Topic), m: m, cl: cl, clock: clk, set: newEntrySet(),
		ctx: ctx, cancel: cancel, readyCh: make(chan struct{}),
		events: make(chan Entry, cfg.OnChangeQueue), rearm: make(chan struct{}, 1),
		badLog: logLimit{every: 30 * time.Second}, fetchLog: logLimit{every: 30 * time.Second},
	}
	f.cbs.Store(&[]func(Entry){})
	f.st.init(f.set)
	f.wg.Add(3)
	go f.fetchLoop()
	go f.expiryLoop()
	go f.dispatchLoop()
	return f, nil
}

// IsHot reports whether key of app is in the set now. It does not allocate
// or lock.
func (f *Follower) IsHot(app, key string) bool { return f.set.lookup(app, key) != nil }

// Get returns key's entry and true when key of app is in the set now, with
// Status StatusHot. It does not allocate or lock.
func (f *Follower) Get(app, key string) (Entry, bool) {
	if e := f.set.lookup(app, key); e != nil {
		return *e, true
	}
	return Entry{}, false
}

// All iterates over the entries in the set, in no particular order. It
// reads the set shard by shard (1/256 of the keys each), so a change
// applied meanwhile may show or not; each entry is one the set held.
func (f *Follower) All() iter.Seq[Entry] {
	return func(yield func(Entry) bool) {
		for i := range f.set.shards {
			t := f.set.shards[i].Load()
			for j := range t.entries {
				if !yield(t.entries[j]) {
					return
				}
			}
		}
	}
}

// OnChange registers fn to be called with each change of the set applied
// after OnChange returns, once the follower is ready. The bootstrap loads
// the set without calling anyone: to miss nothing, register before
// WaitReady, then read the set with All (a change may then be seen twice).
// A change is one key whose Get answer changed:
//
//   - StatusHot with the new entry: the key entered the set or its entry
//     was replaced (a refresh, a promote, or a detector entry shown again
//     when a manual override ended);
//   - StatusCooled with the entry it had: a record took the key out (the
//     detector's cooled or tombstone, a demote, a manual tombstone, a
//     manual record read after its end), or the topic was recreated
//     without it;
//   - StatusExpired with the entry it had: a promote's TTL ended and the
//     detector has no entry for the key.
//
// The records of one fetch are applied together, and a change is reported
// once per key with the key's state after them: a key that went in and
// out within one fetch is not reported. Callbacks run one at a time, in
// registration order, on a goroutine of the follower's, in the order the
// changes were applied; reading never waits for them: when OnChangeQueue
// changes are waiting, further ones are dropped and counted
// (Stats.OnChangeDropped). A callback that never returns makes Close wait
// for ever.
func (f *Follower) OnChange(fn func(Entry)) {
	f.cbMu.Lock()
	defer f.cbMu.Unlock()
	cbs := append(slices.Clone(*f.cbs.Load()), fn)
	f.cbs.Store(&cbs)
}

// Ready reports whether the follower has read the registry up to where it
// ended when the follower started.
func (f *Follower) Ready() bool { return f.ready.Load() }

// WaitReady waits until the follower is ready, ctx ends (ctx's error) or
// the follower is closed (ErrFollowerClosed).
func (f *Follower) WaitReady(ctx context.Context) error {
	select {
	case <-f.readyCh:
		return nil
	default:
	}
	select {
	case <-f.readyCh:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-f.ctx.Done():
		return ErrFollowerClosed
	}
}

// Topic is the registry topic the follower reads.
func (f *Follower) Topic() string { return f.topic }

// Stats returns a snapshot of the follower's counters.
func (f *Follower) Stats() FollowerStats {
	d, m := int(f.nDetector.Load()), int(f.nManual.Load())
	return FollowerStats{Entries: d + m, Detector: d, Manual: m, Demoted: int(f.nDemoted.Load()),
		RecordsRead: f.records.Load(), DecodeErrors: f.decodeErrors.Load(), OnChangeDropped: f.dropped.Load(),
		StaleManual: f.staleManual.Load(),
		Ready:       f.ready.Load(), Lag: f.lag.Load(), FetchErrors: f.fetchErrors.Load(), Failing: f.failing.Load(),
		Resyncs: f.resyncs.Load(), Resyncing: f.resyncing.Load()}
}

// Close stops following, waits for the follower's goroutines (a callback
// running included) and closes its client. The set stays readable, frozen.
// Calling it again does nothing.
func (f *Follower) Close() {
	f.closeOnce.Do(func() {
		f.cancel()
		f.wg.Wait()
		f.cl.Close()
		f.m.unregister()
	})
}

// Backoff after fetch errors: doubled per poll that fails again, reset by
// one that does not.
const (
	minFetchBackoff = 100 * time.Millisecond
	maxFetchBackoff = 5 * time.Second
)

// fetchLoop lists where the registry ends, then reads it until Close.
func (f *Follower) fetchLoop() {
	defer f.wg.Done()
	adm := kadm.NewClient(f.cl)
	if !f.listEnds(adm, false) {
		return
	}
	backoff := minFetchBackoff
	for {
		fs := f.cl.PollFetches(f.ctx)
		if f.ctx.Err() != nil || fs.IsClientClosed() {
			return
		}
		failed, dataLoss := f.countFetchErrors(fs)
		rewound := f.apply(fs)
		switch {
		case rewound || dataLoss:
			why := "offsets started again below the follower's position"
			if dataLoss {
				why = "the client lost records"
			}
			if !f.resync(adm, why) {
				return
			}
			continue
		case !failed:
			backoff = minFetchBackoff
			f.setFailing(false)
			continue
		}
		f.setFailing(true)
		t := time.NewTimer(backoff)
		select {
		case <-f.ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		backoff = min(2*backoff, maxFetchBackoff)
		if f.recreated(adm) && !f.resync(adm, "the topic's ID changed") {
			return
		}
	}
}

// countFetchErrors counts and logs the errors of a poll, and reports whether
// there were any and whether one says the client lost records.
func (f *Follower) countFetchErrors(fs kgo.Fetches) (failed, dataLoss bool) {
	fs.EachError(func(_ string, p int32, err error) {
		if errors.Is(err, context.Canceled) {
			return
		}
		failed = true
		var dl *kgo.ErrDataLoss
		dataLoss = dataLoss || errors.As(err, &dl)
		f.fetchErrors.Add(1)
		f.m.fetchErrors.Inc()
		if ok, skipped := f.fetchLog.allow(time.Now()); ok {
			f.log.Warn("hotkeys follower: fetch", "partition", p, "err", err, "similar_logs_skipped", skipped)
		}
	})
	return failed, dataLoss
}

func (f *Follower) setFailing(v bool) {
	if f.failing.Swap(v) == v {
		return
	}
	if v {
		f.m.failing.Set(1)
		return
	}
	f.m.failing.Set(0)
	f.log.Info("hotkeys follower: fetching again")
}

// recreated reports whether the cluster holds the topic under another ID
// than the one being read. A topic missing, or a broker that cannot say,
// is not recreated (yet): the follower keeps its set and waits.
func (f *Follower) recreated(adm *kadm.Client) bool {
	md, err := adm.Metadata(f.ctx, f.topic)
	if err != nil {
		return false
	}
	td, ok := md.Topics[f.topic]
	if !ok || td.Err != nil || td.ID == (kadm.TopicID{}) {
		return false
	}
	// A zero topicID (the topic appeared after the start and no record
	// came yet) counts as another ID: reading an unchanged topic again
	// only costs the reading.
	return [16]byte(td.ID) != f.topicID
}

// resync reads the topic again from its start: it makes the client forget
// the topic (it never reads a recreated topic by itself), lists the new
// topic's offsets, waiting for the topic to exist, and starts a state
// aside that apply fills and swaps in once read. It returns false when
// the follower was closed.
func (f *Follower) resync(adm *kadm.Client, why string) bool {
	f.resyncs.Add(1)
	f.m.resyncs.Inc()
	f.resyncing.Store(true)
	f.log.Warn("hotkeys follower: the registry topic was deleted or recreated; reading it again from its start, answering from the set read so far until then",
		"why", why)
	f.cl.PurgeTopicsFromClient(f.topic)
	f.cl.AddConsumeTopics(f.topic)
	f.mu.Lock()
	f.aside = f.newAside()
	f.mu.Unlock()
	if !f.listEnds(adm, true) {
		return false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.progress.done() {
		f.swapLocked(f.clock.now())
		f.setReady()
	}
	return true
}

// listEnds records the topic's ID and its partitions' start and last
// stable offsets, retrying until it has them or the follower is closed
// (false). With mustExist it also retries while the topic does not exist.
func (f *Follower) listEnds(adm *kadm.Client, mustExist bool) bool {
	backoff := minFetchBackoff
	for {
		id, want, next, err := f.tryListEnds(adm)
		if err == nil && mustExist && len(next) == 0 {
			err = errors.New("the topic does not exist")
		}
		if err == nil {
			f.setFailing(false)
			f.topicID = id
			f.progress.start(want, next)
			if f.progress.done() && f.aside == nil {
				f.setReady()
			}
			return true
		}
		if f.ctx.Err() != nil {
			return false
		}
		f.setFailing(true)
		if ok, skipped := f.fetchLog.allow(time.Now()); ok {
			f.log.Warn("hotkeys follower: list the registry's offsets; retrying", "err", err, "retry_in", backoff, "similar_logs_skipped", skipped)
		}
		t := time.NewTimer(backoff)
		select {
		case <-f.ctx.Done():
			t.Stop()
			return false
		case <-t.C:
		}
		backoff = min(2*backoff, maxFetchBackoff)
	}
}

// tryListEnds returns the topic's ID (zero if it does not exist or the
// broker has none), per partition with records to read the offset the
// follower must reach to be ready, and each partition's start offset.
func (f *Follower) tryListEnds(adm *kadm.Client) (id [16]byte, want, start map[int32]int64, err error) {
	// The ID first: if the topic is recreated before the offsets are
	// listed, the fetches fail and another resync follows.
	md, err := adm.Metadata(f.ctx, f.topic)
	if err != nil {
		return id, nil, nil, fmt.Errorf("metadata: %w", err)
	}
	if td, ok := md.Topics[f.topic]; ok && td.Err == nil {
		id = td.ID
	}
	ends, err := adm.ListCommittedOffsets(f.ctx, f.topic)
	if err != nil {
		return id, nil, nil, fmt.Errorf("last stable offsets: %w", err)
	}
	starts, err := adm.ListStartOffsets(f.ctx, f.topic)
	if err != nil {
		return id, nil, nil, fmt.Errorf("start offsets: %w", err)
	}
	want, start = map[int32]int64{}, map[int32]int64{}
	var errs []error
	ends.Each(func(o kadm.ListedOffset) {
		if o.Err != nil {
			// A topic that does not exist is listed as partition -1 with
			// this error: nothing to read yet.
			if o.Partition != -1 || !errors.Is(o.Err, kerr.UnknownTopicOrPartition) {
				errs = append(errs, fmt.Errorf("partition %d: %w", o.Partition, o.Err))
			}
			return
		}
		s, ok := starts.Lookup(f.topic, o.Partition)
		switch {
		case !ok:
			errs = append(errs, fmt.Errorf("partition %d: no start offset listed", o.Partition))
		case s.Err != nil:
			errs = append(errs, fmt.Errorf("partition %d start: %w", o.Partition, s.Err))
		default:
			start[o.Partition] = s.Offset
			if o.Offset > s.Offset {
				want[o.Partition] = o.Offset
			}
		}
	})
	if len(errs) > 0 {
		return id, nil, nil, errors.Join(errs...)
	}
	return id, want, start, nil
}

func (f *Follower) setReady() {
	f.readyOnce.Do(func() {
		f.ready.Store(true)
		f.m.ready.Set(1)
		close(f.readyCh)
		f.log.Info("hotkeys follower: ready", "entries", f.nDetector.Load()+f.nManual.Load())
	})
}

// expiryLoop ends manual overrides when their TTL runs out.
func (f *Follower) expiryLoop() {
	defer f.wg.Done()
	for {
		f.mu.Lock()
		next, ok := f.st.nextExpiry()
		f.mu.Unlock()
		var fire <-chan time.Time
		stop := func() {}
		if ok {
			fire, stop = f.clock.at(next)
		}
		select {
		case <-f.ctx.Done():
			stop()
			return
		case <-f.rearm:
			stop()
		case <-fire:
			f.mu.Lock()
			f.sweepLocked(&f.st, f.clock.now())
			f.mu.Unlock()
		}
	}
}

// dispatchLoop runs the OnChange callbacks.
func (f *Follower) dispatchLoop() {
	defer f.wg.Done()
	for {
		select {
		case <-f.ctx.Done():
			return
		case e := <-f.events:
			for _, fn := range *f.cbs.Load() {
				fn(e)
			}
		}
	}
}

// emit queues a change for the callbacks, or counts it dropped.
func (f *Follower) emit(e Entry) {
	select {
	case f.events <- e:
	default:
		f.dropped.Add(1)
		f.m.dropped.Inc()
	}
}

// logLimit lets a kind of log line through at most once per every; the
// lines it held back are counted and reported with the next one.
type logLimit struct {
	every   time.Duration
	last    time.Time
	skipped int
}

func (l *logLimit) allow(now time.Time) (ok bool, skipped int) {
	if !l.last.IsZero() && now.Sub(l.last) < l.every {
		l.skipped++
		return false, 0
	}
	l.last, skipped, l.skipped = now, l.skipped, 0
	return true, skipped
}

// clock is the follower's source of wall-clock time; tests use a fake one.
type clock interface {
	now() time.Time
	// at returns a channel that receives once the clock reaches t, and a
	// function that stops it.
	at(t time.Time) (<-chan time.Time, func())
}

type wallClock struct{}

func (wallClock) now() time.Time { return time.Now() }

func (wallClock) at(t time.Time) (<-chan time.Time, func()) {
	tm := time.NewTimer(time.Until(t))
	return tm.C, func() { tm.Stop() }
}
