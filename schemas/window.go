package schemas

import (
	"encoding/json"
	"fmt"
	"strconv"
)

// WindowVersion is the version of the PartitionWindow JSON format.
const WindowVersion = 1

// KeyCount is one key's figures in a window: in a partition's summary
// (PartitionWindow) and in a merged report (WindowReport).
//
// Counts come from a top-K tracker that counts a key exactly from the
// moment it starts tracking it; what happened before is bounded by Error:
//
//	Count − Error ≤ true count ≤ Count
//
// Error is 0 when the key was tracked from its first event in the window,
// which is the common case for the heaviest keys. Bytes, Reads, Writes and
// LatencyUs are summed over the tracked events only, so they are lower
// bounds when Error > 0.
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
	// ordered as Top by Bytes and BytesError. There Bytes and BytesError are the ranked figure and
	// its bound; Count, Reads, Writes and LatencyUs are summed over the
	// key's events that carried bytes since it was tracked (lower bounds,
	// Error 0).
	Big []KeyCount `json:"big,omitempty"`
	// Floor bounds every key not in Top: its true count is at most Floor.
	// Whitelisted keys are never listed and not bounded by it.
	Floor uint64 `json:"floor"`
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
	// so each key lives on one partition and the union of the partitions'
	// Top lists is exact. When false, Apps carry sketches.
	Keyed bool `json:"keyed"`
	// Final marks the last summary of a partition that reached the end of
	// its input (replay, --exit-at-end): no later window will come from it.
	Final bool `json:"final,omitempty"`
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
// an unknown version and a window whose bounds are not ordered.
func DecodePartitionWindow(src []byte) (*PartitionWindow, error) {
	var w PartitionWindow
	if len(src) > 0 && src[0] == WindowBinaryMagic {
		if err := decodeWindowBinary(src, &w); err != nil {
			return nil, fmt.Errorf("decode partition window: %w", err)
		}
	} else if err := json.Unmarshal(src, &w); err != nil {
		return nil, fmt.Errorf("decode partition window: %w", err)
	}
	if w.Version != WindowVersion {
		return nil, fmt.Errorf("decode partition window: version %d, this reader knows %d", w.Version, WindowVersion)
	}
	if w.EndMs <= w.StartMs {
		return nil, fmt.Errorf("decode partition window %s: end %d is not after start %d", w.ID, w.EndMs, w.StartMs)
	}
	return &w, nil
}
