package schemas

import (
	"fmt"
	"slices"
)

// ParquetVersion is the version of the Parquet row layouts below. Every
// archive file carries it in its key/value metadata under
// ParquetVersionKey; a reader refuses a file with another version instead
// of misreading it. Adding a column is a new version.
//
// Version 2 added EventRow's event_index column; a reader that knows
// version 2 reads a version-1 events file with every event_index 0, which
// is what it was (version 1 archived only the first event of a record).
//
// Version 3 added HotKeyRow's error and partitions columns; a reader reads
// an older hot-key file with error 0 and no partitions, the fields' zero
// values, though the alerts it holds may have had both.
//
// Version 4 added HotKeyRow's peak_rate column, with the "update" type its
// rows may have from then; a reader reads an older hot-key file with
// peak_rate 0, which HotKeyEvent.PeakRate says for records from before
// it.
const ParquetVersion = 4

// ParquetVersionKey is the Parquet key/value metadata key holding
// ParquetVersion, and ParquetKindKey the one naming the row layout
// ("events", "reports" or "hotkeys"), so a file found out of its folder
// still says what it holds.
const (
	ParquetVersionKey = "keyheat.version"
	ParquetKindKey    = "keyheat.kind"
)

// EventRow is one archived AccessEvent: the event's fields plus where it was
// read from (topic, partition, offset) and its index among the events its
// record gave (a raw log line such as a Redis MGET gives one per key). The
// four make a row unique and let a replay order equal event times the same
// way every time.
//
// Column names are snake_case so SQL tools need no quoting. time_ms carries
// the TIMESTAMP(MILLIS, UTC) logical type, so DuckDB and Arrow show a time
// while the stored number stays the exact millisecond.
//
// Strings are Parquet STRING (UTF-8). A key that is not UTF-8 (accepted
// only with Limits.AllowBinaryKeys) is stored byte for byte and comes back
// exactly through keyheat's reader; tools that validate UTF-8 may refuse it.
type EventRow struct {
	TimeMs    int64  `parquet:"time_ms,timestamp(millisecond),delta"`
	App       string `parquet:"app,dict"`
	Key       string `parquet:"key"`
	Op        string `parquet:"op,dict"`
	Bytes     int64  `parquet:"bytes"`
	Status    int32  `parquet:"status"`
	Client    string `parquet:"client,dict"`
	Node      string `parquet:"node,dict"`
	LatencyUs int64  `parquet:"latency_us"`
	Topic     string `parquet:"topic,dict"`
	Partition int32  `parquet:"partition"`
	Offset    int64  `parquet:"offset,delta"`
	Index     int32  `parquet:"event_index"`
}

// EventRowColumns are EventRow's column names in schema order, for readers
// that address columns by position and must check a file has them.
var EventRowColumns = [...]string{"time_ms", "app", "key", "op", "bytes", "status",
	"client", "node", "latency_us", "topic", "partition", "offset", "event_index"}

// MakeEventRow returns the row archiving e, the index-th event of the
// record read at offset of partition of topic.
func MakeEventRow(topic string, partition int32, offset int64, index int32, e *AccessEvent) EventRow {
	return EventRow{
		TimeMs: e.TimeMs, App: e.App, Key: e.Key, Op: e.Op, Bytes: e.Bytes, Status: e.Status,
		Client: e.Client, Node: e.Node, LatencyUs: e.LatencyUs,
		Topic: topic, Partition: partition, Offset: offset, Index: index,
	}
}

// Event returns the AccessEvent r archives.
func (r *EventRow) Event() AccessEvent {
	return AccessEvent{
		TimeMs: r.TimeMs, Key: r.Key, App: r.App, Op: r.Op, Bytes: r.Bytes, Status: r.Status,
		Client: r.Client, Node: r.Node, LatencyUs: r.LatencyUs,
	}
}

// ReportRow is one archived WindowReport. The scalar columns and Top are a
// projection for SQL tools ("which key topped app shop at 14:02"); JSON is
// the report itself (WindowReport.AppendJSON), the one source a reader
// rebuilds the report from, so nested fields that have no column (skew
// details, advice) survive the archive exactly.
type ReportRow struct {
	ID         string           `parquet:"id"`
	Scope      string           `parquet:"scope,dict"`
	App        string           `parquet:"app,dict"`
	StartMs    int64            `parquet:"start_ms,timestamp(millisecond),delta"`
	EndMs      int64            `parquet:"end_ms,timestamp(millisecond),delta"`
	Events     int64            `parquet:"events"`
	Bytes      int64            `parquet:"bytes"`
	Reads      int64            `parquet:"reads"`
	Writes     int64            `parquet:"writes"`
	LatencyUs  int64            `parquet:"latency_us"`
	Late       int64            `parquet:"late"`
	Distinct   int64            `parquet:"distinct_keys"`
	Keyed      bool             `parquet:"keyed"`
	Partial    bool             `parquet:"partial"`
	MaxMean    float64          `parquet:"max_mean"`
	Gini       float64          `parquet:"gini"`
	Top1Share  float64          `parquet:"top1_share"`
	Top10Share float64          `parquet:"top10_share"`
	Top        []ReportTopEntry `parquet:"top,list"`
	JSON       string           `parquet:"json,json"`
}

// ReportTopEntry is one entry of ReportRow.Top: a key of the report's Top
// with its count, error bound and share.
type ReportTopEntry struct {
	App   string  `parquet:"app"`
	Key   string  `parquet:"key"`
	Count int64   `parquet:"count"`
	Error int64   `parquet:"error"`
	Bytes int64   `parquet:"bytes"`
	Share float64 `parquet:"share"`
}

// MakeReportRow returns the row archiving r. Counts are stored as signed
// 64-bit integers (what every SQL engine sums without surprises); a count
// above 2^63-1 is refused rather than wrapped.
func MakeReportRow(r *WindowReport) (ReportRow, error) {
	js, err := r.AppendJSON(nil)
	if err != nil {
		return ReportRow{}, err
	}
	row := ReportRow{
		ID: r.ID, Scope: r.Scope, App: r.App, StartMs: r.StartMs, EndMs: r.EndMs,
		Keyed: r.Keyed, Partial: r.Partial, MaxMean: r.Skew.MaxMean, Gini: r.Skew.Gini,
		Top1Share: r.Skew.Top1Share, Top10Share: r.Skew.Top10Share, JSON: string(js),
	}
	counts := []struct {
		dst  *int64
		v    uint64
		name string
	}{
		{&row.Events, r.Events, "events"}, {&row.Bytes, r.Bytes, "bytes"}, {&row.Reads, r.Reads, "reads"},
		{&row.Writes, r.Writes, "writes"}, {&row.LatencyUs, r.LatencyUs, "latency_us"},
		{&row.Late, r.Late, "late"}, {&row.Distinct, r.Distinct, "distinct"},
	}
	for _, c := range counts {
		if c.v > 1<<63-1 {
			return ReportRow{}, fmt.Errorf("archive report %s: %s %d does not fit a signed 64-bit column", r.ID, c.name, c.v)
		}
		*c.dst = int64(c.v)
	}
	if len(r.Top) > 0 {
		row.Top = make([]ReportTopEntry, len(r.Top))
		for i, k := range r.Top {
			if k.Count > 1<<63-1 || k.Error > 1<<63-1 || k.Bytes > 1<<63-1 {
				return ReportRow{}, fmt.Errorf("archive report %s: key %q counts do not fit signed 64-bit columns", r.ID, k.Key)
			}
			row.Top[i] = ReportTopEntry{App: k.App, Key: k.Key, Count: int64(k.Count), Error: int64(k.Error),
				Bytes: int64(k.Bytes), Share: k.Share}
		}
	}
	return row, nil
}

// Report decodes the WindowReport r archives from its JSON column.
func (r *ReportRow) Report() (*WindowReport, error) {
	return DecodeWindowReport([]byte(r.JSON))
}

// HotKeyRow is one archived HotKeyEvent (hot, update or cooled), one
// column per field; the mitigation is flattened into mitigation_kind (""
// when absent) and mitigation_split. Partitions is an empty list on every
// alert but a cluster alert's.
type HotKeyRow struct {
	ID              string  `parquet:"id"`
	Type            string  `parquet:"type,dict"`
	App             string  `parquet:"app,dict"`
	Key             string  `parquet:"key"`
	KeyHash         string  `parquet:"key_hash"`
	Rule            string  `parquet:"rule,dict"`
	Rate            float64 `parquet:"rate"`
	PeakRate        float64 `parquet:"peak_rate"`
	Threshold       float64 `parquet:"threshold"`
	Count           int64   `parquet:"count"`
	WindowMs        int64   `parquet:"window_ms"`
	Topic           string  `parquet:"topic,dict"`
	Partition       int32   `parquet:"partition"`
	Partitions      []int32 `parquet:"partitions,list"`
	Error           int64   `parquet:"error"`
	OnsetMs         int64   `parquet:"onset_ms,timestamp(millisecond)"`
	DetectedMs      int64   `parquet:"detected_ms,timestamp(millisecond)"`
	Reads           int64   `parquet:"reads"`
	Writes          int64   `parquet:"writes"`
	Bytes           int64   `parquet:"bytes"`
	MitigationKind  string  `parquet:"mitigation_kind,dict"`
	MitigationSplit int64   `parquet:"mitigation_split"`
}

// MakeHotKeyRow returns the row archiving h. A mitigation with an empty
// Kind is refused: it would read back as no mitigation.
func MakeHotKeyRow(h *HotKeyEvent) (HotKeyRow, error) {
	for _, c := range [...]struct {
		v    uint64
		name string
	}{{h.Count, "count"}, {h.Error, "error"}, {h.Reads, "reads"}, {h.Writes, "writes"}, {h.Bytes, "bytes"}} {
		if c.v > 1<<63-1 {
			return HotKeyRow{}, fmt.Errorf("archive hot-key event %s: %s %d does not fit a signed 64-bit column", h.ID, c.name, c.v)
		}
	}
	row := HotKeyRow{
		ID: h.ID, Type: h.Type, App: h.App, Key: h.Key, KeyHash: h.KeyHash, Rule: h.Rule,
		Rate: h.Rate, PeakRate: h.PeakRate, Threshold: h.Threshold, Count: int64(h.Count), WindowMs: h.WindowMs,
		Topic: h.Topic, Partition: h.Partition, Partitions: slices.Clone(h.Partitions), Error: int64(h.Error),
		OnsetMs: h.OnsetMs, DetectedMs: h.DetectedMs,
		Reads: int64(h.Reads), Writes: int64(h.Writes), Bytes: int64(h.Bytes),
	}
	if m := h.Mitigation; m != nil {
		if m.Kind == "" {
			return HotKeyRow{}, fmt.Errorf("archive hot-key event %s: mitigation without a kind", h.ID)
		}
		row.MitigationKind, row.MitigationSplit = m.Kind, int64(m.Split)
	}
	return row, nil
}

// HotKeyEvent returns the HotKeyEvent r archives. It refuses a row whose
// type is not hot, update or cooled or whose counts are negative, as
// DecodeHotKeyEvent refuses such a record.
func (r *HotKeyRow) HotKeyEvent() (*HotKeyEvent, error) {
	if r.Type != HotKeyHot && r.Type != HotKeyUpdate && r.Type != HotKeyCooled {
		return nil, fmt.Errorf("read archived hot-key event %s: type %q is not %q, %q or %q", r.ID, r.Type, HotKeyHot, HotKeyUpdate, HotKeyCooled)
	}
	if r.Count < 0 || r.Error < 0 || r.Reads < 0 || r.Writes < 0 || r.Bytes < 0 {
		return nil, fmt.Errorf("read archived hot-key event %s: negative count", r.ID)
	}
	h := &HotKeyEvent{
		Version: HotKeyVersion, ID: r.ID, Type: r.Type, App: r.App, Key: r.Key, KeyHash: r.KeyHash,
		Rule: r.Rule, Rate: r.Rate, PeakRate: r.PeakRate, Threshold: r.Threshold, Count: uint64(r.Count), WindowMs: r.WindowMs,
		Topic: r.Topic, Partition: r.Partition, Error: uint64(r.Error), OnsetMs: r.OnsetMs, DetectedMs: r.DetectedMs,
		Reads: uint64(r.Reads), Writes: uint64(r.Writes), Bytes: uint64(r.Bytes),
	}
	if len(r.Partitions) > 0 {
		// An empty list reads back as nil, as the JSON omits it.
		h.Partitions = r.Partitions
	}
	if r.MitigationKind != "" {
		h.Mitigation = &Mitigation{Kind: r.MitigationKind, Split: int(r.MitigationSplit)}
	}
	return h, nil
}
