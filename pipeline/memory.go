package pipeline

import (
	"github.com/keyheat/keyheat/hotring"
	"github.com/keyheat/keyheat/sketch"
)

// MemoryBound is an upper estimate, in bytes, of what the structures of
// one Partition built with o can hold, however many distinct keys it sees:
//
//	windows:   (⌈Lateness/Window⌉ + 2) open windows × (exact table
//	           + (MaxApps + 1) apps × app)
//	exact:     ExactKeys × 64 + 4 × (a power of two ≥ 2·ExactKeys)
//	           + (a power of two ≥ ExactKeys) Bloom filter bytes + 32 KiB
//	           + ExactKeyBytes
//	app:       top-K (filter 4·TopWidth·8 + TopCapacity × (48 + MaxKeyBytes + 34)
//	           + table) + big keys (the same with Big*, 33 for 34)
//	           + 2^DistinctPrecision
//	           + 16384 × 4 slot counters (+ 4·SketchWidth·8 when not keyed)
//	           + 3 KiB (the reset logs of its Count-Min sketches)
//	detection: per distinct rule window, (Slots+1) × (SketchDepth·SketchWidth·8
//	           + 1 KiB reset log) (twice with a bytes_rate rule) + a ring of 2·RingNodes nodes of
//	           64 + 8·(5·(Slots+1)+5 rounded up to a power of two) + MaxKeyBytes
//	           + 24 bytes, its buckets, the heap with which a full ring finds
//	           its least-counting node (16 bytes, twice a node, + 1 KiB),
//	           and as many alert states
//	cache:     1024 apps' rule lists; 4096 clock checkpoints
//
// Key bytes are counted at MaxKeyBytes wherever a structure copies keys
// one by one (top-K entries, ring nodes, alert states), and at
// ExactKeyBytes for the exact table, which packs them. An app's top-K and
// big-key trackers are built only once its keys overflow the exact table,
// so a partition whose windows fit holds far less than the bound.
// Windows and hot-key events handed out but never acknowledged are kept
// (a few dozen bytes each) until acknowledged: the caller must acknowledge
// them. TestMemoryBoundedByConfig checks the bound holds and does not move
// with the number of distinct keys, also for keys of MaxKeyBytes.
func (o Options) MemoryBound() int64 {
	s := o.Summary
	keyBytes := int64(o.MaxKeyBytes)
	// aux: the figures kept per tracked key besides the top-K's own.
	topK := func(capacity, width int, aux int64) int64 {
		return int64(4*width*8) + int64(capacity)*(int64(sketch.TopKEntryBytes(int(keyBytes)))+aux) +
			int64(sketch.TopKTableBytes(capacity))
	}
	app := topK(s.TopCapacity, s.TopWidth, 3*8+8+2) + int64(1)<<s.DistinctPrecision + RedisSlots*4 + 4*int64(s.SketchWidth)*8 + 256 +
		3*sketch.ResetLogBytes
	if s.BigKeys > 0 {
		app += topK(s.BigCapacity, s.BigWidth, 4*8+1)
	}
	open := (o.Lateness.Milliseconds()+o.Window.Milliseconds()-1)/o.Window.Milliseconds() + 2
	windows := open * (int64(o.MaxApps+1)*app + exactBound(s.ExactKeys, s.ExactKeyBytes))

	d := o.Detect
	words := int64(1)
	for words < int64(lanes*(d.Slots+1)+lanes) {
		words *= 2
	}
	nodes := int64(2 * d.RingNodes)
	// An alert state is 168 bytes (its episode's refresh figures
	// included), two slots of its table, and its key.
	ring := nodes*(64+8*words+keyBytes+24) + 8<<hotring.SizeBits(2*d.RingNodes) + nodes*(200+keyBytes) +
		2*16*nodes + 1024
	group := 2*int64(d.Slots+1)*(int64(d.SketchDepth*d.SketchWidth*8)+sketch.ResetLogBytes) + ring
	groups := int64(len(o.rulesWindows()))
	const cache = maxDetApps*512 + maxHistory*16
	return windows + groups*group + cache
}

// rulesWindows is the distinct rule windows of o's rules.
func (o Options) rulesWindows() map[int64]bool {
	ws := map[int64]bool{}
	for _, r := range o.Rules {
		ws[r.Window.Milliseconds()] = true
	}
	return ws
}
