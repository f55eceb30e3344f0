package clickhouse

import (
	"context"
	"errors"
	"fmt"

	chgo "github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// dial opens a native-protocol connection pool to database (empty for
// the user's default database) and pings it. Native, not HTTP: ClickHouse
// 18.16 rejects the settings clickhouse-go sends over HTTP.
func dial(ctx context.Context, opts Options, database string) (driver.Conn, error) {
	conn, err := open(opts, database)
	if err != nil {
		return nil, err
	}
	if err := conn.Ping(ctx); err != nil {
		var ex *chgo.Exception
		if errors.As(err, &ex) { // the server answered: its own words say what is wrong
			return nil, errors.Join(fmt.Errorf("clickhouse %v: %w", opts.Addr, err), conn.Close())
		}
		return nil, errors.Join(fmt.Errorf("ping clickhouse %v (is it running, and is that its native port?): %w", opts.Addr, err),
			conn.Close())
	}
	return conn, nil
}

// OpenPool opens a native-protocol connection pool to opts.Database, as
// the sink's own, without contacting the server: a reader that must not
// fail at start when ClickHouse is down (the operator API's history)
// finds out query by query. The caller closes it.
func OpenPool(opts Options) (driver.Conn, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	return open(opts, opts.Database)
}

func open(opts Options, database string) (driver.Conn, error) {
	conn, err := chgo.Open(&chgo.Options{
		Protocol: chgo.Native,
		Addr:     opts.Addr,
		Auth: chgo.Auth{
			Database: database,
			Username: opts.User,
			Password: opts.Password,
		},
		DialTimeout: opts.DialTimeout,
		// LZ4, as clickhouse-client uses by default: report rows are
		// repetitive text (ids, apps, keys), which LZ4 shrinks cheaply
		// on the way to a server across a network.
		Compression: &chgo.Compression{Method: chgo.CompressionLZ4},
	})
	if err != nil {
		return nil, fmt.Errorf("open clickhouse %v: %w", opts.Addr, err)
	}
	return conn, nil
}

// connect opens a pool whose default database is opts.Database, where the
// tables live and the documented queries, which name tables unqualified,
// run.
func connect(ctx context.Context, opts Options) (driver.Conn, error) {
	return dial(ctx, opts, opts.Database)
}

// ensureDatabase creates opts.Database when it is missing. It asks first,
// so a user allowed to use an existing database but not to create one
// gets through.
func ensureDatabase(ctx context.Context, opts Options) (err error) {
	conn, err := dial(ctx, opts, "")
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, conn.Close()) }()
	var n uint64
	if err := conn.QueryRow(ctx, "SELECT count() FROM system.databases WHERE name = @db",
		chgo.Named("db", opts.Database)).Scan(&n); err != nil {
		return fmt.Errorf("look up clickhouse database %s: %w", opts.Database, err)
	}
	if n > 0 {
		return nil
	}
	// Database passed Validate: letters, digits and underscores only.
	if err := conn.Exec(ctx, "CREATE DATABASE IF NOT EXISTS `"+opts.Database+"`"); err != nil {
		return fmt.Errorf("create clickhouse database %s: %w", opts.Database, err)
	}
	return nil
}
