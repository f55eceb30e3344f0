package archive_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/parquet-go/parquet-go"
	"github.com/stretchr/testify/require"

	"github.com/keyheat/keyheat/schemas"
	"github.com/keyheat/keyheat/sink/archive"
)

// TestRoundTripExact archives three partitions and replays them: every
// event comes back exactly, in (time, topic, partition, offset) order.
// Sparse times (seconds apart) sort buckets with pdqsort, dense ones (many
// events per millisecond) with the counting sort; both must hold.
func TestRoundTripExact(t *testing.T) {
	for _, tc := range []struct {
		name   string
		stepMs int64
	}{{"sparse times", 3_000}, {"dense times", 1}, {"equal times", 0}} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			a := openArchive(t, testOptions(root))
			apps := []string{"shop", "search", "", "a/b c%"}
			var want []schemas.EventRow
			for p := int32(0); p < 3; p++ {
				ins := genEvents(p, 3000, apps, tc.stepMs)
				w, err := a.Partition(context.Background(), testTopic, p, 0)
				require.NoError(t, err, "open partition %d", p)
				end := ins[len(ins)-1].offset + 1
				appendAll(t, w, ins, end)
				require.NoError(t, w.Flush(context.Background()), "flush partition %d", p)
				require.Equal(t, end, w.Durable(), "partition %d durable after flush", p)
				for _, in := range ins {
					want = append(want, rowOf(testTopic, in))
				}
			}
			require.NoError(t, a.Close(), "close")
			require.NoError(t, a.Close(), "second close")

			got := readAll(t, root, archive.Query{})
			sortRows(want)
			require.Equal(t, len(want), len(got), "rows read back")
			require.Equal(t, want, got, "replay yields every event exactly, in (time, topic, partition, offset) order")
		})
	}
}

// TestMultiEventRecordsAcrossSegmentRolls archives records of one to 400
// events (a raw log line naming that many keys) with segments small
// enough that many records end one: every event comes back once, with
// its index, and no record is split between two segments, so a restart
// from any durable offset finds each record wholly archived or not at all.
func TestMultiEventRecordsAcrossSegmentRolls(t *testing.T) {
	root := t.TempDir()
	a := openArchive(t, testOptions(root)) // 16 KiB segments
	w, err := a.Partition(context.Background(), testTopic, 0, 0)
	require.NoError(t, err)
	var ins []input
	for off := range int64(300) {
		k := 1 + int(off%9)
		if off == 150 {
			k = 400 // alone larger than a segment
		}
		for j := range k {
			ins = append(ins, input{offset: off, index: int32(j), ev: schemas.AccessEvent{
				TimeMs: baseMs + off*10, App: []string{"shop", "ads"}[j%2], Key: fmt.Sprintf("k%d:%d", off, j), Op: "GET"}})
		}
	}
	appendAll(t, w, ins, 300)
	require.NoError(t, a.Close())

	want := make([]schemas.EventRow, len(ins))
	for i, in := range ins {
		want[i] = rowOf(testTopic, in)
	}
	sortRows(want)
	got := readAll(t, root, archive.Query{})
	require.Equal(t, want, got, "every event of every record once, in (time, offset, index) order")

	// Which segment (by the range in its files' names) holds each offset.
	seg := map[int64]string{}
	segs := map[string]bool{}
	for _, p := range dataFiles(tree(t, root)) {
		info, ok := archive.ParseEventFileName(p)
		require.True(t, ok, "events file name %s", p)
		rng := fmt.Sprintf("[%d, %d]", info.First, info.Last)
		segs[rng] = true
		for _, r := range readFile(t, root, p) {
			require.True(t, r.Offset >= info.First && r.Offset <= info.Last, "row at offset %d in segment %s", r.Offset, rng)
			if s, ok := seg[r.Offset]; ok {
				require.Equal(t, s, rng, "the events of offset %d are in one segment", r.Offset)
			}
			seg[r.Offset] = rng
		}
	}
	require.Greater(t, len(segs), 5, "several segments rolled")
	require.Len(t, seg, 300, "every record archived")
}

// readFile reads the events file p under root with parquet-go's own
// reader.
func readFile(t *testing.T, root, p string) []schemas.EventRow {
	t.Helper()
	rows, err := parquet.ReadFile[schemas.EventRow](filepath.Join(root, p))
	require.NoError(t, err, "read %s", p)
	require.NotEmpty(t, rows, "rows of %s", p)
	return rows
}
