package chsource_test

import (
	"context"
	"fmt"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/keyheat/keyheat/controlplane"
	"github.com/keyheat/keyheat/controlplane/chsource"
	"github.com/keyheat/keyheat/internal/testenv"
	"github.com/keyheat/keyheat/schemas"
	sinkch "github.com/keyheat/keyheat/sink/clickhouse"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// hangGuard bounds every wait; tests wait for conditions, not durations.
const hangGuard = testenv.HangGuard

// baseMs is the first window's start: 2026-01-01T00:00:00Z.
const baseMs = 1767225600000

// store is a fresh database on the real ClickHouse, its tables made by
// the real sink's migrations, a writer into it and a Source reading it.
type store struct {
	t   *testing.T
	w   *sinkch.Writer
	src *chsource.Source
}

func newStore(t *testing.T) *store {
	t.Helper()
	conn := testenv.ClickHouseConn(t)
	db := testenv.ClickHouseDatabase(t, conn)
	opts := sinkch.DefaultOptions()
	opts.Addr = []string{testenv.ClickHouseAddr(t)}
	opts.Database = db
	opts.FlushInterval = 10 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	w, err := sinkch.Open(ctx, opts, sinkch.Deps{})
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
		defer cancel()
		require.NoError(t, w.Close(ctx))
	})
	src, err := chsource.New(chsource.Config{Conn: conn, Database: db, QueryTimeout: hangGuard})
	require.NoError(t, err)
	return &store{t: t, w: w, src: src}
}

// write writes reports and events through the sink and returns once
// ClickHouse holds them all (every ack came, without an error).
func (s *store) write(reports []*schemas.WindowReport, events []*schemas.HotKeyEvent) {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, len(reports)+len(events))
	ack := func(err error) { errs <- err; wg.Done() }
	for _, r := range reports {
		wg.Add(1)
		require.NoError(s.t, s.w.WriteReport(ctx, r, ack))
	}
	for _, e := range events {
		wg.Add(1)
		require.NoError(s.t, s.w.WriteHotKey(ctx, e, ack))
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(s.t, err)
	}
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), hangGuard)
	t.Cleanup(cancel)
	return c
}

// report is a window report of scope (app for ScopeApp) for window w,
// with every field the tables store set, and those they do not (Floor,
// BytesError, Ranges, advice Threshold) set too, to be cleared by
// unstored.
func report(scope, app string, w int, keys ...string) *schemas.WindowReport {
	start := baseMs + int64(w)*1000
	r := &schemas.WindowReport{Version: schemas.ReportVersion, ID: schemas.WindowReportID(scope, app, start),
		Scope: scope, App: app, StartMs: start, EndMs: start + 1000, Topics: []string{"keyheat.events"},
		Events: 1000 + uint64(w), Bytes: 50_000, Reads: 700, Writes: 300, LatencyUs: 9_000, Late: 2,
		Distinct: 40, Keyed: true, Floor: 7, Guaranteed: 1, Approximate: true,
		Skew: schemas.Skew{
			Partitions: []schemas.PartitionLoad{{Topic: "keyheat.events", Partition: 0, Events: 600, Bytes: 30_000, Share: 0.6},
				{Topic: "keyheat.events", Partition: 1, Events: 400, Bytes: 20_000, Share: 0.4}},
			MaxMean: 1.2, Gini: 0.1, Top1Share: 0.3, Top10Share: 0.9,
			Nodes: []schemas.NodeLoad{{Node: "a", FirstSlot: 0, LastSlot: 8191, Events: 500, Share: 0.5,
				Ranges: []schemas.SlotRange{{First: 0, Last: 8191}}},
				{Node: "b", FirstSlot: 8192, LastSlot: 16383, Events: 500, Share: 0.5}},
			NodeMaxMean: 1, NodeGini: 0.01,
			HotSlots: []schemas.SlotCount{{Slot: 77, Events: 300}, {Slot: 5, Events: 100}},
		}}
	keyApp := app
	if scope == schemas.ScopeCluster {
		keyApp = "shop"
	}
	for i, k := range keys {
		kc := schemas.KeyCount{App: keyApp, Key: k, Count: uint64(300 - 10*i + w), Error: uint64(i), Bytes: uint64(1000 * (i + 1)),
			Reads: uint64(200 - i), Writes: uint64(100 + i), LatencyUs: uint64(500 * (i + 1)), Partition: int32(i % 2),
			Share: float64(300-10*i) / 1000, BytesError: 3}
		r.Top = append(r.Top, kc)
		if i < 2 {
			r.TopBytes = append([]schemas.KeyCount{kc}, r.TopBytes...)
			r.TopReads = append(r.TopReads, kc)
		}
	}
	if len(keys) > 0 {
		r.Advice = []schemas.KeyAdvice{{App: keyApp, Key: keys[0], Rate: 290, Threshold: 100, ReadShare: 0.66,
			Mitigation: schemas.Mitigation{Kind: schemas.MitigationLocalCache}}}
	}
	return r
}

// unstored is r as ClickHouse gives it back: without the fields no table
// stores (see the package comment).
func unstored(r *schemas.WindowReport) *schemas.WindowReport {
	c := *r
	c.Floor = 0
	clear := func(l []schemas.KeyCount) []schemas.KeyCount {
		out := make([]schemas.KeyCount, len(l))
		for i, k := range l {
			k.BytesError = 0
			out[i] = k
		}
		if len(out) == 0 {
			return nil
		}
		return out
	}
	c.Top, c.TopBytes, c.TopReads, c.TopWrites, c.TopLatency = clear(c.Top), clear(c.TopBytes), clear(c.TopReads), clear(c.TopWrites), clear(c.TopLatency)
	if c.Top == nil {
		c.Top = []schemas.KeyCount{}
	}
	c.Skew.Nodes = nil
	for _, n := range r.Skew.Nodes {
		n.Ranges = nil
		c.Skew.Nodes = append(c.Skew.Nodes, n)
	}
	c.Advice = nil
	for _, a := range r.Advice {
		a.Threshold = 0
		c.Advice = append(c.Advice, a)
	}
	return &c
}

func TestReportsReadBack(t *testing.T) {
	s := newStore(t)
	var cluster, shop []*schemas.WindowReport
	for w := range 5 {
		cluster = append(cluster, report(schemas.ScopeCluster, "", w, "k1", "k2", "k3"))
		shop = append(shop, report(schemas.ScopeApp, "shop", w, "k1", "k2"))
	}
	// Window 3 of the cluster: written partial first, then complete;
	// the complete version must come back, with its own rows only.
	partial := report(schemas.ScopeCluster, "", 3, "p1")
	partial.Partial, partial.Missing = true, []string{"keyheat.events/1"}
	s.write([]*schemas.WindowReport{partial}, nil)
	s.write(append(cluster, shop...), nil)

	got, err := s.src.Reports(ctx(t), controlplane.ReportQuery{Scope: schemas.ScopeCluster, FromMs: 0, ToMs: math.MaxInt64, Limit: 10})
	require.NoError(t, err)
	require.Len(t, got, 5)
	for i := range got {
		require.Equal(t, unstored(cluster[i]), got[i], "cluster window %d", i)
	}

	got, err = s.src.Reports(ctx(t), controlplane.ReportQuery{Scope: schemas.ScopeApp, App: "shop", FromMs: 0, ToMs: math.MaxInt64, Limit: 10})
	require.NoError(t, err)
	require.Len(t, got, 5)
	require.Equal(t, unstored(shop[4]), got[4])

	// The limit keeps the latest windows, in time order; the range is
	// to the millisecond, though the tables' DateTime is to the second.
	got, err = s.src.Reports(ctx(t), controlplane.ReportQuery{Scope: schemas.ScopeCluster, FromMs: baseMs + 1, ToMs: baseMs + 4001, Limit: 2})
	require.NoError(t, err)
	require.Equal(t, []int64{baseMs + 3000, baseMs + 4000}, starts(got))
	got, err = s.src.Reports(ctx(t), controlplane.ReportQuery{Scope: schemas.ScopeCluster, FromMs: baseMs + 1, ToMs: baseMs + 4000, Limit: 10})
	require.NoError(t, err)
	require.Equal(t, []int64{baseMs + 1000, baseMs + 2000, baseMs + 3000}, starts(got))

	// Another app, or none yet: nothing.
	got, err = s.src.Reports(ctx(t), controlplane.ReportQuery{Scope: schemas.ScopeApp, App: "cart", FromMs: 0, ToMs: math.MaxInt64, Limit: 10})
	require.NoError(t, err)
	require.Empty(t, got)
}

func starts(rs []*schemas.WindowReport) []int64 {
	var out []int64
	for _, r := range rs {
		out = append(out, r.StartMs)
	}
	return out
}

func TestKeyWindowsReadBack(t *testing.T) {
	s := newStore(t)
	var reports []*schemas.WindowReport
	for w := range 4 {
		reports = append(reports, report(schemas.ScopeApp, "shop", w, "hot", "warm"), report(schemas.ScopeApp, "cart", w, "warm"))
	}
	// The cluster report lists the key too, but the key's windows come
	// from the app reports only.
	reports = append(reports, report(schemas.ScopeCluster, "", 9, "hot"))
	s.write(reports, nil)

	got, err := s.src.KeyWindows(ctx(t), controlplane.KeyQuery{App: "shop", Key: "warm", FromMs: 0, ToMs: math.MaxInt64, Limit: 10})
	require.NoError(t, err)
	require.Len(t, got, 4)
	want := controlplane.KeyWindow{StartMs: baseMs + 3000, EndMs: baseMs + 4000, App: "shop", Count: 293, Error: 1,
		Rate: 293, Share: 0.29, Bytes: 2000, Reads: 199, Writes: 101, LatencyUs: 1000, Partition: 1,
		Ranks: controlplane.KeyRanks{Top: 2, TopBytes: 1, TopReads: 2}, Source: controlplane.SourceClickHouse}
	require.Equal(t, want, got[0], "newest first")
	require.Equal(t, int64(baseMs), got[3].StartMs)

	// Every app: a window per app that lists it, newest first, by app.
	got, err = s.src.KeyWindows(ctx(t), controlplane.KeyQuery{Key: "warm", FromMs: baseMs + 2000, ToMs: math.MaxInt64, Limit: 3})
	require.NoError(t, err)
	var seen []string
	for _, w := range got {
		seen = append(seen, fmt.Sprintf("%d/%s", w.StartMs-baseMs, w.App))
	}
	require.Equal(t, []string{"3000/cart", "3000/shop", "2000/cart"}, seen)
	require.Equal(t, controlplane.KeyRanks{Top: 1, TopBytes: 1, TopReads: 1}, got[0].Ranks)

	got, err = s.src.KeyWindows(ctx(t), controlplane.KeyQuery{App: "cart", Key: "hot", FromMs: 0, ToMs: math.MaxInt64, Limit: 3})
	require.NoError(t, err)
	require.Empty(t, got)
}

func alert(typ, app, key string, detectedMs int64) *schemas.HotKeyEvent {
	e := &schemas.HotKeyEvent{Version: schemas.HotKeyVersion, ID: schemas.HotKeyID("keyheat.events", 2, "r", typ, app, key, detectedMs-5),
		Type: typ, App: app, Key: key, KeyHash: "0123456789abcdef", Rule: "r", Rate: 1500, PeakRate: 1600, Threshold: 1000,
		Count: 1500, WindowMs: 1000, Topic: "keyheat.events", Partition: 2, OnsetMs: detectedMs - 5, DetectedMs: detectedMs,
		Reads: 1400, Writes: 100, Bytes: 64_000}
	if typ != schemas.HotKeyCooled {
		e.Mitigation = &schemas.Mitigation{Kind: schemas.MitigationSplit, Split: 4}
	}
	return e
}

func TestAlertsReadBack(t *testing.T) {
	s := newStore(t)
	events := []*schemas.HotKeyEvent{
		alert(schemas.HotKeyHot, "shop", "k", baseMs+10),
		alert(schemas.HotKeyUpdate, "shop", "k", baseMs+20),
		alert(schemas.HotKeyCooled, "shop", "k", baseMs+30),
		alert(schemas.HotKeyHot, "cart", "k", baseMs+40),
	}
	cluster := alert(schemas.HotKeyHot, "shop", "other", baseMs+50)
	cluster.Partition, cluster.Partitions, cluster.Error = schemas.ClusterPartition, []int32{0, 3}, 12
	events = append(events, cluster)
	s.write(nil, events)

	got, err := s.src.Alerts(ctx(t), controlplane.AlertQuery{Limit: 10})
	require.NoError(t, err)
	require.Len(t, got, 5)
	for i, e := range got {
		require.Equal(t, events[len(events)-1-i], e, "newest first: %d", i)
	}
	got, err = s.src.Alerts(ctx(t), controlplane.AlertQuery{App: "shop", Key: "k", BeforeMs: baseMs + 30, Limit: 10})
	require.NoError(t, err)
	require.Equal(t, []*schemas.HotKeyEvent{events[1], events[0]}, got)
	got, err = s.src.Alerts(ctx(t), controlplane.AlertQuery{Key: "k", Limit: 2})
	require.NoError(t, err)
	require.Equal(t, []*schemas.HotKeyEvent{events[3], events[2]}, got)
	require.Nil(t, got[1].Mitigation, "a cooled has no mitigation")
}

func TestConfigValidate(t *testing.T) {
	for name, cfg := range map[string]chsource.Config{
		"no conn":          {},
		"bad database":     {Conn: testenv.ClickHouseConn(t), Database: "a-b"},
		"negative timeout": {Conn: testenv.ClickHouseConn(t), QueryTimeout: -time.Second},
	} {
		_, err := chsource.New(cfg)
		require.Error(t, err, name)
	}
}
