package archive

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"slices"
	"strings"

	"github.com/parquet-go/parquet-go"

	"github.com/keyheat/keyheat/schemas"
)

// ReadReports returns the archived window reports q selects (by window
// start and app; KeyPrefix does not apply), ordered by start, then ID,
// each once: a report archived twice after a crash is returned once. The
// second result lists files skipped with Query.SkipBadFiles.
func ReadReports(ctx context.Context, fsys FS, q Query, log *slog.Logger) ([]*schemas.WindowReport, []*BadFileError, error) {
	return readUnique(ctx, fsys, KindReports, q, log, func(r *schemas.ReportRow) (int64, string, bool) {
		return r.StartMs, r.ID, q.hasTime(r.StartMs) && q.hasApp(r.App)
	}, (*schemas.ReportRow).Report)
}

// ReadHotKeys returns the archived hot-key events q selects (by onset,
// app and key prefix), ordered by onset, then ID, each once.
func ReadHotKeys(ctx context.Context, fsys FS, q Query, log *slog.Logger) ([]*schemas.HotKeyEvent, []*BadFileError, error) {
	return readUnique(ctx, fsys, KindHotKeys, q, log, func(r *schemas.HotKeyRow) (int64, string, bool) {
		return r.OnsetMs, r.ID, q.hasTime(r.OnsetMs) && q.hasApp(r.App) && strings.HasPrefix(r.Key, q.KeyPrefix)
	}, (*schemas.HotKeyRow).HotKeyEvent)
}

// readUnique reads kind's rows that sel keeps and makes a record of the
// first row of each ID with conv, ordered by sel's time, then ID. A row
// conv refuses is its file's BadFileError: returned, or skipped with
// Query.SkipBadFiles.
func readUnique[T, R any](ctx context.Context, fsys FS, kind string, q Query, log *slog.Logger,
	sel func(*T) (at int64, id string, keep bool), conv func(*T) (R, error)) ([]R, []*BadFileError, error) {
	rows, skipped, err := readRecords[T](ctx, fsys, kind, q, log, func(r *T) bool {
		_, _, keep := sel(r)
		return keep
	})
	if err != nil {
		return nil, skipped, err
	}
	type rec struct {
		at  int64
		id  string
		rec R
	}
	recs := make([]rec, 0, len(rows))
	seen := make(map[string]bool, len(rows))
	for i := range rows {
		at, id, _ := sel(&rows[i].row)
		if seen[id] {
			continue
		}
		seen[id] = true
		r, err := conv(&rows[i].row)
		if err != nil {
			bf := &BadFileError{Path: rows[i].path, Err: err}
			if !q.SkipBadFiles {
				return nil, skipped, bf
			}
			skipped = append(skipped, bf)
			continue
		}
		recs = append(recs, rec{at, id, r})
	}
	slices.SortStableFunc(recs, func(a, b rec) int {
		if c := cmpInt(a.at, b.at); c != 0 {
			return c
		}
		return strings.Compare(a.id, b.id)
	})
	out := make([]R, len(recs))
	for i := range recs {
		out[i] = recs[i].rec
	}
	return out, skipped, nil
}

// addedColumns are, per kind, the record columns added after version 1
// with the layout version that added them.
var addedColumns = map[string]map[string]int{
	KindHotKeys: {"partitions": 3, "error": 3, "peak_rate": 4},
}

type fileRow[T any] struct {
	path string
	row  T
}

// readRecords reads every row of kind's selected files that keep accepts.
func readRecords[T any](ctx context.Context, fsys FS, kind string, q Query, log *slog.Logger, keep func(*T) bool) ([]fileRow[T], []*BadFileError, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	names, err := listFiles(fsys, kind, &q)
	if err != nil {
		return nil, nil, err
	}
	var out []fileRow[T]
	var skipped []*BadFileError
	for _, name := range names {
		if err := ctx.Err(); err != nil {
			return nil, skipped, err
		}
		rows, err := readRecordFile[T](fsys, name, kind)
		if err != nil {
			var bf *BadFileError
			if !q.SkipBadFiles || !errors.As(err, &bf) {
				return nil, skipped, err
			}
			log.Warn("archive file skipped", "path", bf.Path, "err", bf.Err)
			skipped = append(skipped, bf)
			continue
		}
		for i := range rows {
			if keep(&rows[i]) {
				out = append(out, fileRow[T]{path: name, row: rows[i]})
			}
		}
	}
	return out, skipped, nil
}

func readRecordFile[T any](fsys FS, name, kind string) ([]T, error) {
	o, err := openArchiveFile(fsys, name, kind)
	if err != nil {
		return nil, err
	}
	defer o.Close()
	var rows []T
	err = guard(func() error {
		for rg := range o.pf.Metadata().RowGroups {
			if _, err := checkPages(o.f, o.pf.Metadata(), rg, nil); err != nil {
				return err
			}
		}
		want := parquet.SchemaOf(new(T))
		for _, f := range want.Fields() {
			if o.pf.Root().Column(f.Name()) != nil {
				continue
			}
			// A file older than the column lacks it, and parquet-go's
			// reader leaves it at its zero value; any other is missing.
			if since := addedColumns[kind][f.Name()]; since == 0 || o.version >= since {
				return errors.New("column " + f.Name() + " missing")
			}
		}
		r := parquet.NewGenericReader[T](o.pf)
		defer r.Close()
		rows = make([]T, r.NumRows())
		n := 0
		for n < len(rows) {
			k, err := r.Read(rows[n:])
			n += k
			if err == io.EOF {
				break
			}
			if err != nil {
				return err
			}
			if k == 0 {
				return errors.New("reader made no progress")
			}
		}
		if n != len(rows) {
			return errors.New("fewer rows than the footer counts")
		}
		return nil
	})
	if err != nil {
		return nil, &BadFileError{Path: name, Err: err}
	}
	return rows, nil
}
