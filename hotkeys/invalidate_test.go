package hotkeys

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/keyheat/keyheat/internal/testenv"
	"github.com/keyheat/keyheat/schemas"
)

func TestParseRecordKey(t *testing.T) {
	for _, tc := range []struct{ app, key string }{
		{"shop", "product:42"}, {"", "k"}, {"a", ""}, {"", ""}, {"1:2", "3:4"}, {"\xff\x00", "\x00\xfe"},
	} {
		app, key, err := parseRecordKey(schemas.HotKeyRecordKey(tc.app, tc.key))
		require.NoError(t, err)
		require.Equal(t, tc.app, app)
		require.Equal(t, tc.key, key)
	}
	for _, bad := range []string{"", ":", "x:", "4:abc", "01:ab", "-1:a", "12345678901:a", "3",
		"99:shop/user/4111-1111-1111-1111", "shop/user/4111-1111-1111-1111"} {
		_, _, err := parseRecordKey([]byte(bad))
		require.Error(t, err, "%q", bad)
		require.NotContains(t, err.Error(), "4111", "an error never shows the key's bytes")
		require.Contains(t, err.Error(), fmt.Sprintf("record key of %d bytes", len(bad)))
	}
}

// An invalidation record whose key cannot be read is skipped, and logged
// by its place and length: never its bytes, which hold a raw key.
func TestInvalidateUnreadableRecordLogsNoKey(t *testing.T) {
	noLeaks(t)
	seeds, topic := kfakeTopic(t)
	var logs testenv.SyncBuffer
	c := newFollowingCache(t, seeds, topic, CacheConfig{Registry: hotRegistry("a", "k", MitigationLocalCache), SharedTTL: time.Hour,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	require.NoError(t, err)
	defer cl.Close()
	const bad = "99:shop/user/4111-1111-1111-1111"
	ctx, cancel := context.WithTimeout(t.Context(), hangGuard)
	defer cancel()
	require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Key: []byte(bad), Value: []byte(`{"v":1,"origin":"x"}`)}).FirstErr())
	testenv.Eventually(t, "the record to be skipped", func() bool { return strings.Contains(logs.String(), "cannot read") })
	require.NotContains(t, logs.String(), "4111", "the log shows none of the record key's bytes")
	require.Contains(t, logs.String(), fmt.Sprintf("record key of %d bytes", len(bad)))
	require.Contains(t, logs.String(), "offset=0")
	require.Zero(t, c.Stats().InvalidationsReceived)
}

func FuzzParseRecordKey(f *testing.F) {
	f.Add([]byte("4:shopproduct:42"))
	f.Add([]byte("0:"))
	f.Add([]byte("99999:x"))
	f.Fuzz(func(t *testing.T, b []byte) {
		app, key, err := parseRecordKey(b)
		if err != nil {
			return
		}
		require.Equal(t, string(b), string(schemas.HotKeyRecordKey(app, key)), "what parses is what HotKeyRecordKey writes")
	})
}

// A write racing a fetch: the fetch read the old value, the write and its
// invalidation land while it is in flight. The fetched value goes to the
// Get that waited for it and is not kept; a Get started after Invalidate
// returned does not join the old fetch.
func TestInvalidateRacingFetchIsNotKept(t *testing.T) {
	noLeaks(t)
	seeds, topic := kfakeTopic(t)
	for _, tc := range []struct {
		name   string
		remote bool // the write and its Invalidate happen in another process
	}{{"local", false}, {"remote", true}} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := CacheConfig{Registry: hotRegistry("a", "k", MitigationLocalCache), SharedTTL: time.Hour}
			c := newFollowingCache(t, seeds, topic, cfg)
			writer := c
			if tc.remote {
				writer = newFollowingCache(t, seeds, topic, cfg)
			}
			s := &versionedStore{}
			s.write()

			entered, release := make(chan struct{}), make(chan struct{})
			slow := func(context.Context) ([]byte, error) {
				v := s.read() // the old value
				close(entered)
				<-release
				return v, nil
			}
			got := make(chan []byte, 1)
			go func() {
				v, err := c.Get(t.Context(), "a", "k", slow)
				if err != nil {
					t.Error(err)
				}
				got <- v
			}()
			<-entered
			s.write()
			ctx, cancel := context.WithTimeout(t.Context(), hangGuard)
			defer cancel()
			require.NoError(t, writer.Invalidate(ctx, "a", "k"))
			if tc.remote {
				testenv.Eventually(t, "the invalidation to reach the other process", func() bool { return c.Stats().InvalidationsReceived == 1 })
			}

			// The fetch is still blocked: a Get now starts its own load
			// (joining the old one would hang until the guard).
			v, err := c.Get(ctx, "a", "k", s.load)
			require.NoError(t, err)
			require.EqualValues(t, 2, version(t, v), "a Get after the invalidation does not join the older fetch")

			close(release)
			require.EqualValues(t, 1, version(t, <-got), "the raced fetch's value goes to its caller")
			// got is sent after the raced load decided not to keep its value.
			for range 3 {
				v, err = c.Get(t.Context(), "a", "k", s.load)
				require.NoError(t, err)
				require.EqualValues(t, 2, version(t, v), "the raced fetch's old value was not kept")
			}
			require.EqualValues(t, 1, s.loads.Load(), "the new value is kept")
		})
	}
}

// An invalidation reaches another process following the topic; a process
// skips its own.
func TestInvalidateReachesOtherProcesses(t *testing.T) {
	noLeaks(t)
	seeds, topic := kfakeTopic(t)
	cfg := CacheConfig{Registry: hotRegistry("a", "k", MitigationLocalCache), SharedTTL: time.Hour}
	a := newFollowingCache(t, seeds, topic, cfg)
	b := newFollowingCache(t, seeds, topic, cfg)
	s := &versionedStore{}
	s.write()
	for _, c := range []*Cache{a, b} {
		_, err := c.Get(t.Context(), "a", "k", s.load)
		require.NoError(t, err)
	}
	s.write()
	require.NoError(t, a.Invalidate(t.Context(), "a", "k"))
	testenv.Eventually(t, "b to receive a's invalidation", func() bool { return b.Stats().InvalidationsReceived == 1 })
	for _, c := range []*Cache{a, b} {
		v, err := c.Get(t.Context(), "a", "k", s.load)
		require.NoError(t, err)
		require.EqualValues(t, 2, version(t, v))
	}
	require.EqualValues(t, 4, s.loads.Load())

	// b's invalidation of the same key lands on the same partition after
	// a's own: once a read b's, it has read (and skipped) its own.
	require.NoError(t, b.Invalidate(t.Context(), "a", "k"))
	testenv.Eventually(t, "a to receive b's invalidation", func() bool { return a.Stats().InvalidationsReceived > 0 })
	require.EqualValues(t, 1, a.Stats().InvalidationsReceived, "a skipped its own invalidation")
	require.EqualValues(t, 1, a.Stats().InvalidationsSent)
	require.EqualValues(t, 1, b.Stats().InvalidationsSent)
}

// Until the cache follows the topic, an invalidation sent meanwhile could
// be missed: it keeps no value then, and starts keeping once it follows.
func TestCacheKeepsNothingUntilFollowing(t *testing.T) {
	noLeaks(t)
	seeds := testenv.KFake(t)
	topic := testenv.UniqueName(t, "inv")
	c := newTestCache(t, CacheConfig{Registry: hotRegistry("a", "k", MitigationLocalCache), SharedTTL: time.Hour,
		Kafka: []kgo.Opt{kgo.SeedBrokers(seeds...)}, Topic: topic})
	s := &versionedStore{}
	for range 3 {
		_, err := c.Get(t.Context(), "a", "k", s.load)
		require.NoError(t, err)
	}
	require.EqualValues(t, 3, s.loads.Load(), "no value kept while the topic is missing")
	require.False(t, c.Stats().Following)

	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	require.NoError(t, err)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(t.Context(), hangGuard)
	defer cancel()
	_, err = kadm.NewClient(cl).CreateTopic(ctx, 2, 1, nil, topic)
	require.NoError(t, err)
	require.NoError(t, c.WaitFollowing(ctx))
	for range 3 {
		_, err := c.Get(t.Context(), "a", "k", s.load)
		require.NoError(t, err)
	}
	require.EqualValues(t, 4, s.loads.Load(), "kept once following")
}

// 64 goroutines read, write (update the store, then Invalidate) and
// invalidate one hot key, checked against a model: a Get started after an
// Invalidate returned never returns a version older than the store's when
// that Invalidate was called. A second process following the topic ends
// with the last version once it read every invalidation.
func TestInvalidateConcurrentModel(t *testing.T) {
	noLeaks(t)
	seeds, topic := kfakeTopic(t)
	cfg := CacheConfig{Registry: hotRegistry("a", "k", MitigationLocalCache), SharedTTL: time.Hour}
	a := newFollowingCache(t, seeds, topic, cfg)
	b := newFollowingCache(t, seeds, topic, cfg)
	s := &versionedStore{}
	s.write()
	load := func(context.Context) ([]byte, error) {
		v := s.read()
		for range 3 {
			runtime.Gosched() // widen the window for a write to race the fetch
		}
		return v, nil
	}
	current := func() uint64 { return version(t, s.read()) }

	// floor is the highest version an Invalidate that returned covers.
	var floor atomic.Uint64
	raise := func(v uint64) {
		for f := floor.Load(); f < v && !floor.CompareAndSwap(f, v); f = floor.Load() {
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), hangGuard)
	defer cancel()
	// Readers read until the writers and invalidators are done.
	var writers, wg sync.WaitGroup
	var done atomic.Bool
	writers.Add(16)
	go func() { writers.Wait(); done.Store(true) }()
	reads := func(c *Cache, check bool) {
		for n := 0; n < 100 || !done.Load(); n++ {
			f := floor.Load()
			got, err := c.Get(ctx, "a", "k", load)
			if err != nil {
				t.Error(err)
				return
			}
			if v := version(t, got); check && v < f {
				t.Errorf("a Get started after the Invalidate of version %d returned version %d", f, v)
				return
			}
		}
	}
	for g := range 64 {
		wg.Go(func() {
			switch {
			case g < 8: // writers
				defer writers.Done()
				for range 50 {
					v := s.write()
					if err := a.Invalidate(ctx, "a", "k"); err != nil {
						t.Error(err)
						return
					}
					raise(v)
				}
			case g < 16: // invalidators
				defer writers.Done()
				for range 50 {
					v := current()
					if err := a.Invalidate(ctx, "a", "k"); err != nil {
						t.Error(err)
						return
					}
					raise(v)
				}
			case g < 56: // readers of a, checked against the model
				reads(a, true)
			default: // readers of b: no promise before b reads an invalidation
				reads(b, false)
			}
		})
	}
	wg.Wait()
	last := current()
	require.EqualValues(t, 401, last)
	sa := a.Stats()
	require.EqualValues(t, 800, sa.InvalidationsSent)
	testenv.Eventually(t, "b to read every invalidation", func() bool { return b.Stats().InvalidationsReceived == sa.InvalidationsSent })
	for _, c := range []*Cache{a, b} {
		v, err := c.Get(ctx, "a", "k", load)
		require.NoError(t, err)
		require.Equal(t, last, version(t, v), "no stale value survived a write")
	}
	t.Logf("a: %d hits, %d misses, %d loads, %d coalesced; b: %+v", sa.Hits, sa.Misses, sa.Loads, sa.Coalesced, b.Stats().InvalidationsReceived)
}

// A topic deleted, then recreated under the same name: kgo fails fetching
// it for good, so each cache stops following (dropping its values and
// keeping none), says so, and once the topic is back follows the new one
// from its end; invalidations flow between the processes again, both ways.
func TestInvalidateTopicRecreated(t *testing.T) {
	noLeaks(t)
	seeds, topic := kfakeTopic(t)
	var logs testenv.SyncBuffer
	cfg := CacheConfig{Registry: hotRegistry("a", "k", MitigationLocalCache), SharedTTL: time.Hour}
	cfgA := cfg
	cfgA.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	reg := prometheus.NewPedanticRegistry()
	cfgA.Registerer = reg
	a := newFollowingCache(t, seeds, topic, cfgA)
	// b checks its topic often, so that it most likely notices the
	// deletion by the check, and a (every 5 s) most likely by a fetch
	// error; either way must work.
	cfg.topicCheckEvery = 100 * time.Millisecond
	b := newFollowingCache(t, seeds, topic, cfg)
	s := &versionedStore{}
	s.write()
	_, err := a.Get(t.Context(), "a", "k", s.load)
	require.NoError(t, err)
	require.True(t, a.Stats().Keys[0].Cached)

	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	require.NoError(t, err)
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(t.Context(), hangGuard)
	defer cancel()
	_, err = adm.DeleteTopics(ctx, topic)
	require.NoError(t, err)

	// While the topic is gone the cache cannot follow it again: it stays
	// not following, and keeps nothing.
	testenv.Eventually(t, "a to lose the topic", func() bool { st := a.Stats(); return st.FollowLosses > 0 && !st.Following })
	st := a.Stats()
	require.NotZero(t, st.Purges, "a lost track of the topic: it dropped its values")
	require.False(t, st.Keys[0].Cached)
	require.NotZero(t, metricValue(t, reg, "keyheat_hotkeys_cache_follow_losses_total"))
	require.Zero(t, metricValue(t, reg, "keyheat_hotkeys_cache_following"))
	require.Contains(t, logs.String(), "lost the invalidation topic")
	loads := s.loads.Load()
	for range 3 {
		_, err := a.Get(t.Context(), "a", "k", s.load)
		require.NoError(t, err)
	}
	require.Equal(t, loads+3, s.loads.Load(), "nothing is kept while not following")
	done, stop := context.WithCancel(t.Context())
	stop()
	require.ErrorIs(t, a.WaitFollowing(done), context.Canceled, "WaitFollowing waits again")

	_, err = adm.CreateTopic(ctx, 3, 1, nil, topic)
	require.NoError(t, err)
	require.NoError(t, a.WaitFollowing(ctx))
	testenv.Eventually(t, "b to lose the topic and follow it again", func() bool { st := b.Stats(); return st.FollowLosses > 0 && st.Following })
	testenv.Eventually(t, "a to log that it follows again", func() bool { return strings.Contains(logs.String(), "follows invalidations again") })

	// Both ways, each cache holding the key's value: the receiver must
	// load the new version after the sender's write and invalidation.
	for _, dir := range []struct{ from, to *Cache }{{b, a}, {a, b}} {
		_, err = dir.to.Get(t.Context(), "a", "k", s.load)
		require.NoError(t, err)
		want := s.write()
		received := dir.to.Stats().InvalidationsReceived
		require.NoError(t, dir.from.Invalidate(ctx, "a", "k"), "the sender's producer works on the new topic")
		testenv.Eventually(t, "the invalidation to arrive", func() bool { return dir.to.Stats().InvalidationsReceived > received })
		v, err := dir.to.Get(t.Context(), "a", "k", s.load)
		require.NoError(t, err)
		require.Equal(t, want, version(t, v))
	}
	require.True(t, a.Stats().Following)
}
