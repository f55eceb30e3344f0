package hotkeys

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/keyheat/keyheat/internal/testenv"
)

// stormGets starts n concurrent Gets of a hot key whose load blocks on
// release, waits until all n wait for the one load, closes release, and
// returns what each Get returned.
func stormGets(t *testing.T, c *Cache, n int, release chan struct{}, load func(context.Context) ([]byte, error)) ([][]byte, []error) {
	t.Helper()
	vals, errs := make([][]byte, n), make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { vals[i], errs[i] = c.Get(t.Context(), "a", "k", load) })
	}
	testenv.Eventually(t, "every Get waiting for the load", func() bool { s := c.Stats(); return s.Loads+s.Coalesced == uint64(n) })
	close(release)
	wg.Wait()
	return vals, errs
}

// 1,000 concurrent misses of a hot key make one upstream call, and every
// Get gets its value; the collapse ratio is 1,000.
func TestCoalesceOneUpstreamCall(t *testing.T) {
	noLeaks(t)
	for _, m := range []Mitigation{MitigationLocalCache, MitigationCoalesce} {
		t.Run(m.String(), func(t *testing.T) {
			const n = 1000
			c := newTestCache(t, CacheConfig{Registry: hotRegistry("a", "k", m), SharedTTL: time.Hour})
			var calls atomic.Int64
			release := make(chan struct{})
			load := func(context.Context) ([]byte, error) {
				calls.Add(1)
				<-release
				return []byte("v"), nil
			}
			vals, errs := stormGets(t, c, n, release, load)
			for i := range n {
				require.NoError(t, errs[i])
				require.Equal(t, "v", string(vals[i]))
			}
			require.EqualValues(t, 1, calls.Load(), "one upstream call for %d concurrent misses", n)
			st := c.Stats()
			require.EqualValues(t, 1, st.Loads)
			require.EqualValues(t, n-1, st.Coalesced)
			require.InDelta(t, n, st.CollapseRatio(), 1e-9)
			t.Logf("collapse ratio %.0f (%d Gets, %d upstream call)", st.CollapseRatio(), n, calls.Load())

			_, err := c.Get(t.Context(), "a", "k", load)
			require.NoError(t, err)
			if m == MitigationLocalCache {
				require.EqualValues(t, 1, calls.Load(), "local_cache keeps the value")
			} else {
				require.EqualValues(t, 2, calls.Load(), "coalesce keeps nothing")
				require.False(t, c.Stats().Keys[0].Cached)
			}
		})
	}
}

// An upstream error reaches every waiter of the load, at once, and is not
// kept.
func TestCoalesceErrorReachesAll(t *testing.T) {
	noLeaks(t)
	const n = 1000
	c := newTestCache(t, CacheConfig{Registry: hotRegistry("a", "k", MitigationLocalCache), SharedTTL: time.Hour})
	errUpstream := errors.New("upstream down")
	var calls atomic.Int64
	release := make(chan struct{})
	load := func(context.Context) ([]byte, error) {
		calls.Add(1)
		<-release
		return nil, errUpstream
	}
	_, errs := stormGets(t, c, n, release, load)
	for i := range n {
		require.ErrorIs(t, errs[i], errUpstream)
	}
	require.EqualValues(t, 1, calls.Load(), "one upstream call, one error, no retries")
	require.EqualValues(t, 1, c.Stats().LoadErrors)
	v, err := c.Get(t.Context(), "a", "k", func(context.Context) ([]byte, error) { return []byte("v"), nil })
	require.NoError(t, err, "the error is not kept")
	require.Equal(t, "v", string(v))
}

// After MaxWait a waiter gets the key's expired value while the load is
// still blocked; without a value young enough, ErrWaitTimeout.
func TestCoalesceMaxWaitServesStale(t *testing.T) {
	noLeaks(t)
	clk := &testClock{}
	reg := hotRegistry("a", "k", MitigationLocalCache)
	// LocalTTL 2 s; stale values served up to 10 s after their load.
	c := newTestCache(t, withClock(CacheConfig{Registry: reg, SharedTTL: 10 * time.Second, MaxWait: time.Millisecond}, clk))
	s := &versionedStore{}
	s.write()
	_, err := c.Get(t.Context(), "a", "k", s.load)
	require.NoError(t, err)

	s.write()
	clk.advance(2 * time.Second) // expired, still young enough to serve stale
	release := make(chan struct{})
	entered := make(chan struct{})
	blocked := func(ctx context.Context) ([]byte, error) {
		close(entered)
		<-release
		return s.read(), nil
	}
	v, err := c.Get(t.Context(), "a", "k", blocked)
	require.NoError(t, err)
	// Get returned while the load is blocked (release is closed below).
	require.EqualValues(t, 1, version(t, v), "the stale value, served after MaxWait")
	<-entered
	st := c.Stats()
	require.EqualValues(t, 1, st.StaleServed)
	require.Zero(t, st.Timeouts)

	// Past MaxStaleAge nothing is served stale: the waiter times out.
	clk.advance(8 * time.Second)
	_, err = c.Get(t.Context(), "a", "k", s.load) // joins the blocked load
	require.ErrorIs(t, err, ErrWaitTimeout)
	require.EqualValues(t, 1, c.Stats().Timeouts)

	close(release)
	testenv.Eventually(t, "the blocked load stored", func() bool { return c.Stats().Keys[0].Cached })
	v, err = c.Get(t.Context(), "a", "k", s.load)
	require.NoError(t, err)
	require.EqualValues(t, 2, version(t, v), "the new value once the load returned")

	// A key never loaded has nothing stale: ErrWaitTimeout.
	reg.Set(Entry{App: "a", Key: "new", Mitigation: MitigationLocalCache})
	release2 := make(chan struct{})
	defer close(release2)
	_, err = c.Get(t.Context(), "a", "new", func(context.Context) ([]byte, error) { <-release2; return nil, nil })
	require.ErrorIs(t, err, ErrWaitTimeout)
}

// A waiter whose ctx ends leaves; the load goes on, with a ctx that did not
// end and that carries the starter's values, and the others get its value.
func TestCoalesceWaiterLeavesWithoutCancellingLoad(t *testing.T) {
	noLeaks(t)
	c := newTestCache(t, CacheConfig{Registry: hotRegistry("a", "k", MitigationLocalCache), SharedTTL: time.Hour})
	type ctxKey struct{}
	release := make(chan struct{})
	entered := make(chan struct{})
	var loadCtx context.Context
	load := func(ctx context.Context) ([]byte, error) {
		loadCtx = ctx
		close(entered)
		<-release
		return []byte("v"), ctx.Err()
	}
	starter, cancel := context.WithCancel(context.WithValue(t.Context(), ctxKey{}, "request-1"))
	errc := make(chan error, 1)
	go func() {
		_, err := c.Get(starter, "a", "k", load)
		errc <- err
	}()
	<-entered
	other := make(chan []byte, 1)
	go func() {
		v, err := c.Get(t.Context(), "a", "k", load)
		if err != nil {
			t.Error(err)
		}
		other <- v
	}()
	testenv.Eventually(t, "the second Get waiting", func() bool { return c.Stats().Coalesced == 1 })
	cancel()
	require.ErrorIs(t, <-errc, context.Canceled, "the starter leaves with its ctx's error")
	require.NoError(t, loadCtx.Err(), "the shared load is not cancelled by its starter")
	require.Equal(t, "request-1", loadCtx.Value(ctxKey{}), "the load sees the starter's ctx values")
	_, hasDeadline := loadCtx.Deadline()
	require.True(t, hasDeadline, "LoadTimeout bounds the load")
	close(release)
	require.Equal(t, "v", string(<-other))
}

// A negative MaxStaleAge serves nothing stale: a waiter past MaxWait times
// out though an expired value is held.
func TestCoalesceNoStaleWhenDisabled(t *testing.T) {
	noLeaks(t)
	clk := &testClock{}
	c := newTestCache(t, withClock(CacheConfig{Registry: hotRegistry("a", "k", MitigationLocalCache), SharedTTL: 10 * time.Second,
		MaxStaleAge: -1, MaxWait: time.Millisecond}, clk))
	s := &versionedStore{}
	s.write()
	_, err := c.Get(t.Context(), "a", "k", s.load)
	require.NoError(t, err)
	clk.advance(2 * time.Second)
	release := make(chan struct{})
	defer close(release)
	_, err = c.Get(t.Context(), "a", "k", func(context.Context) ([]byte, error) { <-release; return s.read(), nil })
	require.ErrorIs(t, err, ErrWaitTimeout)
	require.Zero(t, c.Stats().StaleServed)
}

// getResult is what a Get returned.
type getResult struct {
	v   []byte
	err error
}

// goGet runs a Get in a goroutine; its result arrives on the channel.
func goGet(t *testing.T, c *Cache, key string, load func(context.Context) ([]byte, error)) <-chan getResult {
	ch := make(chan getResult, 1)
	go func() {
		v, err := c.Get(t.Context(), "a", key, load)
		ch <- getResult{v, err}
	}()
	return ch
}

// A load that ignores its ctx holds the key for LoadTimeout at most: then
// its waiters get an error, the next Get starts a load of its own, and the
// stuck load's result, when it comes, is not kept.
func TestCoalesceLoadIgnoringCtxIsGivenUp(t *testing.T) {
	noLeaks(t)
	for _, m := range []Mitigation{MitigationLocalCache, MitigationCoalesce} {
		t.Run(m.String(), func(t *testing.T) {
			clk := &testClock{}
			const loadTimeout = 500 * time.Millisecond
			c := newTestCache(t, withClock(CacheConfig{Registry: hotRegistry("a", "k", m), SharedTTL: time.Hour,
				LoadTimeout: loadTimeout}, clk))
			entered, release := make(chan struct{}), make(chan struct{})
			stuck := func(context.Context) ([]byte, error) {
				close(entered)
				<-release // ignores ctx
				return []byte("late"), nil
			}
			first := goGet(t, c, "k", stuck)
			<-entered
			second := goGet(t, c, "k", stuck)
			testenv.Eventually(t, "the second Get joining the stuck load", func() bool { return c.Stats().Coalesced == 1 })

			clk.advance(loadTimeout)
			for _, ch := range []<-chan getResult{first, second} {
				r := recv(t, "a waiter of the stuck load", ch)
				require.ErrorIs(t, r.err, context.DeadlineExceeded)
				require.ErrorContains(t, r.err, "did not return within LoadTimeout")
			}
			require.EqualValues(t, 1, c.Stats().LoadErrors)

			s := &versionedStore{}
			s.write()
			v, err := c.Get(t.Context(), "a", "k", s.load)
			require.NoError(t, err, "a Get after LoadTimeout does not join the stuck load")
			require.EqualValues(t, 1, version(t, v))
			require.EqualValues(t, 1, s.loads.Load(), "the new Get's own load was called")

			stops := clk.stops.Load()
			close(release)
			testenv.Eventually(t, "the stuck load to return and be handled", func() bool { return clk.stops.Load() > stops })
			v, err = c.Get(t.Context(), "a", "k", s.load)
			require.NoError(t, err)
			require.EqualValues(t, 1, version(t, v), "the stuck load's late result was not kept")
			if m == MitigationLocalCache {
				require.EqualValues(t, 1, s.loads.Load(), "the good load's value is kept")
			}
			require.EqualValues(t, 1, c.Stats().LoadErrors)
		})
	}
}
