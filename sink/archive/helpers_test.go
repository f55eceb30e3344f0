package archive_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/keyheat/keyheat/schemas"
	"github.com/keyheat/keyheat/sink/archive"
)

const (
	testTopic = "keyheat.events"
	// baseMs is 2026-01-01T00:00:00Z.
	baseMs = int64(1767225600000)
	hourMs = int64(time.Hour / time.Millisecond)
)

// input is one event as detect hands it over: the index-th event of the
// record at offset.
type input struct {
	partition int32
	offset    int64
	index     int32
	ev        schemas.AccessEvent
}

// genEvents returns n events of partition, offsets from 0 with a gap every
// 7th record (a record that held no event), spread over apps and over
// hours: event time moves forward by stepMs and jitters back a little,
// as real logs do. Every 5th record holds three events, as a raw log line
// naming several keys (an MGET) does: one time, three keys and apps.
func genEvents(partition int32, n int, apps []string, stepMs int64) []input {
	ops := []string{"GET", "SET", "HGETALL"}
	out := make([]input, 0, n)
	off := int64(0)
	for rec := 0; len(out) < n; rec++ {
		if rec%7 == 6 {
			off++ // a record that held no event
		}
		i0, k := len(out), 1
		if rec%5 == 2 {
			k = 3
		}
		ts := baseMs + int64(i0)*stepMs - int64(i0%5)*2*stepMs
		for j := 0; j < k && len(out) < n; j++ {
			i := len(out)
			out = append(out, input{partition: partition, offset: off, index: int32(j), ev: schemas.AccessEvent{
				TimeMs: ts, Key: fmt.Sprintf("product:%d", (i*7919)%97), App: apps[i%len(apps)], Op: ops[i%3],
				Bytes: int64(100 + i%1000), Status: int32(200 + i%3), Client: fmt.Sprintf("10.0.0.%d", i%13),
				Node: fmt.Sprintf("node-%d", i%4), LatencyUs: int64(i % 977),
			}})
		}
		off++
	}
	return out
}

// record is what one Append hands over: a record's events.
type record struct {
	offset int64
	evs    []schemas.AccessEvent
}

// records groups ins, in order, into the records Append takes.
func records(ins []input) []record {
	var out []record
	for _, in := range ins {
		if n := len(out); n > 0 && out[n-1].offset == in.offset {
			out[n-1].evs = append(out[n-1].evs, in.ev)
			continue
		}
		out = append(out, record{offset: in.offset, evs: []schemas.AccessEvent{in.ev}})
	}
	return out
}

// recordStart returns the first i >= from where a record starts.
func recordStart(ins []input, from int) int {
	for from < len(ins) && ins[from].index != 0 {
		from++
	}
	return from
}

func rowOf(topic string, in input) schemas.EventRow {
	return schemas.MakeEventRow(topic, in.partition, in.offset, in.index, &in.ev)
}

// sortRows puts rows in the order a replay must yield them.
func sortRows(rows []schemas.EventRow) {
	slices.SortFunc(rows, func(a, b schemas.EventRow) int {
		switch {
		case a.TimeMs != b.TimeMs:
			return cmp(a.TimeMs, b.TimeMs)
		case a.Topic != b.Topic:
			return strings.Compare(a.Topic, b.Topic)
		case a.Partition != b.Partition:
			return cmp(int64(a.Partition), int64(b.Partition))
		case a.Offset != b.Offset:
			return cmp(a.Offset, b.Offset)
		}
		return cmp(int64(a.Index), int64(b.Index))
	})
}

func cmp(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// testOptions rolls by size only, so tests decide every boundary.
func testOptions(root string) archive.Options {
	o := archive.DefaultOptions()
	o.Root = root
	o.SegmentBytes = 16 << 10
	o.SegmentAge = time.Hour
	o.RowGroupRows = 100
	return o
}

func openArchive(t *testing.T, opts archive.Options) *archive.Archive {
	t.Helper()
	a, err := archive.Open(context.Background(), opts, nil, nil)
	require.NoError(t, err, "open archive")
	return a
}

// appendAll hands ins to w, advancing to end after the last.
func appendAll(t *testing.T, w *archive.PartitionWriter, ins []input, end int64) {
	t.Helper()
	durable := w.Durable()
	for _, r := range records(ins) {
		require.NoError(t, w.Append(r.offset, r.evs...), "append offset %d", r.offset)
		require.GreaterOrEqual(t, w.Durable(), durable, "durable never moves back (offset %d)", r.offset)
		require.True(t, w.Durable() <= r.offset || w.Durable() == r.offset+1, "durable %d is never inside a record (offset %d)", w.Durable(), r.offset)
		durable = w.Durable()
	}
	require.NoError(t, w.Advance(end), "advance to %d", end)
	require.GreaterOrEqual(t, w.Durable(), durable, "durable never moves back (advance)")
}

// readAll replays the whole archive at root.
func readAll(t *testing.T, root string, q archive.Query) []schemas.EventRow {
	t.Helper()
	r, err := archive.OpenEvents(context.Background(), root, q, nil)
	require.NoError(t, err, "open events")
	defer r.Close()
	var out []schemas.EventRow
	buf := make([]schemas.EventRow, 37)
	for {
		n, err := r.Read(buf)
		out = append(out, buf[:n]...)
		if errors.Is(err, io.EOF) {
			return out
		}
		require.NoError(t, err, "read events")
	}
}

// tree returns every file under root with its content, by slash path.
func tree(t *testing.T, root string) map[string][]byte {
	t.Helper()
	out := make(map[string][]byte)
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		out[filepath.ToSlash(rel)] = b
		return nil
	})
	require.NoError(t, err, "walk %s", root)
	return out
}

// dataFiles returns the .parquet paths of a tree, sorted.
func dataFiles(tr map[string][]byte) []string {
	var out []string
	for p := range tr {
		if strings.HasSuffix(p, ".parquet") {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out
}

// faultFS fails every Rename after the first okRenames (counting only
// renames into the data tree), as a machine dying mid-publish would leave
// things.
type faultFS struct {
	archive.FS
	mu        sync.Mutex
	okRenames int
	renames   int
}

var errInjected = errors.New("injected failure")

func (f *faultFS) Rename(oldname, newname string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if strings.HasPrefix(newname, "kind=") {
		if f.renames >= f.okRenames {
			return errInjected
		}
		f.renames++
	}
	return f.FS.Rename(oldname, newname)
}
