package detect

import (
	"github.com/keyheat/keyheat/schemas"
)

// This file names what the service needs from the partition core of the
// detection code (package pipeline), fed one event at a time. The types
// mirror pipeline's, field for field, so that the service is wired to it
// by aliasing them.

// Source names the events partition a Core counts.
type Source struct {
	Topic     string
	Partition int32
	// Partitions is the topic's partition count.
	Partitions int32
	// Keyed reports that the topic's records are keyed by access key.
	Keyed bool
}

// Start is where a Core starts: the offset its first event will have
// (the committed offset, or where a group with no commit starts) and the
// metadata committed with it ("" when there is none).
type Start struct {
	Offset   int64
	Metadata string
}

// CommitPoint is what a partition may commit: the offset, and the
// metadata to store with it.
type CommitPoint struct {
	Offset   int64
	Metadata string
}

// Output collects what a Core produced.
type Output struct {
	Windows []schemas.PartitionWindow
	HotKeys []schemas.HotKeyEvent
}

// Reset empties o, keeping its capacity.
func (o *Output) Reset() {
	clear(o.Windows)
	clear(o.HotKeys)
	o.Windows, o.HotKeys = o.Windows[:0], o.HotKeys[:0]
}

// CoreStats are a core's cumulative counters.
type CoreStats struct {
	Events, WarmUp                     uint64
	Late, Dropped                      uint64
	TruncatedKeys, Whitelisted         uint64
	AppsFolded                         uint64
	Windows, Hot, Cooled, AlertsWarmUp uint64
	RingAdmitted, RingRefused          uint64
	AlertsDropped                      uint64
}

// Rules are compiled detection rules, swapped into running cores by
// Service.SetRules.
type Rules struct{ Name string }

// Core is what one partition of the events topic computes. It is owned by
// one goroutine; the service feeds it events in offset order and tells it
// which of its outputs reached Kafka.
type Core interface {
	Process(e *schemas.AccessEvent, offset int64, out *Output)
	Idle(wallMs int64, out *Output)
	End(out *Output)
	CommitPoint() CommitPoint
	Acked(startMs int64)
	AckedHotKey(id string)
	SetRules(r *Rules) error
	Stats() CoreStats
}

// NewCoreFunc builds the core of a partition.
type NewCoreFunc func(src Source, start Start) (Core, error)
