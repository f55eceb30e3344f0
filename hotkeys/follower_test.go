package hotkeys_test

import (
	"context"
	"encoding/hex"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/zeebo/xxh3"
	"go.uber.org/goleak"

	"github.com/keyheat/keyheat/hotkeys"
	"github.com/keyheat/keyheat/internal/testenv"
	"github.com/keyheat/keyheat/schemas"
)

// hangGuard bounds every wait on the follower: a test waits for a
// condition, never for a duration, and fails with a message instead of
// hanging when the condition never comes. It is the project's
// testenv.HangGuard, so that a starved machine passes what a fast one
// passes.
const hangGuard = testenv.HangGuard

// t0 is the fake clock's start, and the time of the records' events.
var t0 = time.UnixMilli(1767225600000)

// noLeaks fails the test if it leaves goroutines behind. Registered first,
// it runs after every other cleanup (the broker's and the follower's).
func noLeaks(t *testing.T) {
	opt := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, opt) })
}

// registry is a registry topic on a kfake cluster, and a client writing it.
type registry struct {
	t     *testing.T
	seeds []string
	topic string
	cl    *kgo.Client
}

func newRegistry(t *testing.T, partitions int32) *registry {
	t.Helper()
	seeds := testenv.KFake(t)
	return openRegistry(t, seeds, testenv.NewTopicWithConfigs(t, seeds, partitions, map[string]string{"cleanup.policy": "compact"}))
}

func openRegistry(t *testing.T, seeds []string, topic string) *registry {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(0))
	require.NoError(t, err)
	t.Cleanup(cl.Close)
	return &registry{t: t, seeds: seeds, topic: topic, cl: cl}
}

func (r *registry) produce(recs ...*kgo.Record) {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	require.NoError(r.t, r.cl.ProduceSync(ctx, recs...).FirstErr())
}

// follower starts a follower of the registry, closed when the test ends.
func (r *registry) follower(cfg hotkeys.FollowerConfig, clk *hotkeys.FakeClock) *hotkeys.Follower {
	r.t.Helper()
	cfg.ClientOpts = append(cfg.ClientOpts, kgo.SeedBrokers(r.seeds...), kgo.MetadataMinAge(100*time.Millisecond))
	cfg.Topic = r.topic
	var f *hotkeys.Follower
	var err error
	if clk != nil {
		f, err = hotkeys.NewFollowerWithClock(cfg, clk)
	} else {
		f, err = hotkeys.NewFollower(cfg)
	}
	require.NoError(r.t, err)
	r.t.Cleanup(f.Close)
	return f
}

func waitReady(t *testing.T, f *hotkeys.Follower) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	require.NoError(t, f.WaitReady(ctx))
}

func keyHash(key string) string {
	var b [8]byte
	h := xxh3.HashString(key)
	for i := range b {
		b[i] = byte(h >> (56 - 8*i))
	}
	return hex.EncodeToString(b[:])
}

// det is a detector record for key.
type det struct {
	typ, app, key       string
	rate, peak          float64
	onsetMs, detectedMs int64
	mit                 *schemas.Mitigation
}

func (d det) record() *kgo.Record {
	h := schemas.HotKeyEvent{Version: schemas.HotKeyVersion, ID: schemas.HotKeyID("keyheat.events", 0, "r", d.typ, d.app, d.key, d.onsetMs),
		Type: d.typ, App: d.app, Key: d.key, KeyHash: keyHash(d.key), Rule: "r", Rate: d.rate, PeakRate: d.peak,
		OnsetMs: d.onsetMs, DetectedMs: d.detectedMs, Mitigation: d.mit}
	v, err := h.AppendJSON(nil)
	if err != nil {
		panic(err)
	}
	return &kgo.Record{Key: schemas.HotKeyRecordKey(d.app, d.key), Value: v}
}

func hotRecord(app, key string, rate float64) *kgo.Record {
	return det{typ: schemas.HotKeyHot, app: app, key: key, rate: rate, peak: rate, onsetMs: t0.UnixMilli(), detectedMs: t0.UnixMilli() + 8,
		mit: &schemas.Mitigation{Kind: schemas.MitigationLocalCache}}.record()
}

// bulkHotRecord is hotRecord for a key of plain ASCII, written without
// reflection: tests write 100k of them, under -race too.
// TestBulkHotRecord holds it to hotRecord.
func bulkHotRecord(app, key string, rate float64) *kgo.Record {
	on := t0.UnixMilli()
	v := make([]byte, 0, 400)
	v = append(v, `{"v":1,"id":`...)
	v = strconv.AppendQuote(v, schemas.HotKeyID("keyheat.events", 0, "r", schemas.HotKeyHot, app, key, on))
	v = append(v, `,"type":"hot","app":`...)
	v = strconv.AppendQuote(v, app)
	v = append(v, `,"key":`...)
	v = strconv.AppendQuote(v, key)
	v = append(v, `,"key_hash":"`...)
	v = append(v, keyHash(key)...)
	v = append(v, `","rule":"r","rate":`...)
	v = strconv.AppendFloat(v, rate, 'g', -1, 64)
	v = append(v, `,"peak_rate":`...)
	v = strconv.AppendFloat(v, rate, 'g', -1, 64)
	v = append(v, `,"threshold":0,"count":0,"window_ms":0,"topic":"","partition":0,"onset_ms":`...)
	v = strconv.AppendInt(v, on, 10)
	v = append(v, `,"detected_ms":`...)
	v = strconv.AppendInt(v, on+8, 10)
	v = append(v, `,"reads":0,"writes":0,"bytes":0,"mitigation":{"kind":"local_cache"}}`...)
	return &kgo.Record{Key: schemas.HotKeyRecordKey(app, key), Value: v}
}

func TestBulkHotRecord(t *testing.T) {
	for _, rate := range []float64{0, 1, 5120.5, 99999} {
		a, b := hotRecord("shop", "product:42", rate), bulkHotRecord("shop", "product:42", rate)
		require.Equal(t, a.Key, b.Key)
		ha, err := schemas.DecodeHotKeyEvent(a.Value)
		require.NoError(t, err)
		hb, err := schemas.DecodeHotKeyEvent(b.Value)
		require.NoError(t, err, "%s", b.Value)
		require.Equal(t, ha, hb)
	}
}

func manualRecord(m schemas.ManualEntry) *kgo.Record {
	m.Version = schemas.ManualVersion
	v, err := m.AppendJSON(nil)
	if err != nil {
		panic(err)
	}
	return &kgo.Record{Key: schemas.ManualRecordKey(m.App, m.Key), Value: v}
}

func promote(app, key string, createdMs, ttlMs int64, mit schemas.Mitigation) *kgo.Record {
	return manualRecord(schemas.ManualEntry{Action: schemas.ManualPromote, App: app, Key: key, Mitigation: &mit,
		TTLMs: ttlMs, CreatedMs: createdMs, LocalTTLMs: 1500, By: "ops", Reason: "test"})
}

func demote(app, key string, createdMs, ttlMs int64) *kgo.Record {
	return manualRecord(schemas.ManualEntry{Action: schemas.ManualDemote, App: app, Key: key, TTLMs: ttlMs, CreatedMs: createdMs})
}

// changes records what OnChange reports.
type changes struct {
	t        *testing.T
	ch       chan hotkeys.Entry
	barriers int // barrier keys written
}

func watch(t *testing.T, f *hotkeys.Follower) *changes {
	c := &changes{t: t, ch: make(chan hotkeys.Entry, 1<<16)}
	f.OnChange(func(e hotkeys.Entry) { c.ch <- e })
	return c
}

// next is the next change reported.
func (c *changes) next() hotkeys.Entry {
	c.t.Helper()
	select {
	case e := <-c.ch:
		return e
	case <-time.After(hangGuard):
		c.t.Fatalf("no change reported (hang guard)")
		return hotkeys.Entry{}
	}
}

// expect requires the next change to be key's, with status st.
func (c *changes) expect(key string, st hotkeys.Status) hotkeys.Entry {
	c.t.Helper()
	e := c.next()
	require.Equal(c.t, key, e.Key, "change %s of %q, want a change of %q", e.Status, e.Key, key)
	require.Equal(c.t, st, e.Status, "change of %q", key)
	return e
}

// barrier writes a detector hot record of a fresh key and waits for its
// change: on a one-partition topic, every record written before it has
// then been applied, and a change reported for one of them would have
// come first.
func (c *changes) barrier(r *registry) {
	c.t.Helper()
	c.barriers++
	key := fmt.Sprintf("barrier-%d", c.barriers)
	r.produce(hotRecord("b", key, 1))
	c.expect(key, hotkeys.StatusHot)
}

func TestFollowerConfigValidate(t *testing.T) {
	ok := []kgo.Opt{kgo.SeedBrokers("127.0.0.1:1")}
	for _, tc := range []struct {
		name string
		cfg  hotkeys.FollowerConfig
		want string
	}{
		{"no client opts", hotkeys.FollowerConfig{}, "ClientOpts is empty"},
		{"bad topic", hotkeys.FollowerConfig{ClientOpts: ok, Topic: "a b"}, `topic "a b"`},
		{"dot topic", hotkeys.FollowerConfig{ClientOpts: ok, Topic: ".."}, `topic ".."`},
		{"long topic", hotkeys.FollowerConfig{ClientOpts: ok, Topic: string(make([]byte, 250))}, "not a valid Kafka topic name"},
		{"negative queue", hotkeys.FollowerConfig{ClientOpts: ok, OnChangeQueue: -1}, "OnChangeQueue is -1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.ErrorContains(t, tc.cfg.Validate(), tc.want)
			_, err := hotkeys.NewFollower(tc.cfg)
			require.ErrorContains(t, err, tc.want)
		})
	}
	require.NoError(t, (&hotkeys.FollowerConfig{ClientOpts: ok}).Validate())
	require.NoError(t, (&hotkeys.FollowerConfig{ClientOpts: ok, Topic: "keyheat.hotkeys-2_x", OnChangeQueue: 1}).Validate())

	_, err := hotkeys.NewFollower(hotkeys.FollowerConfig{ClientOpts: append(ok, kgo.ConsumerGroup("g"))})
	require.ErrorContains(t, err, `consumer group "g"`)
}

// TestFollowerBootstrap100k: a registry of 100,000 hot keys written before
// the follower started is all in the set the moment WaitReady returns, and
// the bootstrap reports no changes.
func TestFollowerBootstrap100k(t *testing.T) {
	noLeaks(t)
	const n = 100_000
	r := newRegistry(t, 4)
	recs := make([]*kgo.Record, 0, 10_000)
	for i := range n {
		// Every tenth key goes hot, cools and goes hot again, so the set
		// is what the latest record says, not the first.
		key := "product:" + strconv.Itoa(i)
		if i%10 == 0 {
			recs = append(recs, bulkHotRecord("shop", key, 1), det{typ: schemas.HotKeyCooled, app: "shop", key: key}.record())
		}
		recs = append(recs, bulkHotRecord("shop", key, float64(i)))
		if len(recs) >= 10_000 {
			r.produce(recs...)
			recs = recs[:0]
		}
	}
	r.produce(recs...)
	// Keys that were hot and are gone: cooled, and a tombstone.
	r.produce(hotRecord("shop", "gone:1", 1), det{typ: schemas.HotKeyCooled, app: "shop", key: "gone:1"}.record(),
		hotRecord("shop", "gone:2", 1), &kgo.Record{Key: schemas.HotKeyRecordKey("shop", "gone:2")})

	reg := prometheus.NewRegistry()
	start := time.Now()
	f := r.follower(hotkeys.FollowerConfig{Registerer: reg}, nil)
	c := watch(t, f)
	waitReady(t, f)
	t.Logf("ready in %v", time.Since(start))
	st := f.Stats()
	require.True(t, st.Ready)
	require.Equal(t, n, st.Entries, "every key is in the set when WaitReady returns")
	require.Equal(t, n, st.Detector)
	require.Equal(t, uint64(n+n/10*2+4), st.RecordsRead)
	require.Zero(t, st.DecodeErrors)
	for _, i := range []int{0, 1, 9, 10, 54_321, n - 1} {
		key := "product:" + strconv.Itoa(i)
		e, ok := f.Get("shop", key)
		require.True(t, ok, key)
		require.Equal(t, float64(i), e.Rate, "%s: the latest record's rate", key)
		require.True(t, f.IsHot("shop", key))
	}
	require.False(t, f.IsHot("shop", "gone:1"))
	require.False(t, f.IsHot("shop", "gone:2"))
	seen := map[string]bool{}
	for e := range f.All() {
		require.Equal(t, "shop", e.App)
		require.False(t, seen[e.Key], "%s twice", e.Key)
		seen[e.Key] = true
	}
	require.Len(t, seen, n, "All lists the set")
	require.False(t, f.IsHot("other", "product:1"), "the app is part of the key")
	require.Equal(t, 1.0, gauge(t, reg, "keyheat_hotkeys_follower_ready"))
	require.Equal(t, float64(n), gauge(t, reg, "keyheat_hotkeys_follower_entries"))

	// The bootstrap reported nothing; what follows it is reported.
	r.produce(hotRecord("shop", "after", 1))
	c.expect("after", hotkeys.StatusHot)
}

// gauge sums the samples of the metric name gathered from reg.
func gauge(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		var sum float64
		for _, m := range mf.GetMetric() {
			switch {
			case m.GetGauge() != nil:
				sum += m.GetGauge().GetValue()
			case m.GetCounter() != nil:
				sum += m.GetCounter().GetValue()
			}
		}
		return sum
	}
	t.Fatalf("metric %s not registered", name)
	return 0
}

// TestFollowerFollowsDetector: a key goes hot, is refreshed (rate and peak
// move, onset stays), cools and leaves; a tombstone takes a key out.
func TestFollowerFollowsDetector(t *testing.T) {
	noLeaks(t)
	r := newRegistry(t, 1)
	f := r.follower(hotkeys.FollowerConfig{}, nil)
	c := watch(t, f)
	waitReady(t, f)
	require.Zero(t, f.Stats().Entries)

	onset := t0.UnixMilli()
	r.produce(det{typ: schemas.HotKeyHot, app: "shop", key: "product:42", rate: 5120.5, peak: 5120.5, onsetMs: onset, detectedMs: onset + 8,
		mit: &schemas.Mitigation{Kind: schemas.MitigationSplit, Split: 8}}.record())
	e := c.expect("product:42", hotkeys.StatusHot)
	want := hotkeys.Entry{App: "shop", Key: "product:42", KeyHash: xxh3.HashString("product:42"), Source: hotkeys.SourceDetector,
		Status: hotkeys.StatusHot, Mitigation: hotkeys.MitigationSplit, SplitFactor: 8, Rate: 5120.5, PeakRate: 5120.5,
		Onset: time.UnixMilli(onset), Detected: time.UnixMilli(onset + 8)}
	require.Equal(t, want, e)
	got, ok := f.Get("shop", "product:42")
	require.True(t, ok)
	require.Equal(t, want, got)
	require.Equal(t, keyHash("product:42"), fmt.Sprintf("%016x", got.KeyHash), "KeyHash is the registry's key_hash")

	// A refresh: the rate rises past the peak, then falls; the onset and
	// the mitigation stay (the second update has none).
	r.produce(det{typ: schemas.HotKeyUpdate, app: "shop", key: "product:42", rate: 9000, peak: 9000, onsetMs: onset + 5000, detectedMs: onset + 5008,
		mit: &schemas.Mitigation{Kind: schemas.MitigationSplit, Split: 16}}.record())
	e = c.expect("product:42", hotkeys.StatusHot)
	require.Equal(t, 9000.0, e.Rate)
	require.Equal(t, 9000.0, e.PeakRate)
	require.Equal(t, 16, e.SplitFactor)
	require.Equal(t, time.UnixMilli(onset), e.Onset, "an update keeps the onset")
	require.Equal(t, time.UnixMilli(onset+5008), e.Detected)
	r.produce(det{typ: schemas.HotKeyUpdate, app: "shop", key: "product:42", rate: 3000, onsetMs: onset + 9000, detectedMs: onset + 9008}.record())
	e = c.expect("product:42", hotkeys.StatusHot)
	require.Equal(t, 3000.0, e.Rate)
	require.Equal(t, 9000.0, e.PeakRate, "the peak stays the highest rate of the episode")
	require.Equal(t, hotkeys.MitigationSplit, e.Mitigation, "an update without a mitigation keeps the last")
	require.Equal(t, 16, e.SplitFactor)
	got, _ = f.Get("shop", "product:42")
	require.Equal(t, e, got)

	r.produce(det{typ: schemas.HotKeyCooled, app: "shop", key: "product:42", rate: 10, onsetMs: onset + 20_000, detectedMs: onset + 20_008}.record())
	e = c.expect("product:42", hotkeys.StatusCooled)
	require.Equal(t, 3000.0, e.Rate, "a cooled change carries the entry the key had")
	require.False(t, f.IsHot("shop", "product:42"))
	_, ok = f.Get("shop", "product:42")
	require.False(t, ok)

	// An update for a key not in the set (its hot record compacted away)
	// puts it there with the update's onset; a tombstone takes it out.
	r.produce(det{typ: schemas.HotKeyUpdate, app: "shop", key: "cart:7", rate: 700, peak: 800, onsetMs: onset + 100, detectedMs: onset + 200}.record())
	e = c.expect("cart:7", hotkeys.StatusHot)
	require.Equal(t, time.UnixMilli(onset+100), e.Onset)
	require.Equal(t, 800.0, e.PeakRate)
	require.Equal(t, hotkeys.MitigationNone, e.Mitigation)
	r.produce(&kgo.Record{Key: schemas.HotKeyRecordKey("shop", "cart:7")})
	c.expect("cart:7", hotkeys.StatusCooled)
	require.False(t, f.IsHot("shop", "cart:7"))

	// A tombstone or cooled record of a key not in the set changes nothing.
	r.produce(&kgo.Record{Key: schemas.HotKeyRecordKey("shop", "never")}, det{typ: schemas.HotKeyCooled, app: "shop", key: "never2"}.record())
	c.barrier(r)
	// The counts are stored after the batch's changes are queued: the
	// barrier's callback can run before they are.
	testenv.Eventually(t, "the barrier's batch counted", func() bool { return f.Stats().Entries == 1 })
	st := f.Stats()
	require.Equal(t, 1, st.Entries, "the barrier key only")
	require.Zero(t, st.DecodeErrors)
}

// TestFollowerManualOverrides: a promote makes a key hot whatever the
// detector says, a demote hides it whatever the detector says, each until
// its TTL ends by the (fake) wall clock, with no record needed; then the
// detector's state rules again.
func TestFollowerManualOverrides(t *testing.T) {
	noLeaks(t)
	r := newRegistry(t, 1)
	clk := hotkeys.NewFakeClock(t0)
	f := r.follower(hotkeys.FollowerConfig{}, clk)
	c := watch(t, f)
	waitReady(t, f)
	now := t0.UnixMilli()
	minute := time.Minute.Milliseconds()

	// promote, with no detector entry: hot with the entry's fields.
	r.produce(promote("shop", "a", now, minute, schemas.Mitigation{Kind: schemas.MitigationCoalesce}))
	e := c.expect("a", hotkeys.StatusHot)
	require.Equal(t, hotkeys.Entry{App: "shop", Key: "a", KeyHash: xxh3.HashString("a"), Source: hotkeys.SourceManual, Status: hotkeys.StatusHot,
		Mitigation: hotkeys.MitigationCoalesce, Onset: t0, Detected: t0, TTL: time.Minute, Expires: t0.Add(time.Minute),
		LocalTTL: 1500 * time.Millisecond}, e)
	// The detector's hot, update and cooled change nothing visible.
	r.produce(hotRecord("shop", "a", 100), det{typ: schemas.HotKeyUpdate, app: "shop", key: "a", rate: 200}.record())
	c.barrier(r)
	got, ok := f.Get("shop", "a")
	require.True(t, ok)
	require.Equal(t, hotkeys.SourceManual, got.Source)
	r.produce(det{typ: schemas.HotKeyCooled, app: "shop", key: "a"}.record())
	c.barrier(r)
	require.True(t, f.IsHot("shop", "a"), "a promote beats the detector's cooled")

	// promote over a detector-hot key: the promote shows, then the
	// detector's entry again when it ends.
	r.produce(hotRecord("shop", "b", 100))
	require.Equal(t, hotkeys.SourceDetector, c.expect("b", hotkeys.StatusHot).Source)
	r.produce(promote("shop", "b", now, 2*minute, schemas.Mitigation{Kind: schemas.MitigationSplit, Split: 4}))
	e = c.expect("b", hotkeys.StatusHot)
	require.Equal(t, hotkeys.SourceManual, e.Source)
	require.Equal(t, 4, e.SplitFactor)

	// demote over a detector-hot key: out of the set, whatever the
	// detector publishes meanwhile.
	r.produce(hotRecord("shop", "c", 100))
	c.expect("c", hotkeys.StatusHot)
	r.produce(demote("shop", "c", now, 3*minute))
	require.Equal(t, hotkeys.SourceDetector, c.expect("c", hotkeys.StatusCooled).Source)
	require.False(t, f.IsHot("shop", "c"))
	r.produce(hotRecord("shop", "d", 1))
	c.expect("d", hotkeys.StatusHot)
	r.produce(det{typ: schemas.HotKeyUpdate, app: "shop", key: "c", rate: 333}.record(), demote("shop", "d", now, 3*minute))
	c.expect("d", hotkeys.StatusCooled)
	c.barrier(r)
	require.False(t, f.IsHot("shop", "c"), "a demote hides the detector's update")
	st := f.Stats()
	require.Equal(t, 2, st.Demoted)
	require.Equal(t, 2, st.Manual)

	// A manual tombstone ends an override at once.
	r.produce(promote("shop", "e", now, minute, schemas.Mitigation{Kind: schemas.MitigationLocalCache}))
	c.expect("e", hotkeys.StatusHot)
	r.produce(&kgo.Record{Key: schemas.ManualRecordKey("shop", "e")})
	c.expect("e", hotkeys.StatusCooled)
	require.False(t, f.IsHot("shop", "e"))

	// A manual record made before the key's latest one (by created_ms)
	// changes nothing, wherever it comes in the topic: here d's demote
	// stands.
	r.produce(promote("shop", "d", now-2*minute, minute, schemas.Mitigation{Kind: schemas.MitigationLocalCache}))
	c.barrier(r)
	require.False(t, f.IsHot("shop", "d"), "an older promote read late does not end a newer demote")
	require.EqualValues(t, 1, f.Stats().StaleManual)
	// A manual record read after it ended changes nothing but ending the
	// override before it, when it is the newer.
	r.produce(promote("shop", "old", now-2*minute, minute, schemas.Mitigation{Kind: schemas.MitigationLocalCache}))
	c.barrier(r)
	require.False(t, f.IsHot("shop", "old"))
	r.produce(promote("shop", "f", now-3*minute, 10*minute, schemas.Mitigation{Kind: schemas.MitigationLocalCache}))
	c.expect("f", hotkeys.StatusHot)
	r.produce(promote("shop", "f", now-2*minute, minute, schemas.Mitigation{Kind: schemas.MitigationLocalCache}))
	c.expect("f", hotkeys.StatusCooled)
	require.False(t, f.IsHot("shop", "f"))

	// a's promote ends at +1 min: no detector entry behind it (cooled).
	clk.Set(t0.Add(time.Minute - time.Millisecond))
	c.barrier(r)
	require.True(t, f.IsHot("shop", "a"), "a promote lasts until CreatedMs + TTLMs")
	clk.Set(t0.Add(time.Minute))
	e = c.expect("a", hotkeys.StatusExpired)
	require.Equal(t, hotkeys.SourceManual, e.Source)
	require.False(t, f.IsHot("shop", "a"))

	// b's promote ends at +2 min: the detector's entry shows again.
	clk.Set(t0.Add(2 * time.Minute))
	e = c.expect("b", hotkeys.StatusHot)
	require.Equal(t, hotkeys.SourceDetector, e.Source)
	require.Equal(t, 100.0, e.Rate)

	// c's and d's demotes end at +3 min: the detector's latest entries
	// show, in either order.
	clk.Set(t0.Add(3 * time.Minute))
	byKey := map[string]hotkeys.Entry{}
	for range 2 {
		e := c.next()
		require.Equal(t, hotkeys.StatusHot, e.Status, "change of %q", e.Key)
		byKey[e.Key] = e
	}
	require.Contains(t, byKey, "d")
	e = byKey["c"]
	require.Equal(t, 333.0, e.Rate, "the update applied while the demote hid it")
	require.True(t, f.IsHot("shop", "c"))
	// Stats' counts are stored after a batch's changes were reported, the
	// barrier's own among them: wait until they include the barrier's key.
	c.barrier(r)
	testenv.Eventually(t, "the stats to count the barrier's key", func() bool { return f.Stats().Detector >= 3+c.barriers })
	st = f.Stats()
	require.Zero(t, st.Demoted)
	require.Zero(t, st.Manual)
	require.Equal(t, 3+c.barriers, st.Detector, "b, c, d and the barriers' keys")
}

// TestFollowerExpiryWallClock: with the real clock, a demote's end shows
// the detector's key again without a new record. The demote is read before
// it ends on any machine that is not starved for its whole TTL; on one that
// is, the key shows at once, and the test passes without testing the timer.
func TestFollowerExpiryWallClock(t *testing.T) {
	noLeaks(t)
	r := newRegistry(t, 1)
	f := r.follower(hotkeys.FollowerConfig{}, nil)
	c := watch(t, f)
	waitReady(t, f)
	r.produce(hotRecord("shop", "k", 1))
	c.expect("k", hotkeys.StatusHot)
	r.produce(demote("shop", "k", time.Now().UnixMilli(), 1500), hotRecord("b", "after-demote", 1))
	hidden := false
	for e := c.next(); e.Key != "after-demote"; e = c.next() {
		require.Equal(t, "k", e.Key)
		require.Equal(t, hotkeys.StatusCooled, e.Status)
		hidden = true
	}
	if hidden {
		// The demote was read before it ended: only its timer shows k again.
		c.expect("k", hotkeys.StatusHot)
	}
	require.True(t, f.IsHot("shop", "k"))
	// The counts are stored after the batch's changes are queued: a
	// callback can run before they are.
	testenv.Eventually(t, "no demote counted", func() bool { return f.Stats().Demoted == 0 })
	t.Logf("the demote hid k until its end: %v", hidden)
	var seen []string
	for len(c.ch) > 0 {
		e := <-c.ch
		seen = append(seen, e.Key+" "+e.Status.String())
	}
	require.Empty(t, seen)
}

// TestFollowerTransactions: a registry written with transactions, the last
// committed so that the end offset is a marker's, makes the follower ready;
// records of aborted transactions are never applied.
func TestFollowerTransactions(t *testing.T) {
	noLeaks(t)
	r := newRegistry(t, 2)
	tx, err := kgo.NewClient(kgo.SeedBrokers(r.seeds...), kgo.DefaultProduceTopic(r.topic), kgo.TransactionalID(r.topic+"-tx"))
	require.NoError(t, err)
	defer tx.Close()
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	txn := func(commit kgo.TransactionEndTry, keys ...string) map[int32]int64 {
		require.NoError(t, tx.BeginTransaction())
		last := map[int32]int64{}
		for _, k := range keys {
			res := tx.ProduceSync(ctx, hotRecord("shop", k, 1))
			require.NoError(t, res.FirstErr())
			last[res[0].Record.Partition] = max(last[res[0].Record.Partition], res[0].Record.Offset)
		}
		require.NoError(t, tx.EndTransaction(ctx, commit))
		return last
	}
	txn(kgo.TryCommit, "c1", "c2", "c3", "c4")
	txn(kgo.TryAbort, "a1", "a2", "a3", "a4")
	r.produce(hotRecord("shop", "plain", 1))
	last := txn(kgo.TryCommit, "c5", "c6", "c7", "c8")

	// The topic ends with commit markers, after the last data records.
	ends, err := kadm.NewClient(r.cl).ListEndOffsets(ctx, r.topic)
	require.NoError(t, err)
	ends.Each(func(o kadm.ListedOffset) {
		if l, ok := last[o.Partition]; ok {
			require.Greater(t, o.Offset, l+1, "partition %d ends with a marker", o.Partition)
		}
	})

	f := r.follower(hotkeys.FollowerConfig{}, nil)
	waitReady(t, f)
	st := f.Stats()
	require.Equal(t, 9, st.Entries)
	require.Equal(t, uint64(9), st.RecordsRead, "aborted records and markers are not read as records")
	for _, k := range []string{"c1", "c4", "c5", "c8", "plain"} {
		require.True(t, f.IsHot("shop", k), k)
	}
	for _, k := range []string{"a1", "a2", "a3", "a4"} {
		require.False(t, f.IsHot("shop", k), "%s was aborted", k)
	}

	// An aborted transaction last: the end is an abort marker.
	txn(kgo.TryAbort, "a5", "a6")
	f2 := r.follower(hotkeys.FollowerConfig{}, nil)
	waitReady(t, f2)
	require.Equal(t, 9, f2.Stats().Entries)
	require.False(t, f2.IsHot("shop", "a5"))
}

// TestFollowerSkipsBadRecords: records that cannot be decoded, or that
// name another key than their record key, are counted and skipped; keys
// of any bytes work, in both kinds of record.
func TestFollowerSkipsBadRecords(t *testing.T) {
	noLeaks(t)
	r := newRegistry(t, 3)
	good := hotRecord("shop", "ok", 1)
	bad := []*kgo.Record{
		{Key: schemas.HotKeyRecordKey("shop", "x"), Value: []byte("not json")},
		{Key: schemas.HotKeyRecordKey("shop", "x"), Value: []byte{}},
		{Key: schemas.HotKeyRecordKey("shop", "x"), Value: []byte(`{"v":2,"type":"hot","app":"shop","key":"x"}`)},
		{Key: schemas.HotKeyRecordKey("shop", "x"), Value: []byte(`{"v":1,"type":"warm","app":"shop","key":"x"}`)},
		{Key: schemas.HotKeyRecordKey("shop", "x"), Value: []byte(`{"v":1,"type":"hot","app":"shop","key":"x","mitigation":{"kind":"split","split":3}}`)},
		{Key: schemas.HotKeyRecordKey("shop", "x"), Value: []byte(`{"v":1,"type":"hot","app":"shop","key":"x","mitigation":{"kind":"teleport"}}`)},
		{Key: schemas.HotKeyRecordKey("shop", "x"), Value: good.Value}, // the value is another key's
		{Key: []byte("shopx"), Value: good.Value},                      // no length prefix
		{Key: nil, Value: good.Value},
		{Key: []byte("m:zz"), Value: nil},
		{Key: schemas.ManualRecordKey("shop", "x"), Value: []byte(`{"v":1,"action":"promote","app":"shop","key":"x","ttl_ms":0,"created_ms":1}`)},
		{Key: schemas.ManualRecordKey("shop", "x"), Value: hotRecord("shop", "x", 1).Value},
		{Key: schemas.ManualRecordKey("shop", "y"), Value: promote("shop", "x", t0.UnixMilli(), 60_000, schemas.Mitigation{Kind: schemas.MitigationCoalesce}).Value},
	}
	binKeys := []string{"a\xff", "a\xfe", "bin\xff\x00key", "\x80", ""}
	var recs []*kgo.Record
	recs = append(recs, bad...)
	recs = append(recs, good)
	for _, k := range binKeys {
		recs = append(recs, hotRecord("bin", k, 1), promote("man", k, t0.UnixMilli(), 60_000, schemas.Mitigation{Kind: schemas.MitigationLocalCache}))
	}
	r.produce(recs...)

	clk := hotkeys.NewFakeClock(t0)
	reg := prometheus.NewRegistry()
	f := r.follower(hotkeys.FollowerConfig{Registerer: reg}, clk)
	waitReady(t, f)
	st := f.Stats()
	require.Equal(t, uint64(len(bad)), st.DecodeErrors)
	require.Equal(t, uint64(len(recs)), st.RecordsRead)
	require.Equal(t, 1+len(binKeys), st.Detector)
	require.Equal(t, len(binKeys), st.Manual)
	require.False(t, f.IsHot("shop", "x"))
	require.True(t, f.IsHot("shop", "ok"))
	for _, k := range binKeys {
		for _, app := range []string{"bin", "man"} {
			e, ok := f.Get(app, k)
			require.True(t, ok, "%s/%q", app, k)
			require.Equal(t, []byte(k), []byte(e.Key))
			require.Equal(t, xxh3.HashString(k), e.KeyHash)
		}
	}
	require.False(t, f.IsHot("bin", "a\xfd"), "binary keys are told apart")
	require.False(t, f.IsHot("bin", "a\uFFFD"), "the U+FFFD form is not the key")
	require.Equal(t, float64(len(bad)), gauge(t, reg, "keyheat_hotkeys_follower_decode_errors_total"))
	require.Equal(t, float64(len(recs)), gauge(t, reg, "keyheat_hotkeys_follower_records_total"))
}

// TestFollowerSlowCallbacks: a callback that blocks does not stall
// following; the changes its full queue could not take are counted, and
// the others delivered once it returns.
func TestFollowerSlowCallbacks(t *testing.T) {
	noLeaks(t)
	r := newRegistry(t, 2)
	reg := prometheus.NewRegistry()
	f := r.follower(hotkeys.FollowerConfig{OnChangeQueue: 4, Registerer: reg}, nil)
	release := make(chan struct{})
	var calls atomic.Int64
	f.OnChange(func(hotkeys.Entry) {
		<-release
		calls.Add(1)
	})
	waitReady(t, f)
	const n = 100
	for i := range n {
		r.produce(hotRecord("shop", strconv.Itoa(i), 1))
	}
	testenv.Eventually(t, "every key in the set while the callback blocks", func() bool { return f.Stats().Entries == n })
	for i := range n {
		require.True(t, f.IsHot("shop", strconv.Itoa(i)))
	}
	dropped := f.Stats().OnChangeDropped
	// One change is in the blocked callback, at most 4 wait: the rest
	// were dropped.
	require.GreaterOrEqual(t, dropped, uint64(n-5))
	require.Equal(t, float64(dropped), gauge(t, reg, "keyheat_hotkeys_follower_onchange_dropped_total"))
	close(release)
	testenv.Eventually(t, "the changes not dropped delivered", func() bool { return calls.Load() == int64(n)-int64(dropped) })
	require.Equal(t, dropped, f.Stats().OnChangeDropped)
}

// TestFollowerMissingTopic: a registry topic that does not exist yet makes
// the follower ready at once, empty; it follows the topic once created.
func TestFollowerMissingTopic(t *testing.T) {
	noLeaks(t)
	seeds := testenv.KFake(t)
	r := openRegistry(t, seeds, "keyheat.hotkeys-missing")
	f := r.follower(hotkeys.FollowerConfig{}, nil)
	waitReady(t, f)
	require.Zero(t, f.Stats().Entries)

	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	_, err := kadm.NewClient(r.cl).CreateTopic(ctx, 2, 1, nil, r.topic)
	require.NoError(t, err)
	r.produce(hotRecord("shop", "k", 1))
	testenv.Eventually(t, "the key from the topic created later", func() bool { return f.IsHot("shop", "k") })
}

// TestFollowerClose: Close is idempotent, WaitReady says the follower was
// closed, and the metrics are unregistered so a new follower can register.
func TestFollowerClose(t *testing.T) {
	noLeaks(t)
	reg := prometheus.NewRegistry()
	// Nothing listens on port 1: the follower never gets ready.
	cfg := hotkeys.FollowerConfig{ClientOpts: []kgo.Opt{kgo.SeedBrokers("127.0.0.1:1")}, Registerer: reg}
	f, err := hotkeys.NewFollower(cfg)
	require.NoError(t, err)
	_, err = hotkeys.NewFollower(cfg)
	require.ErrorContains(t, err, "register follower metrics", "two followers cannot share a registry")
	var wg sync.WaitGroup
	wg.Add(1)
	var waitErr error
	go func() {
		defer wg.Done()
		waitErr = f.WaitReady(context.Background())
	}()
	require.False(t, f.Ready())
	f.Close()
	f.Close()
	wg.Wait()
	require.ErrorIs(t, waitErr, hotkeys.ErrFollowerClosed)
	require.False(t, f.IsHot("a", "b"), "a closed follower still answers")

	f2, err := hotkeys.NewFollower(cfg)
	require.NoError(t, err, "Close unregistered the metrics")
	f2.Close()
}

// TestFollowerRealBroker runs a bootstrap and a transaction against the
// real broker (KEYHEAT_TEST_KAFKA).
func TestFollowerRealBroker(t *testing.T) {
	seeds := testenv.KafkaSeeds(t)
	noLeaks(t)
	r := openRegistry(t, seeds, testenv.NewTopicWithConfigs(t, seeds, 3, map[string]string{"cleanup.policy": "compact"}))
	var recs []*kgo.Record
	for i := range 1000 {
		recs = append(recs, hotRecord("shop", strconv.Itoa(i), float64(i)))
	}
	r.produce(recs...)
	tx, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.DefaultProduceTopic(r.topic), kgo.TransactionalID(r.topic+"-tx"))
	require.NoError(t, err)
	defer tx.Close()
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	for _, commit := range []kgo.TransactionEndTry{kgo.TryAbort, kgo.TryCommit} {
		require.NoError(t, tx.BeginTransaction())
		require.NoError(t, tx.ProduceSync(ctx, hotRecord("tx", strconv.FormatBool(bool(commit)), 1), &kgo.Record{Key: schemas.HotKeyRecordKey("shop", "0")}).FirstErr())
		require.NoError(t, tx.EndTransaction(ctx, commit))
	}
	f := r.follower(hotkeys.FollowerConfig{}, nil)
	waitReady(t, f)
	// 999 from the plain records (the committed tombstone took "0" out)
	// and the committed transaction's key.
	require.Equal(t, 1000, f.Stats().Entries)
	require.True(t, f.IsHot("tx", "true"))
	require.False(t, f.IsHot("tx", "false"))
	require.False(t, f.IsHot("shop", "0"))
	e, ok := f.Get("shop", "999")
	require.True(t, ok)
	require.Equal(t, 999.0, e.Rate)
}

// TestFollowerFeedsCache: the follower is the cache's registry and its
// changes are the cache's Forget: a promoted key is served from the cache,
// and once the promote is removed every Get loads again.
func TestFollowerFeedsCache(t *testing.T) {
	noLeaks(t)
	r := newRegistry(t, 1)
	clk := hotkeys.NewFakeClock(t0)
	r.produce(promote("shop", "k", t0.UnixMilli(), time.Hour.Milliseconds(), schemas.Mitigation{Kind: schemas.MitigationLocalCache}))
	f := r.follower(hotkeys.FollowerConfig{}, clk)
	cache, err := hotkeys.NewCache(hotkeys.CacheConfig{Registry: f, SharedTTL: time.Hour, LocalOnly: true})
	require.NoError(t, err)
	t.Cleanup(cache.Close)
	f.OnChange(cache.Forget)
	c := watch(t, f)
	waitReady(t, f)

	var loads atomic.Int64
	load := func(context.Context) ([]byte, error) { return []byte("v" + strconv.Itoa(int(loads.Add(1)))), nil }
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	for range 3 {
		v, err := cache.Get(ctx, "shop", "k", load)
		require.NoError(t, err)
		require.Equal(t, "v1", string(v), "a hot key is loaded once")
	}
	r.produce(&kgo.Record{Key: schemas.ManualRecordKey("shop", "k")})
	c.expect("k", hotkeys.StatusCooled)
	for i := range 2 {
		v, err := cache.Get(ctx, "shop", "k", load)
		require.NoError(t, err)
		require.Equal(t, "v"+strconv.Itoa(i+2), string(v), "a key no longer hot is loaded every time")
	}
}
