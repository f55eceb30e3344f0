package hotkeys

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
)

func TestCacheConfigValidate(t *testing.T) {
	reg := &StaticRegistry{}
	ok := CacheConfig{Registry: reg, SharedTTL: time.Minute, LocalOnly: true}
	require.NoError(t, ok.Validate())
	require.NoError(t, CacheConfig{Registry: reg, LocalTTL: time.Second, Kafka: []kgo.Opt{kgo.SeedBrokers("x:9092")}}.Validate())

	for _, tc := range []struct {
		name string
		edit func(*CacheConfig)
		want string
	}{
		{"no registry", func(c *CacheConfig) { c.Registry = nil }, "Registry is required"},
		{"no ttl", func(c *CacheConfig) { c.SharedTTL = 0 }, "set SharedTTL"},
		{"negative shared ttl", func(c *CacheConfig) { c.SharedTTL = -time.Second }, "must not be negative"},
		{"negative local ttl", func(c *CacheConfig) { c.LocalTTL = -time.Second }, "must not be negative"},
		{"negative entries", func(c *CacheConfig) { c.MaxEntries = -1 }, "MaxEntries -1"},
		{"too many entries", func(c *CacheConfig) { c.MaxEntries = maxCacheEntries + 1 }, "MaxEntries"},
		{"negative bytes", func(c *CacheConfig) { c.MaxBytes = -1 }, "MaxBytes -1"},
		{"negative max wait", func(c *CacheConfig) { c.MaxWait = -1 }, "MaxWait"},
		{"negative load timeout", func(c *CacheConfig) { c.LoadTimeout = -1 }, "LoadTimeout"},
		{"neither kafka nor local", func(c *CacheConfig) { c.LocalOnly = false }, "LocalOnly for an application of one process"},
		{"both kafka and local", func(c *CacheConfig) { c.Kafka = []kgo.Opt{kgo.SeedBrokers("x:9092")} }, "set one or the other"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := ok
			tc.edit(&cfg)
			err := cfg.Validate()
			require.ErrorContains(t, err, tc.want)
			_, err = NewCache(cfg)
			require.ErrorContains(t, err, tc.want, "NewCache must validate")
		})
	}
}

func TestCacheDefaults(t *testing.T) {
	cfg := CacheConfig{SharedTTL: 10 * time.Second}.withDefaults()
	require.Equal(t, 2*time.Second, cfg.LocalTTL, "LocalTTL defaults to a fifth of SharedTTL")
	require.Equal(t, 10*time.Second, cfg.MaxStaleAge)
	require.Equal(t, DefaultCacheMaxEntries, cfg.MaxEntries)
	require.EqualValues(t, DefaultCacheMaxBytes, cfg.MaxBytes)
	require.Equal(t, DefaultInvalidationTopic, cfg.Topic)
	require.Equal(t, DefaultLoadTimeout, cfg.LoadTimeout)
	cfg = CacheConfig{SharedTTL: 10 * time.Second, LocalTTL: time.Second}.withDefaults()
	require.Equal(t, time.Second, cfg.LocalTTL, "a LocalTTL set is kept")
}

// A key that is not hot, or whose mitigation the cache does not serve, is
// loaded on every Get and nothing is kept.
func TestCacheColdKeyLoadsEveryTime(t *testing.T) {
	noLeaks(t)
	reg := &StaticRegistry{}
	reg.Set(Entry{App: "shop", Key: "split", Mitigation: MitigationSplit, SplitFactor: 4})
	reg.Set(Entry{App: "shop", Key: "none", Mitigation: MitigationNone})
	c := newTestCache(t, CacheConfig{Registry: reg, SharedTTL: time.Hour})
	for _, key := range []string{"cold", "split", "none"} {
		t.Run(key, func(t *testing.T) {
			s := &versionedStore{}
			for i := range 5 {
				s.write()
				v, err := c.Get(t.Context(), "shop", key, s.load)
				require.NoError(t, err)
				require.EqualValues(t, i+1, version(t, v), "a cold Get returns what load returns now")
			}
			require.EqualValues(t, 5, s.loads.Load(), "load called on every Get")
			st := c.Stats()
			require.Zero(t, st.Entries, "nothing kept for a key the cache does not serve")
			require.Zero(t, st.Bytes)
			require.Zero(t, st.Hits+st.Misses+st.Loads)
		})
	}
	require.EqualValues(t, 15, c.Stats().ColdLoads)
}

func TestCacheHitAndTTL(t *testing.T) {
	noLeaks(t)
	clk := &testClock{}
	reg := hotRegistry("shop", "product:42", MitigationLocalCache)
	reg.Set(Entry{App: "shop", Key: "short", Mitigation: MitigationLocalCache, LocalTTL: time.Second})
	c := newTestCache(t, withClock(CacheConfig{Registry: reg, SharedTTL: 10 * time.Second}, clk))

	s := &versionedStore{}
	s.write()
	get := func(key string) uint64 {
		t.Helper()
		v, err := c.Get(t.Context(), "shop", key, s.load)
		require.NoError(t, err)
		return version(t, v)
	}
	require.EqualValues(t, 1, get("product:42"))
	s.write()
	for range 10 {
		require.EqualValues(t, 1, get("product:42"), "a fresh value is served from the cache")
	}
	require.EqualValues(t, 1, s.loads.Load())

	// LocalTTL defaults to SharedTTL / 5 = 2 s.
	clk.advance(2*time.Second - 1)
	require.EqualValues(t, 1, get("product:42"), "fresh until its TTL ends")
	clk.advance(1)
	require.EqualValues(t, 2, get("product:42"), "loaded again once its TTL ended")
	require.EqualValues(t, 2, s.loads.Load())

	// The entry's LocalTTL overrides the config's.
	require.EqualValues(t, 2, get("short"))
	s.write()
	clk.advance(time.Second - 1)
	require.EqualValues(t, 2, get("short"))
	clk.advance(1)
	require.EqualValues(t, 3, get("short"), "the entry's LocalTTL of 1 s applies")

	st := c.Stats()
	require.EqualValues(t, 12, st.Hits)
	require.EqualValues(t, 4, st.Misses)
	require.EqualValues(t, 4, st.Loads)
	require.InDelta(t, 12.0/16, st.HitRatio(), 1e-9)
	require.Equal(t, 2, st.Entries)
	keys := map[string]KeyStats{}
	for _, k := range st.Keys {
		keys[k.Key] = k
	}
	require.EqualValues(t, 11, keys["product:42"].Hits)
	require.EqualValues(t, 2, keys["product:42"].Loads)
	require.True(t, keys["product:42"].Cached)
	require.EqualValues(t, len("shop")+len("product:42")+8, keys["product:42"].Bytes)
}

// The entry and byte bounds hold after every Get, for keys of any size,
// and Bytes always equals the sum over the keys held.
func TestCacheBounds(t *testing.T) {
	noLeaks(t)
	const maxEntries, maxBytes = 64, 4096
	reg := &StaticRegistry{}
	for i := range 1000 {
		reg.Set(Entry{App: "a", Key: fmt.Sprint("k", i), Mitigation: MitigationLocalCache})
	}
	c := newTestCache(t, CacheConfig{Registry: reg, SharedTTL: time.Hour, MaxEntries: maxEntries, MaxBytes: maxBytes})
	rng := rand.New(rand.NewPCG(1, 2))
	check := func() {
		t.Helper()
		st := c.Stats()
		require.LessOrEqual(t, st.Entries, maxEntries)
		require.LessOrEqual(t, st.Bytes, int64(maxBytes))
		var sum int64
		for _, k := range st.Keys {
			sum += k.Bytes
		}
		require.Equal(t, st.Bytes, sum, "Bytes is the sum over the keys held")
		require.Len(t, st.Keys, st.Entries)
	}
	last := map[string][]byte{}
	for i := range 5000 {
		key := fmt.Sprint("k", rng.IntN(1000))
		// Mostly small values, now and then one near the whole bound.
		size := rng.IntN(100)
		if i%50 == 0 {
			size = rng.IntN(maxBytes)
		}
		want := bytes.Repeat([]byte{byte(i)}, size)
		got, err := c.Get(t.Context(), "a", key, func(context.Context) ([]byte, error) { return want, nil })
		require.NoError(t, err)
		if !bytes.Equal(got, want) {
			require.Equal(t, last[key], got, "a hit returns the value last loaded for the key")
		}
		last[key] = got
		check()
	}
	// Keys with empty values: the entry bound is the one reached.
	for i := range 200 {
		_, err := c.Get(t.Context(), "a", fmt.Sprint("k", i), func(context.Context) ([]byte, error) { return nil, nil })
		require.NoError(t, err)
		check()
	}
	st := c.Stats()
	require.Equal(t, maxEntries, st.Entries, "small values fill the entry bound")
	require.NotZero(t, st.Evictions)

	// A value larger than the byte bound is returned, not kept.
	huge := make([]byte, maxBytes)
	reg.Set(Entry{App: "a", Key: "huge", Mitigation: MitigationLocalCache})
	v, err := c.Get(t.Context(), "a", "huge", func(context.Context) ([]byte, error) { return huge, nil })
	require.NoError(t, err)
	require.Len(t, v, maxBytes)
	check()
	for _, k := range c.Stats().Keys {
		if k.Key == "huge" {
			require.False(t, k.Cached, "a value over MaxBytes is not kept")
		}
	}
}

// Bounds hold under concurrent inserts too (run with -race).
func TestCacheBoundsConcurrent(t *testing.T) {
	noLeaks(t)
	const maxEntries, maxBytes = 32, 2048
	reg := &StaticRegistry{}
	for i := range 200 {
		reg.Set(Entry{App: "a", Key: fmt.Sprint("k", i), Mitigation: MitigationLocalCache})
	}
	clk := &testClock{}
	// LoadTimeout far beyond what the clock is moved: no load is given up.
	c := newTestCache(t, withClock(CacheConfig{Registry: reg, LocalTTL: time.Second, MaxEntries: maxEntries, MaxBytes: maxBytes,
		LoadTimeout: 24 * time.Hour}, clk))
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 0))
			for range 2000 {
				key := fmt.Sprint("k", rng.IntN(200))
				val := make([]byte, rng.IntN(200))
				_, err := c.Get(t.Context(), "a", key, func(context.Context) ([]byte, error) { return val, nil })
				if err != nil {
					t.Error(err)
					return
				}
				if rng.IntN(100) == 0 {
					clk.advance(100 * time.Millisecond)
				}
			}
		})
	}
	wg.Go(func() {
		for range 500 {
			st := c.Stats()
			if st.Entries > maxEntries || st.Bytes > maxBytes {
				t.Errorf("over the bounds: %d entries, %d bytes", st.Entries, st.Bytes)
				return
			}
		}
	})
	wg.Wait()
}

// A key that left the hot set is dropped at its next Get, and by Forget.
func TestCacheDropsCooledKeys(t *testing.T) {
	noLeaks(t)
	reg := hotRegistry("shop", "k", MitigationLocalCache)
	c := newTestCache(t, CacheConfig{Registry: reg, SharedTTL: time.Hour})
	s := &versionedStore{}
	s.write()

	_, err := c.Get(t.Context(), "shop", "k", s.load)
	require.NoError(t, err)
	require.Equal(t, 1, c.Stats().Entries)
	reg.Delete("shop", "k")
	s.write()
	v, err := c.Get(t.Context(), "shop", "k", s.load)
	require.NoError(t, err)
	require.EqualValues(t, 2, version(t, v), "a cooled key is loaded, not served from the cache")
	require.Zero(t, c.Stats().Entries, "and dropped")

	// Forget: cooled, then a mitigation the cache does not serve, drop the
	// key; coalesce drops its value; local_cache keeps it.
	for _, tc := range []struct {
		e          Entry
		entries    int
		wantCached bool
	}{
		{Entry{Status: StatusHot, Mitigation: MitigationLocalCache}, 1, true},
		{Entry{Status: StatusHot, Mitigation: MitigationCoalesce}, 1, false},
		{Entry{Status: StatusCooled}, 0, false},
		{Entry{Status: StatusExpired}, 0, false},
		{Entry{Status: StatusHot, Mitigation: MitigationSplit}, 0, false},
	} {
		reg.Set(Entry{App: "shop", Key: "k", Mitigation: MitigationLocalCache})
		_, err := c.Get(t.Context(), "shop", "k", s.load)
		require.NoError(t, err)
		require.True(t, c.Stats().Keys[0].Cached)
		tc.e.App, tc.e.Key = "shop", "k"
		c.Forget(tc.e)
		st := c.Stats()
		require.Equal(t, tc.entries, st.Entries, "after Forget(%v %v)", tc.e.Status, tc.e.Mitigation)
		if tc.entries > 0 {
			require.Equal(t, tc.wantCached, st.Keys[0].Cached, "after Forget(%v %v)", tc.e.Status, tc.e.Mitigation)
		}
		c.Forget(Entry{App: "shop", Key: "k", Status: StatusCooled})
	}
	c.Forget(Entry{App: "shop", Key: "never seen", Status: StatusCooled}) // no key: nothing happens
}

// A load that panics fails its waiters instead of the process.
func TestCacheLoadPanic(t *testing.T) {
	noLeaks(t)
	c := newTestCache(t, CacheConfig{Registry: hotRegistry("a", "k", MitigationLocalCache), SharedTTL: time.Hour})
	_, err := c.Get(t.Context(), "a", "k", func(context.Context) ([]byte, error) { panic("boom") })
	require.ErrorContains(t, err, "panicked: boom")
	v, err := c.Get(t.Context(), "a", "k", func(context.Context) ([]byte, error) { return []byte("ok"), nil })
	require.NoError(t, err)
	require.Equal(t, "ok", string(v), "a failed load keeps nothing")
	require.EqualValues(t, 1, c.Stats().LoadErrors)
}

// Close cancels the loads in flight, waits for them, and is idempotent;
// Get and Invalidate fail after it.
func TestCacheClose(t *testing.T) {
	noLeaks(t)
	c, err := NewCache(CacheConfig{Registry: hotRegistry("a", "k", MitigationLocalCache), SharedTTL: time.Hour, LocalOnly: true})
	require.NoError(t, err)
	started := make(chan struct{})
	errc := make(chan error, 1)
	go func() {
		_, err := c.Get(context.Background(), "a", "k", func(ctx context.Context) ([]byte, error) {
			close(started)
			<-ctx.Done()
			return nil, ctx.Err()
		})
		errc <- err
	}()
	<-started
	c.Close()
	require.ErrorIs(t, <-errc, context.Canceled, "the waiter gets the cancelled load's error")
	c.Close()
	_, err = c.Get(t.Context(), "a", "k", nil)
	require.ErrorIs(t, err, ErrCacheClosed)
	require.ErrorIs(t, c.Invalidate(t.Context(), "a", "k"), ErrCacheClosed)
	require.ErrorIs(t, c.WaitFollowing(t.Context()), nil, "a LocalOnly cache followed from the start")
}

func TestCacheMetrics(t *testing.T) {
	noLeaks(t)
	reg := prometheus.NewPedanticRegistry()
	c := newTestCache(t, CacheConfig{Registry: hotRegistry("a", "k", MitigationLocalCache), SharedTTL: time.Hour, Registerer: reg})
	s := &versionedStore{}
	for range 3 {
		_, err := c.Get(t.Context(), "a", "k", s.load)
		require.NoError(t, err)
	}
	_, err := c.Get(t.Context(), "a", "cold", s.load)
	require.NoError(t, err)
	mfs, err := reg.Gather()
	require.NoError(t, err)
	got := map[string]float64{}
	for _, mf := range mfs {
		require.True(t, strings.HasPrefix(mf.GetName(), "keyheat_hotkeys_cache_"), mf.GetName())
		for _, m := range mf.GetMetric() {
			require.Empty(t, m.GetLabel(), "%s: no labels, so no per-key series", mf.GetName())
			got[mf.GetName()] = m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	require.Equal(t, 2.0, got["keyheat_hotkeys_cache_hits_total"])
	require.Equal(t, 1.0, got["keyheat_hotkeys_cache_misses_total"])
	require.Equal(t, 1.0, got["keyheat_hotkeys_cache_loads_total"])
	require.Equal(t, 1.0, got["keyheat_hotkeys_cache_cold_loads_total"])
	require.Equal(t, 1.0, got["keyheat_hotkeys_cache_entries"])
	require.Equal(t, 1.0, got["keyheat_hotkeys_cache_following"])
	require.Equal(t, float64(len("a")+len("k")+8), got["keyheat_hotkeys_cache_bytes"])

	// A second cache on the same registerer is refused, not half-built.
	_, err = NewCache(CacheConfig{Registry: &StaticRegistry{}, SharedTTL: time.Hour, LocalOnly: true, Registerer: reg})
	var are prometheus.AlreadyRegisteredError
	require.True(t, errors.As(err, &are), "got %v", err)
}

// A load that calls runtime.Goexit (t.FailNow in a test) instead of
// returning fails its waiters and leaves the key usable.
func TestCacheLoadGoexit(t *testing.T) {
	noLeaks(t)
	c := newTestCache(t, CacheConfig{Registry: hotRegistry("a", "k", MitigationLocalCache), SharedTTL: time.Hour})
	ctx, cancel := context.WithTimeout(t.Context(), hangGuard)
	defer cancel()
	_, err := c.Get(ctx, "a", "k", func(context.Context) ([]byte, error) { runtime.Goexit(); return nil, nil })
	require.ErrorIs(t, err, errLoadExited)
	require.ErrorContains(t, err, "exited without returning")
	v, err := c.Get(ctx, "a", "k", func(context.Context) ([]byte, error) { return []byte("ok"), nil })
	require.NoError(t, err, "the key is not wedged")
	require.Equal(t, "ok", string(v))
	require.EqualValues(t, 1, c.Stats().LoadErrors)
}

// Close waits for a load that ignores its ctx until its LoadTimeout, not
// forever; the load's waiter gets the LoadTimeout error.
func TestCacheCloseGivesUpStuckLoad(t *testing.T) {
	noLeaks(t)
	clk := &testClock{}
	const loadTimeout = 500 * time.Millisecond
	c, err := NewCache(withClock(CacheConfig{Registry: hotRegistry("a", "k", MitigationLocalCache), SharedTTL: time.Hour,
		LoadTimeout: loadTimeout, LocalOnly: true}, clk))
	require.NoError(t, err)
	entered, release := make(chan struct{}), make(chan struct{})
	defer close(release) // the stuck load returns when the test ends
	got := goGet(t, c, "k", func(context.Context) ([]byte, error) {
		close(entered)
		<-release // ignores ctx
		return []byte("late"), nil
	})
	<-entered
	closed := make(chan struct{})
	go func() { c.Close(); close(closed) }()
	clk.advance(loadTimeout)
	recv(t, "Close", closed)
	require.ErrorIs(t, recv(t, "the waiter", got).err, context.DeadlineExceeded)
	c.Close()
}
