package detect_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/goleak"

	"github.com/keyheat/keyheat/detect"
	"github.com/keyheat/keyheat/internal/testenv"
	"github.com/keyheat/keyheat/pipeline"
	"github.com/keyheat/keyheat/schemas"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// env is one test's topics and groups on a cluster.
type env struct {
	seeds                                            []string
	events, dlq, hotkeys, windows, reports, progress string
	group, mergeGroup                                string
	parts                                            int32
}

func newEnv(t *testing.T, seeds []string, parts int32) *env {
	t.Helper()
	e := &env{seeds: seeds, parts: parts}
	e.events = testenv.NewTopic(t, seeds, parts)
	// The outputs are created by the service itself, with names unique
	// to the test; deleted at the end.
	e.dlq = testenv.UniqueName(t, "dlq")
	e.hotkeys = testenv.UniqueName(t, "hot")
	e.windows = testenv.UniqueName(t, "win")
	e.reports = testenv.UniqueName(t, "rep")
	e.progress = testenv.UniqueName(t, "prog")
	e.group = testenv.UniqueName(t, "g")
	e.mergeGroup = testenv.UniqueName(t, "m")
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		adm := e.admin(t)
		_, _ = adm.DeleteTopics(ctx, e.dlq, e.hotkeys, e.windows, e.reports, e.progress)
	})
	return e
}

func (e *env) admin(t *testing.T) *kadm.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(e.seeds...))
	require.NoError(t, err)
	t.Cleanup(cl.Close)
	return kadm.NewClient(cl)
}

// config is a service config for e: testPipeline, a merger, every topic
// created with e.parts partitions.
func (e *env) config(t *testing.T) detect.Config {
	opts := detect.DefaultOptions()
	opts.Group, opts.MergeGroup = e.group, e.mergeGroup
	opts.FlushTimeout = 20 * time.Second
	opts.CommitInterval = 100 * time.Millisecond
	return detect.Config{
		Options:    opts,
		ClientOpts: []kgo.Opt{kgo.SeedBrokers(e.seeds...)},
		Topics: detect.OutputTopics{Events: e.events, DLQ: e.dlq, Hotkeys: e.hotkeys, Windows: e.windows,
			Reports: e.reports, Progress: e.progress},
		CreateTopics: true, Partitions: e.parts, ReplicationFactor: -1,
		Limits:   schemas.DefaultLimits(),
		Pipeline: testPipeline(),
		Merge:    &pipeline.MergerConfig{MergerOptions: pipeline.DefaultMergerOptions(), Window: time.Second},
		Logger:   testLogger(t),
	}
}

// testPipeline is the detection the tests run: 1 s report windows, no
// lateness, one rule calling a key hot at 2 events within 10 ms, and no
// wall-clock idling (so a live run's output depends only on its input,
// and a test can compute what it commits).
func testPipeline() pipeline.Options {
	o := pipeline.DefaultOptions()
	o.Lateness = 0
	o.IdleTimeout = time.Hour
	o.Detect.Suppress, o.Detect.CoolDown = 0, 0
	o.Rules = []pipeline.Rule{{Name: "t", Key: "*", Window: 10 * time.Millisecond, Rate: 200}}
	return o
}

// oracle runs evs (events at their offsets, in order) through a
// partition core as the service should, every output acknowledged, and
// returns its commit point: what the service must commit once it has
// handled the same records and heard every acknowledgement.
func oracle(t *testing.T, src pipeline.Source, start pipeline.Start, end bool, evs ...at) pipeline.CommitPoint {
	t.Helper()
	p, err := pipeline.NewPartition(testPipeline(), src, start)
	require.NoError(t, err)
	var out pipeline.Output
	for _, e := range evs {
		p.Process(&e.e, e.off, &out)
	}
	if end {
		p.End(&out)
	}
	for _, w := range out.Windows {
		p.Acked(w.StartMs)
	}
	for _, h := range out.HotKeys {
		p.AckedHotKey(h.ID)
	}
	return p.CommitPoint()
}

// at is an event at an offset.
type at struct {
	e   schemas.AccessEvent
	off int64
}

func testLogger(t *testing.T) *slog.Logger {
	if testing.Verbose() && os.Getenv("KEYHEAT_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// running is a service run in the background.
type running struct {
	svc    *detect.Service
	cancel context.CancelFunc
	done   chan error
}

func start(t *testing.T, cfg detect.Config) *running {
	t.Helper()
	svc, err := detect.New(cfg)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{svc: svc, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- svc.Run(ctx) }()
	t.Cleanup(func() { r.stop(t) })
	return r
}

// stop stops the service as SIGTERM does and returns Run's result.
func (r *running) stop(t *testing.T) error {
	t.Helper()
	r.cancel()
	select {
	case err, ok := <-r.done:
		if ok {
			close(r.done)
			return err
		}
		return nil
	case <-time.After(testenv.HangGuard):
		t.Fatalf("the service did not stop within %s (hang guard)", testenv.HangGuard)
		return nil
	}
}

func accessEvent(key string, tsMs int64) schemas.AccessEvent {
	return schemas.AccessEvent{TimeMs: tsMs, Key: key, App: "a", Op: "GET"}
}

// event builds a JSON event record for partition p.
func event(topic string, p int32, key string, tsMs int64) *kgo.Record {
	e := accessEvent(key, tsMs)
	return &kgo.Record{Topic: topic, Partition: p, Key: []byte(key), Value: schemas.AppendJSON(nil, &e)}
}

func raw(topic string, p int32, value []byte) *kgo.Record {
	return &kgo.Record{Topic: topic, Partition: p, Value: value}
}

// produce writes recs to their partitions, in order.
func produce(t *testing.T, seeds []string, recs ...*kgo.Record) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	require.NoError(t, err)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard)
	defer cancel()
	require.NoError(t, cl.ProduceSync(ctx, recs...).FirstErr())
}

// readAll returns every record of topic up to its end offsets now,
// ordered by partition and offset.
func readAll(t *testing.T, seeds []string, topic string) []*kgo.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard)
	defer cancel()
	admCl, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	require.NoError(t, err)
	defer admCl.Close()
	ends, err := kadm.NewClient(admCl).ListEndOffsets(ctx, topic)
	require.NoError(t, err)
	want := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset > 0 {
			want[o.Partition] = o.Offset
		}
	})
	if len(want) == 0 {
		return nil
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	require.NoError(t, err)
	defer cl.Close()
	var out []*kgo.Record
	for len(want) > 0 {
		fs := cl.PollFetches(ctx)
		require.NoError(t, ctx.Err(), "reading %s", topic)
		fs.EachRecord(func(r *kgo.Record) {
			out = append(out, r)
			if r.Offset+1 >= want[r.Partition] {
				delete(want, r.Partition)
			}
		})
	}
	slices.SortFunc(out, func(a, b *kgo.Record) int {
		if a.Partition != b.Partition {
			return int(a.Partition - b.Partition)
		}
		return int(a.Offset - b.Offset)
	})
	return out
}

// committed returns the group's committed offsets and metadata of topic.
func committed(t *testing.T, seeds []string, group, topic string) map[int32]kadm.OffsetResponse {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	require.NoError(t, err)
	defer cl.Close()
	adm := kadm.NewClient(cl)
	os, err := adm.FetchOffsets(ctx, group)
	// A broker just started may not have its group coordinator yet: that
	// is a wait, not an answer.
	for kerr.IsRetriable(err) && ctx.Err() == nil {
		time.Sleep(100 * time.Millisecond)
		os, err = adm.FetchOffsets(ctx, group)
	}
	out := map[int32]kadm.OffsetResponse{}
	if errors.Is(err, kerr.GroupIDNotFound) {
		return out // not created yet: nothing committed
	}
	require.NoError(t, err)
	os.Each(func(o kadm.OffsetResponse) {
		if o.Topic == topic {
			out[o.Partition] = o
		}
	})
	return out
}

// registryEvents decodes records of the registry topic (readAll's order:
// by partition, then offset), checking what detect writes there: every
// value is a hot-key event under its key's record key, except a
// tombstone (nil value), which comes right after a cooled of its record
// key, and every cooled is followed by one. It returns the events,
// tombstones left out.
func registryEvents(t *testing.T, recs []*kgo.Record) []schemas.HotKeyEvent {
	t.Helper()
	var evs []schemas.HotKeyEvent
	owed := map[string]bool{} // record key → a cooled waits for its tombstone
	for _, r := range recs {
		k := string(r.Key)
		if r.Value == nil {
			require.True(t, owed[k], "a tombstone at %d/%d not right after a cooled of %q", r.Partition, r.Offset, k)
			delete(owed, k)
			continue
		}
		require.False(t, owed[k], "a record at %d/%d between a cooled of %q and its tombstone", r.Partition, r.Offset, k)
		h, err := schemas.DecodeHotKeyEvent(r.Value)
		require.NoError(t, err)
		require.Equal(t, string(schemas.HotKeyRecordKey(h.App, h.Key)), k)
		owed[k] = h.Type == schemas.HotKeyCooled
		evs = append(evs, *h)
	}
	for k, o := range owed {
		require.False(t, o, "the cooled of %q has no tombstone after it", k)
	}
	return evs
}

// updateAt returns the slot boundary an update's ID names (its last
// field), checking the ID is schemas.HotKeyID's.
func updateAt(t *testing.T, h *schemas.HotKeyEvent) int64 {
	t.Helper()
	i := strings.LastIndexByte(h.ID, '/')
	require.Positive(t, i, "ID %q", h.ID)
	ms, err := strconv.ParseInt(h.ID[i+1:], 10, 64)
	require.NoError(t, err, "ID %q", h.ID)
	require.Equal(t, schemas.HotKeyID(h.Topic, h.Partition, h.Rule, h.Type, h.App, h.Key, ms), h.ID)
	return ms
}
