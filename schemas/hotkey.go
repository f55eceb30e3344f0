package schemas

import (
	"encoding/json"
	"fmt"
	"strconv"
)

// HotKeyVersion is the version of the HotKeyEvent JSON format written
// today. Readers accept this version only; a new version gets a new number
// so an old reader fails loudly instead of misreading.
const HotKeyVersion = 1

// HotKey types: a key turned hot, a key still hot whose rate moved
// (HotKeyUpdate, a refresh of the registry entry), or a hot key cooled
// down.
const (
	HotKeyHot    = "hot"
	HotKeyUpdate = "update"
	HotKeyCooled = "cooled"
)

// Mitigation kinds suggested for a hot key.
const (
	// MitigationLocalCache: the key is mostly read; cache it in the
	// application's process for a short time.
	MitigationLocalCache = "local_cache"
	// MitigationSplit: the key is mostly written; spread it over
	// Mitigation.Split physical keys (key:0 … key:N-1) and aggregate on read.
	MitigationSplit = "split"
)

// Mitigation is what keyheat suggests an application does about a hot key.
type Mitigation struct {
	// Kind is MitigationLocalCache or MitigationSplit.
	Kind string `json:"kind"`
	// Split is the number of physical keys for MitigationSplit: the next
	// power of two of the key's write rate / the per-node capacity
	// (configured). 0 for other kinds.
	Split int `json:"split,omitempty"`
}

// MitigationCoalesce: collapse an application's concurrent misses of the
// key into one upstream call and cache nothing. Detect does not suggest it;
// an operator can ask for it on a manual entry.
const MitigationCoalesce = "coalesce"

// HotKeyEvent is the value of a record on keyheat.hotkeys, the registry of
// hot keys that applications follow. It is published the moment a key
// crosses its rule's rate (Type "hot"), again while it stays hot each time
// its rate has moved materially since the last record (Type "update",
// detect's pipeline.detect.refresh_change), and when it has stayed below
// the rate for the rule's cool-down (Type "cooled").
//
// The topic is compacted and the record key is HotKeyRecordKey(App, Key),
// so its latest record per key is the key's current state: an application
// that reads the topic from the start knows every key that is hot now.
// Right after a cooled, detect writes a tombstone (a record with a nil
// value) under the same record key, so that compaction removes the key;
// a reader takes a tombstone, like a cooled, as "not hot".
//
// JSON (AppendJSON / DecodeHotKeyEvent), every field always present unless
// marked omitempty:
//
//	{"v":1,"id":"keyheat.events/3/hot-api/shop/product:42/1767225600123",
//	 "type":"hot","app":"shop","key":"product:42","key_hash":"9f1c0a4b5e6d7c8a",
//	 "rule":"hot-api","rate":5120.5,"threshold":1000,"count":5121,"window_ms":1000,
//	 "topic":"keyheat.events","partition":3,"onset_ms":1767225600123,
//	 "detected_ms":1767225600131,"reads":5000,"writes":121,"bytes":2621952,
//	 "mitigation":{"kind":"local_cache"}}
//
// A key that is not UTF-8 also has "key_b64" and "id_b64", its and the
// ID's exact bytes in base64, which DecodeHotKeyEvent prefers (see
// rawkey.go).
type HotKeyEvent struct {
	// Version is HotKeyVersion.
	Version int `json:"v"`
	// ID is deterministic: the same crossing detected again after a crash
	// has the same ID, so consumers and sinks dedupe by it. See HotKeyID.
	// One exception: an update re-published by a restart whose re-read
	// does not reach back to its episode's onset has the same ID, rate and
	// counts, but OnsetMs and PeakRate as far as the restart saw them.
	ID string `json:"id"`
	// Type is HotKeyHot, HotKeyUpdate or HotKeyCooled.
	Type string `json:"type"`
	// App and Key are the hot key.
	App string `json:"app"`
	Key string `json:"key"`
	// KeyHash is 16 lowercase hex digits of the key's 64-bit xxh3 hash, for
	// dashboards and metric labels that must not carry raw keys.
	KeyHash string `json:"key_hash"`
	// Rule is the name of the rule whose threshold the key crossed.
	Rule string `json:"rule"`
	// Rate is the key's rate in events per second over the rule's window at
	// the moment of detection (Type hot), of the refresh (Type update) or
	// of cooling (Type cooled).
	Rate float64 `json:"rate"`
	// PeakRate is the highest Rate published for this episode of the key
	// being hot, this record's included (0 on records that predate it).
	PeakRate float64 `json:"peak_rate,omitempty"`
	// Threshold is the rule's rate threshold, events per second; 0 when the
	// rule sets only a bytes threshold.
	Threshold float64 `json:"threshold"`
	// Count is the number of events of the key inside the rule's window at
	// that moment (an update's: the window ending at its slot boundary).
	Count uint64 `json:"count"`
	// BytesRate is the key's bytes per second over the rule's window, and
	// BytesThreshold the rule's bytes-per-second threshold (0 when it sets
	// none). A key is hot when it reaches either threshold its rule sets.
	BytesRate      float64 `json:"bytes_rate,omitempty"`
	BytesThreshold float64 `json:"bytes_threshold,omitempty"`
	// WindowMs is the length of the rule's sliding window.
	WindowMs int64 `json:"window_ms"`
	// Topic and Partition say where the key was seen. When the events topic
	// is keyed by access key, one partition holds all of a key's events.
	// A cluster alert (a topic not keyed by access key, whose partitions'
	// counts are summed) has Partition ClusterPartition and lists the
	// partitions whose counts it sums in Partitions.
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	// Partitions, on a cluster alert, are the partitions that listed the
	// key in the counts summed, ascending.
	Partitions []int32 `json:"partitions,omitempty"`
	// Error bounds what Count may miss. On a partition's alert it is the
	// events of the window's oldest slot, which Count leaves out though
	// part of that slot lies inside the window: the key's count over the
	// window is at most Count + Error. A partition's update counts the
	// window ending at a slot boundary whole, so its Error is 0. On a
	// cluster alert, partitions
	// that did not list the key had fewer events than their floor, so the
	// key's cluster count is at most Count + Error (and, Count being a sum
	// of partition counts that are upper bounds, Count itself may be
	// above the truth by what each partition's credit over-counts).
	Error uint64 `json:"error,omitempty"`
	// OnsetMs is the event time (Unix ms) of the event that made the key
	// cross the threshold (Type hot, and the same on the episode's
	// updates: an update's own event time, its slot boundary, is the one
	// its ID ends with), or of the event-time instant at which its
	// cool-down ended (Type cooled).
	OnsetMs int64 `json:"onset_ms"`
	// DetectedMs is the wall-clock time (Unix ms) at which detect published
	// the event; DetectedMs − OnsetMs is the detection delay when the input
	// is live. It is the one field that differs between a live run and a
	// replay of the same input.
	DetectedMs int64 `json:"detected_ms"`
	// Reads, Writes and Bytes split the key's events in the rule's window:
	// reads and writes by the event's operation, bytes summed. Count and
	// Bytes count the events the rule counts (its ops) and are upper
	// bounds: a key's events from before exact tracking began are credited
	// with a sketch's estimate. Reads and Writes count every read and write
	// of the key since exact tracking began, so they are lower bounds; they
	// decide the Mitigation.
	Reads  uint64 `json:"reads"`
	Writes uint64 `json:"writes"`
	Bytes  uint64 `json:"bytes"`
	// Mitigation is the suggested remedy; absent on Type cooled.
	Mitigation *Mitigation `json:"mitigation,omitempty"`
	// Shortened reports that the key was longer than the partition's
	// pipeline.max_key_bytes and Key is its prefix, "…" and 16 hex digits
	// of the xxh3 hash of the whole key (KeyHash is then the hash of that
	// shortened form).
	Shortened bool `json:"shortened,omitempty"`
}

// ClusterPartition is the Partition of a cluster alert: one decided over
// every partition of the topic, not by one.
const ClusterPartition = -1

// HotKeyID returns the deterministic ID of a hot-key event: where it was
// detected (topic, partition), by which rule, for which key, of which type,
// at which event time (a hot's and a cooled's OnsetMs, an update's slot
// boundary). A restart that detects the same crossing again produces the
// same ID.
func HotKeyID(topic string, partition int32, rule, typ, app, key string, onsetMs int64) string {
	b := make([]byte, 0, len(topic)+len(rule)+len(app)+len(key)+48)
	b = append(b, topic...)
	b = append(b, '/')
	b = strconv.AppendInt(b, int64(partition), 10)
	b = append(b, '/')
	b = append(b, rule...)
	b = append(b, '/')
	b = append(b, typ...)
	b = append(b, '/')
	b = strconv.AppendInt(b, int64(len(app)), 10)
	b = append(b, ':')
	b = append(b, app...)
	b = append(b, '/')
	b = append(b, key...)
	b = append(b, '/')
	b = strconv.AppendInt(b, onsetMs, 10)
	return string(b)
}

// HotKeyRecordKey is the Kafka record key of a key's records on
// keyheat.hotkeys: the app's length, a colon, the app, then the key
// ("4:shopproduct:42"). The length prefix keeps it unambiguous whatever
// bytes app and key hold, so compaction never merges two keys.
func HotKeyRecordKey(app, key string) []byte {
	b := make([]byte, 0, len(app)+len(key)+4)
	b = strconv.AppendInt(b, int64(len(app)), 10)
	b = append(b, ':')
	b = append(b, app...)
	return append(b, key...)
}

// AppendJSON appends h's JSON form to dst.
func (h *HotKeyEvent) AppendJSON(dst []byte) ([]byte, error) {
	b, err := json.Marshal(h)
	if err != nil {
		return dst, fmt.Errorf("encode hot-key event: %w", err)
	}
	return append(dst, b...), nil
}

// DecodeHotKeyEvent decodes a keyheat.hotkeys record value. It rejects a
// version it does not know, and a type other than hot, update or cooled.
// A record with a nil value (a tombstone) is not an event: the key left the
// registry; callers check for it before decoding.
func DecodeHotKeyEvent(src []byte) (*HotKeyEvent, error) {
	var h HotKeyEvent
	if err := json.Unmarshal(src, &h); err != nil {
		return nil, fmt.Errorf("decode hot-key event: %w", err)
	}
	if h.Version != HotKeyVersion {
		return nil, fmt.Errorf("decode hot-key event: version %d, this reader knows %d", h.Version, HotKeyVersion)
	}
	if h.Type != HotKeyHot && h.Type != HotKeyUpdate && h.Type != HotKeyCooled {
		return nil, fmt.Errorf("decode hot-key event: type %q is not %q, %q or %q", h.Type, HotKeyHot, HotKeyUpdate, HotKeyCooled)
	}
	return &h, nil
}
