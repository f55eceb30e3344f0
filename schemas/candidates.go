package schemas

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// CandidatesVersion is the version of the Candidates JSON format written
// today; readers accept this version only.
const CandidatesVersion = 1

// Candidates is what one partition of an events topic that is not keyed
// by access key tells the cluster stage at a detection slot boundary: its
// keys whose count over a rule's window reached the rule's local
// pre-threshold, with their counts over the window that ends at
// SlotEndMs. Every key a rule watches that is
// not listed had fewer events (bytes) over that window than the rule's
// Floor (FloorBytes), as the partition counts them.
//
// A partition sends one at every slot boundary its clock passes, listed
// keys or not, so the cluster stage knows how far each partition came.
// It travels on keyheat.windows beside the summaries, JSON encoded, with
// record key CandidatesID.
type Candidates struct {
	// Version is CandidatesVersion.
	Version int `json:"v"`
	// ID is CandidatesID(Topic, Partition, WindowMs, SlotEndMs).
	ID string `json:"id"`
	// Topic, Partition and Partitions (the topic's partition count) say
	// where the counts come from.
	Topic      string `json:"topic"`
	Partition  int32  `json:"partition"`
	Partitions int32  `json:"partitions"`
	// WindowMs is the rule window the counts are over; SlotEndMs the end
	// (exclusive) of the window they cover: [SlotEndMs − WindowMs,
	// SlotEndMs).
	WindowMs  int64 `json:"window_ms"`
	SlotEndMs int64 `json:"slot_end_ms"`
	// ClockMs is the partition's newest event time when it counted: the
	// latest event time the counts include (below SlotEndMs).
	ClockMs int64 `json:"clock_ms"`
	// Rules gives, per rule of this window that alerts, the floor every
	// unlisted key of the rule is below.
	Rules []CandidateRule `json:"rules"`
	// Keys are the listed keys, sorted by rule, app and key.
	Keys []CandidateKey `json:"keys,omitempty"`
}

// CandidateRule is a rule's floor in one Candidates: every key the rule
// watches that is not listed had fewer than Floor events and fewer than
// FloorBytes bytes in the window (each 0 when the rule sets no such
// threshold). A batch that had more keys than it may list raises the
// floor to the largest count it left out.
type CandidateRule struct {
	Name       string `json:"name"`
	Floor      uint64 `json:"floor"`
	FloorBytes uint64 `json:"floor_bytes,omitempty"`
}

// CandidateKey is one listed key's counts over the window: Events and
// Bytes of the events its rule counts (upper bounds: a key's events from
// before exact tracking began are credited with a sketch's estimate),
// Reads and Writes of every read and write since exact tracking began.
type CandidateKey struct {
	App       string `json:"app"`
	Key       string `json:"key"`
	Rule      string `json:"rule"`
	Events    uint64 `json:"events"`
	Bytes     uint64 `json:"bytes"`
	Reads     uint64 `json:"reads"`
	Writes    uint64 `json:"writes"`
	Shortened bool   `json:"shortened,omitempty"`
}

// candidatesPrefix starts every CandidatesID. A Kafka topic name has no
// ':', so no PartitionWindowID ("topic/partition/startMs") starts with it.
const candidatesPrefix = "cand:"

// CandidatesID returns the deterministic ID of a partition's candidate
// batch, also its record key on keyheat.windows:
// "cand:topic/partition/windowMs/slotEndMs".
func CandidatesID(topic string, partition int32, windowMs, slotEndMs int64) string {
	b := make([]byte, 0, len(topic)+48)
	b = append(b, candidatesPrefix...)
	b = append(b, topic...)
	b = append(b, '/')
	b = strconv.AppendInt(b, int64(partition), 10)
	b = append(b, '/')
	b = strconv.AppendInt(b, windowMs, 10)
	b = append(b, '/')
	b = strconv.AppendInt(b, slotEndMs, 10)
	return string(b)
}

// IsCandidatesKey reports whether a keyheat.windows record key is a
// CandidatesID rather than a PartitionWindowID.
func IsCandidatesKey(key []byte) bool { return strings.HasPrefix(string(key), candidatesPrefix) }

// AppendJSON appends c's JSON form to dst.
func (c *Candidates) AppendJSON(dst []byte) ([]byte, error) {
	b, err := json.Marshal(c)
	if err != nil {
		return dst, fmt.Errorf("encode candidates: %w", err)
	}
	return append(dst, b...), nil
}

// DecodeCandidates decodes a candidate batch, rejecting an unknown
// version, a window that is not positive and keys of unknown rules.
func DecodeCandidates(src []byte) (*Candidates, error) {
	var c Candidates
	if err := json.Unmarshal(src, &c); err != nil {
		return nil, fmt.Errorf("decode candidates: %w", err)
	}
	if c.Version != CandidatesVersion {
		return nil, fmt.Errorf("decode candidates: version %d, this reader knows %d", c.Version, CandidatesVersion)
	}
	if c.WindowMs <= 0 || c.Partitions <= 0 || c.Partition < 0 || c.Partition >= c.Partitions {
		return nil, fmt.Errorf("decode candidates: window %d ms, partition %d of %d", c.WindowMs, c.Partition, c.Partitions)
	}
	for i := range c.Keys {
		known := false
		for _, r := range c.Rules {
			known = known || r.Name == c.Keys[i].Rule
		}
		if !known {
			return nil, fmt.Errorf("decode candidates: key %d names rule %q, which has no floor", i, c.Keys[i].Rule)
		}
	}
	return &c, nil
}
