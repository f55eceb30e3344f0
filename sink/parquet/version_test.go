package parquet

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

	// The same old rows claiming version 2 lack a column version 2 has.
	_, err = enc.writeFile(fsys, dir+"/"+eventFileName("t", 2, 0, 9), old)
	require.NoError(t, err)
	_, err = OpenEventsFS(context.Background(), fsys, Query{}, nil)
	var bf *BadFileError
	require.ErrorAs(t, err, &bf, "a version-2 file without event_index")
	require.ErrorContains(t, err, "event_index")
}
