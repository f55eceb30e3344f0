// Package chsource reads window reports, a key's windows and hot-key
// events back from the ClickHouse tables sink/clickhouse writes, for the
// control plane's history routes: Source is a controlplane.ReportSource.
//
// It is a package of its own so that controlplane, and whatever imports
// it, does not depend on the ClickHouse driver: only the command that
// wires a Source does.
//
// # What ClickHouse gives back
//
// The tables (schemas/clickhouse/migrations) store a report as a row of
// reports (its totals and skew scalars) and rows of report_keys,
// report_partitions, report_nodes, report_slots and report_advice. A
// report read back has every field but these, which no table stores:
// Floor (0), each KeyCount's BytesError (0), each NodeLoad's Ranges
// (nil; FirstSlot and LastSlot are kept) and each KeyAdvice's Threshold
// (0). Advice comes back in Top's order, as written. A hot-key event read
// back from hotkey_events lacks BytesRate and BytesThreshold (0).
//
// A window written partial and then complete (after a restart) reads as
// its complete version, the one reports holds under FINAL, with that
// version's detail rows only.
//
// Source owns no connection: the caller opens the driver.Conn (native
// protocol, as sink/clickhouse does) and closes it after the Source's
// last use. Every query runs under the caller's context and
// Config.QueryTimeout.
package chsource

import (
	"context"
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"time"

	chgo "github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/keyheat/keyheat/controlplane"
	"github.com/keyheat/keyheat/schemas"
)

// DefaultQueryTimeout bounds each query unless Config.QueryTimeout says
// otherwise: a request's answer waits for it.
const DefaultQueryTimeout = 5 * time.Second

// Config configures a Source.
type Config struct {
	// Conn is a native-protocol connection pool to the server holding
	// keyheat's tables; required. Source does not close it.
	Conn driver.Conn
	// Database is the database of the tables (sink/clickhouse's
	// clickhouse.database); "" means the connection's default database.
	Database string
	// QueryTimeout bounds each query; 0 means DefaultQueryTimeout.
	QueryTimeout time.Duration
}

var identRe = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// Validate reports what makes c unusable, or nil.
func (c *Config) Validate() error {
	var errs []error
	if c.Conn == nil {
		errs = append(errs, errors.New("Conn is nil: give a ClickHouse connection (native protocol)"))
	}
	if c.Database != "" && !identRe.MatchString(c.Database) {
		errs = append(errs, fmt.Errorf("Database %q: want letters, digits and underscores, as clickhouse.database", c.Database))
	}
	if c.QueryTimeout < 0 {
		errs = append(errs, fmt.Errorf("QueryTimeout is %v, want ≥ 0 (0: %v)", c.QueryTimeout, DefaultQueryTimeout))
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("chsource config: %w", errors.Join(errs...))
}

// Source reads reports, key windows and hot-key events from ClickHouse.
// It is safe for concurrent use.
type Source struct {
	conn    driver.Conn
	prefix  string // "db." or ""
	timeout time.Duration
}

var _ controlplane.ReportSource = (*Source)(nil)

// New validates cfg and builds a Source. It does not query the server.
func New(cfg Config) (*Source, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Source{conn: cfg.Conn, timeout: cfg.QueryTimeout}
	if s.timeout == 0 {
		s.timeout = DefaultQueryTimeout
	}
	if cfg.Database != "" {
		s.prefix = "`" + cfg.Database + "`."
	}
	return s, nil
}

// table names a table in the Source's database.
func (s *Source) table(name string) string { return s.prefix + name }

// maxDateTimeSec is the last second bound a query gives: 2105-12-31
// 23:59:59 UTC. A DateTime holds up to early 2106, but ClickHouse 18.16
// parses a later literal of that year as 1970, which would empty the
// range; no window starts that late.
const maxDateTimeSec = 4291747199

// secondRange returns the DateTime bounds [from, to) whose seconds cover
// the milliseconds [fromMs, toMs), clamped to what a DateTime holds: the
// tables partition and order by those columns, so a query bounded by
// them reads only the parts of the range.
func secondRange(fromMs, toMs int64) (from, to time.Time) {
	fromSec := max(0, fromMs) / 1000
	toSec := int64(maxDateTimeSec)
	if toMs/1000 < toSec {
		toSec = (toMs + 999) / 1000
	}
	return time.Unix(fromSec, 0).UTC(), time.Unix(toSec, 0).UTC()
}

func (s *Source) query(ctx context.Context, name string, dest any, text string, args ...any) error {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	if err := s.conn.Select(ctx, dest, text, args...); err != nil {
		return fmt.Errorf("clickhouse %s: %w", name, err)
	}
	return nil
}

// reportRow is a row of reports.
type reportRow struct {
	ID          string   `ch:"id"`
	Rev         uint64   `ch:"rev"`
	Scope       string   `ch:"scope"`
	App         string   `ch:"app"`
	StartMs     int64    `ch:"start_ms"`
	EndMs       int64    `ch:"end_ms"`
	Topics      []string `ch:"topics"`
	Events      uint64   `ch:"events"`
	Bytes       uint64   `ch:"bytes"`
	Reads       uint64   `ch:"reads"`
	Writes      uint64   `ch:"writes"`
	LatencyUs   uint64   `ch:"latency_us"`
	Late        uint64   `ch:"late"`
	Distinct    uint64   `ch:"distinct_keys"`
	Keyed       uint8    `ch:"keyed"`
	Partial     uint8    `ch:"partial"`
	Missing     []string `ch:"missing"`
	MaxMean     float64  `ch:"max_mean"`
	Gini        float64  `ch:"gini"`
	Top1Share   float64  `ch:"top1_share"`
	Top10Share  float64  `ch:"top10_share"`
	NodeMaxMean float64  `ch:"node_max_mean"`
	NodeGini    float64  `ch:"node_gini"`
	Approximate uint8    `ch:"approximate"`
	Guaranteed  uint32   `ch:"guaranteed"`
}

// detailHead is what every detail row says of its report.
type detailHead struct {
	ReportID string `ch:"report_id"`
	Rev      uint64 `ch:"rev"`
}

type keyRow struct {
	detailHead
	List      string  `ch:"list"`
	Rank      uint16  `ch:"rank"`
	App       string  `ch:"key_app"`
	Key       string  `ch:"key"`
	Events    uint64  `ch:"events"`
	Error     uint64  `ch:"error"`
	Bytes     uint64  `ch:"bytes"`
	Reads     uint64  `ch:"reads"`
	Writes    uint64  `ch:"writes"`
	LatencyUs uint64  `ch:"latency_us"`
	Partition int32   `ch:"partition"`
	Share     float64 `ch:"share"`
	Shortened uint8   `ch:"shortened"`
}

type partitionRow struct {
	detailHead
	Topic     string  `ch:"topic"`
	Partition int32   `ch:"partition"`
	Events    uint64  `ch:"events"`
	Bytes     uint64  `ch:"bytes"`
	Share     float64 `ch:"share"`
}

type nodeRow struct {
	detailHead
	Node      string  `ch:"node"`
	FirstSlot uint16  `ch:"first_slot"`
	LastSlot  uint16  `ch:"last_slot"`
	Events    uint64  `ch:"events"`
	Share     float64 `ch:"share"`
}

type slotRow struct {
	detailHead
	Rank   uint16 `ch:"rank"`
	Slot   uint16 `ch:"slot"`
	Events uint64 `ch:"events"`
}

type adviceRow struct {
	detailHead
	App        string  `ch:"key_app"`
	Key        string  `ch:"key"`
	Rate       float64 `ch:"rate"`
	ReadShare  float64 `ch:"read_share"`
	Mitigation string  `ch:"mitigation"`
	Split      uint32  `ch:"split"`
}

// Reports returns, in time order, the latest q.Limit reports of a scope
// whose windows start in [q.FromMs, q.ToMs), rebuilt from the reports
// table and its detail tables (see the package comment for the fields
// they do not store).
func (s *Source) Reports(ctx context.Context, q controlplane.ReportQuery) ([]*schemas.WindowReport, error) {
	if q.Scope != schemas.ScopeCluster && q.Scope != schemas.ScopeApp {
		return nil, fmt.Errorf("reports: scope %q is neither %q nor %q", q.Scope, schemas.ScopeCluster, schemas.ScopeApp)
	}
	if q.Limit < 1 || q.FromMs >= q.ToMs {
		return nil, nil
	}
	from, to := secondRange(q.FromMs, q.ToMs)
	var heads []reportRow
	err := s.query(ctx, "reports", &heads, `SELECT id, rev, scope, app, start_ms, end_ms, topics, events, bytes,
    reads, writes, latency_us, late, distinct_keys, keyed, partial, missing, max_mean, gini, top1_share,
    top10_share, node_max_mean, node_gini, approximate, guaranteed
FROM `+s.table("reports")+` FINAL
WHERE scope = @scope AND app = @app AND start >= @from AND start < @to
  AND start_ms >= @from_ms AND start_ms < @to_ms
ORDER BY start_ms DESC
LIMIT @limit`,
		chgo.Named("scope", q.Scope), chgo.Named("app", q.App), chgo.Named("from", from), chgo.Named("to", to),
		chgo.Named("from_ms", q.FromMs), chgo.Named("to_ms", q.ToMs), chgo.Named("limit", q.Limit))
	if err != nil || len(heads) == 0 {
		return nil, err
	}
	slices.Reverse(heads)
	out := make([]*schemas.WindowReport, len(heads))
	byID := make(map[detailHead]*schemas.WindowReport, len(heads))
	for i := range heads {
		out[i] = reportOf(&heads[i])
		byID[detailHead{heads[i].ID, heads[i].Rev}] = out[i]
	}
	// The detail rows of the windows read, by the same scope and the
	// span of their starts; rows of another version of a window (a
	// partial one superseded) are left out by report id and rev.
	dFrom, dTo := secondRange(heads[0].StartMs, heads[len(heads)-1].StartMs+1)
	where := ` FINAL
WHERE scope = @scope AND app = @app AND start >= @from AND start < @to
  AND start_ms >= @from_ms AND start_ms <= @last_ms`
	args := []any{chgo.Named("scope", q.Scope), chgo.Named("app", q.App), chgo.Named("from", dFrom),
		chgo.Named("to", dTo), chgo.Named("from_ms", heads[0].StartMs), chgo.Named("last_ms", heads[len(heads)-1].StartMs)}

	var keys []keyRow
	if err := s.query(ctx, "report_keys", &keys, `SELECT report_id, rev, list, rank, key_app, key, events, error,
    bytes, reads, writes, latency_us, partition, share, shortened
FROM `+s.table("report_keys")+where+`
ORDER BY report_id, list, rank`, args...); err != nil {
		return nil, err
	}
	for _, k := range keys {
		r := byID[k.detailHead]
		if r == nil {
			continue
		}
		kc := schemas.KeyCount{App: k.App, Key: k.Key, Count: k.Events, Error: k.Error, Bytes: k.Bytes, Reads: k.Reads,
			Writes: k.Writes, LatencyUs: k.LatencyUs, Partition: k.Partition, Share: k.Share, Shortened: k.Shortened != 0}
		switch k.List {
		case "events":
			r.Top = append(r.Top, kc)
		case "bytes":
			r.TopBytes = append(r.TopBytes, kc)
		case "reads":
			r.TopReads = append(r.TopReads, kc)
		case "writes":
			r.TopWrites = append(r.TopWrites, kc)
		case "latency":
			r.TopLatency = append(r.TopLatency, kc)
		}
	}

	var parts []partitionRow
	if err := s.query(ctx, "report_partitions", &parts, `SELECT report_id, rev, topic, partition, events, bytes, share
FROM `+s.table("report_partitions")+where+`
ORDER BY report_id, topic, partition`, args...); err != nil {
		return nil, err
	}
	for _, p := range parts {
		if r := byID[p.detailHead]; r != nil {
			r.Skew.Partitions = append(r.Skew.Partitions, schemas.PartitionLoad{Topic: p.Topic, Partition: p.Partition,
				Events: p.Events, Bytes: p.Bytes, Share: p.Share})
		}
	}

	var nodes []nodeRow
	if err := s.query(ctx, "report_nodes", &nodes, `SELECT report_id, rev, node, first_slot, last_slot, events, share
FROM `+s.table("report_nodes")+where+`
ORDER BY report_id, first_slot, node`, args...); err != nil {
		return nil, err
	}
	for _, n := range nodes {
		if r := byID[n.detailHead]; r != nil {
			r.Skew.Nodes = append(r.Skew.Nodes, schemas.NodeLoad{Node: n.Node, FirstSlot: n.FirstSlot,
				LastSlot: n.LastSlot, Events: n.Events, Share: n.Share})
		}
	}

	var slots []slotRow
	if err := s.query(ctx, "report_slots", &slots, `SELECT report_id, rev, rank, slot, events
FROM `+s.table("report_slots")+where+`
ORDER BY report_id, rank`, args...); err != nil {
		return nil, err
	}
	for _, sl := range slots {
		if r := byID[sl.detailHead]; r != nil {
			r.Skew.HotSlots = append(r.Skew.HotSlots, schemas.SlotCount{Slot: sl.Slot, Events: sl.Events})
		}
	}

	var advice []adviceRow
	if err := s.query(ctx, "report_advice", &advice, `SELECT report_id, rev, key_app, key, rate, read_share,
    mitigation, split
FROM `+s.table("report_advice")+where+`
ORDER BY report_id, key_app, key`, args...); err != nil {
		return nil, err
	}
	for _, a := range advice {
		if r := byID[a.detailHead]; r != nil {
			r.Advice = append(r.Advice, schemas.KeyAdvice{App: a.App, Key: a.Key, Rate: a.Rate, ReadShare: a.ReadShare,
				Mitigation: schemas.Mitigation{Kind: a.Mitigation, Split: int(a.Split)}})
		}
	}
	for _, r := range out {
		sortAdvice(r)
	}
	return out, nil
}

// reportOf is a report with the reports row's fields.
func reportOf(h *reportRow) *schemas.WindowReport {
	r := &schemas.WindowReport{Version: schemas.ReportVersion, ID: h.ID, Scope: h.Scope, StartMs: h.StartMs,
		EndMs: h.EndMs, Topics: h.Topics, Events: h.Events, Bytes: h.Bytes, Reads: h.Reads, Writes: h.Writes,
		LatencyUs: h.LatencyUs, Late: h.Late, Distinct: h.Distinct, Keyed: h.Keyed != 0, Partial: h.Partial != 0,
		Guaranteed: int(h.Guaranteed), Approximate: h.Approximate != 0, Top: []schemas.KeyCount{},
		Skew: schemas.Skew{MaxMean: h.MaxMean, Gini: h.Gini, Top1Share: h.Top1Share, Top10Share: h.Top10Share,
			NodeMaxMean: h.NodeMaxMean, NodeGini: h.NodeGini, Partitions: []schemas.PartitionLoad{}}}
	if h.Scope == schemas.ScopeApp {
		r.App = h.App
	}
	if len(h.Missing) > 0 {
		r.Missing = h.Missing
	}
	return r
}

// sortAdvice puts r's advice in Top's order, as the merger writes it.
func sortAdvice(r *schemas.WindowReport) {
	if len(r.Advice) < 2 {
		return
	}
	rank := make(map[[2]string]int, len(r.Top))
	for i, k := range r.Top {
		rank[[2]string{k.App, k.Key}] = i
	}
	slices.SortStableFunc(r.Advice, func(a, b schemas.KeyAdvice) int {
		ra, oka := rank[[2]string{a.App, a.Key}]
		rb, okb := rank[[2]string{b.App, b.Key}]
		switch {
		case oka && okb:
			return ra - rb
		case oka:
			return -1
		case okb:
			return 1
		}
		return 0
	})
}

// keyWindowRow is a key's rows of one window's report_keys, one per list
// that holds it, folded into one.
type keyWindowRow struct {
	StartMs    int64   `ch:"start_ms"`
	EndMs      int64   `ch:"end_ms"`
	App        string  `ch:"key_app"`
	Events     uint64  `ch:"events"`
	Error      uint64  `ch:"error"`
	Bytes      uint64  `ch:"bytes"`
	Reads      uint64  `ch:"reads"`
	Writes     uint64  `ch:"writes"`
	LatencyUs  uint64  `ch:"latency_us"`
	Partition  int32   `ch:"partition"`
	Share      float64 `ch:"share"`
	Shortened  uint8   `ch:"shortened"`
	RankTop    uint64  `ch:"rank_top"`
	RankBytes  uint64  `ch:"rank_bytes"`
	RankReads  uint64  `ch:"rank_reads"`
	RankWrites uint64  `ch:"rank_writes"`
	RankLat    uint64  `ch:"rank_latency"`
}

// KeyWindows returns the key's figures in the app reports whose windows
// start in [q.FromMs, q.ToMs) and list it: the latest q.Limit windows,
// newest first, each window's lists folded into one KeyWindow.
func (s *Source) KeyWindows(ctx context.Context, q controlplane.KeyQuery) ([]controlplane.KeyWindow, error) {
	if q.Key == "" {
		return nil, errors.New("key windows: name the key")
	}
	if q.Limit < 1 || q.FromMs >= q.ToMs {
		return nil, nil
	}
	from, to := secondRange(q.FromMs, q.ToMs)
	var rows []keyWindowRow
	// Every list of a window carries the key's same figures (max picks
	// them; share is set in each); a list's rank is its row's, 0 where
	// no row is.
	err := s.query(ctx, "key windows", &rows, `SELECT start_ms, any(end_ms) AS end_ms, key_app,
    max(events) AS events, max(error) AS error, max(bytes) AS bytes, max(reads) AS reads,
    max(writes) AS writes, max(latency_us) AS latency_us, any(partition) AS partition,
    max(share) AS share, max(shortened) AS shortened,
    sumIf(rank, list = 'events') AS rank_top, sumIf(rank, list = 'bytes') AS rank_bytes,
    sumIf(rank, list = 'reads') AS rank_reads, sumIf(rank, list = 'writes') AS rank_writes,
    sumIf(rank, list = 'latency') AS rank_latency
FROM `+s.table("report_keys")+` FINAL
WHERE scope = 'app' AND (@app = '' OR app = @app) AND key = @key
  AND start >= @from AND start < @to AND start_ms >= @from_ms AND start_ms < @to_ms
  AND (report_id, rev) IN (
        SELECT id, rev FROM `+s.table("reports")+` FINAL
        WHERE scope = 'app' AND (@app = '' OR app = @app) AND start >= @from AND start < @to)
GROUP BY start_ms, key_app
ORDER BY start_ms DESC, key_app
LIMIT @limit`,
		chgo.Named("app", q.App), chgo.Named("key", q.Key), chgo.Named("from", from), chgo.Named("to", to),
		chgo.Named("from_ms", q.FromMs), chgo.Named("to_ms", q.ToMs), chgo.Named("limit", q.Limit))
	if err != nil {
		return nil, err
	}
	out := make([]controlplane.KeyWindow, 0, len(rows))
	for _, r := range rows {
		out = append(out, controlplane.KeyWindow{StartMs: r.StartMs, EndMs: r.EndMs, App: r.App, Count: r.Events,
			Error: r.Error, Rate: controlplane.RatePerSecond(r.Events, r.StartMs, r.EndMs), Share: r.Share,
			Bytes: r.Bytes, Reads: r.Reads, Writes: r.Writes, LatencyUs: r.LatencyUs, Partition: r.Partition,
			Ranks: controlplane.KeyRanks{Top: int(r.RankTop), TopBytes: int(r.RankBytes), TopReads: int(r.RankReads),
				TopWrites: int(r.RankWrites), TopLatency: int(r.RankLat)},
			Shortened: r.Shortened != 0, Source: controlplane.SourceClickHouse})
	}
	return out, nil
}

// alertRow is a row of hotkey_events.
type alertRow struct {
	ID         string  `ch:"id"`
	Type       string  `ch:"type"`
	App        string  `ch:"app"`
	Key        string  `ch:"key"`
	KeyHash    string  `ch:"key_hash"`
	Rule       string  `ch:"rule"`
	Rate       float64 `ch:"rate"`
	PeakRate   float64 `ch:"peak_rate"`
	Threshold  float64 `ch:"threshold"`
	Events     uint64  `ch:"events"`
	WindowMs   int64   `ch:"window_ms"`
	Topic      string  `ch:"topic"`
	Partition  int32   `ch:"partition"`
	Partitions []int32 `ch:"partitions"`
	Error      uint64  `ch:"error"`
	OnsetMs    int64   `ch:"onset_ms"`
	DetectedMs int64   `ch:"detected_ms"`
	Reads      uint64  `ch:"reads"`
	Writes     uint64  `ch:"writes"`
	Bytes      uint64  `ch:"bytes"`
	Mitigation string  `ch:"mitigation"`
	Split      uint32  `ch:"split"`
	Shortened  uint8   `ch:"shortened"`
}

// Alerts returns hot-key events detected before q.BeforeMs (any time when
// 0), newest first by DetectedMs, at most q.Limit; q.App and q.Key, when
// set, select one app's or one key's.
func (s *Source) Alerts(ctx context.Context, q controlplane.AlertQuery) ([]*schemas.HotKeyEvent, error) {
	if q.Limit < 1 {
		return nil, nil
	}
	before := q.BeforeMs
	if before <= 0 {
		before = math.MaxInt64
	}
	var rows []alertRow
	err := s.query(ctx, "alerts", &rows, `SELECT id, type, app, key, key_hash, rule, rate, peak_rate, threshold,
    events, window_ms, topic, partition, partitions, error, onset_ms, detected_ms, reads, writes, bytes,
    mitigation, split, shortened
FROM `+s.table("hotkey_events")+` FINAL
WHERE (@app = '' OR app = @app) AND (@key = '' OR key = @key) AND detected_ms < @before
ORDER BY detected_ms DESC, id DESC
LIMIT @limit`,
		chgo.Named("app", q.App), chgo.Named("key", q.Key), chgo.Named("before", before), chgo.Named("limit", q.Limit))
	if err != nil {
		return nil, err
	}
	out := make([]*schemas.HotKeyEvent, 0, len(rows))
	for _, r := range rows {
		e := &schemas.HotKeyEvent{Version: schemas.HotKeyVersion, ID: r.ID, Type: r.Type, App: r.App, Key: r.Key,
			KeyHash: r.KeyHash, Rule: r.Rule, Rate: r.Rate, PeakRate: r.PeakRate, Threshold: r.Threshold,
			Count: r.Events, WindowMs: r.WindowMs, Topic: r.Topic, Partition: r.Partition, Error: r.Error,
			OnsetMs: r.OnsetMs, DetectedMs: r.DetectedMs, Reads: r.Reads, Writes: r.Writes, Bytes: r.Bytes,
			Shortened: r.Shortened != 0}
		if len(r.Partitions) > 0 {
			e.Partitions = r.Partitions
		}
		if r.Mitigation != "" {
			e.Mitigation = &schemas.Mitigation{Kind: r.Mitigation, Split: int(r.Split)}
		}
		out = append(out, e)
	}
	return out, nil
}
