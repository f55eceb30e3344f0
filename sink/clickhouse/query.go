package clickhouse

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	chgo "github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	chschema "github.com/keyheat/keyheat/schemas/clickhouse"
)

// Client runs the documented queries (schemas/clickhouse/queries) and
// returns typed rows: what `detect query` prints. It needs no writer and
// applies no migration.
type Client struct {
	conn      driver.Conn
	closeOnce sync.Once
	closeErr  error
}

// Connect opens a Client on opts.Database.
func Connect(ctx context.Context, opts Options) (*Client, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	conn, err := connect(ctx, opts)
	if err != nil {
		return nil, err
	}
	return &Client{conn: conn}, nil
}

// Close closes the connection; later calls return the first's result.
func (c *Client) Close() error {
	c.closeOnce.Do(func() { c.closeErr = c.conn.Close() })
	return c.closeErr
}

// DefaultLimit is the row limit of a query whose Limit is 0.
const DefaultLimit = 100

// Range selects the windows (or alerts) that start in [From, To), to the
// second: the tables' DateTime columns hold whole seconds.
type Range struct {
	From time.Time
	To   time.Time
}

func (r Range) check() error {
	if !r.To.After(r.From) {
		return fmt.Errorf("time range: to (%s) must be after from (%s)", r.To.Format(time.RFC3339), r.From.Format(time.RFC3339))
	}
	return nil
}

// Key lists a report keeps, the values of TopQuery.List.
var keyLists = []string{"events", "bytes", "reads", "writes", "latency"}

// TopQuery asks for the heaviest keys of a range.
type TopQuery struct {
	Range
	// App selects that app's reports; empty selects the cluster's.
	App string
	// List ranks by events (empty means events), bytes, reads, writes or
	// latency.
	List string
	// Limit is the number of keys; 0 means DefaultLimit.
	Limit int
}

// TopRow is one key's figures summed over the windows whose list it made
// (a lower bound of its total when it left the list in some windows).
type TopRow struct {
	App       string  `ch:"key_app" json:"key_app"`
	Key       string  `ch:"key" json:"key"`
	Events    uint64  `ch:"events" json:"events"`
	Error     uint64  `ch:"error" json:"error"`
	Bytes     uint64  `ch:"bytes" json:"bytes"`
	Reads     uint64  `ch:"reads" json:"reads"`
	Writes    uint64  `ch:"writes" json:"writes"`
	LatencyUs uint64  `ch:"latency_us" json:"latency_us"`
	Share     float64 `ch:"share" json:"share"`
	Windows   uint64  `ch:"windows" json:"windows"`
	FirstMs   int64   `ch:"first_ms" json:"first_ms"`
	LastMs    int64   `ch:"last_ms" json:"last_ms"`
}

// Top runs the top query.
func (c *Client) Top(ctx context.Context, q TopQuery) ([]TopRow, error) {
	if q.List == "" {
		q.List = "events"
	}
	if !slices.Contains(keyLists, q.List) {
		return nil, fmt.Errorf("top: list %q: want one of %v", q.List, keyLists)
	}
	var out []TopRow
	err := c.run(ctx, chschema.QueryTop, &out, q.Range, map[string]any{
		"app": q.App, "list": q.List, "limit": limit(q.Limit),
	})
	return out, err
}

// ScopeQuery selects a range of the cluster's reports (App empty) or one
// app's, with a row limit where the query has one (0 means DefaultLimit).
type ScopeQuery struct {
	Range
	App   string
	Limit int
}

// SkewRow is one window's skew, as the skew query returns it.
type SkewRow struct {
	StartMs      int64    `ch:"start_ms" json:"start_ms"`
	EndMs        int64    `ch:"end_ms" json:"end_ms"`
	Events       uint64   `ch:"events" json:"events"`
	MaxMean      float64  `ch:"max_mean" json:"max_mean"`
	Gini         float64  `ch:"gini" json:"gini"`
	NodeMaxMean  float64  `ch:"node_max_mean" json:"node_max_mean"`
	NodeGini     float64  `ch:"node_gini" json:"node_gini"`
	Top1Share    float64  `ch:"top1_share" json:"top1_share"`
	Top10Share   float64  `ch:"top10_share" json:"top10_share"`
	DistinctKeys uint64   `ch:"distinct_keys" json:"distinct_keys"`
	Late         uint64   `ch:"late" json:"late"`
	Partial      uint8    `ch:"partial" json:"partial"`
	Missing      []string `ch:"missing" json:"missing"`
}

// Skew runs the skew query: the most skewed windows first.
func (c *Client) Skew(ctx context.Context, q ScopeQuery) ([]SkewRow, error) {
	var out []SkewRow
	err := c.run(ctx, chschema.QuerySkew, &out, q.Range, map[string]any{"app": q.App, "limit": limit(q.Limit)})
	return out, err
}

// PartitionRow is one events partition's load over a range.
type PartitionRow struct {
	Topic     string  `ch:"topic" json:"topic"`
	Partition int32   `ch:"partition" json:"partition"`
	Events    uint64  `ch:"events" json:"events"`
	Bytes     uint64  `ch:"bytes" json:"bytes"`
	Share     float64 `ch:"share" json:"share"`
	PeakShare float64 `ch:"peak_share" json:"peak_share"`
	Windows   uint64  `ch:"windows" json:"windows"`
}

// Partitions runs the partitions query (no limit: every partition).
func (c *Client) Partitions(ctx context.Context, q ScopeQuery) ([]PartitionRow, error) {
	var out []PartitionRow
	err := c.run(ctx, chschema.QueryPartitions, &out, q.Range, map[string]any{"app": q.App})
	return out, err
}

// NodeRow is one Redis Cluster node's load over a range.
type NodeRow struct {
	Node      string  `ch:"node" json:"node"`
	FirstSlot uint16  `ch:"first_slot" json:"first_slot"`
	LastSlot  uint16  `ch:"last_slot" json:"last_slot"`
	Events    uint64  `ch:"events" json:"events"`
	Share     float64 `ch:"share" json:"share"`
	PeakShare float64 `ch:"peak_share" json:"peak_share"`
	Windows   uint64  `ch:"windows" json:"windows"`
}

// Nodes runs the nodes query (no limit: every node).
func (c *Client) Nodes(ctx context.Context, q ScopeQuery) ([]NodeRow, error) {
	var out []NodeRow
	err := c.run(ctx, chschema.QueryNodes, &out, q.Range, map[string]any{"app": q.App})
	return out, err
}

// SlotRow is one hash slot's events over the windows that listed it.
type SlotRow struct {
	Slot    uint16 `ch:"slot" json:"slot"`
	Events  uint64 `ch:"events" json:"events"`
	Windows uint64 `ch:"windows" json:"windows"`
	FirstMs int64  `ch:"first_ms" json:"first_ms"`
	LastMs  int64  `ch:"last_ms" json:"last_ms"`
}

// Slots runs the slots query.
func (c *Client) Slots(ctx context.Context, q ScopeQuery) ([]SlotRow, error) {
	var out []SlotRow
	err := c.run(ctx, chschema.QuerySlots, &out, q.Range, map[string]any{"app": q.App, "limit": limit(q.Limit)})
	return out, err
}

// KeyQuery asks for one key's history.
type KeyQuery struct {
	Range
	// App is the key's app; empty finds the key in every app.
	App   string
	Key   string
	Limit int
	// Order is one of KeyOrders: which windows come first, and are kept
	// under Limit. Empty is KeyOrderRecent.
	Order string
}

// The values of KeyQuery.Order.
const (
	// KeyOrderRecent lists the newest windows first: the burst that made
	// someone ask is most often the latest.
	KeyOrderRecent = "recent"
	// KeyOrderBusiest lists the windows with the most events first, the
	// newest first among equals.
	KeyOrderBusiest = "busiest"
)

// KeyOrders lists the values of KeyQuery.Order.
func KeyOrders() []string { return []string{KeyOrderRecent, KeyOrderBusiest} }

func (q KeyQuery) args(limit uint32) (map[string]any, error) {
	if q.Key == "" {
		return nil, errors.New("key: name the key")
	}
	order := q.Order
	if order == "" {
		order = KeyOrderRecent
	}
	if !slices.Contains(KeyOrders(), order) {
		return nil, fmt.Errorf("key: order %q: want %s", q.Order, strings.Join(KeyOrders(), " or "))
	}
	return map[string]any{"app": q.App, "key": q.Key, "order": order, "limit": limit}, nil
}

// KeyRow is the key in one window of one app's report.
type KeyRow struct {
	StartMs   int64   `ch:"start_ms" json:"start_ms"`
	EndMs     int64   `ch:"end_ms" json:"end_ms"`
	App       string  `ch:"key_app" json:"key_app"`
	Rank      uint16  `ch:"rank" json:"rank"`
	Events    uint64  `ch:"events" json:"events"`
	Error     uint64  `ch:"error" json:"error"`
	Bytes     uint64  `ch:"bytes" json:"bytes"`
	Reads     uint64  `ch:"reads" json:"reads"`
	Writes    uint64  `ch:"writes" json:"writes"`
	LatencyUs uint64  `ch:"latency_us" json:"latency_us"`
	Partition int32   `ch:"partition" json:"partition"`
	Share     float64 `ch:"share" json:"share"`
}

// Key runs the key query: at most q.Limit windows, in q.Order.
func (c *Client) Key(ctx context.Context, q KeyQuery) ([]KeyRow, error) {
	args, err := q.args(limit(q.Limit))
	if err != nil {
		return nil, err
	}
	var out []KeyRow
	err = c.run(ctx, chschema.QueryKey, &out, q.Range, args)
	return out, err
}

// KeyWindows counts the windows the key query finds for q without a
// limit: with Key, how many a limit left out.
func (c *Client) KeyWindows(ctx context.Context, q KeyQuery) (uint64, error) {
	args, err := q.args(math.MaxUint32)
	if err != nil {
		return 0, err
	}
	if err := q.Range.check(); err != nil {
		return 0, fmt.Errorf("%s: %w", chschema.QueryKey, err)
	}
	args["from"] = q.From.UTC().Truncate(time.Second)
	args["to"] = q.To.UTC().Truncate(time.Second)
	bound, named, err := bindQuery(chschema.QueryKey, args)
	if err != nil {
		return 0, err
	}
	// The documented query, counted: one text to keep right.
	var n uint64
	if err := c.conn.QueryRow(ctx, "SELECT count() FROM ("+bound+")", named...).Scan(&n); err != nil {
		return 0, fmt.Errorf("clickhouse query %s (count): %w", chschema.QueryKey, err)
	}
	return n, nil
}

// AlertsQuery asks for hot-key events; empty App or Key match all.
type AlertsQuery struct {
	Range
	App   string
	Key   string
	Limit int
}

// AlertRow is one hot-key event: hot, update or cooled. OnsetMs is the
// hot's crossing on a hot and its updates (an episode's rows share it),
// the end of the cool-down on a cooled; Rate the key's rate then (an
// update's: over the rule window ending at its slot boundary), PeakRate
// the highest rate published in the episode so far (0 on rows written
// before updates existed).
type AlertRow struct {
	OnsetMs    int64   `ch:"onset_ms" json:"onset_ms"`
	DetectedMs int64   `ch:"detected_ms" json:"detected_ms"`
	Type       string  `ch:"type" json:"type"`
	App        string  `ch:"app" json:"app"`
	Key        string  `ch:"key" json:"key"`
	Rule       string  `ch:"rule" json:"rule"`
	Rate       float64 `ch:"rate" json:"rate"`
	PeakRate   float64 `ch:"peak_rate" json:"peak_rate"`
	Threshold  float64 `ch:"threshold" json:"threshold"`
	Events     uint64  `ch:"events" json:"events"`
	WindowMs   int64   `ch:"window_ms" json:"window_ms"`
	Topic      string  `ch:"topic" json:"topic"`
	Partition  int32   `ch:"partition" json:"partition"`
	Reads      uint64  `ch:"reads" json:"reads"`
	Writes     uint64  `ch:"writes" json:"writes"`
	Bytes      uint64  `ch:"bytes" json:"bytes"`
	Mitigation string  `ch:"mitigation" json:"mitigation"`
	Split      uint32  `ch:"split" json:"split"`
}

// Alerts runs the alerts query, oldest onset first; an episode's updates
// follow its hot, in the order they were decided.
func (c *Client) Alerts(ctx context.Context, q AlertsQuery) ([]AlertRow, error) {
	var out []AlertRow
	err := c.run(ctx, chschema.QueryAlerts, &out, q.Range, map[string]any{
		"app": q.App, "key": q.Key, "limit": limit(q.Limit),
	})
	return out, err
}

func limit(n int) uint32 {
	if n <= 0 {
		return DefaultLimit
	}
	return uint32(min(n, 1<<31))
}

// run binds a documented query's parameters and scans its rows into
// dest. Values are bound by clickhouse-go on the client ({name:Type}
// becomes @name, strings quoted and escaped): ClickHouse 18.16 has no
// server-side query parameters. Every declared parameter must be given
// and nothing else, so a query file and its Go caller cannot drift apart
// unnoticed.
func (c *Client) run(ctx context.Context, name string, dest any, r Range, args map[string]any) error {
	if err := r.check(); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	args["from"] = r.From.UTC().Truncate(time.Second)
	args["to"] = r.To.UTC().Truncate(time.Second)
	bound, named, err := bindQuery(name, args)
	if err != nil {
		return err
	}
	if err := c.conn.Select(ctx, dest, bound, named...); err != nil {
		return fmt.Errorf("clickhouse query %s: %w", name, err)
	}
	return nil
}

// bindQuery returns a documented query's client-bound text and the named
// arguments for it, checking that args names exactly the query's
// parameters.
func bindQuery(name string, args map[string]any) (bound string, named []any, err error) {
	text, err := chschema.Query(name)
	if err != nil {
		return "", nil, err
	}
	params, err := chschema.Params(text)
	if err != nil {
		return "", nil, fmt.Errorf("query %s: %w", name, err)
	}
	for _, p := range params {
		v, ok := args[p.Name]
		if !ok {
			return "", nil, fmt.Errorf("query %s: no value for parameter %s", name, p.Name)
		}
		named = append(named, chgo.Named(p.Name, v))
	}
	if len(args) != len(params) {
		return "", nil, fmt.Errorf("query %s: %d values for its %d parameters", name, len(args), len(params))
	}
	return chschema.ClientBound(text), named, nil
}
