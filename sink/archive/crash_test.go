package archive_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/keyheat/keyheat/schemas"
	"github.com/keyheat/keyheat/sink/archive"
)

// crashInputs is one partition's events over two apps and three hours:
// about a dozen size-rolled segments of four to six files each.
func crashInputs() []input {
	return genEvents(5, 2000, []string{"shop", "search"}, 5_000)
}

// cleanRun archives ins in one run that never crashes: the reference.
func cleanRun(t *testing.T, ins []input) map[string][]byte {
	root := t.TempDir()
	a := openArchive(t, testOptions(root))
	w, err := a.Partition(context.Background(), testTopic, 5, 0)
	require.NoError(t, err)
	appendAll(t, w, ins, ins[len(ins)-1].offset+1)
	require.NoError(t, a.Close())
	return tree(t, root)
}

// resume reopens the archive at root from offset start and hands over
// every event from there, as detect does after a restart.
func resume(t *testing.T, root string, ins []input, start int64) {
	t.Helper()
	a := openArchive(t, testOptions(root))
	w, err := a.Partition(context.Background(), testTopic, 5, start)
	require.NoError(t, err, "reopen at %d", start)
	var rest []input
	for _, in := range ins {
		if in.offset >= start {
			rest = append(rest, in)
		}
	}
	appendAll(t, w, rest, ins[len(ins)-1].offset+1)
	require.NoError(t, a.Close(), "close after resume")
}

// requireSameArchive demands byte-identical trees: the same data files,
// the same manifests, and nothing left in staging.
func requireSameArchive(t *testing.T, want, got map[string][]byte) {
	t.Helper()
	require.Equal(t, sortedKeys(want), sortedKeys(got), "files in the archive")
	for p, b := range want {
		require.Equal(t, b, got[p], "content of %s", p)
	}
}

func sortedKeys(m map[string][]byte) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return sortStrings(out)
}

func sortStrings(s []string) []string {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
	return s
}

// segmentFirsts returns the First of every recorded segment, from the
// manifests' names.
func segmentFirsts(t *testing.T, tr map[string][]byte) []int64 {
	var out []int64
	for p := range tr {
		if strings.Contains(p, "/segments/") {
			first, err := strconv.ParseInt(strings.SplitN(filepath.Base(p), "_", 2)[0], 10, 64)
			require.NoError(t, err, "manifest name %s", p)
			out = append(out, first)
		}
	}
	return out
}

func TestCrashBeforeRollRewritesIdentically(t *testing.T) {
	ins := crashInputs()
	want := cleanRun(t, ins)
	require.Greater(t, len(segmentFirsts(t, want)), 5, "the reference run has several segments")

	// The first run dies after handing over about 1100 events: the segments
	// rolled so far are durable, the open one was only in memory, and
	// staging may hold nothing (it is written at the roll only).
	crash := func(t *testing.T) (root string, durable int64, firsts []int64) {
		root = t.TempDir()
		a := openArchive(t, testOptions(root))
		w, err := a.Partition(context.Background(), testTopic, 5, 0)
		require.NoError(t, err)
		cut := recordStart(ins, 1100)
		appendAll(t, w, ins[:cut], ins[cut].offset)
		durable = w.Durable()
		require.Less(t, durable, ins[cut].offset, "the open segment is not durable")
		require.Positive(t, durable, "some segments are durable")
		a.Crash()
		return root, durable, segmentFirsts(t, tree(t, root))
	}
	tests := []struct {
		name  string
		start func(durable int64, firsts []int64) int64
	}{
		{"from the durable offset", func(d int64, _ []int64) int64 { return d }},
		{"from the beginning", func(int64, []int64) int64 { return 0 }},
		{"from inside a durable segment", func(_ int64, f []int64) int64 { return sortInts(f)[1] + 3 }},
		{"from a segment start", func(_ int64, f []int64) int64 { return sortInts(f)[2] }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root, durable, firsts := crash(t)
			start := tc.start(durable, firsts)
			require.LessOrEqual(t, start, durable, "a consumer never commits beyond Durable")
			resume(t, root, ins, start)
			requireSameArchive(t, want, tree(t, root))
			requireAllOnce(t, root, ins)
		})
	}
}

func sortInts(s []int64) []int64 {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
	return s
}

// requireAllOnce demands that the archive replays every input exactly once.
func requireAllOnce(t *testing.T, root string, ins []input) {
	t.Helper()
	want := make([]schemas.EventRow, len(ins))
	for i, in := range ins {
		want[i] = rowOf(testTopic, in)
	}
	sortRows(want)
	got := readAll(t, root, archive.Query{})
	require.Equal(t, len(want), len(got), "events in the archive")
	require.Equal(t, want, got, "every event once, in replay order")
}

func TestCrashMidPublishRewritesIdentically(t *testing.T) {
	ins := crashInputs()
	want := cleanRun(t, ins)
	for _, okRenames := range []int{1, 7, 10, 13, 22} {
		t.Run("after "+itoa(okRenames)+" renames", func(t *testing.T) {
			root := t.TempDir()
			dir, err := archive.NewDirFS(root)
			require.NoError(t, err)
			ffs := &faultFS{FS: dir, okRenames: okRenames}
			a := archive.OpenFSForTest(t, testOptions(root), ffs, time.Now)
			w, err := a.Partition(context.Background(), testTopic, 5, 0)
			require.NoError(t, err)
			var failed error
			for _, r := range records(ins) {
				if failed = w.Append(r.offset, r.evs...); failed != nil {
					break
				}
			}
			require.ErrorIs(t, failed, errInjected, "the publish fails part way")
			require.ErrorIs(t, w.Append(1<<40, ins[0].ev), errInjected, "the writer refuses work after a failed roll")
			committed := w.Durable()
			a.Crash()

			// Files of the failed segment are partly visible, its temp
			// files are still in staging, and its manifest is recorded:
			// resuming inside it is refused with where to resume.
			a2 := openArchive(t, testOptions(root))
			_, err = a2.Partition(context.Background(), testTopic, 5, committed+1)
			var inc *archive.IncompleteSegmentError
			require.ErrorAs(t, err, &inc, "resume inside the half-published segment")
			require.Equal(t, committed, inc.First, "the error names the segment start, the committed offset")
			require.NoError(t, a2.Close())

			resume(t, root, ins, committed)
			requireSameArchive(t, want, tree(t, root))
			requireAllOnce(t, root, ins)
		})
	}
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var b []byte
	for ; n > 0; n /= 10 {
		b = append([]byte{byte('0' + n%10)}, b...)
	}
	return string(b)
}

func TestLeftoverTempFilesAreRemoved(t *testing.T) {
	root := t.TempDir()
	staging := filepath.Join(root, "_keyheat", "events", testTopic, "5", "tmp")
	require.NoError(t, os.MkdirAll(staging, 0o755))
	leftover := filepath.Join(staging, "12_0.tmp")
	require.NoError(t, os.WriteFile(leftover, []byte("PAR1 half a file"), 0o644))
	a := openArchive(t, testOptions(root))
	_, err := a.Partition(context.Background(), testTopic, 5, 0)
	require.NoError(t, err)
	_, err = os.Stat(leftover)
	require.True(t, errors.Is(err, os.ErrNotExist), "a temp file left by a crash is removed when the partition opens: %v", err)
	require.NoError(t, a.Close())
}

// TestRewriteKeepsRecordedBoundary restarts with a smaller segment size
// after a crash mid-publish: the half-published segment is still
// re-written whole, ending where its manifest says, so its files come out
// as the first run wrote them and no event is archived twice.
func TestRewriteKeepsRecordedBoundary(t *testing.T) {
	ins := crashInputs()
	want := cleanRun(t, ins)
	root := t.TempDir()
	dir, err := archive.NewDirFS(root)
	require.NoError(t, err)
	a := archive.OpenFSForTest(t, testOptions(root), &faultFS{FS: dir, okRenames: 9}, time.Now)
	w, err := a.Partition(context.Background(), testTopic, 5, 0)
	require.NoError(t, err)
	for _, r := range records(ins) {
		if w.Append(r.offset, r.evs...) != nil {
			break
		}
	}
	committed := w.Durable()
	a.Crash()

	opts := testOptions(root)
	opts.SegmentBytes = 4 << 10
	a2 := openArchive(t, opts)
	w2, err := a2.Partition(context.Background(), testTopic, 5, committed)
	require.NoError(t, err)
	var rest []input
	for _, in := range ins {
		if in.offset >= committed {
			rest = append(rest, in)
		}
	}
	appendAll(t, w2, rest, ins[len(ins)-1].offset+1)
	require.NoError(t, a2.Close())

	got := tree(t, root)
	var rewritten int
	for p, b := range got {
		if strings.HasSuffix(p, ".parquet") && strings.Contains(p, fmt.Sprintf("_%019d_", committed)) {
			require.Equal(t, want[p], b, "re-written file %s is as the first run wrote it", p)
			rewritten++
		}
	}
	require.Positive(t, rewritten, "the half-published segment's files are there")
	requireAllOnce(t, root, ins)
}

// TestRewriteRecordsNewSizes: a half-published segment re-written with
// another zstd level holds the same rows in files of other sizes; its
// manifest records the new sizes, so the next restart finds it complete.
func TestRewriteRecordsNewSizes(t *testing.T) {
	ins := crashInputs()
	root := t.TempDir()
	dir, err := archive.NewDirFS(root)
	require.NoError(t, err)
	a := archive.OpenFSForTest(t, testOptions(root), &faultFS{FS: dir, okRenames: 9}, time.Now)
	w, err := a.Partition(context.Background(), testTopic, 5, 0)
	require.NoError(t, err)
	for _, r := range records(ins) {
		if w.Append(r.offset, r.evs...) != nil {
			break
		}
	}
	committed := w.Durable()
	a.Crash()

	opts := testOptions(root)
	opts.Zstd = "better"
	a2 := openArchive(t, opts)
	w2, err := a2.Partition(context.Background(), testTopic, 5, committed)
	require.NoError(t, err)
	var rest []input
	for _, in := range ins {
		if in.offset >= committed {
			rest = append(rest, in)
		}
	}
	appendAll(t, w2, rest, ins[len(ins)-1].offset+1)
	require.NoError(t, a2.Close())

	tr := tree(t, root)
	var checked int
	for p, b := range tr {
		if !strings.Contains(p, "/segments/") {
			continue
		}
		var m struct {
			Files []struct {
				Path  string `json:"path"`
				Bytes int64  `json:"bytes"`
			} `json:"files"`
		}
		require.NoError(t, json.Unmarshal(b, &m), "manifest %s", p)
		for _, f := range m.Files {
			require.EqualValues(t, len(tr[f.Path]), f.Bytes, "manifest %s records the size of %s", p, f.Path)
			checked++
		}
	}
	require.Positive(t, checked)
	requireAllOnce(t, root, ins)
}
