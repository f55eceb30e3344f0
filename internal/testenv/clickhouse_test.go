package testenv

import (
	"context"
	"errors"
	"syscall"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
)

// TestPrivateClickHouseStopStart: a private server refuses connections
// while stopped and comes back on the same address with its tables.
func TestPrivateClickHouseStopStart(t *testing.T) {
	srv := PrivateClickHouse(t)
	if srv.Addr() == ClickHouseAddr(t) {
		t.Fatalf("private server on the shared server's address %s", srv.Addr())
	}
	conn, err := clickhouse.Open(&clickhouse.Options{Addr: []string{srv.Addr()}, DialTimeout: time.Second,
		MaxOpenConns: 1, ConnMaxLifetime: time.Millisecond})
	if err != nil {
		t.Fatalf("open %s: %v", srv.Addr(), err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := conn.Exec(ctx, "CREATE TABLE default.kept (a UInt8) ENGINE = TinyLog"); err != nil {
		t.Fatalf("create a table: %v", err)
	}
	srv.Stop(t)
	time.Sleep(10 * time.Millisecond) // past ConnMaxLifetime: the next query dials
	if err := conn.Ping(ctx); err == nil || !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("ping a stopped server: %v, want connection refused", err)
	}
	srv.Start(t)
	var n uint64
	if err := conn.QueryRow(ctx, "SELECT count() FROM system.tables WHERE database = 'default' AND name = 'kept'").Scan(&n); err != nil {
		t.Fatalf("query after the restart: %v", err)
	}
	if n != 1 {
		t.Fatalf("table kept: %d after the restart, want 1", n)
	}
}
