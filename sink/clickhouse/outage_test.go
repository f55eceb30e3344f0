package clickhouse

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/keyheat/keyheat/internal/testenv"
	"github.com/keyheat/keyheat/schemas"
)

// tlog sends a writer's log to the test log.
type tlog struct{ t *testing.T }

func (l tlog) Write(p []byte) (int, error) {
	l.t.Helper()
	l.t.Log(string(p))
	return len(p), nil
}

func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(tlog{t}, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

// outageDowntime is how long TestClickHouseOutage keeps ClickHouse down.
const outageDowntime = 20 * time.Second

// TestClickHouseOutage kills the test's own ClickHouse server in the
// middle of a run, keeps it down for outageDowntime while the producer
// keeps writing, and starts it again. Afterwards every item is in
// ClickHouse exactly once and acknowledged exactly once, the writer never
// held more rows than its bound (the producer waited instead), and its
// readiness went degraded and came back.
func TestClickHouseOutage(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), testenv.HangGuard)
	defer cancel()
	srv := startPrivateServer(t)
	opts := testOptions(srv.addr(), "keyheat_outage")
	opts.BatchRows = 200
	opts.MaxBufferedRows = 1_000
	opts.InsertTimeout = 2 * time.Second
	opts.DialTimeout = time.Second
	opts.RetryMax = time.Second
	reg := prometheus.NewRegistry()
	w, err := Open(ctx, opts, Deps{Logger: testLogger(t), Registerer: reg})
	require.NoError(t, err)

	f := makeFixture(3, 60, fixtureApps, fixtureBaseMs)
	type entry struct {
		id    string
		write func(AckFunc) error
	}
	var items []entry
	totalRows := 0
	for i, r := range f.reports {
		items = append(items, entry{fmt.Sprintf("r%d/%s", i, r.ID), func(a AckFunc) error { return w.WriteReport(ctx, r, a) }})
		it, err := newReportItem(r, nil)
		require.NoError(t, err)
		totalRows += it.rows
	}
	for _, h := range f.hot {
		items = append(items, entry{"h/" + h.ID, func(a AckFunc) error { return w.WriteHotKey(ctx, h, a) }})
		totalRows++
	}
	require.Greater(t, totalRows, 3*opts.MaxBufferedRows, "the outage must fill the buffer")

	a := newAcks()
	before := len(items) / 4
	for _, e := range items[:before] {
		require.NoError(t, e.write(a.fn(e.id)))
	}
	a.wait(t, before)
	require.NoError(t, w.Ready())

	// Watch readiness while the server is down and after.
	var degraded, maxHeld atomic.Int64
	stopWatch := make(chan struct{})
	var watch sync.WaitGroup
	watch.Go(func() {
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stopWatch:
				return
			case <-tick.C:
			}
			if w.Ready() != nil {
				degraded.Add(1)
			}
			if h := int64(w.HeldRows()); h > maxHeld.Load() {
				maxHeld.Store(h)
			}
		}
	})

	srv.kill()
	var produced sync.WaitGroup
	var produceErr error
	produced.Go(func() {
		for _, e := range items[before:] {
			if produceErr = e.write(a.fn(e.id)); produceErr != nil {
				return
			}
		}
	})
	time.Sleep(outageDowntime)
	downAcks := func() int { a.mu.Lock(); defer a.mu.Unlock(); return a.n }()
	srv.start()
	produced.Wait()
	require.NoError(t, produceErr)
	a.wait(t, len(items))
	close(stopWatch)
	watch.Wait()
	require.NoError(t, w.Ready(), "ready again once ClickHouse is back")
	require.NoError(t, w.Close(ctx))

	require.Less(t, downAcks, len(items), "items were still unacknowledged when the server came back")
	require.Empty(t, a.errs, "acks with errors")
	for _, e := range items {
		require.Equal(t, 1, a.ok[e.id], "acks of %s", e.id)
	}
	require.Positive(t, degraded.Load(), "readiness never reported the outage")
	require.LessOrEqual(t, w.PeakRows(), opts.MaxBufferedRows, "rows held at the peak")
	require.LessOrEqual(t, maxHeld.Load(), int64(opts.MaxBufferedRows))
	require.Positive(t, testutil.ToFloat64(w.m.waitSeconds), "writes never waited for room")
	require.Positive(t, sumCounter(t, reg, "keyheat_clickhouse_insert_failures_total"), "failed inserts counted")
	n, err := testutil.GatherAndCount(reg, "keyheat_clickhouse_write_wait_seconds_total", "keyheat_clickhouse_ready",
		"keyheat_clickhouse_buffered_rows", "keyheat_clickhouse_rows_written_total")
	require.NoError(t, err)
	require.Positive(t, n, "metrics exported through the registry")

	conn, err := dial(ctx, opts, opts.Database)
	require.NoError(t, err)
	defer func() { require.NoError(t, conn.Close()) }()
	want := f.rows()
	for _, tb := range tables() {
		var n, ids uint64
		require.NoError(t, conn.QueryRow(ctx, "SELECT count(), uniqExact(id) FROM "+tb.name+" FINAL").Scan(&n, &ids))
		require.Equal(t, uint64(want[tb.name]), n, "logical rows of %s", tb.name)
		require.Equal(t, n, ids, "distinct ids of %s", tb.name)
	}
	var hotIDs []string
	for _, h := range f.hot {
		hotIDs = append(hotIDs, h.ID)
	}
	var got []string
	rows, err := conn.Query(ctx, "SELECT id FROM hotkey_events FINAL")
	require.NoError(t, err)
	for rows.Next() {
		var id string
		require.NoError(t, rows.Scan(&id))
		got = append(got, id)
	}
	require.NoError(t, rows.Err())
	require.NoError(t, rows.Close())
	require.ElementsMatch(t, hotIDs, got, "hot-key events in ClickHouse")
}

// TestClickHouseCloseWhileDown closes a writer whose server is gone:
// writes beyond the bound wait until their ctx ends, Close gives up when
// its ctx ends and acknowledges every held item with ErrClosed, and the
// writer refuses everything afterwards.
func TestClickHouseCloseWhileDown(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), testenv.HangGuard)
	defer cancel()
	srv := startPrivateServer(t)
	opts := testOptions(srv.addr(), "keyheat_close")
	opts.BatchRows = 50
	opts.MaxBufferedRows = 100
	opts.InsertTimeout = time.Second
	opts.DialTimeout = 500 * time.Millisecond
	w, err := Open(ctx, opts, Deps{Logger: testLogger(t)})
	require.NoError(t, err)
	srv.kill()

	a := newAcks()
	hot := func(i int) *schemas.HotKeyEvent {
		return &schemas.HotKeyEvent{Version: 1, ID: fmt.Sprintf("h%d", i), Type: schemas.HotKeyHot, App: "a",
			Key: fmt.Sprint(i), OnsetMs: fixtureBaseMs}
	}
	for i := range opts.MaxBufferedRows {
		require.NoError(t, w.WriteHotKey(ctx, hot(i), a.fn(fmt.Sprint(i))))
	}
	short, cancelShort := context.WithTimeout(ctx, 200*time.Millisecond)
	err = w.WriteHotKey(short, hot(-1), a.fn("over"))
	cancelShort()
	require.ErrorIs(t, err, context.DeadlineExceeded, "a write beyond the bound waits for its ctx")

	blocked := make(chan error)
	go func() { blocked <- w.WriteHotKey(ctx, hot(-2), a.fn("blocked")) }()

	for w.Ready() == nil {
		select {
		case <-ctx.Done():
			t.Fatal("readiness never reported the dead server")
		case <-time.After(10 * time.Millisecond):
		}
	}
	require.ErrorContains(t, w.Ready(), "failing since")

	closeCtx, cancelClose := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancelClose()
	err = w.Close(closeCtx)
	require.ErrorContains(t, err, fmt.Sprintf("%d items not written", opts.MaxBufferedRows))
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.ErrorIs(t, <-blocked, ErrClosed, "a write waiting for room when Close starts")

	require.Equal(t, opts.MaxBufferedRows, a.n, "every held item acknowledged")
	require.Empty(t, a.ok, "nothing acknowledged as written")
	for id, e := range a.errs {
		require.ErrorIs(t, e, ErrClosed, "ack of %s", id)
	}
	require.Equal(t, err, w.Close(ctx), "a second Close returns the first's result")
	require.ErrorIs(t, w.WriteHotKey(ctx, hot(1), nil), ErrClosed)
	require.ErrorIs(t, w.Ready(), ErrClosed)
}

// sumCounter sums a counter family over its labels.
func sumCounter(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() == name {
			for _, m := range mf.GetMetric() {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}
