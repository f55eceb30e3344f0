package clickhouse

import (
	"crypto/tls"
	"errors"
	"fmt"
	"regexp"
	"time"
)

// Options configure the ClickHouse sink. The config package composes them
// under clickhouse.*; the zero value is not usable, start from
// [DefaultOptions].
type Options struct {
	// Enabled turns the sink on. The package itself ignores it; the
	// command that wires the sink reads it.
	Enabled bool `mapstructure:"enabled"`
	// Addr are native-protocol addresses, host:port (9000 on a stock
	// server). The HTTP port does not work with ClickHouse 18.16.
	Addr []string `mapstructure:"addr"`
	// Database holds keyheat's tables; Open creates it when missing.
	Database string `mapstructure:"database"`
	// User and Password authenticate.
	User     string `mapstructure:"user"`
	Password string `mapstructure:"password"`
	// TLS, when set, encrypts every connection with it: the server's
	// tcp_port_secure (9440 on a stock server), never its plain
	// tcp_port. Nil connects in plain text. The config package builds it
	// from the clickhouse.tls keys; errors that say the server refused
	// it name those keys.
	TLS *tls.Config `mapstructure:"-"`
	// DialTimeout bounds connecting to a server.
	DialTimeout time.Duration `mapstructure:"dial_timeout"`

	// BatchRows flushes the buffer once it holds this many rows. A window
	// report is one row per listed key, partition, node, slot and advice
	// plus one; a hot-key event is one row.
	BatchRows int `mapstructure:"batch_rows"`
	// FlushInterval flushes rows that have waited this long, however few.
	FlushInterval time.Duration `mapstructure:"flush_interval"`
	// MaxBufferedRows bounds the rows held, waiting and being written,
	// while ClickHouse is slow or down. A write that would exceed it waits
	// (backpressure); nothing is ever dropped.
	MaxBufferedRows int `mapstructure:"max_buffered_rows"`
	// InsertTimeout bounds one insert, so a hung server turns into a retry.
	InsertTimeout time.Duration `mapstructure:"insert_timeout"`
	// RetryMin and RetryMax bound the exponential backoff between attempts
	// while inserts fail; each wait is jittered over its upper half.
	RetryMin time.Duration `mapstructure:"retry_min"`
	RetryMax time.Duration `mapstructure:"retry_max"`
	// RetentionDays drops rows older than this many days, on servers that
	// have TTL (ClickHouse 19.6 and later); 0 keeps everything. On older
	// servers it is logged and ignored.
	RetentionDays int `mapstructure:"retention_days"`
}

// DefaultOptions returns the defaults: a local server, database keyheat,
// batches of 10,000 rows or 1 s, at most 100,000 rows buffered.
func DefaultOptions() Options {
	return Options{
		Addr:            []string{"127.0.0.1:9000"},
		Database:        "keyheat",
		User:            "default",
		DialTimeout:     5 * time.Second,
		BatchRows:       10_000,
		FlushInterval:   time.Second,
		MaxBufferedRows: 100_000,
		InsertTimeout:   30 * time.Second,
		RetryMin:        100 * time.Millisecond,
		RetryMax:        10 * time.Second,
	}
}

var identRe = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// Validate reports every problem with o at once.
func (o Options) Validate() error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("clickhouse.%s: %s", key, fmt.Sprintf(format, args...)))
	}
	if len(o.Addr) == 0 {
		bad("addr", "must not be empty")
	}
	for _, a := range o.Addr {
		if a == "" {
			bad("addr", "empty address; want host:port")
		}
	}
	if !identRe.MatchString(o.Database) {
		bad("database", "%q must be letters, digits and underscores, not starting with a digit", o.Database)
	}
	if o.DialTimeout <= 0 {
		bad("dial_timeout", "must be positive, e.g. 5s")
	}
	if o.BatchRows <= 0 {
		bad("batch_rows", "must be positive, e.g. 10000")
	}
	if o.FlushInterval <= 0 {
		bad("flush_interval", "must be positive, e.g. 1s")
	}
	if o.MaxBufferedRows < o.BatchRows {
		bad("max_buffered_rows", "%d is below batch_rows %d; make it a few batches", o.MaxBufferedRows, o.BatchRows)
	}
	if o.InsertTimeout <= 0 {
		bad("insert_timeout", "must be positive, e.g. 30s")
	}
	if o.RetryMin <= 0 {
		bad("retry_min", "must be positive, e.g. 100ms")
	}
	if o.RetryMax < o.RetryMin {
		bad("retry_max", "%s is below retry_min %s", o.RetryMax, o.RetryMin)
	}
	if o.RetentionDays < 0 {
		bad("retention_days", "must be 0 (keep everything) or a number of days")
	}
	return errors.Join(errs...)
}
