package clickhouse

import (
	"context"
	"testing"
	"time"

	chgo "github.com/ClickHouse/clickhouse-go/v2"
	"github.com/stretchr/testify/require"

	"github.com/keyheat/keyheat/internal/testenv"
	"github.com/keyheat/keyheat/schemas"
	chschema "github.com/keyheat/keyheat/schemas/clickhouse"
)

// TestClickHouseUpdatesAfterUpgrade: a database at migration 3 holding a
// hot-key row is upgraded (migration 4 adds 'update' to the type and a
// peak_rate column, twice over, as two instances starting at once may);
// the old row reads back as it was, peak_rate 0; an episode's hot, two
// updates and cooled are then stored and the alerts query lists them in
// order, hot and updates sharing the onset, with their rates and peaks.
func TestClickHouseUpdatesAfterUpgrade(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), testenv.HangGuard)
	defer cancel()
	conn, db := testDB(t)
	c := dialDB(ctx, t, db)

	migrations, err := chschema.Migrations()
	require.NoError(t, err)
	require.NoError(t, execIdempotent(ctx, c.conn, chschema.MigrationsTableDDL))
	var v4 chschema.Migration
	for _, m := range migrations {
		if m.Version > 3 {
			if m.Version == 4 {
				v4 = m
			}
			continue
		}
		for _, s := range m.Statements {
			require.NoError(t, execIdempotent(ctx, c.conn, s), "migration %d", m.Version)
		}
		require.NoError(t, recordMigration(ctx, c.conn, m))
	}
	require.Equal(t, "refresh", v4.Name)

	// A row as a version-3 writer inserted it.
	old := &schemas.HotKeyEvent{ID: schemas.HotKeyID("t", 1, "r", schemas.HotKeyHot, "shop", "old", fixtureBaseMs),
		Type: schemas.HotKeyHot, App: "shop", Key: "old", Rule: "r", Rate: 1200, Threshold: 1000, Count: 1200,
		WindowMs: 1000, Topic: "t", Partition: 1, OnsetMs: fixtureBaseMs, DetectedMs: fixtureBaseMs + 5}
	b, err := c.conn.PrepareBatch(ctx, "INSERT INTO hotkey_events (id, type, app, key, key_hash, rule, rate, threshold, events, "+
		"window_ms, topic, partition, onset, onset_ms, detected_ms, reads, writes, bytes, mitigation, split, shortened, partitions, error)")
	require.NoError(t, err)
	require.NoError(t, b.Append(old.ID, old.Type, old.App, old.Key, "", old.Rule, old.Rate, old.Threshold, old.Count,
		old.WindowMs, old.Topic, old.Partition, secondOf(old.OnsetMs), old.OnsetMs, old.DetectedMs, uint64(0), uint64(0),
		uint64(0), "local_cache", uint32(0), uint8(0), []int32{}, uint64(0)))
	require.NoError(t, b.Send())

	res, err := Migrate(ctx, c.conn, 0, nil)
	require.NoError(t, err)
	require.Equal(t, []int{4}, res.Applied)
	for _, s := range v4.Statements { // a second instance that applied it at the same time
		require.NoError(t, execIdempotent(ctx, c.conn, s), s)
	}
	t.Logf("upgraded on ClickHouse %s", res.ServerVersion)

	w, err := Open(ctx, testOptions(testenv.ClickHouseAddr(t), db), Deps{Logger: testLogger(t)})
	require.NoError(t, err)
	defer func() { require.NoError(t, w.Close(context.Background())) }()
	onset := int64(fixtureBaseMs + 2000)
	ev := func(typ string, atMs int64, rate, peak float64, split int) *schemas.HotKeyEvent {
		h := &schemas.HotKeyEvent{Version: schemas.HotKeyVersion, ID: schemas.HotKeyID("t", 2, "r", typ, "shop", "url:/checkout", atMs),
			Type: typ, App: "shop", Key: "url:/checkout", Rule: "r", Rate: rate, PeakRate: peak, Threshold: 1000,
			Count: uint64(rate), WindowMs: 1000, Topic: "t", Partition: 2, OnsetMs: onset, DetectedMs: atMs + 7}
		if typ == schemas.HotKeyCooled {
			h.OnsetMs = atMs
		} else {
			h.Mitigation = &schemas.Mitigation{Kind: schemas.MitigationSplit, Split: split}
		}
		return h
	}
	episode := []*schemas.HotKeyEvent{
		ev(schemas.HotKeyHot, onset, 1000, 1000, 2),
		ev(schemas.HotKeyUpdate, onset+1100, 1502, 1502, 2),
		ev(schemas.HotKeyUpdate, onset+9300, 3100, 3100, 4),
		ev(schemas.HotKeyCooled, onset+30_000, 0, 3100, 0),
	}
	a := newAcks()
	for i := len(episode) - 1; i >= 0; i-- { // in any order: the query orders them
		h := episode[i]
		require.NoError(t, w.WriteHotKey(ctx, h, a.fn(h.ID)))
	}
	a.wait(t, len(episode))
	require.Empty(t, a.errs)

	var typ string
	var peak float64
	require.NoError(t, conn.QueryRow(ctx, "SELECT toString(type), peak_rate FROM "+db+".hotkey_events FINAL WHERE id = @id",
		chgo.Named("id", old.ID)).Scan(&typ, &peak))
	require.Equal(t, []any{"hot", 0.0}, []any{typ, peak}, "the row from before the upgrade")

	rows, err := c.Alerts(ctx, AlertsQuery{Range: Range{From: time.UnixMilli(fixtureBaseMs), To: time.UnixMilli(fixtureBaseMs + 60_000)}})
	require.NoError(t, err)
	var got [][]any
	for _, r := range rows {
		got = append(got, []any{r.Type, r.Key, r.OnsetMs, r.Rate, r.PeakRate, r.Split})
	}
	require.Equal(t, [][]any{
		{"hot", "old", int64(fixtureBaseMs), 1200.0, 0.0, uint32(0)},
		{"hot", "url:/checkout", onset, 1000.0, 1000.0, uint32(2)},
		{"update", "url:/checkout", onset, 1502.0, 1502.0, uint32(2)},
		{"update", "url:/checkout", onset, 3100.0, 3100.0, uint32(4)},
		{"cooled", "url:/checkout", onset + 30_000, 0.0, 3100.0, uint32(0)},
	}, got)
}
