package archive

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/keyheat/keyheat/schemas"
)

// eventRowV1 is schemas.EventRow as layout version 1 wrote it: no
// event_index column.
type eventRowV1 struct {
	TimeMs    int64  `parquet:"time_ms,timestamp(millisecond),delta"`
	App       string `parquet:"app,dict"`
	Key       string `parquet:"key"`
	Op        string `parquet:"op,dict"`
	Bytes     int64  `parquet:"bytes"`
	Status    int32  `parquet:"status"`
	Client    string `parquet:"client,dict"`
	Node      string `parquet:"node,dict"`
	LatencyUs int64  `parquet:"latency_us"`
	Topic     string `parquet:"topic,dict"`
	Partition int32  `parquet:"partition"`
	Offset    int64  `parquet:"offset,delta"`
}

// TestReadsVersion1EventFiles: an archive written before event_index
// existed reads back with every index 0, merged with newer files in the
// usual order; a version-2 file without the column is refused.
func TestReadsVersion1EventFiles(t *testing.T) {
	root := t.TempDir()
	fsys, err := NewDirFS(root)
	require.NoError(t, err)
	const baseMs = int64(1767225600000)
	dir := bucketDir(KindEvents, "shop", baseMs)
	require.NoError(t, fsys.MkdirAll(dir))
	var old []eventRowV1
	for off := range int64(10) {
		old = append(old, eventRowV1{TimeMs: baseMs + off, App: "shop", Key: "old", Op: "GET", Topic: "t", Offset: off})
	}
	enc := newEncoder[eventRowV1](DefaultOptions(), KindEvents, "time_ms", "offset")
	_, err = enc.writeFile(fsys, dir+"/"+eventFileName("t", 0, 0, 9), old, schemas.ParquetVersionKey, "1")
	require.NoError(t, err)

	// Partition 1 of the same topic, written now: records of two events
	// at the same times as the old file's.
	opts := DefaultOptions()
	opts.Root = root
	a, err := openFS(context.Background(), opts, fsys, nil, nil, time.Now)
	require.NoError(t, err)
	w, err := a.Partition(context.Background(), "t", 1, 0)
	require.NoError(t, err)
	for off := range int64(10) {
		e := schemas.AccessEvent{TimeMs: baseMs + off, App: "shop", Key: "new", Op: "GET"}
		require.NoError(t, w.Append(off, e, e))
	}
	require.NoError(t, a.Close())

	r, err := OpenEventsFS(context.Background(), fsys, Query{}, nil)
	require.NoError(t, err)
	defer r.Close()
	buf := make([]schemas.EventRow, 100)
	n, err := r.Read(buf)
	require.True(t, err == nil || errors.Is(err, io.EOF), "read: %v", err)
	var want []schemas.EventRow
	for off := range int64(10) {
		want = append(want,
			schemas.EventRow{TimeMs: baseMs + off, App: "shop", Key: "old", Op: "GET", Topic: "t", Offset: off},
			schemas.EventRow{TimeMs: baseMs + off, App: "shop", Key: "new", Op: "GET", Topic: "t", Partition: 1, Offset: off},
			schemas.EventRow{TimeMs: baseMs + off, App: "shop", Key: "new", Op: "GET", Topic: "t", Partition: 1, Offset: off, Index: 1})
	}
	require.Equal(t, want, buf[:n], "version 1 rows with index 0, merged by (time, topic, partition, offset, index)")

	// The same old rows claiming the current version lack a column it has.
	_, err = enc.writeFile(fsys, dir+"/"+eventFileName("t", 2, 0, 9), old)
	require.NoError(t, err)
	_, err = OpenEventsFS(context.Background(), fsys, Query{}, nil)
	var bf *BadFileError
	require.ErrorAs(t, err, &bf, "a current file without event_index")
	require.ErrorContains(t, err, "event_index")
}

// hotKeyRowV2 is schemas.HotKeyRow as layout version 2 wrote it: no
// partitions or error column.
type hotKeyRowV2 struct {
	ID              string  `parquet:"id"`
	Type            string  `parquet:"type,dict"`
	App             string  `parquet:"app,dict"`
	Key             string  `parquet:"key"`
	KeyHash         string  `parquet:"key_hash"`
	Rule            string  `parquet:"rule,dict"`
	Rate            float64 `parquet:"rate"`
	Threshold       float64 `parquet:"threshold"`
	Count           int64   `parquet:"count"`
	WindowMs        int64   `parquet:"window_ms"`
	Topic           string  `parquet:"topic,dict"`
	Partition       int32   `parquet:"partition"`
	OnsetMs         int64   `parquet:"onset_ms,timestamp(millisecond)"`
	DetectedMs      int64   `parquet:"detected_ms,timestamp(millisecond)"`
	Reads           int64   `parquet:"reads"`
	Writes          int64   `parquet:"writes"`
	Bytes           int64   `parquet:"bytes"`
	MitigationKind  string  `parquet:"mitigation_kind,dict"`
	MitigationSplit int64   `parquet:"mitigation_split"`
}

// TestReadsVersion2HotKeyFiles: hot-key files written before the error
// and partitions columns read back with error 0 and no partitions, every
// other field intact, beside a current file; a file of version 3 (which
// added them) without them, or an old one without another column, is
// refused.
func TestReadsVersion2HotKeyFiles(t *testing.T) {
	const baseMs = int64(1767225600000)
	dir := bucketDir(KindHotKeys, "shop", baseMs)
	old := []hotKeyRowV2{
		{ID: "t/3/r/hot/4:shop/a/1767225600000", Type: schemas.HotKeyHot, App: "shop", Key: "a", KeyHash: "0123456789abcdef",
			Rule: "r", Rate: 1500.5, Threshold: 1000, Count: 1501, WindowMs: 1000, Topic: "t", Partition: 3,
			OnsetMs: baseMs, DetectedMs: baseMs + 8, Reads: 1400, Writes: 101, Bytes: 7777,
			MitigationKind: schemas.MitigationSplit, MitigationSplit: 2},
		{ID: "t/-1/r/cooled/4:shop/b/1767225600001", Type: schemas.HotKeyCooled, App: "shop", Key: "b", KeyHash: "fedcba9876543210",
			Rule: "r", Rate: 10, Threshold: 1000, Count: 10, WindowMs: 1000, Topic: "t", Partition: schemas.ClusterPartition,
			OnsetMs: baseMs + 1, DetectedMs: baseMs + 9, Reads: 10},
	}
	want := []*schemas.HotKeyEvent{
		{Version: schemas.HotKeyVersion, ID: old[0].ID, Type: schemas.HotKeyHot, App: "shop", Key: "a", KeyHash: "0123456789abcdef",
			Rule: "r", Rate: 1500.5, Threshold: 1000, Count: 1501, WindowMs: 1000, Topic: "t", Partition: 3,
			OnsetMs: baseMs, DetectedMs: baseMs + 8, Reads: 1400, Writes: 101, Bytes: 7777,
			Mitigation: &schemas.Mitigation{Kind: schemas.MitigationSplit, Split: 2}},
		{Version: schemas.HotKeyVersion, ID: old[1].ID, Type: schemas.HotKeyCooled, App: "shop", Key: "b", KeyHash: "fedcba9876543210",
			Rule: "r", Rate: 10, Threshold: 1000, Count: 10, WindowMs: 1000, Topic: "t", Partition: schemas.ClusterPartition,
			OnsetMs: baseMs + 1, DetectedMs: baseMs + 9, Reads: 10},
	}
	fsys, root := writeHotKeyFile(t, dir, old, schemas.ParquetVersionKey, "2")
	opts := DefaultOptions()
	opts.Root = root
	a, err := openFS(context.Background(), opts, fsys, nil, nil, time.Now)
	require.NoError(t, err)
	w, err := a.HotKeys("cluster")
	require.NoError(t, err)
	cur := &schemas.HotKeyEvent{Version: schemas.HotKeyVersion, ID: "t/-1/r/hot/4:shop/c/1767225600002", Type: schemas.HotKeyHot,
		App: "shop", Key: "c", KeyHash: "00", Rule: "r", Rate: 2000, Threshold: 1000, Count: 1990, WindowMs: 1000,
		Topic: "t", Partition: schemas.ClusterPartition, Partitions: []int32{0, 2, 5}, Error: 91,
		OnsetMs: baseMs + 2, DetectedMs: baseMs + 10, Reads: 1990,
		Mitigation: &schemas.Mitigation{Kind: schemas.MitigationLocalCache}}
	require.NoError(t, w.Append(cur))
	require.NoError(t, a.Close())
	got, bad, err := ReadHotKeys(context.Background(), fsys, Query{}, nil)
	require.NoError(t, err)
	require.Empty(t, bad)
	require.Equal(t, append(want, cur), got, "version 2 rows with error 0 and no partitions, beside a current row")

	var bf *BadFileError
	fsys, _ = writeHotKeyFile(t, dir, old, schemas.ParquetVersionKey, "3")
	_, _, err = ReadHotKeys(context.Background(), fsys, Query{}, nil)
	require.ErrorAs(t, err, &bf, "a file of the version that added the columns, without them")
	require.ErrorContains(t, err, "column partitions missing")

	fsys, _ = writeHotKeyFile(t, dir, []idRow{{ID: "x"}}, schemas.ParquetVersionKey, "2")
	_, _, err = ReadHotKeys(context.Background(), fsys, Query{}, nil)
	require.ErrorAs(t, err, &bf, "a version-2 file without a version-2 column")
	require.ErrorContains(t, err, "column type missing")
}

// idRow is a hot-key row with nothing but its id.
type idRow struct {
	ID string `parquet:"id"`
}

// writeHotKeyFile writes rows into dir of a new archive as a hot-key file
// with the extra metadata meta (a version other than the current one),
// and returns the archive and its root.
func writeHotKeyFile[T any](t *testing.T, dir string, rows []T, meta ...string) (FS, string) {
	root := t.TempDir()
	fsys, err := NewDirFS(root)
	require.NoError(t, err)
	require.NoError(t, fsys.MkdirAll(dir))
	enc := newEncoder[T](DefaultOptions(), KindHotKeys)
	_, err = enc.writeFile(fsys, dir+"/old_0_1_0000000000000000"+fileExt, rows, meta...)
	require.NoError(t, err)
	return fsys, root
}

// hotKeyRowV3 is schemas.HotKeyRow as layout version 3 wrote it: no
// peak_rate column.
type hotKeyRowV3 struct {
	ID              string  `parquet:"id"`
	Type            string  `parquet:"type,dict"`
	App             string  `parquet:"app,dict"`
	Key             string  `parquet:"key"`
	KeyHash         string  `parquet:"key_hash"`
	Rule            string  `parquet:"rule,dict"`
	Rate            float64 `parquet:"rate"`
	Threshold       float64 `parquet:"threshold"`
	Count           int64   `parquet:"count"`
	WindowMs        int64   `parquet:"window_ms"`
	Topic           string  `parquet:"topic,dict"`
	Partition       int32   `parquet:"partition"`
	Partitions      []int32 `parquet:"partitions,list"`
	Error           int64   `parquet:"error"`
	OnsetMs         int64   `parquet:"onset_ms,timestamp(millisecond)"`
	DetectedMs      int64   `parquet:"detected_ms,timestamp(millisecond)"`
	Reads           int64   `parquet:"reads"`
	Writes          int64   `parquet:"writes"`
	Bytes           int64   `parquet:"bytes"`
	MitigationKind  string  `parquet:"mitigation_kind,dict"`
	MitigationSplit int64   `parquet:"mitigation_split"`
}

// TestReadsVersion3HotKeyFiles: hot-key files written before the
// peak_rate column read back with peak 0, every other field intact,
// beside a current file holding an update and its peak; a file of the
// current version without the column is refused.
func TestReadsVersion3HotKeyFiles(t *testing.T) {
	const baseMs = int64(1767225600000)
	dir := bucketDir(KindHotKeys, "shop", baseMs)
	old := []hotKeyRowV3{
		{ID: "t/-1/r/hot/4:shop/a/1767225600000", Type: schemas.HotKeyHot, App: "shop", Key: "a", KeyHash: "0123456789abcdef",
			Rule: "r", Rate: 1500.5, Threshold: 1000, Count: 1501, WindowMs: 1000, Topic: "t", Partition: schemas.ClusterPartition,
			Partitions: []int32{0, 4}, Error: 12, OnsetMs: baseMs, DetectedMs: baseMs + 8, Reads: 1400, Writes: 101, Bytes: 7777,
			MitigationKind: schemas.MitigationLocalCache},
	}
	want := []*schemas.HotKeyEvent{
		{Version: schemas.HotKeyVersion, ID: old[0].ID, Type: schemas.HotKeyHot, App: "shop", Key: "a", KeyHash: "0123456789abcdef",
			Rule: "r", Rate: 1500.5, Threshold: 1000, Count: 1501, WindowMs: 1000, Topic: "t", Partition: schemas.ClusterPartition,
			Partitions: []int32{0, 4}, Error: 12, OnsetMs: baseMs, DetectedMs: baseMs + 8, Reads: 1400, Writes: 101, Bytes: 7777,
			Mitigation: &schemas.Mitigation{Kind: schemas.MitigationLocalCache}},
	}
	fsys, root := writeHotKeyFile(t, dir, old, schemas.ParquetVersionKey, "3")
	opts := DefaultOptions()
	opts.Root = root
	a, err := openFS(context.Background(), opts, fsys, nil, nil, time.Now)
	require.NoError(t, err)
	w, err := a.HotKeys("cluster")
	require.NoError(t, err)
	up := &schemas.HotKeyEvent{Version: schemas.HotKeyVersion, ID: "t/-1/r/update/4:shop/a/1767225601100", Type: schemas.HotKeyUpdate,
		App: "shop", Key: "a", KeyHash: "0123456789abcdef", Rule: "r", Rate: 3004, PeakRate: 3004, Threshold: 1000, Count: 3004,
		WindowMs: 1000, Topic: "t", Partition: schemas.ClusterPartition, Partitions: []int32{0, 4}, OnsetMs: baseMs,
		DetectedMs: baseMs + 1108, Writes: 3004, Mitigation: &schemas.Mitigation{Kind: schemas.MitigationSplit, Split: 4}}
	require.NoError(t, w.Append(up))
	require.NoError(t, a.Close())
	got, bad, err := ReadHotKeys(context.Background(), fsys, Query{}, nil)
	require.NoError(t, err)
	require.Empty(t, bad)
	require.Equal(t, append(want, up), got, "a version 3 row with peak 0, beside a current update")

	var bf *BadFileError
	fsys, _ = writeHotKeyFile(t, dir, old)
	_, _, err = ReadHotKeys(context.Background(), fsys, Query{}, nil)
	require.ErrorAs(t, err, &bf, "a current file without the column")
	require.ErrorContains(t, err, "column peak_rate missing")
}
