package clickhouse

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	chgo "github.com/ClickHouse/clickhouse-go/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/keyheat/keyheat/internal/testenv"
	"github.com/keyheat/keyheat/schemas"
	chschema "github.com/keyheat/keyheat/schemas/clickhouse"
)

// fixtureBaseMs is 2026-01-02 23:59:55 UTC: the fixture's windows cross
// midnight, so they land in two daily partitions.
const fixtureBaseMs = 1767398395000

var fixtureApps = []string{"cart", "shop", "search"}

func migrationVersions(t *testing.T) []int {
	t.Helper()
	ms, err := chschema.Migrations()
	require.NoError(t, err)
	var vs []int
	for _, m := range ms {
		vs = append(vs, m.Version)
	}
	return vs
}

func dialDB(ctx context.Context, t *testing.T, db string) *Client {
	t.Helper()
	c, err := Connect(ctx, testOptions(testenv.ClickHouseAddr(t), db))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, c.Close()) })
	return c
}

func TestClickHouseMigrate(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), testenv.HangGuard)
	defer cancel()
	conn, db := testDB(t)
	c := dialDB(ctx, t, db)

	res, err := Migrate(ctx, c.conn, 0, nil)
	require.NoError(t, err)
	require.Equal(t, migrationVersions(t), res.Applied, "first start applies every migration")
	t.Logf("server version %s", res.ServerVersion)

	// Every column of every table is in the writer's column list, and
	// nothing else is: an INSERT names them all.
	for _, tb := range tables() {
		rows, err := conn.Query(ctx, "SELECT name FROM system.columns WHERE database = @db AND table = @t",
			chgo.Named("db", db), chgo.Named("t", tb.name))
		require.NoError(t, err)
		var cols []string
		for rows.Next() {
			var name string
			require.NoError(t, rows.Scan(&name))
			cols = append(cols, name)
		}
		require.NoError(t, rows.Err())
		require.NoError(t, rows.Close())
		require.ElementsMatch(t, cols, tb.columns, "columns of %s", tb.name)
	}
	var raw uint64
	require.NoError(t, conn.QueryRow(ctx, "SELECT count() FROM "+db+".keyheat_migrations").Scan(&raw))

	res, err = Migrate(ctx, c.conn, 0, nil)
	require.NoError(t, err)
	require.Empty(t, res.Applied, "second start applies nothing")
	var raw2 uint64
	require.NoError(t, conn.QueryRow(ctx, "SELECT count() FROM "+db+".keyheat_migrations").Scan(&raw2))
	require.Equal(t, raw, raw2, "second start records nothing")

	// Retention asks for TTL; 18.16 has none, so nothing is altered there.
	res, err = Migrate(ctx, c.conn, 30, nil)
	require.NoError(t, err)
	supports, err := chschema.SupportsTTL(res.ServerVersion)
	require.NoError(t, err)
	if supports {
		require.Len(t, res.TTLSet, len(chschema.Tables()), "a server with TTL gets it on every table")
	} else {
		require.Empty(t, res.TTLSet, "server %s has no TTL", res.ServerVersion)
	}

	// An applied migration whose file changed is refused.
	b, err := conn.PrepareBatch(ctx, "INSERT INTO "+db+".keyheat_migrations (version, name, checksum, applied_at)")
	require.NoError(t, err)
	require.NoError(t, b.Append(uint32(1), "tables", "edited", time.Now()))
	require.NoError(t, b.Send())
	_, err = Migrate(ctx, c.conn, 0, nil)
	require.ErrorContains(t, err, "must not change")
}

// TestClickHouseMigrateConcurrent starts several appliers at once on
// empty databases: all succeed, each migration is one logical record,
// and a later start applies nothing.
func TestClickHouseMigrateConcurrent(t *testing.T) {
	const appliers, rounds = 4, 3
	ctx, cancel := context.WithTimeout(t.Context(), testenv.HangGuard)
	defer cancel()
	conn := testenv.ClickHouseConn(t)
	for round := range rounds {
		db := testenv.ClickHouseDatabase(t, conn)
		clients := make([]*Client, appliers)
		for i := range clients {
			clients[i] = dialDB(ctx, t, db)
		}
		var wg sync.WaitGroup
		results := make([]MigrateResult, appliers)
		errs := make([]error, appliers)
		start := make(chan struct{})
		for i := range appliers {
			wg.Go(func() {
				<-start
				results[i], errs[i] = Migrate(ctx, clients[i].conn, 0, nil)
			})
		}
		close(start)
		wg.Wait()
		applied := 0
		for i := range appliers {
			require.NoError(t, errs[i], "round %d applier %d", round, i)
			applied += len(results[i].Applied)
		}
		require.GreaterOrEqual(t, applied, len(migrationVersions(t)), "round %d: someone applied each migration", round)

		var logical uint64
		require.NoError(t, conn.QueryRow(ctx, "SELECT count() FROM "+db+".keyheat_migrations FINAL").Scan(&logical))
		require.Equal(t, uint64(len(migrationVersions(t))), logical, "round %d: one logical record per migration", round)
		for _, tb := range tables() {
			var n uint64
			require.NoError(t, conn.QueryRow(ctx, "SELECT count() FROM system.tables WHERE database = @db AND name = @t",
				chgo.Named("db", db), chgo.Named("t", tb.name)).Scan(&n))
			require.Equal(t, uint64(1), n, "round %d: table %s", round, tb.name)
		}
		res, err := Migrate(ctx, clients[0].conn, 0, nil)
		require.NoError(t, err)
		require.Empty(t, res.Applied, "round %d: a start after the race applies nothing", round)
		t.Logf("round %d: %d appliers applied %d migrations in total", round, appliers, applied)
	}
}

func TestClickHouseWrite(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), testenv.HangGuard)
	defer cancel()
	conn, db := testDB(t)
	reg := prometheus.NewRegistry()
	w, err := Open(ctx, testOptions(testenv.ClickHouseAddr(t), db), Deps{Registerer: reg, Logger: testLogger(t)})
	require.NoError(t, err)
	defer func() { require.NoError(t, w.Close(ctx)) }()
	_, err = Open(ctx, testOptions(testenv.ClickHouseAddr(t), db), Deps{Registerer: reg})
	require.ErrorContains(t, err, "one writer per registry", "a second writer on the same registry")

	f := makeFixture(1, 12, fixtureApps, fixtureBaseMs)
	a := newAcks()
	n := writeAll(ctx, t, w, f, a, "first")
	a.wait(t, n)
	require.Empty(t, a.errs, "acks with errors")
	for id, k := range a.ok {
		require.Equal(t, 1, k, "item %s acknowledged %d times", id, k)
	}
	require.NoError(t, w.Ready())

	want := f.rows()
	final, _ := counts(ctx, t, conn, db)
	require.Equal(t, want, final, "logical rows per table after one write")
	require.Equal(t, float64(len(f.reports)), testutil.ToFloat64(w.m.items.WithLabelValues("report", "written")))
	require.Equal(t, float64(len(f.hot)), testutil.ToFloat64(w.m.items.WithLabelValues("hotkey", "written")))
	require.Zero(t, testutil.ToFloat64(w.m.bufferedRows), "nothing held once everything is acknowledged")

	// One report's row, field by field.
	r := f.reports[0]
	var (
		scope, app        string
		startMs, endMs    int64
		events, distinct  uint64
		maxMean, top1     float64
		topics, missing   []string
		complete, partial uint8
	)
	require.NoError(t, conn.QueryRow(ctx, "SELECT scope, app, start_ms, end_ms, events, distinct_keys, max_mean, top1_share, topics, missing, complete, partial FROM "+db+".reports FINAL WHERE id = @id",
		chgo.Named("id", r.ID)).Scan(&scope, &app, &startMs, &endMs, &events, &distinct, &maxMean, &top1, &topics, &missing, &complete, &partial))
	require.Equal(t, []any{r.Scope, r.App, r.StartMs, r.EndMs, r.Events, r.Distinct, r.Skew.MaxMean, r.Skew.Top1Share, r.Topics, []string{}, uint8(1), uint8(0)},
		[]any{scope, app, startMs, endMs, events, distinct, maxMean, top1, topics, missing, complete, partial})

	// What reports and keys say of their exactness.
	for _, r := range f.reports[:4] {
		var approximate uint8
		var guaranteed uint32
		require.NoError(t, conn.QueryRow(ctx, "SELECT approximate, guaranteed FROM "+db+".reports FINAL WHERE id = @id",
			chgo.Named("id", r.ID)).Scan(&approximate, &guaranteed))
		require.Equal(t, []any{boolByte(r.Approximate), uint32(r.Guaranteed)}, []any{approximate, guaranteed}, r.ID)
	}
	var shortKeys, wantShortKeys, shortHot, wantShortHot uint64
	for _, r := range f.current() {
		for _, l := range [][]schemas.KeyCount{r.Top, r.TopBytes, r.TopReads, r.TopWrites, r.TopLatency} {
			for _, k := range l {
				if k.Shortened {
					wantShortKeys++
				}
			}
		}
	}
	for _, h := range f.hot {
		if h.Shortened {
			wantShortHot++
		}
	}
	require.NoError(t, conn.QueryRow(ctx, "SELECT count() FROM "+db+".report_keys FINAL WHERE shortened = 1 AND (report_id, rev) IN (SELECT id, rev FROM "+db+".reports FINAL)").Scan(&shortKeys))
	require.NoError(t, conn.QueryRow(ctx, "SELECT count() FROM "+db+".hotkey_events FINAL WHERE shortened = 1").Scan(&shortHot))
	require.NotZero(t, wantShortKeys)
	require.NotZero(t, wantShortHot)
	require.Equal(t, []uint64{wantShortKeys, wantShortHot}, []uint64{shortKeys, shortHot}, "shortened keys and hot-key events")

	// The same items again: no new logical row.
	n2 := writeAll(ctx, t, w, f, a, "second")
	a.wait(t, n+n2)
	final2, raw2 := counts(ctx, t, conn, db)
	require.Equal(t, want, final2, "logical rows per table after writing everything twice")
	for tb, k := range raw2 {
		require.GreaterOrEqual(t, k, want[tb], "raw rows of %s", tb)
	}
	// Merged for good, the duplicates are gone from storage too.
	for _, tb := range tables() {
		require.NoError(t, conn.Exec(ctx, "OPTIMIZE TABLE "+db+"."+tb.name+" FINAL"))
	}
	_, raw3 := counts(ctx, t, conn, db)
	require.Equal(t, want, raw3, "rows per table after OPTIMIZE FINAL")
}

func TestClickHouseQueries(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), testenv.HangGuard)
	defer cancel()
	_, db := testDB(t)
	w, err := Open(ctx, testOptions(testenv.ClickHouseAddr(t), db), Deps{})
	require.NoError(t, err)
	f := makeFixture(2, 12, fixtureApps, fixtureBaseMs)
	a := newAcks()
	a.wait(t, writeAll(ctx, t, w, f, a, "q"))
	require.NoError(t, w.Close(ctx))
	c := dialDB(ctx, t, db)
	cur := f.current()

	sec := func(i int) time.Time { return time.UnixMilli(fixtureBaseMs + int64(i)*1000).UTC() }
	ranges := []struct {
		name string
		r    Range
	}{
		{"all", Range{sec(-5), sec(100)}},
		{"windows 1 to 5 (partials inside)", Range{sec(1), sec(6)}},
		{"one window", Range{sec(7), sec(8)}},
		{"sub-second bounds", Range{sec(3).Add(400 * time.Millisecond), sec(5).Add(999 * time.Millisecond)}},
		{"empty", Range{sec(50), sec(60)}},
	}
	for _, rg := range ranges {
		for _, app := range []string{"", "shop"} {
			t.Run(fmt.Sprintf("%s/app=%q", rg.name, app), func(t *testing.T) {
				for _, list := range keyLists {
					for _, limit := range []int{0, 3} {
						got, err := c.Top(ctx, TopQuery{Range: rg.r, App: app, List: list, Limit: limit})
						require.NoError(t, err)
						require.Equal(t, nonNilRows(expectTop(cur, rg.r, app, list, limit)), nonNilRows(got), "top list=%s limit=%d", list, limit)
					}
				}
				skew, err := c.Skew(ctx, ScopeQuery{Range: rg.r, App: app, Limit: 5})
				require.NoError(t, err)
				require.Equal(t, nonNilRows(expectSkew(cur, rg.r, app, 5)), nonNilRows(skew), "skew")
				parts, err := c.Partitions(ctx, ScopeQuery{Range: rg.r, App: app})
				require.NoError(t, err)
				require.Equal(t, nonNilRows(expectPartitions(cur, rg.r, app)), nonNilRows(parts), "partitions")
				nodes, err := c.Nodes(ctx, ScopeQuery{Range: rg.r, App: app})
				require.NoError(t, err)
				require.Equal(t, nonNilRows(expectNodes(cur, rg.r, app)), nonNilRows(nodes), "nodes")
				slots, err := c.Slots(ctx, ScopeQuery{Range: rg.r, App: app, Limit: 4})
				require.NoError(t, err)
				require.Equal(t, nonNilRows(expectSlots(cur, rg.r, app, 4)), nonNilRows(slots), "slots")
				for _, key := range []string{"key-00", "key-07", "absent"} {
					got, err := c.Key(ctx, KeyQuery{Range: rg.r, App: app, Key: key})
					require.NoError(t, err)
					require.Equal(t, nonNilRows(expectKey(cur, rg.r, app, key, KeyOrderRecent, 0)), nonNilRows(got), "key %s", key)
					n, err := c.KeyWindows(ctx, KeyQuery{Range: rg.r, App: app, Key: key, Limit: 1})
					require.NoError(t, err)
					require.Equal(t, uint64(len(expectKey(cur, rg.r, app, key, KeyOrderRecent, 1<<30))), n, "key %s: windows without a limit", key)
					for _, order := range KeyOrders() {
						got, err := c.Key(ctx, KeyQuery{Range: rg.r, App: app, Key: key, Order: order, Limit: 3})
						require.NoError(t, err)
						require.Equal(t, nonNilRows(expectKey(cur, rg.r, app, key, order, 3)), nonNilRows(got), "key %s order %s", key, order)
					}
				}
				for _, key := range []string{"", "key-00", "absent"} {
					got, err := c.Alerts(ctx, AlertsQuery{Range: rg.r, App: app, Key: key})
					require.NoError(t, err)
					require.Equal(t, nonNilRows(expectAlerts(f, rg.r, app, key)), nonNilRows(got), "alerts key=%q", key)
				}
			})
		}
	}
	// The answer to "what was hottest" must not be empty by accident.
	top, err := c.Top(ctx, TopQuery{Range: ranges[0].r, Limit: 1})
	require.NoError(t, err)
	require.Len(t, top, 1)

	_, err = c.Top(ctx, TopQuery{Range: ranges[0].r, List: "nope"})
	require.ErrorContains(t, err, "list")
	_, err = c.Skew(ctx, ScopeQuery{Range: Range{sec(5), sec(5)}})
	require.ErrorContains(t, err, "must be after")
	_, err = c.Key(ctx, KeyQuery{Range: ranges[0].r})
	require.ErrorContains(t, err, "name the key")
	_, err = c.Key(ctx, KeyQuery{Range: ranges[0].r, Key: "k", Order: "oldest"})
	require.ErrorContains(t, err, `order "oldest": want recent or busiest`)

	// A key with quotes and backslashes reaches the server as a value.
	got, err := c.Key(ctx, KeyQuery{Range: ranges[0].r, Key: `x' OR 1=1 --\'`})
	require.NoError(t, err)
	require.Empty(t, got)
}

func nonNilRows[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

func inRange(r Range, startMs int64) bool {
	s := startMs / 1000
	return s >= r.From.Unix() && s < r.To.Unix()
}
