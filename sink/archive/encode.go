package archive

import (
	"bufio"
	"errors"
	"fmt"
	"strconv"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress/zstd"

	"github.com/keyheat/keyheat/schemas"
)

// encoder writes rows of type T into Parquet files. Not safe for
// concurrent use; each partition writer and record writer owns one.
type encoder[T any] struct {
	opts []parquet.WriterOption
	buf  *bufio.Writer
}

// newEncoder configures zstd at level, row groups of at most rowGroupRows
// rows, the kind and version in the metadata, and sortedBy as the files'
// declared sort order (the rows must be sorted by the caller).
func newEncoder[T any](o Options, kind string, sortedBy ...string) *encoder[T] {
	level, _ := zstdLevel(o.Zstd) // Options were validated.
	cols := make([]parquet.SortingColumn, len(sortedBy))
	for i, c := range sortedBy {
		cols[i] = parquet.Ascending(c)
	}
	return &encoder[T]{
		opts: []parquet.WriterOption{
			parquet.Compression(&zstd.Codec{Level: level}),
			parquet.MaxRowsPerRowGroup(o.RowGroupRows),
			parquet.KeyValueMetadata(schemas.ParquetKindKey, kind),
			parquet.KeyValueMetadata(schemas.ParquetVersionKey, strconv.Itoa(schemas.ParquetVersion)),
			parquet.SortingWriterConfig(parquet.SortingColumns(cols...)),
		},
		buf: bufio.NewWriterSize(nil, 256<<10),
	}
}

// skipStats leaves out the min/max of cols, in page headers, the column
// index and the column chunk's statistics.
func (e *encoder[T]) skipStats(cols ...string) *encoder[T] {
	for _, c := range cols {
		e.opts = append(e.opts, parquet.SkipPageBounds(c), parquet.SkipPageStatistics(c))
	}
	return e
}

// countingWriter counts the bytes written through it.
type countingWriter struct {
	w *bufio.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// writeFile writes rows into a new file name of fsys with the extra
// key/value metadata meta (pairs), fsyncs and closes it, and returns its
// size. On error the partial file is removed.
func (e *encoder[T]) writeFile(fsys FS, name string, rows []T, meta ...string) (size int64, err error) {
	return e.writeFileFunc(fsys, name, func(write func([]T) error) error { return write(rows) }, meta...)
}

// writeFileFunc is writeFile with the rows handed over by rows, in
// batches, through the write function it is given.
func (e *encoder[T]) writeFileFunc(fsys FS, name string, rows func(write func([]T) error) error, meta ...string) (size int64, err error) {
	f, err := fsys.Create(name)
	if err != nil {
		return 0, fmt.Errorf("create %s: %w", name, err)
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, f.Close(), fsys.Remove(name))
		}
	}()
	e.buf.Reset(f)
	cw := &countingWriter{w: e.buf}
	// A fresh parquet-go writer per file: in v0.32.0 a writer reused
	// through Reset writes different bytes for the same rows, with an
	// empty path_in_schema that Spark and Athena reject
	// (parquet-go/parquet-go#602), and a re-write after a crash must be
	// byte-identical to the first write.
	w := parquet.NewGenericWriter[T](cw, e.opts...)
	for i := 0; i+1 < len(meta); i += 2 {
		w.SetKeyValueMetadata(meta[i], meta[i+1])
	}
	if err := rows(func(batch []T) error {
		_, err := w.Write(batch)
		return err
	}); err != nil {
		return 0, fmt.Errorf("encode %s: %w", name, err)
	}
	if err := w.Close(); err != nil {
		return 0, fmt.Errorf("encode %s: %w", name, err)
	}
	if err := e.buf.Flush(); err != nil {
		return 0, fmt.Errorf("write %s: %w", name, err)
	}
	if err := f.Sync(); err != nil {
		return 0, fmt.Errorf("fsync %s: %w", name, err)
	}
	if err := f.Close(); err != nil {
		return 0, fmt.Errorf("close %s: %w", name, err)
	}
	return cw.n, nil
}
