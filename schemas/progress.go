package schemas

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// ProgressVersion is the version of the Progress JSON format.
const ProgressVersion = 1

// Progress states of an events partition.
const (
	// ProgressWaiting: assigned, with records to read, no event taken yet;
	// where its events will lie in time is unknown.
	ProgressWaiting = "waiting"
	// ProgressReading: taking events; ClockMs is its newest event time.
	ProgressReading = "reading"
	// ProgressIdle: no event for the idle timeout, or nothing to read;
	// ClockMs follows the wall clock.
	ProgressIdle = "idle"
	// ProgressEnded: an exit-at-end run read it to its end.
	ProgressEnded = "ended"
)

// Progress is the value of a record on keyheat.progress, a small
// compacted topic every detect instance writes and follows: how far each
// events partition has come, and that the instance holding it is alive.
// It is how detect instances keep their partitions aligned in event time
// with one another, and how the merger tells a partition that is slow
// (alive and moving, waited for) from one whose owner is gone (silent,
// given up on), with Kafka as the only coordination.
//
// Two kinds share the topic. A partition record (Topic set; record key
// ProgressKey) says where one events partition of a detect group is; its
// owner sends one whenever the partition's clock enters a new report
// window (at most every few hundred milliseconds) and at least every
// heartbeat. A member record (Topic empty; record key MemberKey) is an
// instance's own heartbeat; reading back its own tells an instance that
// it is not behind on the topic.
//
// JSON (AppendJSON / DecodeProgress):
//
//	{"v":1,"group":"keyheat-detect","member":"host-1a2b3c","at_ms":1767225600123,
//	 "topic":"keyheat.events","partition":3,"partitions":8,"generation":7,"state":"reading",
//	 "clock_ms":1767225599000,"offset":123456}
type Progress struct {
	// Version is ProgressVersion.
	Version int `json:"v"`
	// Group is the detect consumer group the sender belongs to: groups
	// reading the same topics do not mix.
	Group string `json:"group"`
	// Member names the sending detect instance.
	Member string `json:"member"`
	// AtMs is the sender's wall clock when it sent the record (Unix ms).
	AtMs int64 `json:"at_ms"`
	// Topic and Partition name the events partition; Topic is empty in a
	// member record.
	Topic     string `json:"topic,omitempty"`
	Partition int32  `json:"partition"`
	// Partitions is the topic's partition count: the merger expects every
	// partition of a topic any instance of the group reads.
	Partitions int32 `json:"partitions,omitempty"`
	// Generation is the group generation in which the sender held the
	// partition, for whoever reads the topic to follow an owner change.
	// Readers do not order records by it: generations start again at 1
	// when a group is deleted or expires.
	Generation int32 `json:"generation,omitempty"`
	// State is one of the Progress states.
	State string `json:"state,omitempty"`
	// ClockMs is the partition's clock: its newest event time, or for an
	// idle partition the wall clock it follows. Absent while waiting.
	ClockMs int64 `json:"clock_ms,omitempty"`
	// PositionMs, while reading, is the start of the window the partition
	// stands at for the alignment: its clock's window, or an earlier one
	// while summaries of older windows are not yet on the windows topic.
	PositionMs int64 `json:"position_ms,omitempty"`
	// NoEvents marks an idle partition that never took an event: it has
	// none in any window that ends by ClockMs minus the lateness.
	NoEvents bool `json:"no_events,omitempty"`
	// Offset is the next offset the partition reads.
	Offset int64 `json:"offset,omitempty"`
}

// ProgressKey is the record key of a partition record of group.
func ProgressKey(group, topic string, partition int32) []byte {
	return []byte("p/" + group + "/" + topic + "/" + strconv.Itoa(int(partition)))
}

// MemberKey is the record key of a member record of group.
func MemberKey(group, member string) []byte {
	return []byte("m/" + group + "/" + member)
}

// IsMember reports whether p is a member record.
func (p *Progress) IsMember() bool { return p.Topic == "" }

// AppendJSON appends p's JSON form to dst.
func (p *Progress) AppendJSON(dst []byte) ([]byte, error) {
	b, err := json.Marshal(p)
	if err != nil {
		return dst, fmt.Errorf("encode progress: %w", err)
	}
	return append(dst, b...), nil
}

var progressStates = []string{ProgressWaiting, ProgressReading, ProgressIdle, ProgressEnded}

// DecodeProgress decodes and checks one Progress record.
func DecodeProgress(src []byte) (*Progress, error) {
	var p Progress
	if err := json.Unmarshal(src, &p); err != nil {
		return nil, fmt.Errorf("decode progress: %w", err)
	}
	var errs []error
	if p.Version != ProgressVersion {
		errs = append(errs, fmt.Errorf("version %d, this reader knows %d", p.Version, ProgressVersion))
	}
	if p.Group == "" || p.Member == "" {
		errs = append(errs, errors.New("no group or member"))
	}
	if p.Topic != "" {
		if p.Partition < 0 || p.Partition >= p.Partitions {
			errs = append(errs, fmt.Errorf("partition %d of %d", p.Partition, p.Partitions))
		}
		if !slices.Contains(progressStates, p.State) {
			errs = append(errs, fmt.Errorf("state %q, want one of %s", p.State, strings.Join(progressStates, ", ")))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("decode progress: %w", err)
	}
	return &p, nil
}
