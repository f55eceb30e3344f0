package testenv

import (
	"context"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// ClickHouseConn opens a native-protocol connection pool to the real
// ClickHouse server named by KEYHEAT_TEST_CLICKHOUSE (skipping or failing
// the test as [ClickHouseAddr] does when it is unset), checks it with a
// ping, and closes it when the test ends.
//
// Native, not HTTP: the Debian ClickHouse (18.16) used here rejects the
// settings clickhouse-go sends over HTTP.
func ClickHouseConn(t testing.TB) driver.Conn {
	t.Helper()
	addr := ClickHouseAddr(t)
	conn, err := clickhouse.Open(&clickhouse.Options{
		Protocol:    clickhouse.Native,
		Addr:        []string{addr},
		Auth:        clickhouse.Auth{Username: "default"},
		DialTimeout: 5 * time.Second,
	})
	if err != nil {
		t.Fatalf("open clickhouse %s: %v", addr, err)
	}
	t.Cleanup(func() {
		if err := conn.Close(); err != nil {
			t.Errorf("close clickhouse %s: %v", addr, err)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
	defer cancel()
	if err := conn.Ping(ctx); err != nil {
		t.Fatalf("ping clickhouse %s: %v (is it running? scripts/services.sh status)", addr, err)
	}
	return conn
}

// ClickHouseDatabase creates a database with a name unique to this test run
// and drops it, with everything in it, when the test ends. Register it after
// ClickHouseConn (cleanups run in reverse), as calling it with that
// connection does naturally.
func ClickHouseDatabase(t testing.TB, conn driver.Conn) string {
	t.Helper()
	db := UniqueName(t, "keyheat")
	ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
	defer cancel()
	if err := conn.Exec(ctx, "CREATE DATABASE "+db); err != nil {
		t.Fatalf("create database %s: %v", db, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
		defer cancel()
		if err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+db); err != nil {
			t.Errorf("drop database %s: %v", db, err)
		}
	})
	return db
}
