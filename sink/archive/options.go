package archive

import (
	"errors"
	"fmt"
	"time"

	"github.com/parquet-go/parquet-go/compress/zstd"
)

// Options configures the archive. config composes it under archive.*; the
// mapstructure tags are those keys.
type Options struct {
	// Root is the local folder the archive lives in. Open refuses an
	// empty Root; DefaultOptions leaves it empty, so a configuration that
	// sets no root has no archive.
	Root string `mapstructure:"root"`
	// SegmentBytes rolls a partition's open segment once the events it
	// buffers take this much memory (each event's row plus its strings).
	// Events stay in memory until the roll, so this bounds the archive's
	// memory per assigned partition, give or take the last chunk of
	// each bucket.
	SegmentBytes int64 `mapstructure:"segment_bytes"`
	// SegmentAge rolls a partition's open segment, and a record writer's
	// buffered rows, this long after their first event arrived. Offsets
	// become durable, and committable, only at a roll, so this bounds how
	// far detect's commits lag behind its reads.
	SegmentAge time.Duration `mapstructure:"segment_age"`
	// RowGroupRows bounds the rows of one Parquet row group, so a reader
	// holds at most this many rows of a file in memory at once.
	RowGroupRows int64 `mapstructure:"row_group_rows"`
	// RecordRows rolls a report or hot-key writer once it buffers this
	// many rows.
	RecordRows int `mapstructure:"record_rows"`
	// Zstd is the zstd level: fastest, default, better or best.
	Zstd string `mapstructure:"zstd"`
}

// DefaultOptions returns the defaults: 32 MiB or one minute per segment,
// row groups of 64Ki rows, and zstd at its fastest level, which on
// BenchmarkArchiveWrite's access-log data writes about 9.4 bytes an event;
// the default and better levels wrote slower and no smaller files there.
func DefaultOptions() Options {
	return Options{
		SegmentBytes: 32 << 20,
		SegmentAge:   time.Minute,
		RowGroupRows: 64 << 10,
		RecordRows:   10_000,
		Zstd:         "fastest",
	}
}

// ErrInvalidOptions is wrapped by every error Validate returns.
var ErrInvalidOptions = errors.New("invalid archive options")

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalidOptions}, args...)...)
}

// Validate reports the first problem with o, or nil.
func (o Options) Validate() error {
	switch {
	case o.Root == "":
		return invalid("root is empty; set archive.root to a folder")
	case o.SegmentBytes < 1<<10:
		return invalid("segment_bytes = %d, want at least 1024", o.SegmentBytes)
	case o.SegmentAge <= 0:
		return invalid("segment_age = %v, want > 0", o.SegmentAge)
	case o.RowGroupRows < 1:
		return invalid("row_group_rows = %d, want > 0", o.RowGroupRows)
	case o.RecordRows < 1:
		return invalid("record_rows = %d, want > 0", o.RecordRows)
	}
	if _, err := zstdLevel(o.Zstd); err != nil {
		return err
	}
	return nil
}

func zstdLevel(name string) (zstd.Level, error) {
	switch name {
	case "fastest":
		return zstd.SpeedFastest, nil
	case "default":
		return zstd.SpeedDefault, nil
	case "better":
		return zstd.SpeedBetterCompression, nil
	case "best":
		return zstd.SpeedBestCompression, nil
	}
	return 0, invalid("zstd = %q, want fastest, default, better or best", name)
}
