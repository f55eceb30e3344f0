package archive_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"
	"github.com/stretchr/testify/require"

	"github.com/keyheat/keyheat/schemas"
	"github.com/keyheat/keyheat/sink/archive"
)

// writeArchive archives ins of partition 0 and returns the root.
func writeArchive(t *testing.T, ins []input) string {
	t.Helper()
	root := t.TempDir()
	a := openArchive(t, testOptions(root))
	w, err := a.Partition(context.Background(), testTopic, 0, 0)
	require.NoError(t, err)
	appendAll(t, w, ins, ins[len(ins)-1].offset+1)
	require.NoError(t, a.Close())
	return root
}

func TestQueryFilters(t *testing.T) {
	ins := genEvents(0, 3000, []string{"shop", "search", "ads"}, 4_000)
	root := writeArchive(t, ins)
	tests := []struct {
		name string
		q    archive.Query
	}{
		{"everything", archive.Query{}},
		{"one hour and a half", archive.Query{FromMs: baseMs + hourMs/2, ToMs: baseMs + 2*hourMs}},
		{"from a time on", archive.Query{FromMs: baseMs + 3*hourMs - 7}},
		{"two apps", archive.Query{Apps: []string{"shop", "ads"}}},
		{"key prefix", archive.Query{KeyPrefix: "product:1"}},
		{"all filters", archive.Query{FromMs: baseMs + hourMs/3, ToMs: baseMs + 2*hourMs + 5, Apps: []string{"search"}, KeyPrefix: "product:2"}},
		{"nothing matches", archive.Query{Apps: []string{"nobody"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var want []schemas.EventRow
			for _, in := range ins {
				r := rowOf(testTopic, in)
				q := tc.q
				if r.TimeMs < q.FromMs || (q.ToMs != 0 && r.TimeMs >= q.ToMs) || !strings.HasPrefix(r.Key, q.KeyPrefix) {
					continue
				}
				if len(q.Apps) > 0 && !contains(q.Apps, r.App) {
					continue
				}
				want = append(want, r)
			}
			sortRows(want)
			got := readAll(t, root, tc.q)
			require.Equal(t, len(want), len(got), "rows selected")
			if len(want) > 0 {
				require.Equal(t, want, got, "rows selected, in replay order")
			}
		})
	}
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// badFiles plants files a reader must refuse next to good ones and
// returns their paths under root.
func badFiles(t *testing.T, root string) []string {
	t.Helper()
	var good string
	require.NoError(t, filepath.WalkDir(filepath.Join(root, "kind=events"), func(p string, d os.DirEntry, err error) error {
		if err == nil && good == "" && strings.HasSuffix(p, ".parquet") {
			good = p
		}
		return err
	}))
	require.NotEmpty(t, good, "a good file to damage")
	data, err := os.ReadFile(good)
	require.NoError(t, err)
	dir := filepath.Dir(good)

	truncated := filepath.Join(dir, "truncated.parquet")
	require.NoError(t, os.WriteFile(truncated, data[:len(data)/2], 0o644))

	garbage := filepath.Join(dir, "garbage.parquet")
	require.NoError(t, os.WriteFile(garbage, []byte("this is not parquet at all"), 0o644))

	// A well-formed Parquet file somebody else wrote.
	type other struct {
		Name  string `parquet:"name"`
		Value int64  `parquet:"value"`
	}
	foreign := filepath.Join(dir, "foreign.parquet")
	require.NoError(t, parquet.WriteFile(foreign, []other{{"a", 1}, {"b", 2}}))

	// Parquet's magic at both ends around a corrupted body.
	corrupt := append([]byte(nil), data...)
	for i := 4; i < len(corrupt)/2; i += 3 {
		corrupt[i] ^= 0x5a
	}
	corruptName := filepath.Join(dir, "corrupt.parquet")
	require.NoError(t, os.WriteFile(corruptName, corrupt, 0o644))

	var out []string
	for _, p := range []string{truncated, garbage, foreign, corruptName} {
		rel, _ := filepath.Rel(root, p)
		out = append(out, filepath.ToSlash(rel))
	}
	return out
}

func TestBadFiles(t *testing.T) {
	ins := genEvents(0, 1500, []string{"shop"}, 1_000)
	root := writeArchive(t, ins)
	bad := badFiles(t, root)

	t.Run("stop", func(t *testing.T) {
		_, err := archive.OpenEvents(context.Background(), root, archive.Query{}, nil)
		var bf *archive.BadFileError
		require.ErrorAs(t, err, &bf, "a bad file stops the reader")
		require.Contains(t, bad, bf.Path, "the error names the bad file")
		require.Contains(t, err.Error(), bf.Path, "the message names the file")
	})
	t.Run("skip", func(t *testing.T) {
		r, err := archive.OpenEvents(context.Background(), root, archive.Query{SkipBadFiles: true}, nil)
		require.NoError(t, err)
		defer r.Close()
		buf := make([]schemas.EventRow, 1000)
		total := 0
		for {
			n, err := r.Read(buf)
			total += n
			if errors.Is(err, errEOF) {
				break
			}
			require.NoError(t, err)
		}
		require.Equal(t, len(ins), total, "every good event is read")
		var skipped []string
		for _, s := range r.Skipped() {
			skipped = append(skipped, s.Path)
		}
		require.ElementsMatch(t, bad, skipped, "the bad files are skipped and listed")
	})
}

func TestBadRecordFiles(t *testing.T) {
	root := t.TempDir()
	a := openArchive(t, testOptions(root))
	w, err := a.Reports("merger")
	require.NoError(t, err)
	require.NoError(t, w.Append(report(schemas.ScopeCluster, "", baseMs)))
	require.NoError(t, a.Close())
	dirs, err := filepath.Glob(filepath.Join(root, "kind=reports", "*", "*", "*"))
	require.NoError(t, err)
	require.Len(t, dirs, 1)
	garbage := filepath.Join(dirs[0], "x.parquet")
	require.NoError(t, os.WriteFile(garbage, []byte("PAR1xxxxPAR1"), 0o644))
	fsys, err := archive.NewDirFS(root)
	require.NoError(t, err)

	_, _, err = archive.ReadReports(context.Background(), fsys, archive.Query{}, nil)
	var bf *archive.BadFileError
	require.ErrorAs(t, err, &bf)
	require.True(t, strings.HasSuffix(bf.Path, "/x.parquet"), "names the file: %s", bf.Path)

	got, skipped, err := archive.ReadReports(context.Background(), fsys, archive.Query{SkipBadFiles: true}, nil)
	require.NoError(t, err)
	require.Len(t, got, 1, "the good report")
	require.Len(t, skipped, 1, "the bad file")
}

// TestReaderTotals: Rows counts the selected row groups' rows (what a
// replay of the whole archive reads) and Partitions the partitions that
// archived something, per topic.
func TestReaderTotals(t *testing.T) {
	ins := genEvents(0, 2000, []string{"shop", "ads"}, 1_000)
	root := writeArchive(t, ins)
	r, err := archive.OpenEvents(context.Background(), root, archive.Query{}, nil)
	require.NoError(t, err)
	defer r.Close()
	require.EqualValues(t, len(ins), r.Rows(), "every row of the archive")
	require.Equal(t, map[string]int32{testTopic: 1}, r.Partitions(), "partition 0 archived: one partition")

	none, err := archive.OpenEvents(context.Background(), root, archive.Query{Apps: []string{"nobody"}}, nil)
	require.NoError(t, err)
	defer none.Close()
	require.Zero(t, none.Rows(), "nothing selected")
	require.Empty(t, none.Partitions())
}
