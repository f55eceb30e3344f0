package hotkeys

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/zeebo/xxh3"
)

// Cache defaults.
const (
	// DefaultCacheMaxEntries is the number of keys a Cache holds when its
	// config leaves MaxEntries at 0.
	DefaultCacheMaxEntries = 1024
	// DefaultCacheMaxBytes is the bytes of keys and values a Cache holds
	// when its config leaves MaxBytes at 0.
	DefaultCacheMaxBytes = 64 << 20
	// DefaultLoadTimeout bounds a load when the config leaves LoadTimeout
	// at 0.
	DefaultLoadTimeout = 10 * time.Second
	// DefaultInvalidationTopic is the Kafka topic invalidations are
	// broadcast on when the config leaves Topic empty.
	DefaultInvalidationTopic = "keyheat.invalidations"
)

// Errors a Cache returns.
var (
	// ErrCacheClosed is returned by Get and Invalidate after Close.
	ErrCacheClosed = errors.New("hotkeys: cache closed")
	// ErrWaitTimeout is returned by Get when a hot key's load took longer
	// than CacheConfig.MaxWait and the cache held no stale value to serve
	// instead. The load goes on; a later Get may find its result.
	ErrWaitTimeout = errors.New("hotkeys: waited MaxWait for a hot key's load")
)

// CacheConfig configures a Cache. Registry is required, and so is a time
// to live: SharedTTL or LocalTTL. Broadcasting invalidations needs Kafka;
// a single process sets LocalOnly instead.
type CacheConfig struct {
	// Registry says which keys are hot and what their entries ask for.
	// Required.
	Registry Registry

	// SharedTTL is the time to live of the shared cache (e.g. Redis) in
	// front of the same data: the staleness the application already
	// accepts. LocalTTL defaults to a fifth of it and MaxStaleAge to it.
	SharedTTL time.Duration
	// LocalTTL is how long a loaded value is served from this process
	// without asking load again; an Entry's LocalTTL overrides it for its
	// key. 0 means SharedTTL / 5.
	LocalTTL time.Duration
	// MaxStaleAge is the oldest a value may be (since its load started) to
	// be served stale, when a Get waited MaxWait for a new load. 0 means
	// SharedTTL (so nothing stale is served when SharedTTL is 0); negative
	// means never serve stale.
	MaxStaleAge time.Duration

	// MaxEntries bounds the keys held, 1..1<<24. 0 means
	// DefaultCacheMaxEntries. NewCache allocates the table's buckets for
	// it up front: 8 bytes for each of 2×MaxEntries rounded up to a power
	// of two, so 16 to 32 bytes per entry allowed, held or not (16 KiB for
	// the default, 256 MiB for 1<<24).
	MaxEntries int
	// MaxBytes bounds the bytes of the keys (app and key) and values held.
	// 0 means DefaultCacheMaxBytes. A value larger than what is left once
	// every other key is evicted is returned and not kept; a key whose app
	// and key alone exceed MaxBytes is served as if it were not hot.
	MaxBytes int64

	// MaxWait is how long a Get of a hot key waits for a load before it
	// returns the stale value (see MaxStaleAge) or ErrWaitTimeout. 0 means
	// no maximum: a Get waits for the load or for its ctx.
	MaxWait time.Duration
	// LoadTimeout bounds each load of a hot key: its ctx ends then, and
	// a load that has not returned by then is given up: the Gets waiting
	// for it get an error that errors.Is context.DeadlineExceeded, the
	// next Get starts a load of its own, and whatever the late load
	// returns is dropped. 0 means DefaultLoadTimeout.
	LoadTimeout time.Duration

	// Topic is the Kafka topic invalidations are broadcast on; every
	// process of the application must use the same one. Empty means
	// DefaultInvalidationTopic. The topic must exist.
	Topic string
	// Kafka are the franz-go client options (seed brokers, TLS, SASL) of
	// the client that produces and follows invalidations. Required unless
	// LocalOnly.
	Kafka []kgo.Opt
	// LocalOnly turns the broadcast off: Invalidate evicts in this process
	// only. For an application that runs one process.
	LocalOnly bool

	// Logger receives the cache's logs; nil discards them. A line about
	// a key names it by its key_hash (Entry.KeyHash in hex), and by the
	// key itself too only with LogRawKeys.
	Logger *slog.Logger
	// LogRawKeys shows the keys themselves in the cache's log lines,
	// beside their key_hash: for an application whose keys its logs may
	// carry.
	LogRawKeys bool
	// Registerer receives the cache's metrics; nil registers none.
	Registerer prometheus.Registerer

	// clock is the cache's time, for tests; nil is the monotonic clock.
	clock cacheClock
	// topicCheckEvery is how often the cache checks that the topic it
	// follows is still there under the same ID, for tests; 0 means
	// defaultTopicCheckEvery.
	topicCheckEvery time.Duration
}

func (c CacheConfig) withDefaults() CacheConfig {
	if c.LocalTTL == 0 {
		c.LocalTTL = c.SharedTTL / 5
	}
	if c.MaxStaleAge == 0 {
		c.MaxStaleAge = c.SharedTTL
	}
	if c.MaxEntries == 0 {
		c.MaxEntries = DefaultCacheMaxEntries
	}
	if c.MaxBytes == 0 {
		c.MaxBytes = DefaultCacheMaxBytes
	}
	if c.LoadTimeout == 0 {
		c.LoadTimeout = DefaultLoadTimeout
	}
	if c.Topic == "" {
		c.Topic = DefaultInvalidationTopic
	}
	if c.topicCheckEvery == 0 {
		c.topicCheckEvery = defaultTopicCheckEvery
	}
	return c
}

// maxCacheEntries bounds MaxEntries: the table's bucket array is sized
// from it at construction.
const maxCacheEntries = 1 << 24

// Validate reports whether the config (after defaults) describes a Cache
// this package can build.
func (c CacheConfig) Validate() error {
	var errs []error
	if c.Registry == nil {
		errs = append(errs, errors.New("a Registry is required: the registry follower, or a StaticRegistry"))
	}
	if c.SharedTTL < 0 || c.LocalTTL < 0 {
		errs = append(errs, fmt.Errorf("SharedTTL %v and LocalTTL %v must not be negative", c.SharedTTL, c.LocalTTL))
	} else if c.SharedTTL == 0 && c.LocalTTL == 0 {
		errs = append(errs, errors.New("set SharedTTL to the TTL of the shared cache in front of the same data (LocalTTL defaults to a fifth of it), or set LocalTTL"))
	}
	if c.MaxEntries < 0 || c.MaxEntries > maxCacheEntries {
		errs = append(errs, fmt.Errorf("MaxEntries %d: want 1..%d (0 for the default %d)", c.MaxEntries, maxCacheEntries, DefaultCacheMaxEntries))
	}
	if c.MaxBytes < 0 {
		errs = append(errs, fmt.Errorf("MaxBytes %d must not be negative (0 for the default %d)", c.MaxBytes, DefaultCacheMaxBytes))
	}
	if c.MaxWait < 0 || c.LoadTimeout < 0 {
		errs = append(errs, fmt.Errorf("MaxWait %v and LoadTimeout %v must not be negative", c.MaxWait, c.LoadTimeout))
	}
	if len(c.Kafka) == 0 && !c.LocalOnly {
		errs = append(errs, errors.New("set Kafka (the seed brokers at least) to broadcast invalidations to the application's other processes, or LocalOnly for an application of one process"))
	}
	if len(c.Kafka) > 0 && c.LocalOnly {
		errs = append(errs, errors.New("LocalOnly with Kafka options: set one or the other"))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("hotkeys: cache config: %w", err)
	}
	return nil
}

// Cache serves hot keys' values from this process, as their registry
// entries ask: for a key whose entry says MitigationLocalCache it keeps the
// loaded value for a short time to live, and collapses concurrent misses
// into one load; for MitigationCoalesce it only collapses concurrent
// misses; for every other key (not hot, MitigationSplit, MitigationNone) it
// just calls load. It is safe for concurrent use.
//
// Invalidate evicts a key here and, through a Kafka topic, in every other
// process of the application. A write must update the backing store first
// and then call Invalidate; see Invalidate for what a caller is promised.
type Cache struct {
	reg         Registry
	clock       cacheClock
	localTTL    time.Duration
	maxStaleAge time.Duration
	maxWait     time.Duration
	loadTimeout time.Duration
	log         *slog.Logger
	rawKeys     bool // CacheConfig.LogRawKeys
	// topicCheckEvery: see CacheConfig.topicCheckEvery.
	topicCheckEvery time.Duration

	tab *table
	st  cacheCounters

	// following is true while the cache follows the invalidation topic
	// (always when LocalOnly): only a load started then is stored, since
	// an invalidation sent before the cache followed may never reach this
	// process. It turns false when fetching fails, until the cache follows
	// the topic again. followingc is closed while following is true, and
	// replaced when it turns false; both change under fmu.
	fmu        sync.Mutex
	following  atomic.Bool
	followingc chan struct{}

	bc *broadcaster // nil when LocalOnly

	// ctx ends at Close: it cancels loads and the follower.
	ctx       context.Context
	cancel    context.CancelFunc
	closed    atomic.Bool
	closeOnce sync.Once
	wg        sync.WaitGroup // flights not ended, and the follower
}

// NewCache returns a Cache configured by cfg. With Kafka it starts
// following the invalidation topic in the background; until it follows
// (WaitFollowing), hot keys are coalesced but no value is kept. Close
// releases it.
func NewCache(cfg CacheConfig) (*Cache, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	c := &Cache{
		reg:             cfg.Registry,
		clock:           cfg.clock,
		localTTL:        cfg.LocalTTL,
		maxStaleAge:     cfg.MaxStaleAge,
		maxWait:         cfg.MaxWait,
		loadTimeout:     cfg.LoadTimeout,
		topicCheckEvery: cfg.topicCheckEvery,
		log:             cfg.Logger,
		rawKeys:         cfg.LogRawKeys,
		tab:             newTable(cfg.MaxEntries, cfg.MaxBytes),
		followingc:      make(chan struct{}),
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	if c.clock == nil {
		c.clock = monoClock{start: time.Now()}
	}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	if cfg.Registerer != nil {
		if err := cfg.Registerer.Register(&cacheCollector{c: c}); err != nil {
			c.cancel()
			return nil, fmt.Errorf("hotkeys: register cache metrics: %w", err)
		}
	}
	if cfg.LocalOnly {
		c.setFollowing(true)
		return c, nil
	}
	bc, err := newBroadcaster(cfg.Topic, cfg.Kafka, c.log)
	if err != nil {
		c.cancel()
		if cfg.Registerer != nil {
			cfg.Registerer.Unregister(&cacheCollector{c: c})
		}
		return nil, err
	}
	c.bc = bc
	c.wg.Add(1)
	go c.follow()
	return c, nil
}

func (c *Cache) setFollowing(on bool) {
	c.fmu.Lock()
	defer c.fmu.Unlock()
	if c.following.Swap(on) == on {
		return
	}
	if on {
		close(c.followingc)
	} else {
		c.followingc = make(chan struct{})
	}
}

// WaitFollowing blocks until the cache follows the invalidation topic, from
// which on it keeps hot keys' values, or until ctx ends (returning its
// error) or the cache is closed (ErrCacheClosed). A LocalOnly cache follows
// from the start. A cache stops following when fetching invalidations
// fails, and follows again once it could start over at the topic's end
// (see CacheStats.FollowLosses).
func (c *Cache) WaitFollowing(ctx context.Context) error {
	if c.following.Load() {
		return nil
	}
	c.fmu.Lock()
	followingc := c.followingc
	c.fmu.Unlock()
	select {
	case <-followingc:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-c.ctx.Done():
		return ErrCacheClosed
	}
}

// Get returns the value of (app, key): from this process when the key is
// hot and its entry asks for the local cache and a loaded value is still
// fresh, else from load. The cache keeps the slice load returns, and the
// slice Get returns may be shared with other callers: neither load nor
// callers may modify it afterwards.
//
// Which path a Get takes follows the key's registry entry at the moment:
//
//   - Not hot, MitigationSplit or MitigationNone: load is called with ctx,
//     nothing is kept, concurrent Gets are not coalesced (a key that is not
//     hot has no crowd to collapse), and whatever the cache held for the
//     key is dropped.
//   - MitigationLocalCache: a fresh value is returned at once (a hit: no
//     lock, no allocation). On a miss, concurrent Gets of the key share one
//     load, whose result is kept for the entry's LocalTTL (else the
//     config's), unless an invalidation of the key arrived while it ran.
//   - MitigationCoalesce: concurrent Gets share one load; nothing is kept.
//
// A shared load runs in a goroutine of the cache with the ctx values of the
// Get that started it, not its cancellation nor deadline: a Get whose ctx
// ends returns ctx's error and leaves the load to the others. The load's
// ctx ends after LoadTimeout or at Close. Every Get waiting for a load gets
// its result, or its error, when it ends; a load still running after
// LoadTimeout is given up (see CacheConfig.LoadTimeout). After MaxWait (when set) a
// waiting Get returns the key's stale value if one younger than MaxStaleAge
// is held, else an error that errors.Is ErrWaitTimeout.
//
// load is kept by that goroutine, so a func literal capturing variables is
// allocated by the caller on every call, hit or not; keep one per key
// where that matters. A panic in a shared load is returned to its waiters
// as an error, and so is a load that calls runtime.Goexit (t.FailNow in a
// test) instead of returning.
func (c *Cache) Get(ctx context.Context, app, key string, load func(ctx context.Context) ([]byte, error)) ([]byte, error) {
	if c.closed.Load() {
		return nil, ErrCacheClosed
	}
	e, hot := c.reg.Get(app, key)
	h := c.tab.hash(key)
	ks := c.tab.lookup(h, app, key)
	if !hot || (e.Mitigation != MitigationLocalCache && e.Mitigation != MitigationCoalesce) {
		if ks != nil {
			c.drop(ks)
		}
		c.st.coldLoads.Add(1)
		return load(ctx)
	}
	if ks != nil && e.Mitigation == MitigationLocalCache {
		if v := ks.val.Load(); v != nil && v.fresh.Load() {
			if !ks.visited.Load() {
				ks.visited.Store(true)
			}
			ks.hits.add()
			return v.data, nil
		}
	}
	return c.miss(ctx, &e, h, load)
}

// drop takes ks out of the table: its key cooled or its mitigation is one
// the cache does not serve.
func (c *Cache) drop(ks *keyState) {
	c.tab.mu.Lock()
	c.tab.removeLocked(ks)
	c.tab.mu.Unlock()
}

// Forget applies a registry change: when e's key left the hot set (Status
// StatusCooled or StatusExpired) or its mitigation is one the cache does not
// serve, the cache drops the key; when it asks for MitigationCoalesce, the
// cache drops the key's value. A load in flight for a dropped key is not
// stored. An application wires it to the registry follower's changes
// (follower.OnChange(cache.Forget)); Get also drops a key it finds no
// longer hot, so a missed change costs memory until the next Get, not
// correctness.
func (c *Cache) Forget(e Entry) {
	h := c.tab.hash(e.Key)
	c.tab.mu.Lock()
	defer c.tab.mu.Unlock()
	ks := c.tab.lookup(h, e.App, e.Key)
	if ks == nil {
		return
	}
	switch {
	case e.Status == StatusHot && e.Mitigation == MitigationLocalCache:
	case e.Status == StatusHot && e.Mitigation == MitigationCoalesce:
		c.tab.setValueLocked(ks, nil)
		if ks.flight != nil {
			ks.flight.store = false
		}
	default:
		c.tab.removeLocked(ks)
	}
}

// Close stops following invalidations, cancels the loads in flight, waits
// for each to return or for its LoadTimeout to pass, whichever comes first,
// and releases the Kafka client. Gets waiting for a load get its result
// (likely ctx's error), or the LoadTimeout error. A load that ignores its
// ctx may still be running when Close returns: its goroutine ends when it
// returns, and its result is dropped. Close is idempotent; Get and
// Invalidate return ErrCacheClosed after it.
func (c *Cache) Close() {
	c.closeOnce.Do(func() {
		c.tab.mu.Lock()
		c.closed.Store(true)
		c.tab.mu.Unlock()
		c.cancel()
		c.wg.Wait()
		if c.bc != nil {
			c.bc.close()
		}
		c.tab.mu.Lock()
		c.tab.dropValuesLocked() // stops the values' timers
		c.tab.mu.Unlock()
	})
}

// keyStateLocked returns the keyState of (app, key) in the table, adding one
// when there is none; nil when the key alone is larger than MaxBytes.
// Called with tab.mu held.
func (c *Cache) keyStateLocked(h uint64, app, key string) *keyState {
	if ks := c.tab.lookup(h, app, key); ks != nil {
		return ks
	}
	return c.tab.insertLocked(h, app, key, xxh3.HashString(key))
}
