package hotkeys

import (
	"context"
	"encoding/binary"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/goleak"

	"github.com/keyheat/keyheat/internal/testenv"
)

// hangGuard bounds the waits of these tests: a generous limit that only a
// hung test reaches, never a timing assertion.
const hangGuard = testenv.HangGuard

// testClock is a clock the test moves by hand; its timers fire, in the
// goroutine that moves it, when it passes their time.
type testClock struct {
	ns     atomic.Int64
	mu     sync.Mutex
	timers map[int]testTimer
	nextID int
	// stops counts the calls of the stop funcs afterFunc returned, fired
	// or not: a point a test can wait for (runLoad stops its LoadTimeout
	// timer once it handled load's return).
	stops atomic.Int64
}

type testTimer struct {
	atNs int64
	f    func()
}

func (c *testClock) nowNs() int64 { return c.ns.Load() }

func (c *testClock) afterFunc(d time.Duration, f func()) func() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.timers == nil {
		c.timers = map[int]testTimer{}
	}
	id := c.nextID
	c.nextID++
	c.timers[id] = testTimer{atNs: c.ns.Load() + int64(d), f: f}
	return func() bool {
		c.stops.Add(1)
		c.mu.Lock()
		defer c.mu.Unlock()
		_, ok := c.timers[id]
		delete(c.timers, id)
		return ok
	}
}

func (c *testClock) advance(d time.Duration) {
	now := c.ns.Add(int64(d))
	c.mu.Lock()
	var due []func()
	for id, tm := range c.timers {
		if tm.atNs <= now {
			due = append(due, tm.f)
			delete(c.timers, id)
		}
	}
	c.mu.Unlock()
	for _, f := range due {
		f()
	}
}

// withClock makes cfg's cache run on clk instead of the monotonic clock.
func withClock(cfg CacheConfig, clk *testClock) CacheConfig {
	cfg.clock = clk
	return cfg
}

// noLeaks checks, when the test and its cleanups end, that no goroutine it
// started is left. Call it first, so that its cleanup runs last.
func noLeaks(t *testing.T) {
	t.Helper()
	opt := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, opt) })
}

// newTestCache builds a cache from cfg (LocalOnly unless cfg has Kafka
// options) that the test closes when it ends.
func newTestCache(t *testing.T, cfg CacheConfig) *Cache {
	t.Helper()
	if len(cfg.Kafka) == 0 {
		cfg.LocalOnly = true
	}
	c, err := NewCache(cfg)
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return c
}

// newFollowingCache builds a cache broadcasting on topic of the cluster at
// seeds, and waits until it follows the topic.
func newFollowingCache(t *testing.T, seeds []string, topic string, cfg CacheConfig) *Cache {
	t.Helper()
	cfg.Kafka = []kgo.Opt{kgo.SeedBrokers(seeds...)}
	cfg.Topic = topic
	c := newTestCache(t, cfg)
	ctx, cancel := context.WithTimeout(t.Context(), hangGuard)
	defer cancel()
	require.NoError(t, c.WaitFollowing(ctx), "cache never followed %s", topic)
	return c
}

// kfakeTopic starts a kfake cluster with a three-partition topic.
func kfakeTopic(t *testing.T) ([]string, string) {
	t.Helper()
	seeds := testenv.KFake(t)
	return seeds, testenv.NewTopic(t, seeds, 3)
}

// hotRegistry returns a registry in which (app, key) is hot with
// mitigation m.
func hotRegistry(app, key string, m Mitigation) *StaticRegistry {
	r := &StaticRegistry{}
	r.Set(Entry{App: app, Key: key, Mitigation: m})
	return r
}

// versionedStore is the backing store of the tests: one value, whose
// content is its version, 8 bytes big-endian. Each write makes a new
// version.
type versionedStore struct {
	mu      sync.Mutex
	version uint64
	loads   atomic.Int64
}

func (s *versionedStore) write() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.version++
	return s.version
}

func (s *versionedStore) read() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return binary.BigEndian.AppendUint64(nil, s.version)
}

// load is the store's load function: it counts the calls.
func (s *versionedStore) load(context.Context) ([]byte, error) {
	s.loads.Add(1)
	return s.read(), nil
}

// version decodes a versionedStore value; safe to call from any goroutine.
func version(t testing.TB, b []byte) uint64 {
	t.Helper()
	if len(b) != 8 {
		t.Errorf("value %x is not a version", b)
		return 0
	}
	return binary.BigEndian.Uint64(b)
}

// recv returns what ch yields; it fails the test after hangGuard.
func recv[T any](t testing.TB, what string, ch <-chan T) T {
	t.Helper()
	tm := time.NewTimer(hangGuard)
	defer tm.Stop()
	select {
	case v := <-ch:
		return v
	case <-tm.C:
		t.Fatalf("still waiting for %s after %v", what, hangGuard)
		panic("unreachable")
	}
}

// metricValue returns the value of the metric named name, which has no
// labels, in what reg gathers.
func metricValue(t testing.TB, reg prometheus.Gatherer, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() == name {
			m := mf.GetMetric()[0]
			return m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}
