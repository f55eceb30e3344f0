package detect_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/keyheat/keyheat/detect"
	"github.com/keyheat/keyheat/internal/testenv"
	"github.com/keyheat/keyheat/pipeline"
	"github.com/keyheat/keyheat/schemas"
	"github.com/keyheat/keyheat/sink/archive"
)

// collect is a ReplaySink that keeps everything.
type collect struct {
	hot     []*schemas.HotKeyEvent
	reports []*schemas.WindowReport
}

func (c *collect) HotKey(h *schemas.HotKeyEvent) error {
	c.hot = append(c.hot, h)
	return nil
}

func (c *collect) Report(r *schemas.WindowReport) error {
	c.reports = append(c.reports, r)
	return nil
}

// replayInput is traffic over parts partitions and three apps whose event
// times never go backwards within a partition (see Replay), with keys
// that turn hot under testPipeline's rule (one hot for long, with
// updates) and a long tail that does not.
func replayInput(topic string, parts int32, baseMs int64) []*kgo.Record {
	apps := []string{"shop", "search", "ads"}
	var recs []*kgo.Record
	for p := range parts {
		for i := range int64(1500) {
			key := fmt.Sprintf("user:%d", (i*7919+int64(p)*13)%211)
			app := apps[(i+int64(p))%3]
			tsMs := baseMs + i*4 + int64(p)
			if i%10 < 3 && i > 300 && i < 900 {
				key, app = fmt.Sprintf("hot:%d", p), "shop" // three in a row, 4 ms apart: hot
			}
			if i >= 1000 && i < 1100 {
				// Every event for 400 ms, 250/s (200/s in the window at
				// each slot boundary), twice as many in the second half:
				// hot, then an update.
				key, app = fmt.Sprintf("steady:%d", p), "ads"
			}
			e := schemas.AccessEvent{TimeMs: tsMs, Key: key, App: app, Op: []string{"GET", "SET"}[i%2],
				Bytes: 100 + i%700, Node: fmt.Sprintf("n%d", i%3), LatencyUs: i % 97}
			recs = append(recs, &kgo.Record{Topic: topic, Partition: p, Key: []byte(key), Value: schemas.AppendJSON(nil, &e)})
			if i >= 1050 && i < 1100 {
				recs = append(recs, &kgo.Record{Topic: topic, Partition: p, Key: []byte(key), Value: schemas.AppendJSON(nil, &e)})
			}
		}
	}
	return recs
}

// replayArchive runs the replay of root through cfg's pipeline and merger.
func replayArchive(t *testing.T, root string, q archive.Query, cfg detect.Config) (*collect, detect.ReplayStats) {
	t.Helper()
	r, err := archive.OpenEvents(context.Background(), root, q, testLogger(t))
	require.NoError(t, err)
	defer func() { require.NoError(t, r.Close()) }()
	out := &collect{}
	st, err := detect.Replay(context.Background(), r, detect.ReplayConfig{
		Pipeline: cfg.Pipeline, Merge: *cfg.Merge, Partitions: r.Partitions(), Keyed: cfg.Keyed, Logger: testLogger(t),
	}, out)
	require.NoError(t, err)
	return out, st
}

// TestReplayMatchesLive is the golden compare: an --exit-at-end run with
// the archive on, then a replay of that archive through the same
// pipeline and merger, must give the same reports (same IDs, same
// content) and the same hot-key events, updates included (same IDs, same
// content except the wall-clock DetectedMs).
func TestReplayMatchesLive(t *testing.T) {
	testenv.EachBroker(t, func(t *testing.T, seeds []string) {
		const parts = 3
		e := newEnv(t, seeds, parts)
		base := time.Now().Add(-time.Hour).Truncate(time.Second).UnixMilli()
		recs := replayInput(e.events, parts, base)
		produce(t, e.seeds, recs...)

		ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard)
		defer cancel()
		arOpts := archive.DefaultOptions()
		arOpts.Root, arOpts.SegmentAge = t.TempDir(), 200*time.Millisecond
		arOpts.SegmentBytes = 64 << 10 // several segments per partition
		ar, err := archive.Open(ctx, arOpts, testLogger(t), nil)
		require.NoError(t, err)
		cfg := e.config(t)
		cfg.ExitAtEnd = true
		cfg.Archive, cfg.ArchiveFlush = ar, arOpts.SegmentAge
		svc, err := detect.New(cfg)
		require.NoError(t, err)
		require.NoError(t, svc.Run(ctx))
		require.NoError(t, ar.Close())

		live := map[string]string{}
		for _, r := range readAll(t, e.seeds, e.reports) {
			rep, err := schemas.DecodeWindowReport(r.Value)
			require.NoError(t, err)
			live[rep.ID] = reportJSON(t, rep)
		}
		liveHot := map[string]string{}
		for _, h := range registryEvents(t, readAll(t, e.seeds, e.hotkeys)) {
			liveHot[h.ID] = hotJSON(t, &h)
		}
		require.NotEmpty(t, live, "the live run reported")
		require.NotEmpty(t, liveHot, "the live run found hot keys")
		updates := 0
		for id := range liveHot {
			if strings.Contains(id, "/"+schemas.HotKeyUpdate+"/") {
				updates++
			}
		}
		require.Positive(t, updates, "the live run published updates, which the replay must reproduce")

		got, st := replayArchive(t, arOpts.Root, archive.Query{}, cfg)
		require.EqualValues(t, len(recs), st.Events, "every archived event replayed")
		replayed := map[string]string{}
		for _, r := range got.reports {
			_, dup := replayed[r.ID]
			require.False(t, dup, "report %s replayed once", r.ID)
			replayed[r.ID] = reportJSON(t, r)
		}
		require.Equal(t, sortedKeys(live), sortedKeys(replayed), "the same report IDs")
		for id, want := range live {
			require.JSONEq(t, want, replayed[id], "report %s", id)
		}
		replayedHot := map[string]string{}
		for _, h := range got.hot {
			replayedHot[h.ID] = hotJSON(t, h)
		}
		require.Equal(t, sortedKeys(liveHot), sortedKeys(replayedHot), "the same hot-key event IDs")
		for id, want := range liveHot {
			require.JSONEq(t, want, replayedHot[id], "hot-key event %s", id)
		}
		t.Logf("%d reports and %d hot-key events identical", len(live), len(liveHot))
	})
}

func reportJSON(t *testing.T, r *schemas.WindowReport) string {
	b, err := r.AppendJSON(nil)
	require.NoError(t, err)
	return string(b)
}

// hotJSON is h's JSON without the wall-clock detection time.
func hotJSON(t *testing.T, h *schemas.HotKeyEvent) string {
	c := *h
	c.DetectedMs = 0
	b, err := c.AppendJSON(nil)
	require.NoError(t, err)
	return string(b)
}

func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// writeTestArchive archives recs (events records) as detect does, one
// partition writer per partition.
func writeTestArchive(t *testing.T, recs []*kgo.Record) string {
	t.Helper()
	opts := archive.DefaultOptions()
	opts.Root = t.TempDir()
	ar, err := archive.Open(context.Background(), opts, nil, nil)
	require.NoError(t, err)
	ws := map[int32]*archive.PartitionWriter{}
	next := map[int32]int64{}
	for _, r := range recs {
		w := ws[r.Partition]
		if w == nil {
			w, err = ar.Partition(context.Background(), r.Topic, r.Partition, 0)
			require.NoError(t, err)
			ws[r.Partition] = w
		}
		var e schemas.AccessEvent
		require.NoError(t, schemas.DecodeAny(r.Value, &e))
		require.NoError(t, w.Append(next[r.Partition], e))
		next[r.Partition]++
	}
	require.NoError(t, ar.Close())
	return opts.Root
}

// TestReplayRange: a time range replays the windows inside it, and an app
// filter reports only that app (and the cluster over it).
func TestReplayRange(t *testing.T) {
	base := int64(1_767_225_600_000)
	recs := replayInput("keyheat.events", 2, base)
	root := writeTestArchive(t, recs)
	cfg := replayConfig()
	tests := []struct {
		name string
		q    archive.Query
	}{
		{"from and to", archive.Query{FromMs: base + 1000, ToMs: base + 3000}},
		{"one app", archive.Query{Apps: []string{"search"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, st := replayArchive(t, root, tc.q, cfg)
			require.NotZero(t, st.Events)
			require.NotEmpty(t, got.reports)
			for _, r := range got.reports {
				if tc.q.ToMs != 0 {
					require.GreaterOrEqual(t, r.StartMs, tc.q.FromMs, "report %s inside the range", r.ID)
					require.Less(t, r.StartMs, tc.q.ToMs, "report %s inside the range", r.ID)
				}
				if len(tc.q.Apps) > 0 && r.Scope == schemas.ScopeApp {
					require.Equal(t, "search", r.App, "report %s of the selected app", r.ID)
				}
			}
		})
	}
}

// replayConfig is the config replay tests run without a broker.
func replayConfig() detect.Config {
	return detect.Config{
		Options:  detect.DefaultOptions(),
		Pipeline: testPipeline(),
		Merge:    &pipeline.MergerConfig{MergerOptions: pipeline.DefaultMergerOptions(), Window: time.Second},
	}
}

// TestReplayBadFile: a bad file stops the replay with an error naming it;
// with bad files skipped, the replay reads every good event.
func TestReplayBadFile(t *testing.T) {
	base := int64(1_767_225_600_000)
	recs := replayInput("keyheat.events", 2, base)
	root := writeTestArchive(t, recs)
	dir := ""
	require.NoError(t, filepath.WalkDir(filepath.Join(root, "kind=events"), func(p string, d os.DirEntry, err error) error {
		if err == nil && dir == "" && strings.HasSuffix(p, ".parquet") {
			dir = filepath.Dir(p)
		}
		return err
	}))
	bad := filepath.Join(dir, "keyheat.events_0_0000000000000099999_0000000000000099999.parquet")
	require.NoError(t, os.WriteFile(bad, []byte("PAR1 not really PAR1"), 0o644))
	rel, err := filepath.Rel(root, bad)
	require.NoError(t, err)
	cfg := replayConfig()

	_, err = archive.OpenEvents(context.Background(), root, archive.Query{}, nil)
	var bf *archive.BadFileError
	require.ErrorAs(t, err, &bf, "a bad file stops the replay")
	require.Equal(t, filepath.ToSlash(rel), bf.Path, "the error names the file")

	r, err := archive.OpenEvents(context.Background(), root, archive.Query{SkipBadFiles: true}, nil)
	require.NoError(t, err)
	defer r.Close()
	st, err := detect.Replay(context.Background(), r, detect.ReplayConfig{Pipeline: cfg.Pipeline, Merge: *cfg.Merge, Partitions: r.Partitions()}, &collect{})
	require.NoError(t, err)
	require.EqualValues(t, len(recs), st.Events, "every good event replayed")
	require.Len(t, r.Skipped(), 1, "the bad file skipped")
}

// failingSource fails after its first batch.
type failingSource struct{ n int }

func (f *failingSource) Read(dst []schemas.EventRow) (int, error) {
	f.n++
	if f.n > 1 {
		return 0, &archive.BadFileError{Path: "kind=events/x.parquet", Err: errors.New("corrupt data")}
	}
	dst[0] = schemas.EventRow{TimeMs: 1000, Key: "k", App: "a", Op: "GET", Topic: "t", Partition: 0}
	return 1, nil
}

// TestReplayErrors: a source failing midway and bad configurations are
// errors that say what is wrong, never a panic.
func TestReplayErrors(t *testing.T) {
	cfg := replayConfig()
	tests := []struct {
		name string
		rc   detect.ReplayConfig
		src  detect.EventSource
		want string
	}{
		{"source fails", detect.ReplayConfig{Pipeline: cfg.Pipeline, Merge: *cfg.Merge}, &failingSource{}, "kind=events/x.parquet"},
		{"window mismatch", detect.ReplayConfig{Pipeline: cfg.Pipeline, Merge: pipeline.MergerConfig{MergerOptions: pipeline.DefaultMergerOptions(), Window: 2 * time.Second}}, &failingSource{}, "merger window"},
		{"keyed", detect.ReplayConfig{Pipeline: cfg.Pipeline, Merge: *cfg.Merge, Keyed: "maybe"}, &failingSource{}, "keyed"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := detect.Replay(context.Background(), tc.src, tc.rc, &collect{})
			require.ErrorContains(t, err, tc.want)
		})
	}
}

// rawMultiKeyInput is a raw redis-format topic over parts partitions:
// MGET, DEL and MSET lines naming several keys, single-key lines and
// PINGs (no key), times never going backwards within a partition, and a
// key per partition that turns hot. It returns the records and how many
// keys their lines name in all: the events detection counts.
func rawMultiKeyInput(topic string, parts int32, baseMs int64) ([]*kgo.Record, int) {
	var recs []*kgo.Record
	keys := 0
	for p := range parts {
		for i := range int64(800) {
			tsMs := baseMs + i*3 + int64(p)
			k := func(j int64) string { return fmt.Sprintf(`"user:%d"`, (i*7919+j*31+int64(p)*13)%211) }
			hot := fmt.Sprintf(`"hot:%d"`, p)
			var line string
			var n int
			switch i % 5 {
			case 0:
				line, n = `"mget" `+k(0)+" "+k(1)+" "+k(2), 3
			case 1:
				line, n = `"get" `+k(0), 1
			case 2:
				line, n = `"del" `+k(0)+" "+k(1), 2
			case 3:
				line, n = `"mset" `+k(0)+` "v" `+k(1)+` "w"`, 2
			case 4:
				line, n = `"ping"`, 0
			}
			if i > 200 && i < 500 && i%5 == 0 {
				line, n = `"mget" `+hot+" "+k(1)+" "+hot, 3 // the same key twice: two events
			}
			keys += n
			recs = append(recs, raw(topic, p, monitorLine(tsMs, line)))
		}
	}
	return recs, keys
}

// TestReplayMatchesLiveRawMultiKey: records of a raw log topic that name
// several keys are archived whole, one row per key, and a replay of the
// archive reports what the live run reported.
func TestReplayMatchesLiveRawMultiKey(t *testing.T) {
	testenv.EachBroker(t, func(t *testing.T, seeds []string) {
		const parts = 2
		e := newEnv(t, seeds, parts)
		base := time.Now().Add(-time.Hour).Truncate(time.Second).UnixMilli()
		recs, keys := rawMultiKeyInput(e.events, parts, base)
		produce(t, e.seeds, recs...)

		ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard)
		defer cancel()
		arOpts := archive.DefaultOptions()
		arOpts.Root, arOpts.SegmentAge = t.TempDir(), 200*time.Millisecond
		arOpts.SegmentBytes = 32 << 10 // several segments per partition
		ar, err := archive.Open(ctx, arOpts, testLogger(t), nil)
		require.NoError(t, err)
		cfg := e.config(t)
		cfg.ExitAtEnd = true
		cfg.Parse.Format, cfg.Parse.App = "redis", "cache"
		cfg.Keyed = detect.KeyedFalse // raw records carry no access key
		cfg.Archive, cfg.ArchiveFlush = ar, arOpts.SegmentAge
		svc, err := detect.New(cfg)
		require.NoError(t, err)
		require.NoError(t, svc.Run(ctx))
		require.NoError(t, ar.Close())

		live := map[string]string{}
		var liveEvents uint64
		for _, r := range readAll(t, e.seeds, e.reports) {
			rep, err := schemas.DecodeWindowReport(r.Value)
			require.NoError(t, err)
			live[rep.ID] = reportJSON(t, rep)
			if rep.Scope == schemas.ScopeCluster {
				liveEvents += rep.Events
			}
		}
		require.EqualValues(t, keys, liveEvents, "the live run counted one event per key")
		liveHot := map[string]string{}
		for _, h := range registryEvents(t, readAll(t, e.seeds, e.hotkeys)) {
			liveHot[h.ID] = hotJSON(t, &h)
		}
		require.NotEmpty(t, liveHot, "the live run found hot keys")

		got, st := replayArchive(t, arOpts.Root, archive.Query{}, cfg)
		require.EqualValues(t, keys, st.Events, "the archive holds one row per key of every line")
		replayed := map[string]string{}
		for _, r := range got.reports {
			replayed[r.ID] = reportJSON(t, r)
		}
		require.Equal(t, sortedKeys(live), sortedKeys(replayed), "the same report IDs")
		for id, want := range live {
			require.JSONEq(t, want, replayed[id], "report %s", id)
		}
		replayedHot := map[string]string{}
		for _, h := range got.hot {
			replayedHot[h.ID] = hotJSON(t, h)
		}
		require.Equal(t, sortedKeys(liveHot), sortedKeys(replayedHot), "the same hot-key event IDs")
		for id, want := range liveHot {
			require.JSONEq(t, want, replayedHot[id], "hot-key event %s", id)
		}
		t.Logf("%d keys in %d lines; %d reports and %d hot-key events identical", keys, len(recs), len(live), len(liveHot))
	})
}

// rowSource is an EventSource over rows in memory.
type rowSource struct{ rows []schemas.EventRow }

func (s *rowSource) Read(dst []schemas.EventRow) (int, error) {
	if len(s.rows) == 0 {
		return 0, io.EOF
	}
	n := copy(dst, s.rows)
	s.rows = s.rows[n:]
	return n, nil
}

// TestReplayKeepsBinaryKeys: keys that are not UTF-8 (events.codec:
// binary, events.allow_binary_keys) stay distinct through a replay's
// merger, as they do live: "a\xff" and "a\xfe" are not merged into one
// "a\uFFFD" with the sum of their counts.
func TestReplayKeepsBinaryKeys(t *testing.T) {
	base := int64(1_767_225_600_000)
	var rows []schemas.EventRow
	for i := range 2200 {
		key := "a\xff"
		if i%3 == 2 {
			key = "a\xfe"
		}
		rows = append(rows, schemas.EventRow{TimeMs: base + int64(i%1000), App: "a", Key: key, Op: "GET",
			Topic: "t", Partition: 0, Offset: int64(i)})
	}
	cfg := replayConfig()
	out := &collect{}
	_, err := detect.Replay(context.Background(), &rowSource{rows: rows},
		detect.ReplayConfig{Pipeline: cfg.Pipeline, Merge: *cfg.Merge, Partitions: map[string]int32{"t": 1}}, out)
	require.NoError(t, err)
	counts := map[string]uint64{}
	for _, r := range out.reports {
		if r.Scope == schemas.ScopeCluster {
			for _, k := range r.Top {
				counts[k.Key] += k.Count
			}
		}
	}
	require.Equal(t, map[string]uint64{"a\xff": 1467, "a\xfe": 733}, counts, "each key counted on its own, byte for byte")
}
