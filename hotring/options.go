package hotring

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"
)

// Limits enforced by Options.Validate.
const (
	// MaxBits is the largest accepted Options.Bits (16M buckets).
	MaxBits = 24
	// MaxWindowSlots is the largest accepted Options.WindowSlots. The slots
	// live inside the node allocation, so the bound keeps nodes small.
	MaxWindowSlots = 64
	// MaxSampleBits is the largest accepted Options.SampleBits.
	MaxSampleBits = 32
)

// Options configures a Ring. The zero value of every field except Bits
// disables the feature it controls; DefaultOptions returns the recommended
// configuration. New validates the options and applies one normalization:
// when a sliding window is configured, periodic decay is switched off,
// because the window already forgets old traffic.
type Options struct {
	// Bits sets the number of buckets to 2^Bits. Each bucket is a sorted
	// linked list, so a lookup walks about Len()/2^(Bits+1) nodes, each a
	// likely cache miss once the ring outgrows the CPU cache. 0 sizes the
	// table from NodeCap (see SizeBits): about two nodes per bucket at the
	// cap, and never fewer than 2^12 buckets.
	Bits int

	// TopK is how many keys Top returns. 0 means Top returns nothing.
	TopK int

	// DecayInterval and DecayShift halve the lifetime counts periodically:
	// every DecayInterval of ring time each count is shifted right by
	// DecayShift bits (count >>= shift). Both must be set, or neither.
	// Ignored when a sliding window is configured.
	DecayInterval time.Duration
	DecayShift    uint

	// WindowSlots and WindowSlotDuration configure the per-key sliding
	// window of WindowSlots × WindowSlotDuration. When set, Frequency,
	// TouchAndClamp, TopN and KeysAbove report the number of touches inside
	// the window ending at "now" instead of lifetime counts. Both must be
	// set, or neither.
	WindowSlots        int
	WindowSlotDuration time.Duration

	// RotationInterval enables dual-ring rotation: every RotationInterval of
	// ring time the active generation becomes the warm one and a fresh empty
	// active generation starts; the old warm generation is dropped. This
	// bounds memory to about 2 × NodeCap nodes. 0 disables rotation. With
	// a window it must be at least the window's length.
	RotationInterval time.Duration

	// NodeCap caps the number of nodes per generation. 0 means no cap.
	NodeCap int

	// SampleBits controls what happens to new keys once NodeCap is reached:
	// 0 refuses them all (strict cap); N admits about 1/2^N of them, chosen
	// by hash so a given key is always in or always out. Requires NodeCap.
	SampleBits int

	// ColdSweepInterval makes the ring, every ColdSweepInterval of ring
	// time, remove cold nodes (zero window count, or zero lifetime count
	// after decay) when a generation is at least 3/4 full, so the cap does
	// not fill with dead keys. The sweep runs inline in the call that
	// crosses the deadline. 0 disables automatic sweeps; EvictCold is
	// always available.
	ColdSweepInterval time.Duration

	// Admit, when set, is asked about a new key that the cap (or sampling)
	// would refuse; returning true admits the key anyway. It runs only on
	// that slow path. Typical use: admit keys whose Count-Min estimate
	// passed a gate. Admitted keys may push a generation past NodeCap.
	Admit func(key string) bool

	// Clock returns the current time in nanoseconds. It is read by the
	// methods that do not take an explicit time (Touch, Frequency, TopN…),
	// and only when windows, rotation, decay or sweeps need a time. nil
	// means wall-clock time. For replays, use the *At methods or a
	// ManualClock so that the same input produces the same answers.
	Clock func() int64
}

// DefaultOptions returns the defaults: the seed's table (TopK 16, a
// sliding window of 8 × 250ms, rotation every 30 minutes, a strict cap of
// 250,000 nodes per generation, no decay) plus cold sweeps every 10
// seconds, with one departure: the bucket table is sized from the cap
// (Bits 0, so 2^17 buckets for 250,000 nodes) instead of the seed's fixed
// 2^12. With 2^12 buckets a full ring has chains of about 61 nodes and a
// touch costs microseconds (BenchmarkTouchFullRing); sized from the cap,
// it is a few hundred nanoseconds at worst, for 1 MiB of bucket heads.
func DefaultOptions() Options {
	return Options{
		Bits:               0,
		TopK:               16,
		WindowSlots:        8,
		WindowSlotDuration: 250 * time.Millisecond,
		RotationInterval:   30 * time.Minute,
		NodeCap:            250_000,
		SampleBits:         0,
		ColdSweepInterval:  10 * time.Second,
	}
}

// ErrInvalidOptions is wrapped by every error Validate and New return.
var ErrInvalidOptions = errors.New("hotring: invalid options")

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalidOptions}, args...)...)
}

// Validate reports the first problem with o, or nil. Errors wrap
// ErrInvalidOptions.
func (o Options) Validate() error {
	switch {
	case o.Bits < 0 || o.Bits > MaxBits:
		return invalid("Bits = %d, want 0 (default) to %d", o.Bits, MaxBits)
	case o.TopK < 0:
		return invalid("TopK = %d, want >= 0", o.TopK)
	case o.DecayInterval < 0:
		return invalid("DecayInterval = %v, want >= 0", o.DecayInterval)
	case (o.DecayInterval > 0) != (o.DecayShift > 0):
		return invalid("DecayInterval = %v and DecayShift = %d: set both or neither", o.DecayInterval, o.DecayShift)
	case o.DecayShift > 63:
		return invalid("DecayShift = %d, want <= 63", o.DecayShift)
	case o.WindowSlots < 0 || o.WindowSlots > MaxWindowSlots:
		return invalid("WindowSlots = %d, want 0 to %d", o.WindowSlots, MaxWindowSlots)
	case o.WindowSlotDuration < 0:
		return invalid("WindowSlotDuration = %v, want >= 0", o.WindowSlotDuration)
	case (o.WindowSlots > 0) != (o.WindowSlotDuration > 0):
		return invalid("WindowSlots = %d and WindowSlotDuration = %v: set both or neither", o.WindowSlots, o.WindowSlotDuration)
	case o.RotationInterval < 0:
		return invalid("RotationInterval = %v, want >= 0", o.RotationInterval)
	case o.NodeCap < 0:
		return invalid("NodeCap = %d, want >= 0", o.NodeCap)
	case o.SampleBits < 0 || o.SampleBits > MaxSampleBits:
		return invalid("SampleBits = %d, want 0 to %d", o.SampleBits, MaxSampleBits)
	case o.SampleBits > 0 && o.NodeCap == 0:
		return invalid("SampleBits = %d has no effect without NodeCap; set NodeCap or SampleBits = 0", o.SampleBits)
	case o.RotationInterval > 0 && o.windowed() && o.RotationInterval < time.Duration(o.WindowSlots)*o.WindowSlotDuration:
		// A generation is dropped one interval after it stops taking
		// touches; shorter than the window, that would drop touches still
		// inside it and window counts would read low.
		return invalid("RotationInterval = %v is shorter than the window (%d × %v); raise it", o.RotationInterval, o.WindowSlots, o.WindowSlotDuration)
	case o.ColdSweepInterval < 0:
		return invalid("ColdSweepInterval = %v, want >= 0", o.ColdSweepInterval)
	}
	return nil
}

func (o Options) windowed() bool { return o.WindowSlots > 0 }

// MinBits is the smallest table SizeBits picks: the seed's 4096 buckets.
const MinBits = 12

// SizeBits returns the table size New uses when Options.Bits is 0: the
// smallest power of two with at least nodeCap/2 buckets (chains of about
// two nodes at the cap), clamped to MinBits..MaxBits. nodeCap 0 (no cap)
// gives MinBits.
func SizeBits(nodeCap int) int {
	bits := MinBits
	for bits < MaxBits && 1<<bits < nodeCap/2 {
		bits++
	}
	return bits
}

// wallClock is the default Clock.
func wallClock() int64 { return time.Now().UnixNano() }

// ManualClock is a Clock whose time only moves when told to. Give its Now
// method to Options.Clock to drive a ring from event time (set it from each
// event's timestamp) or from a test. It is safe for concurrent use.
type ManualClock struct {
	now atomic.Int64
}

// NewManualClock returns a ManualClock reading start.
func NewManualClock(start time.Time) *ManualClock {
	c := &ManualClock{}
	c.now.Store(start.UnixNano())
	return c
}

// Now returns the clock's time in nanoseconds since the Unix epoch.
func (c *ManualClock) Now() int64 { return c.now.Load() }

// Set moves the clock to t (in nanoseconds since the Unix epoch), forward
// or backward.
func (c *ManualClock) Set(nanos int64) { c.now.Store(nanos) }

// Advance moves the clock forward by d.
func (c *ManualClock) Advance(d time.Duration) { c.now.Add(int64(d)) }
