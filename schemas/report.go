package schemas

import (
	"encoding/json"
	"fmt"
	"strconv"
)

// ReportVersion is the version of the WindowReport JSON format.
const ReportVersion = 1

// Report scopes.
const (
	// ScopeCluster covers every app and partition.
	ScopeCluster = "cluster"
	// ScopeApp covers one app (or OtherApp) over every partition.
	ScopeApp = "app"
)

// WindowReport is the value of a record on keyheat.reports: what the whole
// cluster (Scope cluster) or one app (Scope app) did in one report window,
// merged from every partition's PartitionWindow.
//
// The record key is ID. Reports are deterministic: the same input read in
// the same order gives byte-identical reports, live or replayed, except
// when the merger gave up waiting for a partition (Partial).
type WindowReport struct {
	// Version is ReportVersion.
	Version int `json:"v"`
	// ID is WindowReportID(Scope, App, StartMs).
	ID string `json:"id"`
	// Scope is ScopeCluster or ScopeApp; App is set for ScopeApp.
	Scope string `json:"scope"`
	App   string `json:"app,omitempty"`
	// StartMs and EndMs bound the window [StartMs, EndMs) in event time.
	StartMs int64 `json:"start_ms"`
	EndMs   int64 `json:"end_ms"`
	// Topics are the events topics merged, sorted.
	Topics []string `json:"topics"`
	// Events, Bytes, Reads, Writes and LatencyUs are exact totals.
	Events    uint64 `json:"events"`
	Bytes     uint64 `json:"bytes"`
	Reads     uint64 `json:"reads"`
	Writes    uint64 `json:"writes"`
	LatencyUs uint64 `json:"latency_us"`
	// Late counts events reported late in this window by the partitions
	// (cluster scope only; late events are not attributed to apps).
	Late uint64 `json:"late"`
	// Distinct estimates the number of distinct key strings (HyperLogLog,
	// about 1% standard error); in the cluster report a key string two apps
	// use counts once.
	Distinct uint64 `json:"distinct"`
	// Keyed reports that every partition's input was keyed by access key,
	// so each key's figures come from the one partition that saw it;
	// otherwise counts were merged from sketches and carry wider error
	// bounds.
	Keyed bool `json:"keyed"`
	// Partial reports that the merger emitted the window without hearing
	// from every partition, named in Missing as "topic/partition".
	Partial bool     `json:"partial,omitempty"`
	Missing []string `json:"missing,omitempty"`
	// Top are the heaviest keys by events, heaviest first, with Share.
	// Every listed key has Count − Error ≤ true count ≤ Count, and its
	// other figures are exact when Error is 0, lower bounds otherwise.
	Top []KeyCount `json:"top"`
	// Floor bounds every key not in Top: its true count in the window is
	// at most Floor. A key with more events than Floor is always in Top.
	Floor uint64 `json:"floor"`
	// Guaranteed is how many keys at the head of Top are surely the
	// Guaranteed heaviest keys of the window: each has at least as many
	// events (Count − Error) as any key after it or left out can have
	// (their Count, and Floor), the guaranteed top-k of Metwally, Agrawal
	// and El Abbadi. The keys after them are candidates whose bounds
	// overlap those of keys not listed: listed by Count, not ranked.
	Guaranteed int `json:"guaranteed"`
	// Approximate reports that the report may differ from the exact
	// answer: some partition could not count every key of the scope
	// exactly (its exact table filled, AppWindow.Approximate), a listed
	// count carries an Error, or not every listed key is guaranteed. When
	// false, Top is the exact top of the window (ties at the cut in any
	// order) with exact figures, and so are the first summary.big_keys
	// keys of TopBytes, TopReads, TopWrites and TopLatency.
	Approximate bool `json:"approximate,omitempty"`
	// TopBytes are the heaviest keys by bytes (big keys). It and the
	// rankings below cover the keys some partition listed (in any of its
	// lists), by figures that are exact where Error is 0 and lower bounds
	// otherwise; keys without the figure are left out.
	TopBytes []KeyCount `json:"top_bytes,omitempty"`
	// TopReads and TopWrites rank the listed keys by reads and by writes.
	TopReads  []KeyCount `json:"top_reads,omitempty"`
	TopWrites []KeyCount `json:"top_writes,omitempty"`
	// TopLatency ranks the listed keys by summed latency (cost), when the
	// log records latency.
	TopLatency []KeyCount `json:"top_latency,omitempty"`
	// Skew describes how unevenly the load fell.
	Skew Skew `json:"skew"`
	// Advice suggests a mitigation for each key in Top whose rate crossed
	// its hot threshold in this window and whose events were classified as
	// reads or writes, in Top's order.
	Advice []KeyAdvice `json:"advice,omitempty"`
}

// Skew is how unevenly a window's load fell on partitions, on Redis
// Cluster nodes, and on keys.
type Skew struct {
	// Partitions is the load per events partition, sorted by topic and
	// partition; MaxMean is the largest load over the mean and Gini the
	// Gini coefficient of the loads (0 even, towards 1 all on one).
	Partitions []PartitionLoad `json:"partitions"`
	MaxMean    float64         `json:"max_mean"`
	Gini       float64         `json:"gini"`
	// Top1Share and Top10Share are the shares of the events that went to
	// the heaviest key and to the ten heaviest keys.
	Top1Share  float64 `json:"top1_share"`
	Top10Share float64 `json:"top10_share"`
	// Nodes is the Redis Cluster view: the events per node when the 16384
	// slots are split over the configured nodes (or N equal ranges), with
	// NodeMaxMean and NodeGini as above, and the hottest slots.
	Nodes       []NodeLoad  `json:"nodes,omitempty"`
	NodeMaxMean float64     `json:"node_max_mean,omitempty"`
	NodeGini    float64     `json:"node_gini,omitempty"`
	HotSlots    []SlotCount `json:"hot_slots,omitempty"`
}

// PartitionLoad is one events partition's load in a window.
type PartitionLoad struct {
	Topic     string  `json:"topic"`
	Partition int32   `json:"partition"`
	Events    uint64  `json:"events"`
	Bytes     uint64  `json:"bytes"`
	Share     float64 `json:"share"`
}

// NodeLoad is one Redis Cluster node's load in a window.
type NodeLoad struct {
	// Node is the configured node name, or "shard-N" for equal ranges.
	Node string `json:"node"`
	// FirstSlot and LastSlot are the lowest and highest slot the node
	// serves (inclusive). A node given several ranges lists them in Ranges;
	// then not every slot between FirstSlot and LastSlot is the node's.
	FirstSlot uint16      `json:"first_slot"`
	LastSlot  uint16      `json:"last_slot"`
	Ranges    []SlotRange `json:"ranges,omitempty"`
	Events    uint64      `json:"events"`
	Share     float64     `json:"share"`
}

// SlotRange is a range of Redis Cluster hash slots, First to Last
// inclusive.
type SlotRange struct {
	First uint16 `json:"first"`
	Last  uint16 `json:"last"`
}

// KeyAdvice is a suggested mitigation for one hot key of a report.
type KeyAdvice struct {
	App string `json:"app"`
	Key string `json:"key"`
	// Rate is the key's rate in events per second over the report window,
	// from the lower bound of its count (Count − Error), so a key is
	// advised on only when it surely crossed its threshold.
	Rate float64 `json:"rate"`
	// Threshold is the rate, events per second, the key crossed.
	Threshold float64 `json:"threshold"`
	// ReadShare is reads / (reads + writes) for the key in the window.
	ReadShare  float64    `json:"read_share"`
	Mitigation Mitigation `json:"mitigation"`
}

// WindowReportID returns a report's deterministic ID, also its record key
// on keyheat.reports: "cluster/startMs" or "app/<len>:<app>/startMs".
func WindowReportID(scope, app string, startMs int64) string {
	b := make([]byte, 0, len(app)+40)
	b = append(b, scope...)
	b = append(b, '/')
	if scope == ScopeApp {
		b = strconv.AppendInt(b, int64(len(app)), 10)
		b = append(b, ':')
		b = append(b, app...)
		b = append(b, '/')
	}
	b = strconv.AppendInt(b, startMs, 10)
	return string(b)
}

// AppendJSON appends r's JSON form to dst. The form is deterministic:
// fields in declaration order, floats in Go's shortest representation.
func (r *WindowReport) AppendJSON(dst []byte) ([]byte, error) {
	if out, ok := r.appendJSON(dst); ok {
		return out, nil
	}
	// A NaN or infinite float: encoding/json says which.
	b, err := json.Marshal(r)
	if err != nil {
		return dst, fmt.Errorf("encode window report: %w", err)
	}
	return append(dst, b...), nil
}

// DecodeWindowReport decodes a keyheat.reports record value, rejecting an
// unknown version or scope.
func DecodeWindowReport(src []byte) (*WindowReport, error) {
	var r WindowReport
	if err := json.Unmarshal(src, &r); err != nil {
		return nil, fmt.Errorf("decode window report: %w", err)
	}
	if r.Version != ReportVersion {
		return nil, fmt.Errorf("decode window report: version %d, this reader knows %d", r.Version, ReportVersion)
	}
	if r.Scope != ScopeCluster && r.Scope != ScopeApp {
		return nil, fmt.Errorf("decode window report %s: scope %q is neither %q nor %q", r.ID, r.Scope, ScopeCluster, ScopeApp)
	}
	return &r, nil
}
