package clickhouse

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/zeebo/xxh3"

	"github.com/keyheat/keyheat/schemas"
)

// item is one accepted write: a hot-key event or a window report, the rows
// it becomes, and whom to tell once they are all in ClickHouse.
type item struct {
	hot    *schemas.HotKeyEvent
	report *schemas.WindowReport
	rev    uint64
	rows   int
	ack    AckFunc
	// at is when Write accepted it, for the flush interval.
	at time.Time
}

// table is one destination table: its explicit column list (ClickHouse
// 18.16 cannot prepare an INSERT without one) and how an item becomes its
// rows. The column lists are checked against the migrated tables in the
// tests.
type table struct {
	name    string
	columns []string
	rows    func(it *item) int
	append  func(b driver.Batch, it *item) error
}

func (t *table) insertSQL() string {
	return "INSERT INTO " + t.name + " (" + strings.Join(t.columns, ", ") + ")"
}

// reportHead heads every report detail table: which report and version
// a row belongs to, and where that report sits in time.
var reportHead = []string{"id", "report_id", "rev", "scope", "app", "start", "start_ms", "end_ms"}

// tables lists the destinations. reports must come last: the writer
// inserts it after every other table, and the queries join the detail
// tables to the report versions it holds, so a report's rows become
// visible together, once all of them are written.
func tables() []*table {
	return []*table{
		{
			name: "hotkey_events",
			columns: []string{"id", "type", "app", "key", "key_hash", "rule", "rate", "threshold", "events",
				"window_ms", "topic", "partition", "onset", "onset_ms", "detected_ms", "reads", "writes", "bytes",
				"mitigation", "split", "shortened", "partitions", "error", "peak_rate"},
			rows: func(it *item) int {
				if it.hot != nil {
					return 1
				}
				return 0
			},
			append: func(b driver.Batch, it *item) error {
				h := it.hot
				var mitigation string
				var split uint32
				if h.Mitigation != nil {
					mitigation, split = h.Mitigation.Kind, uint32(h.Mitigation.Split)
				}
				return b.Append(h.ID, h.Type, h.App, h.Key, h.KeyHash, h.Rule, h.Rate, h.Threshold, h.Count,
					h.WindowMs, h.Topic, h.Partition, secondOf(h.OnsetMs), h.OnsetMs, h.DetectedMs, h.Reads, h.Writes,
					h.Bytes, mitigation, split, boolByte(h.Shortened), partitionsOf(h), h.Error, h.PeakRate)
			},
		},
		{
			name: "report_keys",
			columns: append(slices.Clone(reportHead), "list", "rank", "key_app", "key", "events", "error", "bytes",
				"reads", "writes", "latency_us", "partition", "share", "shortened"),
			rows: func(it *item) int {
				if r := it.report; r != nil {
					return len(r.Top) + len(r.TopBytes) + len(r.TopReads) + len(r.TopWrites) + len(r.TopLatency)
				}
				return 0
			},
			append: func(b driver.Batch, it *item) error {
				r := it.report
				for _, l := range []struct {
					name string
					keys []schemas.KeyCount
				}{
					{"events", r.Top}, {"bytes", r.TopBytes}, {"reads", r.TopReads}, {"writes", r.TopWrites}, {"latency", r.TopLatency},
				} {
					for i, k := range l.keys {
						id := detailID(r, it.rev, l.name, appKey(k.App, k.Key))
						if err := b.Append(id, r.ID, it.rev, r.Scope, r.App, secondOf(r.StartMs), r.StartMs, r.EndMs,
							l.name, uint16(i+1), k.App, k.Key, k.Count, k.Error, k.Bytes, k.Reads, k.Writes, k.LatencyUs,
							k.Partition, k.Share, boolByte(k.Shortened)); err != nil {
							return err
						}
					}
				}
				return nil
			},
		},
		{
			name:    "report_partitions",
			columns: append(slices.Clone(reportHead), "topic", "partition", "events", "bytes", "share"),
			rows: func(it *item) int {
				if it.report != nil {
					return len(it.report.Skew.Partitions)
				}
				return 0
			},
			append: func(b driver.Batch, it *item) error {
				r := it.report
				for _, p := range r.Skew.Partitions {
					id := detailID(r, it.rev, "p", p.Topic+"/"+strconv.Itoa(int(p.Partition)))
					if err := b.Append(id, r.ID, it.rev, r.Scope, r.App, secondOf(r.StartMs), r.StartMs, r.EndMs,
						p.Topic, p.Partition, p.Events, p.Bytes, p.Share); err != nil {
						return err
					}
				}
				return nil
			},
		},
		{
			name:    "report_nodes",
			columns: append(slices.Clone(reportHead), "node", "first_slot", "last_slot", "events", "share"),
			rows: func(it *item) int {
				if it.report != nil {
					return len(it.report.Skew.Nodes)
				}
				return 0
			},
			append: func(b driver.Batch, it *item) error {
				r := it.report
				for _, n := range r.Skew.Nodes {
					id := detailID(r, it.rev, "n", n.Node)
					if err := b.Append(id, r.ID, it.rev, r.Scope, r.App, secondOf(r.StartMs), r.StartMs, r.EndMs,
						n.Node, n.FirstSlot, n.LastSlot, n.Events, n.Share); err != nil {
						return err
					}
				}
				return nil
			},
		},
		{
			name:    "report_slots",
			columns: append(slices.Clone(reportHead), "rank", "slot", "events"),
			rows: func(it *item) int {
				if it.report != nil {
					return len(it.report.Skew.HotSlots)
				}
				return 0
			},
			append: func(b driver.Batch, it *item) error {
				r := it.report
				for i, s := range r.Skew.HotSlots {
					id := detailID(r, it.rev, "s", strconv.Itoa(int(s.Slot)))
					if err := b.Append(id, r.ID, it.rev, r.Scope, r.App, secondOf(r.StartMs), r.StartMs, r.EndMs,
						uint16(i+1), s.Slot, s.Events); err != nil {
						return err
					}
				}
				return nil
			},
		},
		{
			name: "report_advice",
			columns: append(slices.Clone(reportHead), "key_app", "key", "rate", "read_share", "mitigation",
				"split"),
			rows: func(it *item) int {
				if it.report != nil {
					return len(it.report.Advice)
				}
				return 0
			},
			append: func(b driver.Batch, it *item) error {
				r := it.report
				for _, a := range r.Advice {
					id := detailID(r, it.rev, "a", appKey(a.App, a.Key))
					if err := b.Append(id, r.ID, it.rev, r.Scope, r.App, secondOf(r.StartMs), r.StartMs, r.EndMs,
						a.App, a.Key, a.Rate, a.ReadShare, a.Mitigation.Kind, uint32(a.Mitigation.Split)); err != nil {
						return err
					}
				}
				return nil
			},
		},
		{
			name: "reports",
			columns: []string{"id", "rev", "complete", "scope", "app", "start", "start_ms", "end_ms", "topics",
				"events", "bytes", "reads", "writes", "latency_us", "late", "distinct_keys", "keyed", "partial",
				"missing", "max_mean", "gini", "top1_share", "top10_share", "node_max_mean", "node_gini",
				"approximate", "guaranteed"},
			rows: func(it *item) int {
				if it.report != nil {
					return 1
				}
				return 0
			},
			append: func(b driver.Batch, it *item) error {
				r := it.report
				return b.Append(r.ID, it.rev, boolByte(!r.Partial), r.Scope, r.App, secondOf(r.StartMs), r.StartMs,
					r.EndMs, nonNil(r.Topics), r.Events, r.Bytes, r.Reads, r.Writes, r.LatencyUs, r.Late, r.Distinct,
					boolByte(r.Keyed), boolByte(r.Partial), nonNil(r.Missing), r.Skew.MaxMean, r.Skew.Gini,
					r.Skew.Top1Share, r.Skew.Top10Share, r.Skew.NodeMaxMean, r.Skew.NodeGini,
					boolByte(r.Approximate), uint32(r.Guaranteed))
			},
		},
	}
}

// newHotItem checks that ClickHouse will take h (a row it rejects would
// be retried for ever) and wraps it.
func newHotItem(h *schemas.HotKeyEvent, ack AckFunc) (*item, error) {
	if h == nil {
		return nil, errors.New("write hot-key event: nil event")
	}
	var errs []error
	if h.ID == "" {
		errs = append(errs, errors.New("empty id"))
	}
	if h.Type != schemas.HotKeyHot && h.Type != schemas.HotKeyUpdate && h.Type != schemas.HotKeyCooled {
		errs = append(errs, fmt.Errorf("type %q is not %q, %q or %q", h.Type, schemas.HotKeyHot, schemas.HotKeyUpdate, schemas.HotKeyCooled))
	}
	if err := checkMs("onset_ms", h.OnsetMs); err != nil {
		errs = append(errs, err)
	}
	if h.Mitigation != nil && (h.Mitigation.Split < 0 || int64(h.Mitigation.Split) > math.MaxUint32) {
		errs = append(errs, fmt.Errorf("mitigation split %d out of range", h.Mitigation.Split))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("write hot-key event %s: %w", h.ID, err)
	}
	return &item{hot: h, rows: 1, ack: ack}, nil
}

// newReportItem checks that ClickHouse will take r and wraps it with its
// content revision.
func newReportItem(r *schemas.WindowReport, ack AckFunc) (*item, error) {
	if r == nil {
		return nil, errors.New("write window report: nil report")
	}
	var errs []error
	if r.ID == "" {
		errs = append(errs, errors.New("empty id"))
	}
	if r.Scope != schemas.ScopeCluster && r.Scope != schemas.ScopeApp {
		errs = append(errs, fmt.Errorf("scope %q is neither %q nor %q", r.Scope, schemas.ScopeCluster, schemas.ScopeApp))
	}
	if err := checkMs("start_ms", r.StartMs); err != nil {
		errs = append(errs, err)
	}
	for _, l := range [][]schemas.KeyCount{r.Top, r.TopBytes, r.TopReads, r.TopWrites, r.TopLatency} {
		if len(l) > math.MaxUint16 {
			errs = append(errs, fmt.Errorf("a top list of %d keys; at most %d can be ranked", len(l), math.MaxUint16))
		}
	}
	if r.Guaranteed < 0 || r.Guaranteed > len(r.Top) {
		errs = append(errs, fmt.Errorf("guaranteed %d outside 0 to the %d keys of top", r.Guaranteed, len(r.Top)))
	}
	if len(r.Skew.HotSlots) > math.MaxUint16 {
		errs = append(errs, fmt.Errorf("%d hot slots; at most %d can be ranked", len(r.Skew.HotSlots), math.MaxUint16))
	}
	for _, a := range r.Advice {
		if a.Mitigation.Split < 0 || int64(a.Mitigation.Split) > math.MaxUint32 {
			errs = append(errs, fmt.Errorf("advice for %s: split %d out of range", a.Key, a.Mitigation.Split))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("write window report %s: %w", r.ID, err)
	}
	rows := 1 + len(r.Top) + len(r.TopBytes) + len(r.TopReads) + len(r.TopWrites) + len(r.TopLatency) +
		len(r.Skew.Partitions) + len(r.Skew.Nodes) + len(r.Skew.HotSlots) + len(r.Advice)
	return &item{report: r, rev: reportRev(r), rows: rows, ack: ack}, nil
}

// maxDateTimeMs is the last millisecond a ClickHouse DateTime (UInt32
// seconds) holds.
const maxDateTimeMs = (math.MaxUint32+1)*1000 - 1

func checkMs(name string, ms int64) error {
	if ms < 0 || ms > maxDateTimeMs {
		return fmt.Errorf("%s %d is outside what a ClickHouse DateTime holds (1970 to 2106)", name, ms)
	}
	return nil
}

// reportRev names a report's content: 0 for a complete report, which the
// merger makes the same way every time; for a partial one, a hash of the
// partitions it lacked, which decide what it holds. Never 0 for a partial
// report.
func reportRev(r *schemas.WindowReport) uint64 {
	if !r.Partial {
		return 0
	}
	missing := slices.Clone(r.Missing)
	slices.Sort(missing)
	h := xxh3.New()
	for _, m := range missing {
		_, _ = h.WriteString(m) // a hash never fails to write
		_, _ = h.Write([]byte{0})
	}
	if v := h.Sum64(); v != 0 {
		return v
	}
	return 1
}

// detailID is the id of one row of a report's detail table: the report,
// its revision, the row's kind and what names it within the report.
func detailID(r *schemas.WindowReport, rev uint64, kind, name string) string {
	b := make([]byte, 0, len(r.ID)+len(kind)+len(name)+24)
	b = append(b, r.ID...)
	b = append(b, '/')
	b = strconv.AppendUint(b, rev, 16)
	b = append(b, '/')
	b = append(b, kind...)
	b = append(b, '/')
	b = append(b, name...)
	return string(b)
}

// appKey joins an app and a key unambiguously: "<len(app)>:<app>/<key>".
func appKey(app, key string) string {
	return strconv.Itoa(len(app)) + ":" + app + "/" + key
}

func secondOf(ms int64) time.Time { return time.Unix(ms/1000, 0).UTC() }

func boolByte(b bool) uint8 {
	if b {
		return 1
	}
	return 0
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// partitionsOf is h.Partitions, never nil (an Array column takes no NULL).
func partitionsOf(h *schemas.HotKeyEvent) []int32 {
	if h.Partitions == nil {
		return []int32{}
	}
	return h.Partitions
}
