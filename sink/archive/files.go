package archive

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/format"

	"github.com/keyheat/keyheat/schemas"
)

// Query selects what a reader reads.
type Query struct {
	// FromMs and ToMs bound event time to [FromMs, ToMs), Unix ms; ToMs 0
	// means no upper bound.
	FromMs, ToMs int64
	// Apps restricts reading to these apps; empty reads every app.
	Apps []string
	// KeyPrefix keeps only keys starting with it (events and hot keys).
	KeyPrefix string
	// SkipBadFiles makes a reader log a file it cannot read, list it in
	// Skipped and go on, instead of failing with a *BadFileError.
	SkipBadFiles bool
}

func (q *Query) hasTime(tsMs int64) bool {
	return tsMs >= q.FromMs && (q.ToMs == 0 || tsMs < q.ToMs)
}

// overlaps reports whether [fromMs, toMs) meets the query's time range.
func (q *Query) overlaps(fromMs, toMs int64) bool {
	return toMs > q.FromMs && (q.ToMs == 0 || fromMs < q.ToMs)
}

func (q *Query) hasApp(app string) bool {
	return len(q.Apps) == 0 || slices.Contains(q.Apps, app)
}

// BadFileError is a file of the archive a reader could not use: not
// Parquet, truncated, another layout or version, or corrupt inside.
type BadFileError struct {
	// Path is the file's path under the archive root.
	Path string
	Err  error
}

func (e *BadFileError) Error() string {
	return fmt.Sprintf("archive file %s: %v (move it out of the archive, or read with bad files skipped)", e.Path, e.Err)
}

func (e *BadFileError) Unwrap() error { return e.Err }

// listFiles returns the .parquet files of kind under the folders the query
// selects (app, then day, then hour), sorted by path.
func listFiles(fsys FS, kind string, q *Query) ([]string, error) {
	root := "kind=" + kind
	var apps []string
	if len(q.Apps) > 0 {
		for _, a := range q.Apps {
			apps = append(apps, "app="+escape(a))
		}
	} else {
		entries, err := readDirs(fsys, root)
		if err != nil {
			return nil, err
		}
		for _, e := range entries {
			if strings.HasPrefix(e, "app=") {
				apps = append(apps, e)
			}
		}
	}
	var out []string
	for _, app := range apps {
		appDir := root + "/" + app
		days, err := readDirs(fsys, appDir)
		if err != nil {
			return nil, err
		}
		for _, day := range days {
			d, err := time.Parse("2006-01-02", strings.TrimPrefix(day, "dt="))
			if err != nil || !strings.HasPrefix(day, "dt=") {
				continue
			}
			if dayMs := d.UnixMilli(); !q.overlaps(dayMs, dayMs+24*hourMs) {
				continue
			}
			hours, err := readDirs(fsys, appDir+"/"+day)
			if err != nil {
				return nil, err
			}
			for _, hour := range hours {
				h, err := strconv.Atoi(strings.TrimPrefix(hour, "hour="))
				if err != nil || !strings.HasPrefix(hour, "hour=") || h < 0 || h > 23 {
					continue
				}
				if hMs := d.UnixMilli() + int64(h)*hourMs; !q.overlaps(hMs, hMs+hourMs) {
					continue
				}
				dir := appDir + "/" + day + "/" + hour
				entries, err := fsys.ReadDir(dir)
				if err != nil {
					return nil, fmt.Errorf("list %s: %w", dir, err)
				}
				for _, e := range entries {
					if !e.IsDir() && strings.HasSuffix(e.Name(), fileExt) {
						out = append(out, dir+"/"+e.Name())
					}
				}
			}
		}
	}
	slices.Sort(out)
	return out, nil
}

// readDirs lists the folder names in dir; a missing dir has none.
func readDirs(fsys FS, dir string) ([]string, error) {
	entries, err := fsys.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", dir, err)
	}
	var out []string
	for _, e := range entries {
		if e.IsDir() {
			out = append(out, e.Name())
		}
	}
	return out, nil
}

// openedFile is an archive file with its footer read and checked.
type openedFile struct {
	path    string
	f       ReadableFile
	pf      *parquet.File
	version int // schemas.ParquetVersion it was written with
}

func (o *openedFile) Close() error { return o.f.Close() }

// openArchiveFile opens name and checks it is a keyheat file of kind and
// of a version this reader knows (every one up to schemas.ParquetVersion:
// each added columns only, which a reader of older files does without). Errors are *BadFileError unless the
// file system failed.
func openArchiveFile(fsys FS, name, kind string) (_ *openedFile, err error) {
	f, err := fsys.Open(name)
	if err != nil {
		return nil, fmt.Errorf("open archive file %s: %w", name, err)
	}
	defer func() {
		if err != nil {
			f.Close()
		}
	}()
	if err := checkFooterLength(f); err != nil {
		return nil, &BadFileError{Path: name, Err: err}
	}
	var pf *parquet.File
	err = guard(func() error {
		var err error
		pf, err = parquet.OpenFile(f, f.Size(), parquet.SkipBloomFilters(true), parquet.SkipPageIndex(true))
		return err
	})
	if err != nil {
		return nil, &BadFileError{Path: name, Err: fmt.Errorf("not a readable Parquet file: %w", err)}
	}
	for _, rg := range pf.Metadata().RowGroups {
		for _, cc := range rg.Columns {
			// keyheat writes zstd. Refusing other codecs up front also
			// keeps a corrupt codec field away from parquet-go v0.32.0's
			// lz4 decoder, which doubles its buffer without bound on
			// input it cannot decode.
			if c := cc.MetaData.Codec; c != format.Zstd && c != format.Uncompressed {
				return nil, &BadFileError{Path: name, Err: fmt.Errorf("column %v compressed with %v; keyheat writes zstd", cc.MetaData.PathInSchema, c)}
			}
		}
	}
	k, _ := pf.Lookup(schemas.ParquetKindKey)
	v, _ := pf.Lookup(schemas.ParquetVersionKey)
	if k != kind {
		return nil, &BadFileError{Path: name, Err: fmt.Errorf("not a keyheat %s file (%s is %q)", kind, schemas.ParquetKindKey, k)}
	}
	version, verr := strconv.Atoi(v)
	if verr != nil || version < 1 || version > schemas.ParquetVersion {
		return nil, &BadFileError{Path: name, Err: fmt.Errorf("layout version %q, this reader knows 1 to %d", v, schemas.ParquetVersion)}
	}
	return &openedFile{path: name, f: f, pf: pf, version: version}, nil
}

// checkFooterLength refuses a file whose trailer claims a footer longer
// than the file. parquet-go v0.32.0 allocates the claimed length (up to
// 4 GiB) before it reads, so a corrupt trailer would exhaust memory
// instead of failing.
func checkFooterLength(f ReadableFile) error {
	size := f.Size()
	if size < 12 {
		return fmt.Errorf("not a Parquet file: %d bytes", size)
	}
	var tail [8]byte
	if _, err := f.ReadAt(tail[:], size-8); err != nil {
		return fmt.Errorf("read trailer: %w", err)
	}
	if footer := int64(binary.LittleEndian.Uint32(tail[:4])); footer > size-12 {
		return fmt.Errorf("truncated or corrupt: trailer claims a %d-byte footer in a %d-byte file", footer, size)
	}
	return nil
}

// guard runs fn and turns a panic into an error. parquet-go decodes what
// it is given and can panic on a corrupt file (an index beyond its
// dictionary, a length beyond its page); a replay must report the file,
// not crash.
func guard(fn func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("corrupt data: %v", r)
		}
	}()
	return fn()
}

// int64Stat decodes an INT64 min or max statistic; ok is false when absent.
func int64Stat(b []byte) (int64, bool) {
	if len(b) != 8 {
		return 0, false
	}
	return int64(binary.LittleEndian.Uint64(b)), true
}

// timeBounds returns the time column's min and max in row group rg from
// the footer's statistics, or the whole int64 range when they are absent.
func timeBounds(pf *parquet.File, rg, col int) (minMs, maxMs int64) {
	minMs, maxMs = -1<<63, 1<<63-1
	rgs := pf.Metadata().RowGroups
	if rg >= len(rgs) || col >= len(rgs[rg].Columns) {
		return minMs, maxMs
	}
	st := rgs[rg].Columns[col].MetaData.Statistics
	if v, ok := int64Stat(st.MinValue); ok {
		minMs = v
	}
	if v, ok := int64Stat(st.MaxValue); ok {
		maxMs = v
	}
	return minMs, maxMs
}
