package schemas

import (
	"encoding/json"
	"fmt"
	"strconv"
)

// WindowVersion is the version of the PartitionWindow formats written
// today, JSON and binary. Version 2 added Approximate, the rankings by
// reads, writes and latency, and KeyCount.Shortened, and made every list's
// Count and Error bounds of the key's count. DecodePartitionWindow also
// reads version 1 and returns it as version 2 (see upgradeV1).
const WindowVersion = 2

// KeyCount is one key's figures in a window: in a partition's summary
// (PartitionWindow) and in a merged report (WindowReport).
//
// A partition counts every key of a window exactly while its exact table
// has room (pipeline's summary.exact_keys and exact_key_bytes); keys that
// come after it filled are counted by a top-K tracker that counts a key
// exactly from the moment it starts tracking it, and bounds what came
// before by Error:
//
//	Count − Error ≤ true count ≤ Count
//
// This holds of every KeyCount in every list. Error is 0 when the key was
// counted from its first event in the window; then Bytes, Reads, Writes
// and LatencyUs are exact too. With Error above 0 they are lower bounds,
// except Bytes in a list ranked by bytes, which is bounded by BytesError.
type KeyCount struct {
	// App and Key identify the key; the same key string in two apps is two
	// keys. In JSON a Key that is not UTF-8 also has "key_b64", its exact
	// bytes, which the decoders prefer (see rawkey.go).
	App string `json:"app"`
	Key string `json:"key"`
	// Count is the number of events (an upper bound, see Error).
	Count uint64 `json:"count"`
	// Error bounds how much Count may exceed the true count.
	Error uint64 `json:"error,omitempty"`
	// Bytes is the sum of the events' Bytes.
	Bytes uint64 `json:"bytes,omitempty"`
	// Reads and Writes split Count by operation (see the rules' read and
	// write operation lists); events that are neither count in Count only.
	Reads  uint64 `json:"reads,omitempty"`
	Writes uint64 `json:"writes,omitempty"`
	// LatencyUs is the sum of the events' latencies, a measure of the cost
	// the key imposes where the log records service time.
	LatencyUs uint64 `json:"latency_us,omitempty"`
	// Partition is where the key was seen: the one partition of a keyed
	// topic, or -1 in a report when its events came from several.
	Partition int32 `json:"partition"`
	// Share is Count divided by the scope's events; set in reports only.
	Share float64 `json:"share,omitempty"`
	// BytesError bounds Bytes the way Error bounds Count, in lists ranked
	// by bytes (AppWindow.Big): Bytes − BytesError ≤ true bytes ≤ Bytes.
	BytesError uint64 `json:"bytes_error,omitempty"`
	// Shortened reports that the key was longer than the partition's
	// pipeline.max_key_bytes and Key is its prefix, "…" and 16 hex digits
	// of the xxh3 hash of the whole key: not a name an application uses.
	Shortened bool `json:"shortened,omitempty"`
}

// AppWindow is one app's part of a partition's window.
type AppWindow struct {
	// App is the app, or OtherApp for apps beyond the partition's app limit.
	App string `json:"app"`
	// Events, Bytes, Reads, Writes and LatencyUs are exact totals over the
	// app's events in the window.
	Events    uint64 `json:"events"`
	Bytes     uint64 `json:"bytes"`
	Reads     uint64 `json:"reads"`
	Writes    uint64 `json:"writes"`
	LatencyUs uint64 `json:"latency_us"`
	// Top lists the heaviest keys by events, heaviest first: by Count, then
	// by Count − Error, then by key.
	Top []KeyCount `json:"top"`
	// Big lists the heaviest keys by bytes (big keys), heaviest first,
	// ordered as Top by Bytes and BytesError. There Bytes and BytesError
	// are the ranked figure and its bound; Count and Error bound the
	// count as everywhere.
	Big []KeyCount `json:"big,omitempty"`
	// TopReads, TopWrites and TopLatency list the heaviest keys by reads,
	// by writes and by summed latency, as many as Big: with Error 0 the
	// figures are exact, otherwise lower bounds (the merger's secondary
	// rankings start from them).
	TopReads   []KeyCount `json:"top_reads,omitempty"`
	TopWrites  []KeyCount `json:"top_writes,omitempty"`
	TopLatency []KeyCount `json:"top_latency,omitempty"`
	// Floor bounds every key not in Top: its true count is at most Floor.
	// Whitelisted keys are never listed and not bounded by it.
	Floor uint64 `json:"floor"`
	// Approximate reports that the partition's exact table filled in this
	// window, so keys of the app were counted by a bounded top-K: listed
	// counts may carry Errors, and Top may miss keys up to Floor. When
	// false every key of the app was counted exactly: Top is its heaviest
	// keys (ties at the cut in any order) and every figure listed is
	// exact.
	Approximate bool `json:"approximate,omitempty"`
	// Distinct is the app's distinct-key sketch (sketch.Cardinality's
	// binary encoding), merged across partitions into the report's estimate.
	Distinct []byte `json:"distinct,omitempty"`
	// Slots counts the app's events per Redis Cluster hash slot (see
	// the skew report), non-zero slots only, sorted by slot.
	Slots []SlotCount `json:"slots,omitempty"`
	// Sketch is the app's Count-Min sketch of the window (sketch.CountMin's
	// binary encoding), present only when the topic is not keyed by access
	// key: the merger then sums the partitions' sketches to count a key
	// whose events are spread over partitions.
	Sketch []byte `json:"sketch,omitempty"`
}

// SlotCount is the number of events whose key hashes to one Redis Cluster
// slot: CRC16 (XMODEM) of the key, or of its first non-empty {hash tag},
// modulo 16384.
type SlotCount struct {
	Slot   uint16 `json:"slot"`
	Events uint64 `json:"events"`
}

// OtherApp is the app name under which events of apps beyond a configured
// limit are folded, in partition summaries and reports.
const OtherApp = "_other"

// PartitionWindow is the value of a record on keyheat.windows: what one
// partition of the events topic counted in one report window. A partition
// emits one for every window with an event or a late event, in order, and
// for the last of a run of empty windows closing together: a summary of a
// window also says the partition has nothing more for the earlier ones,
// so the merger knows when it has heard from all of them.
//
// The record key is PartitionWindowID; the JSON form is the struct's
// (AppendJSON / DecodePartitionWindow), sketches in standard base64. The
// service writes the binary form (AppendBinary), which carries the same
// fields.
type PartitionWindow struct {
	// Version is WindowVersion.
	Version int `json:"v"`
	// ID is PartitionWindowID(Topic, Partition, StartMs): deterministic,
	// so a summary re-sent after a crash is recognised by the merger.
	ID string `json:"id"`
	// Topic and Partition are the events partition counted.
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	// Partitions is the topic's partition count when the summary was made:
	// how many summaries of this window the merger waits for.
	Partitions int32 `json:"partitions"`
	// StartMs and EndMs bound the window [StartMs, EndMs) in event time.
	StartMs int64 `json:"start_ms"`
	EndMs   int64 `json:"end_ms"`
	// FirstOffset and LastOffset are the lowest and highest offsets of the
	// events counted in the window; both -1 when it holds none.
	FirstOffset int64 `json:"first_offset"`
	LastOffset  int64 `json:"last_offset"`
	// Events is the number of events counted in the window, all apps.
	Events uint64 `json:"events"`
	// Late counts events that arrived after their own window had closed on
	// this partition, reported in this (the oldest open) window. They are
	// not in any count.
	Late uint64 `json:"late"`
	// WatermarkMs is the partition's watermark when the window closed.
	WatermarkMs int64 `json:"watermark_ms"`
	// Keyed reports that the partition's records were keyed by access key,
	// so each key lives on one partition and its count there is its count
	// in the window. When false, Apps carry sketches.
	Keyed bool `json:"keyed"`
	// Final marks the last summary of a partition that reached the end of
	// its input (replay, --exit-at-end): no later window will come from it.
	Final bool `json:"final,omitempty"`
	// Approximate is set when some app's lists are (AppWindow.Approximate).
	Approximate bool `json:"approximate,omitempty"`
	// Apps holds each app's figures, sorted by App.
	Apps []AppWindow `json:"apps"`
}

// PartitionWindowID returns the deterministic ID of a partition's window
// summary, also its record key on keyheat.windows:
// "topic/partition/startMs".
func PartitionWindowID(topic string, partition int32, startMs int64) string {
	b := make([]byte, 0, len(topic)+32)
	b = append(b, topic...)
	b = append(b, '/')
	b = strconv.AppendInt(b, int64(partition), 10)
	b = append(b, '/')
	b = strconv.AppendInt(b, startMs, 10)
	return string(b)
}

// AppendJSON appends w's JSON form to dst.
func (w *PartitionWindow) AppendJSON(dst []byte) ([]byte, error) {
	b, err := json.Marshal(w)
	if err != nil {
		return dst, fmt.Errorf("encode partition window: %w", err)
	}
	return append(dst, b...), nil
}

// DecodePartitionWindow decodes a keyheat.windows record value in either
// form (AppendJSON, AppendBinary: told apart by the first byte), rejecting
// an unknown version and a window whose bounds are not ordered. A version 1
// summary, as detect wrote it before exact counting, is returned as
// version 2 (upgradeV1), so the merger reads both during an upgrade.
func DecodePartitionWindow(src []byte) (*PartitionWindow, error) {
	var w PartitionWindow
	if len(src) > 0 && src[0] == WindowBinaryMagic {
		if err := decodeWindowBinary(src, &w); err != nil {
			return nil, fmt.Errorf("decode partition window: %w", err)
		}
	} else if err := json.Unmarshal(src, &w); err != nil {
		return nil, fmt.Errorf("decode partition window: %w", err)
	}
	switch w.Version {
	case WindowVersion:
	case 1:
		upgradeV1(&w)
	default:
		return nil, fmt.Errorf("decode partition window: version %d, this reader knows 1 and %d", w.Version, WindowVersion)
	}
	if w.EndMs <= w.StartMs {
		return nil, fmt.Errorf("decode partition window %s: end %d is not after start %d", w.ID, w.EndMs, w.StartMs)
	}
	return &w, nil
}

// upgradeV1 turns a version 1 summary into what it says in version 2.
// Version 1 counted with a top-K alone, so an app's lists are exact only
// when its Floor is 0 (the top-K never filled and listed every key);
// otherwise they are marked approximate. A version 1 big key's Count and
// other figures were summed over its events that carried bytes since it
// was tracked, lower bounds with no upper one: it takes its Top entry's
// figures when that one is exact (Error 0), else the count bounds its Top
// entry gives, or, when not in Top, [that lower bound, Floor] (Floor
// bounds every key not in Top).
func upgradeV1(w *PartitionWindow) {
	w.Version = WindowVersion
	for i := range w.Apps {
		a := &w.Apps[i]
		a.Approximate = a.Floor > 0
		w.Approximate = w.Approximate || a.Approximate
		for j := range a.Big {
			b := &a.Big[j]
			lower := b.Count
			b.Count, b.Error = a.Floor, a.Floor-min(lower, a.Floor)
			for _, t := range a.Top {
				if t.Key == b.Key && t.Error == 0 {
					*b = t
					break
				}
				if t.Key == b.Key {
					b.Count, b.Error = t.Count, t.Error
					break
				}
			}
		}
	}
}
