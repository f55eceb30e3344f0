package hotring

import (
	"runtime"
	"sync/atomic"
	"unsafe"
)

// deadBit is the top bit of node.count. It is set exactly once, when the
// node is logically deleted (Remove or a cold sweep), before the node is
// unlinked. A touch that sees it retries against a fresh node, so a touch
// racing with a deletion is never lost; readers skip dead nodes.
const deadBit = 1 << 63

// maxCount is the largest count the ring holds or reports. Counts saturate
// there instead of wrapping: a lifetime count that carried into deadBit
// would make a live node look deleted (it would read 0, stay linked and
// counted in table.nodes, and every later touch would retry on a fresh
// node), and a weight of 2^63 or more would do so on every retry, forever.
const maxCount = deadBit - 1

// satAdd returns a + b, or maxCount if that is larger or overflows.
func satAdd(a, b uint64) uint64 {
	s := a + b
	if s < a || s > maxCount {
		return maxCount
	}
	return s
}

// node is one tracked key, or a deletion marker (see table.unlink).
//
// Layout is 64 bytes on 64-bit platforms (one size class, one cache line).
// With a window, the slots follow the node in the same allocation (see
// newNode), so an insert is a single allocation.
type node struct {
	next  atomic.Pointer[node]
	hash  uint64 // immutable after publication
	key   string // immutable after publication
	count atomic.Uint64
	// mu is the per-node spin lock guarding epoch and the window slots.
	// Windowed rings also set deadBit while holding it.
	mu     atomic.Uint32
	marker bool
	// win points at the first of the ring's WindowSlots counters, which
	// live in the same allocation as the node; nil without a window.
	win *uint64
	// epoch is the slot number (nowMs / slot length in ms, rounded down)
	// of the newest slot the window holds. Guarded by mu.
	epoch int64
}

func (n *node) lock() {
	for !n.mu.CompareAndSwap(0, 1) {
		// Holders keep the lock for a few dozen instructions; yield rather
		// than burn the other goroutine's core.
		runtime.Gosched()
	}
}

func (n *node) unlock() { n.mu.Store(0) }

// dead reports whether the node was logically deleted.
func (n *node) dead() bool { return n.count.Load()&deadBit != 0 }

// succ returns the next node in list order, stepping over a deletion
// marker if n is being unlinked.
func (n *node) succ() *node {
	nx := n.next.Load()
	if nx != nil && nx.marker {
		return nx.next.Load()
	}
	return nx
}

// marked reports whether n is being unlinked (its next is a marker).
func (n *node) marked() bool {
	nx := n.next.Load()
	return nx != nil && nx.marker
}

// less orders nodes by (hash, key). Inside a bucket the low hash bits are
// equal, so this is the (tag, key) order of the HotRing paper (Chen et al.,
// "HotRing: A Hotspot-Aware In-Memory Key-Value Store", USENIX FAST 2020),
// with tag = the high bits: most comparisons end on the integer, and a
// lookup stops at the first larger node.
func less(h1 uint64, k1 string, h2 uint64, k2 string) bool {
	if h1 != h2 {
		return h1 < h2
	}
	return k1 < k2
}

// Allocation shapes for windowed nodes: the node and its slots in one
// object. The GC keeps the whole object alive through node pointers, and
// node.win is an interior pointer into the same object.
type winNode[A any] struct {
	n     node
	slots A
}

func allocWin[A any]() *node {
	w := new(winNode[A])
	w.n.win = (*uint64)(unsafe.Pointer(&w.slots))
	return &w.n
}

// newNode allocates a node for key with room for slots window counters.
// Its window starts empty.
func newNode(hash uint64, key string, slots int) *node {
	var n *node
	switch {
	case slots == 0:
		n = new(node)
	case slots <= 4:
		n = allocWin[[4]uint64]()
	case slots <= 8:
		n = allocWin[[8]uint64]()
	case slots <= 16:
		n = allocWin[[16]uint64]()
	case slots <= 32:
		n = allocWin[[32]uint64]()
	default:
		n = allocWin[[MaxWindowSlots]uint64]()
	}
	n.hash = hash
	n.key = key
	n.epoch = emptyEpoch
	return n
}

// slots returns the window counters. Caller holds n.mu.
func (n *node) slots(s int) []uint64 { return unsafe.Slice(n.win, s) }

func floorMod(e int64, s int) int {
	m := int(e % int64(s))
	if m < 0 {
		m += s
	}
	return m
}

// winAdd adds d to the slot of epoch e. Caller holds n.mu. It returns false
// when e is older than the window the node holds (a very late event), in
// which case nothing is added to the window.
func (n *node) winAdd(e int64, d uint64, s int) bool {
	sl := n.slots(s)
	switch {
	// Epoch differences are compared as uint64: with a 1ms slot, a gap
	// between times near MinInt64 and MaxInt64 overflows int64, and the
	// wrapped, negative difference sent the loop below through ~2^64
	// epochs. The true difference is below 2^64, so its uint64 is exact.
	case e > n.epoch:
		// Slide forward: clear the slots of the epochs we skip over.
		if n.epoch == emptyEpoch || uint64(e-n.epoch) >= uint64(s) {
			clear(sl)
		} else {
			for i := n.epoch + 1; i <= e; i++ {
				sl[floorMod(i, s)] = 0
			}
		}
		n.epoch = e
	case uint64(n.epoch-e) >= uint64(s): // e <= n.epoch here
		return false
	}
	i := floorMod(e, s)
	sl[i] = satAdd(sl[i], d)
	return true
}

// winTotal returns the touches in the window (e-s, e]. Caller holds n.mu.
// Slots newer than e (events "from the future" relative to a late reader)
// are not counted, so a read at time t answers "as of t".
func (n *node) winTotal(e int64, s int) uint64 {
	hi := min(e, n.epoch)
	lo := max(e, n.epoch) - int64(s) + 1
	if hi < lo {
		return 0
	}
	sl := n.slots(s)
	if hi-lo+1 == int64(s) {
		var t uint64
		for _, v := range sl {
			t = satAdd(t, v)
		}
		return t
	}
	var t uint64
	for i := lo; i <= hi; i++ {
		t = satAdd(t, sl[floorMod(i, s)])
	}
	return t
}
