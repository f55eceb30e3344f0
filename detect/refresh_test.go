package detect_test

import (
	"context"
	"testing"
	"time"

	chgo "github.com/ClickHouse/clickhouse-go/v2"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/keyheat/keyheat/internal/testenv"
	"github.com/keyheat/keyheat/pipeline"
	"github.com/keyheat/keyheat/schemas"
	"github.com/keyheat/keyheat/sink/clickhouse"
)

// refreshInput is a keyed topic's traffic: a URL at 1,500 requests/s for
// 20 s from second 2, under the default 1,000/s rule, beside a quiet
// background, then 10 s of background alone. It returns the records and
// the URL's event times.
func refreshInput(topic string, baseMs int64) ([]*kgo.Record, []int64) {
	var recs []*kgo.Record
	var hot []int64
	add := func(key string, tsMs int64) {
		e := schemas.AccessEvent{TimeMs: tsMs, Key: key, App: "web", Op: "GET", Bytes: 512}
		recs = append(recs, &kgo.Record{Topic: topic, Partition: 0, Key: []byte(key), Value: schemas.AppendJSON(nil, &e)})
	}
	for ms := range int64(32_000) {
		if ms%10 == 0 {
			add("/p/"+string(rune('a'+ms/10%20)), baseMs+ms)
		}
		if ms >= 2000 && ms < 22_000 {
			// 1,500/s: three events every two milliseconds.
			for range 1 + ms%2 {
				add("/checkout", baseMs+ms)
				hot = append(hot, baseMs+ms)
			}
		}
	}
	return recs, hot
}

// TestRegistryRefreshAndTombstone: what the registry topic and ClickHouse
// (the real 18.16 server) hold for the URL at 1,500/s: its hot at the
// crossing, about the rule's 1,000/s; a window later an update with its
// rate, exactly its events in the rule window ending at the update's
// slot boundary; nothing more while it stays at that rate; its cooled
// with the episode's peak; then, last on the topic, the key's tombstone.
// ClickHouse has the same events, tombstone aside.
func TestRegistryRefreshAndTombstone(t *testing.T) {
	testenv.EachBroker(t, func(t *testing.T, seeds []string) {
		e := newEnv(t, seeds, 1)
		base := time.Now().Add(-time.Hour).Truncate(time.Second).UnixMilli()
		recs, hotTimes := refreshInput(e.events, base)
		produce(t, e.seeds, recs...)

		conn := testenv.ClickHouseConn(t)
		db := testenv.ClickHouseDatabase(t, conn)
		ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard)
		defer cancel()
		chOpts := clickhouse.DefaultOptions()
		chOpts.Addr, chOpts.Database, chOpts.FlushInterval = []string{testenv.ClickHouseAddr(t)}, db, 50*time.Millisecond
		ch, err := clickhouse.Open(ctx, chOpts, clickhouse.Deps{Logger: testLogger(t)})
		require.NoError(t, err)
		defer func() { require.NoError(t, ch.Close(context.Background())) }()

		cfg := e.config(t)
		p := pipeline.DefaultOptions() // 1,000 events/s over 1 s; refresh at ±25 %
		p.Lateness, p.IdleTimeout = 0, time.Hour
		p.Detect.CoolDown = 3 * time.Second
		cfg.Pipeline, cfg.ClickHouse = p, ch
		runToEnd(t, cfg)

		all := readAll(t, e.seeds, e.hotkeys)
		key := string(schemas.HotKeyRecordKey("web", "/checkout"))
		var mine []*kgo.Record
		for _, r := range all {
			if string(r.Key) == key {
				mine = append(mine, r)
			}
		}
		evs := registryEvents(t, mine)
		require.NotEmpty(t, mine)
		require.Nil(t, mine[len(mine)-1].Value, "the key's last record is its tombstone")
		require.GreaterOrEqual(t, len(evs), 3, "%+v", evs)
		hot, up, cooled := evs[0], evs[1], evs[len(evs)-1]
		require.Equal(t, schemas.HotKeyHot, hot.Type)
		require.InDelta(t, 1000, hot.Rate, 2, "the crossing's rate")
		require.Equal(t, schemas.HotKeyUpdate, up.Type)
		atMs := updateAt(t, &up)
		var n int
		for _, ts := range hotTimes {
			if ts >= atMs-1000 && ts < atMs {
				n++
			}
		}
		require.Equal(t, float64(n), up.Rate, "the URL's events over [at − 1 s, at)")
		require.Equal(t, 1500.0, up.Rate)
		require.Equal(t, 1500.0, up.PeakRate)
		require.Equal(t, hot.OnsetMs, up.OnsetMs)
		for _, h := range evs[2 : len(evs)-1] {
			require.Greater(t, updateAt(t, &h), base+22_000, "an update while the URL stayed at 1,500/s: %+v", h)
		}
		require.Equal(t, schemas.HotKeyCooled, cooled.Type)
		require.Equal(t, 1500.0, cooled.PeakRate)

		type row struct {
			ID       string  `ch:"id"`
			Type     string  `ch:"type"`
			Rate     float64 `ch:"rate"`
			PeakRate float64 `ch:"peak_rate"`
		}
		var rows []row
		require.NoError(t, conn.Select(ctx, &rows, "SELECT id, toString(type) AS type, rate, peak_rate FROM "+db+
			".hotkey_events FINAL WHERE key = @k ORDER BY onset_ms, type, id", chgo.Named("k", "/checkout")))
		var want []row
		for _, h := range evs {
			want = append(want, row{h.ID, h.Type, h.Rate, h.PeakRate})
		}
		require.Equal(t, want, rows, "ClickHouse holds the registry's events, updates included")
	})
}
