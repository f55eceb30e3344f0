package onsetbench_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/keyheat/keyheat/detect"
	"github.com/keyheat/keyheat/hotkeys"
	"github.com/keyheat/keyheat/internal/testenv"
	"github.com/keyheat/keyheat/pipeline"
	"github.com/keyheat/keyheat/schemas"
)

// app is the application every event of a campaign names.
const app = "bench"

// hangGuard bounds each wait of a campaign on a condition (detect joined,
// the follower ready, a planted key seen hot): a campaign waits for
// conditions, and this only turns a hang into a failure that says what
// never came.
const hangGuard = testenv.HangGuard

// broker is a cluster a campaign runs against.
type broker struct {
	name  string
	seeds func(testing.TB) []string
}

var (
	kafkaBroker = broker{"kafka", func(tb testing.TB) []string { return testenv.KafkaSeeds(tb) }}
	kfakeBroker = broker{"kfake", func(tb testing.TB) []string { return testenv.KFake(tb) }}
)

// defaultBroker is the real broker when KEYHEAT_TEST_KAFKA names one (and,
// under CI, always: testenv fails the test there when it is unset), kfake
// otherwise.
func defaultBroker() broker {
	if os.Getenv(testenv.EnvKafka) != "" || testenv.InCI() {
		return kafkaBroker
	}
	return kfakeBroker
}

// setting is the detect configuration a campaign runs.
type setting struct {
	name string
	// pipeline is the detection; the zero value is replaced by
	// pipeline.DefaultOptions().
	pipeline pipeline.Options
	// clientOpts are added after detect's own client options (they win).
	clientOpts []kgo.Opt
}

// defaults is detect as shipped: pipeline.DefaultOptions() (one rule,
// 1,000 events/s over a 1 s window in 10 slots) and detect.DefaultOptions().
var defaults = setting{name: "default"}

// ruleWindow is defaults with the rule's window set to w (its rate, and
// the slot count, as they are): the threshold count scales with w, so a
// key at twice the rate crosses in w/2.
func ruleWindow(w time.Duration) setting {
	o := pipeline.DefaultOptions()
	o.Rules[0].Window = w
	return setting{name: "window=" + w.String(), pipeline: o}
}

// plan is a campaign's traffic.
type plan struct {
	// partitions of the events topic (and of detect's outputs).
	partitions int32
	// background is the rate of the cold keys' events, each a key drawn
	// uniformly from coldKeys keys.
	background float64
	coldKeys   int
	// onsets planted keys start one after another, every apart; each is
	// produced at plantedRate for plantedFor.
	onsets      int
	every       time.Duration
	plantedRate float64
	plantedFor  time.Duration
	// linger is the generator's producer linger (ingest's default is 5 ms).
	linger time.Duration
}

// benchPlan is what the benchmark runs: 100 onsets, one every 500 ms, each
// key at 2,000 events/s (twice the default rule's rate) for 2 s, over
// 2,000 events/s of background on 8 partitions; 50 s of traffic, 8,000 to
// 10,000 events/s.
var benchPlan = plan{partitions: 8, background: 2000, coldKeys: 50_000, onsets: 100, every: 500 * time.Millisecond,
	plantedRate: 2000, plantedFor: 2 * time.Second, linger: 5 * time.Millisecond}

// onset is one planted key: when its events were produced and when each
// stage of the path to the application saw it. Times are Unix ns of this
// process's wall clock, 0 until known; event times (and so onset_ms) are
// Unix ms of the same clock, stamped when the event was handed to the
// producer.
type onset struct {
	key string
	// firstMs is the event time (and record timestamp) of the key's first
	// event.
	firstMs atomic.Int64
	// acked and fetched hold, per millisecond of event time from firstMs
	// on, when the last event stamped that millisecond was acknowledged
	// by the broker and when detect's consumer client buffered it.
	acked, fetched []atomic.Int64
	// produced counts the events stamped each millisecond from firstMs
	// on; written by the generator's loop only, read once it stopped.
	produced []int32
	// published is when the key's first registry record (its hot) was
	// acknowledged to detect; followerFetched when the follower's client
	// buffered it; seen when the follower's OnChange reported it hot.
	published, followerFetched, seen atomic.Int64
	// onsetMs and detectedMs are the entry's Onset (the crossing event's
	// time) and Detected (when detect's core emitted it) as OnChange saw
	// them; hotThen is IsHot's answer inside that callback.
	onsetMs, detectedMs atomic.Int64
	hotThen             atomic.Bool
}

// mark records at (ns) for the event stamped tsMs in per (acked or
// fetched).
func (o *onset) mark(per []atomic.Int64, tsMs, at int64) {
	if first := o.firstMs.Load(); first != 0 {
		if i := tsMs - first; i >= 0 && i < int64(len(per)) {
			per[i].Store(at)
		}
	}
}

// at returns what per holds for the event stamped tsMs.
func (o *onset) at(per []atomic.Int64, tsMs int64) int64 {
	i := tsMs - o.firstMs.Load()
	if i < 0 || i >= int64(len(per)) {
		return 0
	}
	return per[i].Load()
}

// campaign is one run: detect, a follower and the generator against one
// cluster, with the planted keys each stage reports on.
type campaign struct {
	tb                 testing.TB
	plan               plan
	events, hotkeys    string
	warmup             *onset
	planted            []*onset
	byKey, byRecordKey map[string]*onset // read-only once built
	seenCount          atomic.Int64
	seenCh             chan struct{} // a planted key was seen hot
	strayMu            sync.Mutex
	stray              []string // keys reported hot that were never planted
	produceErrs        atomic.Int64
	// The generator's pauses (see gen.maxPause), once it stopped.
	genMaxPause time.Duration
	genPauses   int
	// threshold is the rule's count over its window: the events a key
	// needs to cross it.
	threshold float64
}

func newCampaign(tb testing.TB, p plan) *campaign {
	c := &campaign{tb: tb, plan: p, byKey: map[string]*onset{}, byRecordKey: map[string]*onset{}, seenCh: make(chan struct{}, 1)}
	// The slack covers a generator that falls behind and stamps a key's
	// last events later than plantedFor after its first.
	slots := int(p.plantedFor/time.Millisecond) + 5_000
	add := func(key string) *onset {
		o := &onset{key: key, acked: make([]atomic.Int64, slots), fetched: make([]atomic.Int64, slots),
			produced: make([]int32, slots)}
		c.byKey[key] = o
		c.byRecordKey[string(schemas.HotKeyRecordKey(app, key))] = o
		return o
	}
	c.warmup = add("warmup")
	for i := range p.onsets {
		c.planted = append(c.planted, add(fmt.Sprintf("planted:%03d", i)))
	}
	return c
}

// detectHook watches detect's clients: the registry records its producer
// got acknowledged, and the planted events its consumer fetched.
type detectHook struct{ c *campaign }

func (h detectHook) OnProduceRecordUnbuffered(r *kgo.Record, err error) {
	if err != nil || r.Topic != h.c.hotkeys || r.Value == nil {
		return
	}
	if o := h.c.byRecordKey[string(r.Key)]; o != nil {
		o.published.CompareAndSwap(0, time.Now().UnixNano())
	}
}

func (h detectHook) OnFetchRecordBuffered(r *kgo.Record) {
	if r.Topic != h.c.events {
		return
	}
	if o := h.c.byKey[string(r.Key)]; o != nil {
		o.mark(o.fetched, r.Timestamp.UnixMilli(), time.Now().UnixNano())
	}
}

// followerHook watches the follower's client: when it fetched each
// planted key's first registry record.
type followerHook struct{ c *campaign }

func (h followerHook) OnFetchRecordBuffered(r *kgo.Record) {
	if r.Topic != h.c.hotkeys || r.Value == nil {
		return
	}
	if o := h.c.byRecordKey[string(r.Key)]; o != nil {
		o.followerFetched.CompareAndSwap(0, time.Now().UnixNano())
	}
}

// onChange is the follower's callback, as an application would register
// it.
func (c *campaign) onChange(f *hotkeys.Follower) func(hotkeys.Entry) {
	return func(e hotkeys.Entry) {
		if e.Status != hotkeys.StatusHot {
			return
		}
		now := time.Now().UnixNano()
		o := c.byKey[e.Key]
		if o == nil || e.App != app {
			c.strayMu.Lock()
			c.stray = append(c.stray, e.App+"/"+e.Key)
			c.strayMu.Unlock()
			return
		}
		if !o.seen.CompareAndSwap(0, now) {
			return // an update of a key already seen
		}
		o.onsetMs.Store(e.Onset.UnixMilli())
		o.detectedMs.Store(e.Detected.UnixMilli())
		o.hotThen.Store(f.IsHot(app, e.Key))
		c.seenCount.Add(1)
		select {
		case c.seenCh <- struct{}{}:
		default:
		}
	}
}

// run runs the campaign: detect with s against seeds, a follower, the
// background traffic, the warm-up key, then the planted keys one every
// plan.every, until every planted key was seen hot (or a hang guard
// fires). It returns once everything it started has stopped.
func (c *campaign) run(seeds []string, s setting) {
	tb := c.tb
	p := c.plan
	if s.pipeline.Window == 0 {
		s.pipeline = pipeline.DefaultOptions()
	}
	r := s.pipeline.Rules[0]
	c.threshold = r.Rate * r.Window.Seconds()
	c.events = testenv.NewTopic(tb, seeds, p.partitions)
	c.hotkeys = testenv.UniqueName(tb, "hot")
	outs := detect.OutputTopics{Events: c.events, DLQ: testenv.UniqueName(tb, "dlq"), Hotkeys: c.hotkeys,
		Windows: testenv.UniqueName(tb, "win"), Reports: testenv.UniqueName(tb, "rep"), Progress: testenv.UniqueName(tb, "prog")}
	opts := detect.DefaultOptions()
	opts.Group, opts.MergeGroup = testenv.UniqueName(tb, "g"), testenv.UniqueName(tb, "m")
	cleanupKafka(tb, seeds, []string{outs.DLQ, outs.Hotkeys, outs.Windows, outs.Reports, outs.Progress},
		[]string{opts.Group, opts.MergeGroup})

	cfg := detect.Config{
		Options:    opts,
		ClientOpts: append([]kgo.Opt{kgo.SeedBrokers(seeds...), kgo.WithHooks(detectHook{c})}, s.clientOpts...),
		Topics:     outs, CreateTopics: true, Partitions: p.partitions, ReplicationFactor: -1,
		Limits:   schemas.DefaultLimits(),
		Pipeline: s.pipeline,
		Merge: &pipeline.MergerConfig{MergerOptions: pipeline.DefaultMergerOptions(), Window: s.pipeline.Window,
			Lateness: s.pipeline.Lateness},
		Logger: logger(),
	}
	svc, err := detect.New(cfg)
	require.NoError(tb, err)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- svc.Run(ctx) }()
	var stopOnce sync.Once
	stopDetect := func() {
		stopOnce.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					tb.Errorf("detect's Run: %v", err)
				}
			case <-time.After(hangGuard):
				tb.Errorf("detect did not stop within %v", hangGuard)
			}
		})
	}
	// On a failure the campaign stops where it is: the cleanups stop
	// what it started (each stop runs once).
	tb.Cleanup(stopDetect)
	readyBy := time.Now().Add(hangGuard)
	for err := svc.Ready(); err != nil; err = svc.Ready() {
		select {
		case runErr := <-done:
			done <- runErr // for stopDetect
			tb.Fatalf("detect stopped before it was ready: %v", runErr)
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(readyBy) {
			tb.Fatalf("detect not ready after %v: %v", hangGuard, err)
		}
	}

	g, err := newGen(c, seeds)
	require.NoError(tb, err)
	g.start()
	tb.Cleanup(g.stop)

	f, err := hotkeys.NewFollower(hotkeys.FollowerConfig{
		ClientOpts: []kgo.Opt{kgo.SeedBrokers(seeds...), kgo.WithHooks(followerHook{c})},
		Topic:      c.hotkeys, Logger: logger(),
	})
	require.NoError(tb, err)
	tb.Cleanup(f.Close)
	f.OnChange(c.onChange(f))
	readyCtx, readyCancel := context.WithTimeout(context.Background(), hangGuard)
	err = f.WaitReady(readyCtx)
	readyCancel()
	require.NoError(tb, err, "the follower's WaitReady")

	// The warm-up key is seen once detect reads every partition and the
	// follower follows the registry; the measured keys start after it.
	g.plant(c.warmup)
	c.waitSeen(done, func() bool { return c.warmup.seen.Load() != 0 }, "the warm-up key")
	for i, o := range c.planted {
		if i > 0 {
			time.Sleep(p.every)
		}
		g.plant(o)
	}
	c.waitSeen(done, func() bool { return c.seenCount.Load() == int64(1+len(c.planted)) },
		"every planted key")

	g.stop()
	c.genMaxPause, c.genPauses = g.maxPause, g.pauses
	f.Close()
	stopDetect()
	require.Zero(tb, c.produceErrs.Load(), "events the generator's producer failed")
}

// waitSeen waits until cond holds, checked each time a planted key is
// seen hot; it fails the campaign if detect stops meanwhile or the hang
// guard passes with no key seen.
func (c *campaign) waitSeen(done chan error, cond func() bool, what string) {
	c.tb.Helper()
	for !cond() {
		select {
		case <-c.seenCh:
		case err := <-done:
			done <- err // for stopDetect
			c.tb.Fatalf("detect stopped while waiting for %s: %v", what, err)
		case <-time.After(hangGuard):
			c.tb.Fatalf("no planted key seen hot for %v while waiting for %s (%d of %d seen): %s",
				hangGuard, what, c.seenCount.Load(), 1+len(c.planted), c.missing())
		}
	}
}

// missing names the planted keys not seen hot, each with the last stage
// of its path it reached, so a hang says where the path stopped: none of
// its events produced yet, produced but none acknowledged by the broker,
// acknowledged but none fetched by detect, fetched but no hot record
// published, published but not fetched by the follower.
func (c *campaign) missing() string {
	var out []string
	for _, o := range append([]*onset{c.warmup}, c.planted...) {
		if o.seen.Load() != 0 {
			continue
		}
		count := func(per []atomic.Int64) (n int) {
			for i := range per {
				if per[i].Load() != 0 {
					n++
				}
			}
			return n
		}
		stage := "no event produced"
		switch {
		case o.followerFetched.Load() != 0:
			stage = "hot record fetched by the follower, not yet applied"
		case o.published.Load() != 0:
			stage = "hot record published, not fetched by the follower"
		case o.firstMs.Load() != 0:
			stage = fmt.Sprintf("events produced from %s: %d ms of them acknowledged, %d ms fetched by detect, no hot record published",
				time.UnixMilli(o.firstMs.Load()).UTC().Format("15:04:05.000"), count(o.acked), count(o.fetched))
		}
		out = append(out, o.key+" ("+stage+")")
	}
	return strings.Join(out, ", ")
}

// cleanupKafka deletes topics and groups when the test ends.
func cleanupKafka(tb testing.TB, seeds, topics, groups []string) {
	tb.Cleanup(func() {
		cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
		if err != nil {
			return
		}
		defer cl.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		adm := kadm.NewClient(cl)
		_, _ = adm.DeleteTopics(ctx, topics...)
		_, _ = adm.DeleteGroups(ctx, groups...)
	})
}

func logger() *slog.Logger {
	if testing.Verbose() && os.Getenv("KEYHEAT_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// gen produces the campaign's events live: every millisecond or so it
// produces what is due by the wall clock (the background at its rate,
// each planted key at its rate from when it was planted), each event
// stamped, as its time and its record's timestamp, with the wall clock
// of that round. Stamps only grow, so every partition's events are in
// event-time order. A round that runs late produces what came due
// meanwhile at once: every key keeps its rate in event time, however
// starved the generator is.
type gen struct {
	c        *campaign
	cl       *kgo.Client
	rng      *rand.Rand
	wg       sync.WaitGroup
	quit     chan struct{}
	stopOnce sync.Once

	mu      sync.Mutex
	planted []*growing // planted and not yet produced in full

	// maxPause is the longest time between two rounds, and pauses the
	// number of rounds that came more than pauseOver after the one before:
	// how far the generator fell behind the wall clock. Written by loop,
	// read after stop.
	maxPause time.Duration
	pauses   int
}

// pauseOver is the gap between two rounds counted as a pause.
const pauseOver = 20 * time.Millisecond

// growing is a planted key being produced.
type growing struct {
	o     *onset
	start time.Time
	sent  int
}

func newGen(c *campaign, seeds []string) (*gen, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.DefaultProduceTopic(c.events),
		kgo.ProducerLinger(c.plan.linger))
	if err != nil {
		return nil, err
	}
	return &gen{c: c, cl: cl, rng: rand.New(rand.NewPCG(1, 2)), quit: make(chan struct{})}, nil
}

func (g *gen) start() {
	g.wg.Add(1)
	go g.loop()
}

// plant starts producing o's events now.
func (g *gen) plant(o *onset) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.planted = append(g.planted, &growing{o: o, start: time.Now()})
}

// stop stops producing and waits for every event produced to be
// acknowledged, then closes the client. Calling it again does nothing.
func (g *gen) stop() {
	g.stopOnce.Do(g.doStop)
}

func (g *gen) doStop() {
	close(g.quit)
	g.wg.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	if err := g.cl.Flush(ctx); err != nil {
		g.c.tb.Errorf("flush the generator's producer: %v", err)
	}
	g.cl.Close()
}

func (g *gen) loop() {
	defer g.wg.Done()
	p := g.c.plan
	t0 := time.Now()
	last := t0
	bgSent := 0
	// Produce's context is not the loop's: stopping must not fail the
	// events in flight.
	ctx := context.Background()
	for {
		select {
		case <-g.quit:
			return
		default:
		}
		now := time.Now()
		tsMs := now.UnixMilli()
		if d := now.Sub(last); d > pauseOver {
			g.pauses++
			g.maxPause = max(g.maxPause, d)
		}
		last = now
		for due := int(p.background*now.Sub(t0).Seconds()) - bgSent; due > 0; due-- {
			g.produce(ctx, fmt.Sprintf("cold:%d", g.rng.IntN(p.coldKeys)), tsMs, nil)
			bgSent++
		}
		g.mu.Lock()
		planted := slices.Clone(g.planted)
		g.mu.Unlock()
		ended := false
		for _, k := range planted {
			el := min(now.Sub(k.start), p.plantedFor)
			want := int(p.plantedRate*el.Seconds()) + 1 // the first event at once
			if k.sent == 0 && want > 0 {
				k.o.firstMs.Store(tsMs)
			}
			if i := tsMs - k.o.firstMs.Load(); k.sent < want && i < int64(len(k.o.produced)) {
				k.o.produced[i] += int32(want - k.sent)
			}
			for ; k.sent < want; k.sent++ {
				g.produce(ctx, k.o.key, tsMs, k.o)
			}
			ended = ended || el == p.plantedFor
		}
		if ended {
			g.mu.Lock()
			g.planted = slices.DeleteFunc(g.planted, func(k *growing) bool {
				return min(now.Sub(k.start), p.plantedFor) == p.plantedFor
			})
			g.mu.Unlock()
		}
		time.Sleep(time.Millisecond)
	}
}

// produce sends one event of key stamped tsMs; o is its planted key, nil
// for a cold one.
func (g *gen) produce(ctx context.Context, key string, tsMs int64, o *onset) {
	e := schemas.AccessEvent{TimeMs: tsMs, Key: key, App: app, Op: "GET"}
	r := &kgo.Record{Key: []byte(key), Value: schemas.AppendJSON(nil, &e), Timestamp: time.UnixMilli(tsMs)}
	g.cl.Produce(ctx, r, func(_ *kgo.Record, err error) {
		if err != nil {
			if g.c.produceErrs.Add(1) == 1 {
				g.c.tb.Errorf("produce an event: %v", err)
			}
			return
		}
		if o != nil {
			o.mark(o.acked, tsMs, time.Now().UnixNano())
		}
	})
}

// sample is one planted key's path in ms: total (first event → OnChange)
// = window (first event → crossing event) + delivery (crossing event →
// OnChange), and delivery's stages, each from the crossing event's stamp:
// its produce acknowledged, detect's client fetching it, detect's core
// emitting the hot (detected_ms), the registry record acknowledged, the
// follower's client fetching it. A stage not observed is NaN.
//
// before and upTo count the key's events stamped before the crossing
// event's millisecond and up to it: the crossing event was the n-th of
// its key for some n in (before, upTo].
type sample struct {
	total, window, delivery                        float64
	acked, fetched, detected, published, followerF float64
	before, upTo                                   int
}

// samples returns the measured keys' paths, checking each is causal
// (every stage at or after the one before it, within the 1 ms of a
// stamp) and that the key was hot in the follower when OnChange said so.
func (c *campaign) samples() []sample {
	tb := c.tb
	var out []sample
	for _, o := range c.planted {
		require.NotZero(tb, o.seen.Load(), "%s was never seen hot", o.key)
		require.True(tb, o.hotThen.Load(), "%s: OnChange reported it hot while IsHot said no", o.key)
		first, crossing := o.firstMs.Load(), o.onsetMs.Load()
		require.GreaterOrEqual(tb, crossing, first, "%s: its onset precedes its first event", o.key)
		require.GreaterOrEqual(tb, o.detectedMs.Load(), crossing, "%s: detected before its crossing event was produced", o.key)
		ms := func(ns int64) float64 {
			if ns == 0 {
				return math.NaN()
			}
			return float64(ns)/1e6 - float64(crossing)
		}
		s := sample{
			window:    float64(crossing - first),
			delivery:  ms(o.seen.Load()),
			acked:     ms(o.at(o.acked, crossing)),
			fetched:   ms(o.at(o.fetched, crossing)),
			detected:  float64(o.detectedMs.Load() - crossing),
			published: ms(o.published.Load()),
			followerF: ms(o.followerFetched.Load()),
		}
		s.total = s.window + s.delivery
		for i, n := range o.produced[:min(int(crossing-first)+1, len(o.produced))] {
			if int64(i) < crossing-first {
				s.before += int(n)
			}
			s.upTo += int(n)
		}
		require.GreaterOrEqual(tb, s.delivery, -1.0, "%s: seen hot before its crossing event was produced", o.key)
		out = append(out, s)
	}
	return out
}

// strays returns the keys reported hot that were not planted.
func (c *campaign) strays() []string {
	c.strayMu.Lock()
	defer c.strayMu.Unlock()
	return slices.Clone(c.stray)
}

// stats are the p50, p99 and max of one part over the samples.
type stats struct{ p50, p99, max float64 }

func quantiles(ss []sample, part func(sample) float64) stats {
	var v []float64
	for _, s := range ss {
		if x := part(s); !math.IsNaN(x) {
			v = append(v, x)
		}
	}
	if len(v) == 0 {
		return stats{math.NaN(), math.NaN(), math.NaN()}
	}
	slices.Sort(v)
	rank := func(q float64) float64 { return v[max(0, int(math.Ceil(q*float64(len(v))))-1)] }
	return stats{rank(0.5), rank(0.99), v[len(v)-1]}
}

// parts are the rows of a report, in the order of the path.
var parts = []struct {
	name string
	of   func(sample) float64
}{
	{"total: first event -> OnChange hot", func(s sample) float64 { return s.total }},
	{"window: first event -> crossing event", func(s sample) float64 { return s.window }},
	{"delivery: crossing event -> OnChange hot", func(s sample) float64 { return s.delivery }},
	{"  crossing -> its produce acked", func(s sample) float64 { return s.acked }},
	{"  crossing -> detect's client fetched it", func(s sample) float64 { return s.fetched }},
	{"  crossing -> detected (detected_ms)", func(s sample) float64 { return s.detected }},
	{"  crossing -> registry record acked", func(s sample) float64 { return s.published }},
	{"  crossing -> follower's client fetched it", func(s sample) float64 { return s.followerF }},
}

// report formats the samples' figures, one part a line (no more than
// nine lines in all, the describe line first: the testing package cuts a
// benchmark's log after ten), and says at which of its events each key
// crossed: at the rule's count (the window share is then the time the
// generator took to produce that many) or before it (Count-Min
// over-counting a key admitted late).
func (c *campaign) report(ss []sample) string {
	var b strings.Builder
	for i, p := range parts {
		if i > 0 {
			b.WriteByte('\n')
		}
		st := quantiles(ss, p.of)
		fmt.Fprintf(&b, "%-44s p50 %7.1f  p99 %7.1f  max %7.1f ms", p.name, st.p50, st.p99, st.max)
	}
	return b.String()
}

// crossings says at which of its events each key crossed its rule.
func (c *campaign) crossings(ss []sample) string {
	at, early := 0, 0
	for _, s := range ss {
		switch n := int(math.Ceil(c.threshold)); {
		case s.before < n && n <= s.upTo:
			at++
		case s.upTo < n:
			early++
		}
	}
	return fmt.Sprintf("crossing event: the rule's count (%.0f) for %d of %d keys, earlier for %d, later for %d",
		c.threshold, at, len(ss), early, len(ss)-at-early)
}

// describe names the broker, the setting and the traffic of a campaign
// for its log, and how far the generator fell behind: a pause delays the
// events due meanwhile, which shows in the window when it falls before a
// key's crossing and in delivery when it holds up the crossing event's
// batch.
func (c *campaign) describe(br broker, seeds []string, s setting) string {
	p := c.plan
	where := "kfake in this process"
	if br.name == kafkaBroker.name {
		where = fmt.Sprintf("real Kafka at %s (%s)", strings.Join(seeds, ","), testenv.EnvKafka)
	}
	return fmt.Sprintf("broker: %s; detect: %s; %d onsets, one every %v, each %.0f events/s for %v; "+
		"background %.0f events/s over %d keys; %d partitions; generator linger %v, %d pauses over %v, longest %v",
		where, s.name, p.onsets, p.every, p.plantedRate, p.plantedFor, p.background, p.coldKeys, p.partitions, p.linger,
		c.genPauses, pauseOver, c.genMaxPause.Round(time.Millisecond))
}
