package testenv

import (
	"context"
	"strconv"
	"sync"
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

// ClickHouseServer is a ClickHouse server of a test's own that the test can
// stop and start again, keeping its data and its address: for tests of
// what keyheat does while ClickHouse is away. It is removed, data and
// all, when the test ends.
type ClickHouseServer struct {
	addr    string
	run     func(t testing.TB, what string)
	mu      sync.Mutex
	running bool
}

// Addr returns the server's native-protocol address, host:port.
func (s *ClickHouseServer) Addr() string { return s.addr }

// Stop stops the server (TERM, then KILL after half a minute); clients get
// connection refused until Start.
func (s *ClickHouseServer) Stop(t testing.TB) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.running {
		s.run(t, "clickhouse-stop")
		s.running = false
	}
}

// Start starts the stopped server again on the same address with the data
// it had, and returns once it answers a query.
func (s *ClickHouseServer) Start(t testing.TB) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.running {
		s.run(t, "clickhouse-start")
		s.running = true
	}
}

// PrivateClickHouse starts a ClickHouse server of the test's own, with
// scripts/services.sh (clickhouse-up) on ports no other test uses and a
// run folder of its own, so stopping it disturbs nothing else: never stop
// the shared server. Like [ClickHouseAddr] it skips the test when
// KEYHEAT_TEST_CLICKHOUSE is unset (fails under CI=true): a machine with
// the shared server has the clickhouse-server binary this one runs. A
// start takes about a second.
func PrivateClickHouse(t testing.TB) *ClickHouseServer {
	t.Helper()
	Require(t, EnvClickHouse)
	// services.sh places the native port at 19000, HTTP at 18123 and the
	// interserver port at 19009, plus an offset.
	off := freeOffset(t, 19000, 18123, 19009)
	s := &ClickHouseServer{addr: "127.0.0.1:" + strconv.Itoa(19000+off), run: servicesRunner(t, off)}
	s.run(t, "clickhouse-up")
	s.running = true
	t.Cleanup(func() { s.run(t, "clickhouse-down") })
	return s
}
