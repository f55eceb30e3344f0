package testenv

import (
	"context"
	"errors"
	"syscall"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// dial opens a connection pool to addr. Each phase of the test below
// opens its own instead of relying on a short ConnMaxLifetime to re-dial
// after the restart: clickhouse-go's pool can deadlock in Close when its
// lifetime ticker fires at that moment (ClickHouse/clickhouse-go#1990), and
// a millisecond lifetime made that likely enough to hang a test run.
func dial(t *testing.T, addr string) driver.Conn {
	t.Helper()
	conn, err := clickhouse.Open(&clickhouse.Options{Addr: []string{addr}, DialTimeout: time.Second, MaxOpenConns: 1})
	if err != nil {
		t.Fatalf("open %s: %v", addr, err)
	}
	return conn
}

// TestPrivateClickHouseStopStart: a private server refuses connections
// while stopped and comes back on the same address with its tables.
func TestPrivateClickHouseStopStart(t *testing.T) {
	srv := PrivateClickHouse(t)
	if srv.Addr() == ClickHouseAddr(t) {
		t.Fatalf("private server on the shared server's address %s", srv.Addr())
	}
	ctx, cancel := context.WithTimeout(context.Background(), HangGuard)
	defer cancel()

	conn := dial(t, srv.Addr())
	if err := conn.Exec(ctx, "CREATE TABLE default.kept (a UInt8) ENGINE = TinyLog"); err != nil {
		t.Fatalf("create a table: %v", err)
	}
	_ = conn.Close()

	srv.Stop(t)
	conn = dial(t, srv.Addr())
	if err := conn.Ping(ctx); err == nil || !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("ping a stopped server: %v, want connection refused", err)
	}
	_ = conn.Close()

	srv.Start(t)
	conn = dial(t, srv.Addr())
	defer conn.Close()
	var n uint64
	if err := conn.QueryRow(ctx, "SELECT count() FROM system.tables WHERE database = 'default' AND name = 'kept'").Scan(&n); err != nil {
		t.Fatalf("query after the restart: %v", err)
	}
	if n != 1 {
		t.Fatalf("table kept: %d after the restart, want 1", n)
	}
}
