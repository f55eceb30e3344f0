package hotring

import (
	"errors"
	"fmt"
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
	// MaxLanes is the largest accepted Options.Lanes.
	MaxLanes = 8
)

// Options configures a Ring. The zero value of every field except Bits
// disables the feature it controls; DefaultOptions returns the recommended
// configuration.
//
// The ring keeps time in whole Unix milliseconds, the unit of the event
// times it is given, so every duration below that is set must be a whole
// number of milliseconds, at least 1ms; Validate rejects anything else
// rather than round it.
type Options struct {
	// Bits sets the number of buckets to 2^Bits. Each bucket is a sorted
	// linked list, so a lookup walks about Len()/2^(Bits+1) nodes, each a
	// likely cache miss once the ring outgrows the CPU cache. 0 sizes the
	// table from NodeCap (see SizeBits): about two nodes per bucket at the
	// cap, and never fewer than 2^MinBits buckets.
	Bits int

	// TopK is how many keys Top returns. 0 means Top returns nothing.
	TopK int

	// DecayInterval and DecayShift shrink the lifetime counts periodically:
	// every DecayInterval of event time each count is shifted right by
	// DecayShift bits (count >>= shift). Both must be set, or neither.
	// Decay only applies to lifetime counts, so it cannot be combined with
	// a sliding window, which forgets old traffic on its own.
	DecayInterval time.Duration
	DecayShift    uint

	// WindowSlots and WindowSlotDuration configure the per-key sliding
	// window of WindowSlots × WindowSlotDuration. When set, Frequency,
	// TouchAndClamp, TopN and KeysAbove report the number of touches inside
	// the window ending at nowMs instead of lifetime counts. Both must be
	// set, or neither.
	WindowSlots        int
	WindowSlotDuration time.Duration

	// RotationInterval enables dual-generation rotation: every
	// RotationInterval of event time the active generation becomes the
	// warm one and a fresh empty active generation starts; the old warm
	// generation is dropped. This bounds memory to about 2 × NodeCap
	// nodes. 0 disables rotation. With a window it must be at least the
	// window's length.
	RotationInterval time.Duration

	// NodeCap caps the number of nodes per generation. 0 means no cap.
	NodeCap int

	// SampleBits controls what happens to new keys once NodeCap is reached:
	// 0 refuses them all (strict cap); N admits about 1/2^N of them, chosen
	// by hash so a given key is always in or always out. Requires NodeCap.
	SampleBits int

	// ColdSweepInterval makes the ring, every ColdSweepInterval of event
	// time, remove cold nodes (zero window count, or zero lifetime count
	// after decay) when a generation is at least 3/4 full, so the cap does
	// not fill with dead keys. The sweep runs inline in the call that
	// crosses the deadline. 0 disables automatic sweeps; EvictCold is
	// always available.
	ColdSweepInterval time.Duration

	// Lanes is the number of weights counted per key and window slot, for
	// callers that count several things per access at once (events,
	// bytes, reads, writes) through TouchHash. Lane 0 is the count every
	// other method reports and the one that decides whether a key is cold.
	// 0 means 1. More than one lane needs a window, and keeps a running
	// total per lane so that TouchHash reads every lane in O(Lanes);
	// Lanes × (WindowSlots + 1) must not exceed 512.
	Lanes int

	// SingleWriter promises that the ring is used from one goroutine at a
	// time (a pipeline partition owns its rings). TouchHash, WindowHash and
	// InsertHash then take no per-node lock and do no atomic
	// read-modify-write: on the detector's per-event path those were most
	// of a touch's cost. Other methods still lock as usual. Breaking the
	// promise corrupts counts; the race detector reports it.
	SingleWriter bool

	// Admit, when set, is asked about a new key that the cap (or sampling)
	// would refuse; returning true admits the key anyway. It runs only on
	// that slow path. Typical use: admit keys whose Count-Min estimate
	// passed a gate. Admitted keys may push a generation past NodeCap.
	Admit func(key string) bool
}

// DefaultOptions returns the recommended configuration: TopK 16, a
// sliding window of 8 × 250ms (about 2s), rotation every 30 minutes, a
// strict cap of 250,000 nodes per generation, no decay, and cold sweeps
// every 10 seconds. The first five follow the defaults of NoKV's
// open-source hotring package (github.com/feichai0017/NoKV, docs/hotring.md).
//
// The bucket table is sized from the cap (Bits 0: 2^17 buckets, 1 MiB of
// bucket heads, for 250,000 nodes) instead of a fixed 2^12-bucket table:
// with 2^12 buckets a full ring's chains are about 61 nodes long and every
// touch walks one, which BenchmarkTouchFullRing shows costing an order of
// magnitude more than chains of about two.
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
	}
	if err := validMs("DecayInterval", o.DecayInterval); err != nil {
		return err
	}
	if err := validMs("WindowSlotDuration", o.WindowSlotDuration); err != nil {
		return err
	}
	if err := validMs("RotationInterval", o.RotationInterval); err != nil {
		return err
	}
	if err := validMs("ColdSweepInterval", o.ColdSweepInterval); err != nil {
		return err
	}
	switch {
	case (o.DecayInterval > 0) != (o.DecayShift > 0):
		return invalid("DecayInterval = %v and DecayShift = %d: set both or neither", o.DecayInterval, o.DecayShift)
	case o.DecayShift > 63:
		return invalid("DecayShift = %d, want <= 63", o.DecayShift)
	case o.WindowSlots < 0 || o.WindowSlots > MaxWindowSlots:
		return invalid("WindowSlots = %d, want 0 to %d", o.WindowSlots, MaxWindowSlots)
	case (o.WindowSlots > 0) != (o.WindowSlotDuration > 0):
		return invalid("WindowSlots = %d and WindowSlotDuration = %v: set both or neither", o.WindowSlots, o.WindowSlotDuration)
	case o.windowed() && o.DecayInterval > 0:
		// Decay shrinks lifetime counts, which a windowed ring never
		// reports: the window forgets old traffic by itself.
		return invalid("DecayInterval = %v with a sliding window: decay applies only to lifetime counts; unset DecayInterval and DecayShift, or the window", o.DecayInterval)
	case o.NodeCap < 0:
		return invalid("NodeCap = %d, want >= 0", o.NodeCap)
	case o.SampleBits < 0 || o.SampleBits > MaxSampleBits:
		return invalid("SampleBits = %d, want 0 to %d", o.SampleBits, MaxSampleBits)
	case o.Lanes < 0 || o.Lanes > MaxLanes:
		return invalid("Lanes = %d, want 0 (one lane) to %d", o.Lanes, MaxLanes)
	case o.Lanes > 1 && !o.windowed():
		return invalid("Lanes = %d without a window: lanes count per window slot; set WindowSlots and WindowSlotDuration, or Lanes <= 1", o.Lanes)
	case o.layout().words() > maxWords:
		return invalid("Lanes = %d with %d window slots needs %d counters per key, over %d; use fewer slots or lanes", o.Lanes, o.WindowSlots, o.layout().words(), maxWords)
	case o.SampleBits > 0 && o.NodeCap == 0:
		return invalid("SampleBits = %d has no effect without NodeCap; set NodeCap or SampleBits = 0", o.SampleBits)
	case o.RotationInterval > 0 && o.windowed() && o.RotationInterval.Milliseconds() < o.windowMs():
		// A generation is dropped one interval after it stops taking
		// touches; shorter than the window, that would drop touches still
		// inside it and window counts would read low.
		return invalid("RotationInterval = %v is shorter than the window (%d × %v); raise it", o.RotationInterval, o.WindowSlots, o.WindowSlotDuration)
	}
	return nil
}

// validMs checks a duration option: unset (0), or whole milliseconds of at
// least 1ms, since the ring counts time in Unix milliseconds.
func validMs(name string, d time.Duration) error {
	if d < 0 || d%time.Millisecond != 0 {
		return invalid("%s = %v, want 0 (off) or a whole number of milliseconds >= 1ms", name, d)
	}
	return nil
}

func (o Options) windowed() bool { return o.WindowSlots > 0 }

// layout is the counter layout of the options' nodes.
func (o Options) layout() layout {
	lanes := max(o.Lanes, 1)
	return layout{slots: o.WindowSlots, lanes: lanes, sums: lanes > 1}
}

// windowMs is the window's length in milliseconds. It cannot overflow:
// WindowSlots <= 64 and a Duration holds fewer than 2^44 ms.
func (o Options) windowMs() int64 { return int64(o.WindowSlots) * o.WindowSlotDuration.Milliseconds() }

// MinBits is the smallest table SizeBits picks: 2^12 = 4096 buckets, so a
// small or uncapped ring still starts with short chains.
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
