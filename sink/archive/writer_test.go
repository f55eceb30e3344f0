package archive_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/keyheat/keyheat/schemas"
	"github.com/keyheat/keyheat/sink/archive"
)

func TestOptionsValidate(t *testing.T) {
	good := archive.DefaultOptions()
	good.Root = "/data/archive"
	require.NoError(t, good.Validate())
	tests := []struct {
		name   string
		change func(*archive.Options)
		want   string
	}{
		{"no root", func(o *archive.Options) { o.Root = "" }, "root is empty"},
		{"tiny segments", func(o *archive.Options) { o.SegmentBytes = 10 }, "segment_bytes"},
		{"no age", func(o *archive.Options) { o.SegmentAge = 0 }, "segment_age"},
		{"no row groups", func(o *archive.Options) { o.RowGroupRows = 0 }, "row_group_rows"},
		{"no record rows", func(o *archive.Options) { o.RecordRows = 0 }, "record_rows"},
		{"unknown zstd", func(o *archive.Options) { o.Zstd = "max" }, "zstd"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := good
			tc.change(&o)
			err := o.Validate()
			require.ErrorIs(t, err, archive.ErrInvalidOptions)
			require.ErrorContains(t, err, tc.want)
		})
	}
}

func TestEscape(t *testing.T) {
	tests := []struct{ in, want string }{
		{"shop", "shop"},
		{"", "__HIVE_DEFAULT_PARTITION__"},
		{"__HIVE_DEFAULT_PARTITION__", "%5F_HIVE_DEFAULT_PARTITION__"},
		{"a/b c%", "a%2Fb%20c%25"},
		{".", "%2E"},
		{"..", "%2E%2E"},
		{"v1.2_x-y", "v1.2_x-y"},
		{"käse", "k%C3%A4se"},
	}
	for _, tc := range tests {
		require.Equal(t, tc.want, archive.Escape(tc.in), "escape(%q)", tc.in)
	}
	long1, long2 := strings.Repeat("x", 300)+"1", strings.Repeat("x", 300)+"2"
	require.LessOrEqual(t, len(archive.Escape(long1)), 120, "long values are cut")
	require.NotEqual(t, archive.Escape(long1), archive.Escape(long2), "cut values stay apart")
	require.NotContains(t, archive.Escape(strings.Repeat("/", 200)), "/")
}

func TestParseEventFileName(t *testing.T) {
	info, ok := archive.ParseEventFileName("kind=events/app=x/dt=2026-01-01/hour=00/my_topic.v2_12_0000000000000000100_0000000000000000199.parquet")
	require.True(t, ok)
	require.Equal(t, archive.EventFileInfo{Topic: "my_topic.v2", Partition: 12, First: 100, Last: 199}, info)
	for _, bad := range []string{"x.parquet", "t_1_5_4.parquet", "t_1_a_4.parquet", "t_1_1_4.json", "t_-1_1_4.parquet"} {
		_, ok := archive.ParseEventFileName(bad)
		require.False(t, ok, "%s is not an events file name", bad)
	}
}

func TestLayout(t *testing.T) {
	root := t.TempDir()
	a := openArchive(t, testOptions(root))
	w, err := a.Partition(context.Background(), "keyheat.events", 2, 40)
	require.NoError(t, err)
	ev := schemas.AccessEvent{TimeMs: baseMs + 3*hourMs + 5, Key: "k", App: "a/b"}
	require.NoError(t, w.Append(41, ev))
	ev.App, ev.TimeMs = "", baseMs-1 // the previous day, no app
	require.NoError(t, w.Append(45, ev))
	require.NoError(t, w.Advance(50))
	require.NoError(t, w.Close())
	require.NoError(t, w.Close(), "second close")
	require.NoError(t, a.Close())
	require.Equal(t, []string{
		"kind=events/app=__HIVE_DEFAULT_PARTITION__/dt=2025-12-31/hour=23/keyheat.events_2_0000000000000000040_0000000000000000049.parquet",
		"kind=events/app=a%2Fb/dt=2026-01-01/hour=03/keyheat.events_2_0000000000000000040_0000000000000000049.parquet",
	}, dataFiles(tree(t, root)), "files by app and UTC hour of event time, named by the segment's offset range")
}

func TestPartitionWriterContract(t *testing.T) {
	root := t.TempDir()
	a := openArchive(t, testOptions(root))
	ctx := context.Background()
	w, err := a.Partition(ctx, testTopic, 1, 100)
	require.NoError(t, err)
	require.Equal(t, int64(100), w.Durable(), "durable starts at the start offset")

	_, err = a.Partition(ctx, testTopic, 1, 100)
	require.ErrorContains(t, err, "open already", "one writer per partition")

	require.NoError(t, w.Advance(119))
	require.Equal(t, int64(119), w.Durable(), "offsets without events are durable at once")
	require.NoError(t, w.Append(119))
	require.Equal(t, int64(120), w.Durable(), "a record without events is durable at once")

	ev := schemas.AccessEvent{TimeMs: baseMs, Key: "k", App: "shop"}
	require.NoError(t, w.Append(125, ev, ev))
	require.Equal(t, int64(120), w.Durable(), "an open segment holds durable at its start")
	require.ErrorContains(t, w.Append(124, ev), "offset order")
	require.ErrorContains(t, w.Append(125, ev), "offset order", "a record is appended once, all its events at once")
	require.NoError(t, w.Advance(130))
	require.Equal(t, int64(120), w.Durable(), "advancing does not make buffered events durable")
	require.NoError(t, w.Flush(ctx))
	require.Equal(t, int64(130), w.Durable(), "a flush makes everything handed over durable")
	require.NoError(t, w.Close())
	require.ErrorIs(t, w.Append(131, ev), archive.ErrClosed)

	w2, err := a.Partition(ctx, testTopic, 1, 130)
	require.NoError(t, err, "a closed partition can be opened again")
	require.NoError(t, a.Close())
	require.ErrorIs(t, w2.Append(131, ev), archive.ErrClosed, "closing the archive closes its writers")
	_, err = a.Partition(ctx, testTopic, 2, 0)
	require.ErrorIs(t, err, archive.ErrClosed)
}

func TestSegmentRollsByAge(t *testing.T) {
	root := t.TempDir()
	dir, err := archive.NewDirFS(root)
	require.NoError(t, err)
	var nowNs atomic.Int64
	nowNs.Store(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	opts := testOptions(root)
	opts.SegmentAge = time.Minute
	a := archive.OpenFSForTest(t, opts, dir, func() time.Time { return time.Unix(0, nowNs.Load()) })
	w, err := a.Partition(context.Background(), testTopic, 0, 0)
	require.NoError(t, err)
	ev := schemas.AccessEvent{TimeMs: baseMs, Key: "k", App: "shop"}
	require.NoError(t, w.Append(0, ev))
	require.NoError(t, w.Append(1, ev))

	nowNs.Add(int64(59 * time.Second))
	a.RollAged()
	require.Equal(t, int64(0), w.Durable(), "younger than segment_age: not rolled")

	nowNs.Add(int64(time.Second))
	a.RollAged()
	require.Equal(t, int64(2), w.Durable(), "segment_age old: rolled and durable")
	require.Len(t, dataFiles(tree(t, root)), 1)
	require.NoError(t, a.Close())
}

func TestRollFailureStopsTheWriter(t *testing.T) {
	root := t.TempDir()
	dir, err := archive.NewDirFS(root)
	require.NoError(t, err)
	a := archive.OpenFSForTest(t, testOptions(root), &faultFS{FS: dir}, time.Now)
	w, err := a.Partition(context.Background(), testTopic, 0, 0)
	require.NoError(t, err)
	ev := schemas.AccessEvent{TimeMs: baseMs, Key: "k", App: "shop"}
	require.NoError(t, w.Append(0, ev))
	err = w.Flush(context.Background())
	require.ErrorIs(t, err, errInjected)
	require.ErrorContains(t, err, "reopen the partition")
	require.ErrorIs(t, w.Append(1, ev), errInjected, "refuses events after a failed roll")
	require.Equal(t, int64(0), w.Durable(), "nothing became durable")
	require.NoError(t, a.Close(), "close does not retry a failed writer")
}

func TestReopenRefusesForeignManifest(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "_keyheat", "events", testTopic, "0", "segments")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "0000000000000000000_0000000000000000009.json"),
		[]byte(`{"v":1,"topic":"other","partition":0,"first":0,"last":9,"files":[]}`), 0o644))
	a := openArchive(t, testOptions(root))
	_, err := a.Partition(context.Background(), testTopic, 0, 0)
	require.ErrorContains(t, err, "does not belong here")
	require.NoError(t, a.Close())
}

// TestAgeRollsRaceAppends lets the roll goroutine cut segments by age
// while events arrive (a job for the race detector): every event is
// archived exactly once whatever the cuts.
func TestAgeRollsRaceAppends(t *testing.T) {
	root := t.TempDir()
	opts := testOptions(root)
	opts.SegmentAge = 10 * time.Millisecond
	opts.SegmentBytes = 1 << 30
	a := openArchive(t, opts)
	w, err := a.Partition(context.Background(), testTopic, 0, 0)
	require.NoError(t, err)
	ins := genEvents(0, 3000, []string{"shop", "ads"}, 1_000)
	for i, r := range records(ins) {
		require.NoError(t, w.Append(r.offset, r.evs...))
		if i%100 == 0 {
			time.Sleep(time.Millisecond)
		}
		_ = w.Durable()
	}
	require.NoError(t, a.Close())
	requireAllOnce(t, root, ins)
}
