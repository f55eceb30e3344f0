package archive

import (
	"context"
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/zeebo/xxh3"

	"github.com/keyheat/keyheat/schemas"
)

// recordWriter buffers rows of reports or hot-key events per bucket (app
// and UTC hour of the row's time) and writes each bucket as one file when
// it rolls: after Options.RecordRows rows, after Options.SegmentAge, on
// Flush and on Close.
//
// A file is named by its source, the range of its rows' times and a hash
// of their IDs: writing the same rows again (a restart re-emitting what it
// emitted before) replaces the file with an identical one; different rows
// get a different name. So a crash can leave a row in two files only when
// the re-emitted rows were cut into batches differently; the readers of
// this package drop such duplicates by ID.
type recordWriter[T any] struct {
	a      *Archive
	kind   string
	source string
	key    string
	rowOf  func(*T) (id, app string, tsMs int64)
	enc    *encoder[T]

	mu        sync.Mutex
	buckets   map[bucketKey][]T
	rows      int
	startedAt time.Time
	err       error
	closed    bool
}

func newRecordWriter[T any](a *Archive, kind, source string, rowOf func(*T) (string, string, int64), sortCol string) (*recordWriter[T], error) {
	if source == "" {
		return nil, fmt.Errorf("archive %s writer: empty source; name what writes (e.g. the topic and partition)", kind)
	}
	w := &recordWriter[T]{
		a: a, kind: kind, source: source, key: kind + "/" + source, rowOf: rowOf,
		enc:     newEncoder[T](a.opts, kind, sortCol, "id"),
		buckets: make(map[bucketKey][]T),
	}
	if err := cleanStaging(a.fs, w.tmpDir()); err != nil {
		return nil, err
	}
	if err := a.registerRecords(w.key, w); err != nil {
		return nil, err
	}
	return w, nil
}

func (w *recordWriter[T]) tmpDir() string {
	return fmt.Sprintf("%s/%s/%s/tmp", stateDir, w.kind, escape(w.source))
}

func (w *recordWriter[T]) append(row T) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case w.closed:
		return fmt.Errorf("archive %s: %w", w.key, ErrClosed)
	case w.err != nil:
		return w.err
	}
	_, app, tsMs := w.rowOf(&row)
	k := bucketKey{app: app, hourMs: hourOf(tsMs)}
	if w.rows == 0 {
		w.startedAt = w.a.now()
	}
	w.buckets[k] = append(w.buckets[k], row)
	w.rows++
	if w.rows >= w.a.opts.RecordRows {
		return w.rollErr()
	}
	return nil
}

func (w *recordWriter[T]) flush(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case w.closed:
		return fmt.Errorf("archive %s: %w", w.key, ErrClosed)
	case w.err != nil:
		return w.err
	}
	return w.rollErr()
}

// Close rolls the buffered rows and releases the writer; calling it again
// returns nil.
func (w *recordWriter[T]) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return nil
	}
	var err error
	if w.err == nil {
		err = w.rollErr()
	}
	w.closed = true
	w.a.unregisterRecords(w.key, w)
	return err
}

func (w *recordWriter[T]) rollIfOlder(now time.Time, age time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed || w.err != nil || w.rows == 0 || now.Sub(w.startedAt) < age {
		return
	}
	_ = w.rollErr()
}

func (w *recordWriter[T]) rollErr() error {
	if err := w.roll(); err != nil {
		w.err = fmt.Errorf("archive %s: %w (the writer stopped; its buffered rows are not durable)", w.key, err)
		w.a.m.rollErrors.Inc()
		w.a.log.Error("archive roll failed", "writer", w.key, "err", err)
		return w.err
	}
	return nil
}

// roll writes every bucket: staged and fsynced, renamed into place, and
// each folder fsynced.
func (w *recordWriter[T]) roll() error {
	if w.rows == 0 {
		return nil
	}
	start := time.Now()
	fsys := w.a.fs
	dirs := make(map[string]bool)
	var files, bytes int64
	for _, k := range slices.SortedFunc(maps.Keys(w.buckets), func(x, y bucketKey) int {
		if c := strings.Compare(x.app, y.app); c != 0 {
			return c
		}
		return cmpInt(x.hourMs, y.hourMs)
	}) {
		rows := w.buckets[k]
		slices.SortStableFunc(rows, func(x, y T) int {
			xid, _, xt := w.rowOf(&x)
			yid, _, yt := w.rowOf(&y)
			if c := cmpInt(xt, yt); c != 0 {
				return c
			}
			return strings.Compare(xid, yid)
		})
		h := xxh3.New()
		for i := range rows {
			id, _, _ := w.rowOf(&rows[i])
			_, _ = h.WriteString(id)
			_, _ = h.Write([]byte{0})
		}
		_, _, firstMs := w.rowOf(&rows[0])
		_, _, lastMs := w.rowOf(&rows[len(rows)-1])
		dir := bucketDir(w.kind, k.app, k.hourMs)
		name := fmt.Sprintf("%s/%s_%d_%d_%016x%s", dir, escape(w.source), firstMs, lastMs, h.Sum64(), fileExt)
		tmp := fmt.Sprintf("%s/%s%s", w.tmpDir(), path.Base(name), tempSuffix)
		size, err := w.enc.writeFile(fsys, tmp, rows, "keyheat.source", w.source)
		if err != nil {
			return err
		}
		if !dirs[dir] {
			if err := fsys.MkdirAll(dir); err != nil {
				return fmt.Errorf("create %s: %w", dir, err)
			}
			dirs[dir] = true
		}
		if err := fsys.Rename(tmp, name); err != nil {
			return fmt.Errorf("publish %s: %w", name, err)
		}
		files++
		bytes += size
	}
	for _, dir := range slices.Sorted(maps.Keys(dirs)) {
		if err := fsys.SyncDir(dir); err != nil {
			return fmt.Errorf("fsync %s: %w", dir, err)
		}
	}
	w.a.m.files.WithLabelValues(w.kind).Add(float64(files))
	w.a.m.rows.WithLabelValues(w.kind).Add(float64(w.rows))
	w.a.m.bytes.WithLabelValues(w.kind).Add(float64(bytes))
	w.a.m.rollTime.Observe(time.Since(start).Seconds())
	clear(w.buckets)
	w.rows = 0
	return nil
}

// RecordWriter archives records of one kind (window reports, hot-key
// events), one row per record, bucketed by the record's app and the UTC
// hour of its time.
type RecordWriter[R, Row any] struct {
	w   *recordWriter[Row]
	row func(R) (Row, error)
}

// ReportWriter archives WindowReports under kind=reports, by the report's
// app (cluster-wide reports under the empty app's folder) and the UTC hour
// of its window start.
type ReportWriter = RecordWriter[*schemas.WindowReport, schemas.ReportRow]

// HotKeyWriter archives HotKeyEvents under kind=hotkeys, by the event's
// app and the UTC hour of its onset.
type HotKeyWriter = RecordWriter[*schemas.HotKeyEvent, schemas.HotKeyRow]

// Reports opens the report writer of source, a name unique among the
// processes writing reports to this archive (the merger: "merger").
func (a *Archive) Reports(source string) (*ReportWriter, error) {
	return openRecordWriter(a, KindReports, source, func(r *schemas.ReportRow) (string, string, int64) {
		return r.ID, r.App, r.StartMs
	}, "start_ms", schemas.MakeReportRow)
}

// HotKeys opens the hot-key writer of source, a name unique among the
// writers of this archive: detect opens one per events partition, e.g.
// "keyheat.events-3".
func (a *Archive) HotKeys(source string) (*HotKeyWriter, error) {
	return openRecordWriter(a, KindHotKeys, source, func(r *schemas.HotKeyRow) (string, string, int64) {
		return r.ID, r.App, r.OnsetMs
	}, "onset_ms", schemas.MakeHotKeyRow)
}

func openRecordWriter[R, Row any](a *Archive, kind, source string, key func(*Row) (string, string, int64), timeCol string,
	row func(R) (Row, error)) (*RecordWriter[R, Row], error) {
	w, err := newRecordWriter(a, kind, source, key, timeCol)
	if err != nil {
		return nil, err
	}
	return &RecordWriter[R, Row]{w: w, row: row}, nil
}

// Append buffers r; it is durable after the next roll (Flush forces one).
func (w *RecordWriter[R, Row]) Append(r R) error {
	row, err := w.row(r)
	if err != nil {
		return err
	}
	return w.w.append(row)
}

// Flush writes what is buffered and returns once it is durable.
func (w *RecordWriter[R, Row]) Flush(ctx context.Context) error { return w.w.flush(ctx) }

// Close flushes and releases the writer; calling it again returns nil.
func (w *RecordWriter[R, Row]) Close() error { return w.w.Close() }
