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

// layout is where a windowed node keeps its counters: Lanes counters per
// window slot, slot-major (slot i, lane l at base()+i*lanes+l), preceded
// by one running total per lane when sums is set. Single-lane rings keep
// no totals, so their nodes stay as small as they always were; multi-lane
// rings (the detector's) read every lane on every touch, and a total per
// lane turns that read from slots × lanes additions into lanes loads.
type layout struct {
	slots, lanes int
	sums         bool
}

func (l layout) base() int {
	if l.sums {
		return l.lanes
	}
	return 0
}

// words is the number of uint64 counters a node of this layout carries.
func (l layout) words() int { return l.base() + l.slots*l.lanes }

// Allocation shapes for windowed nodes: the node and its counters in one
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

// maxWords is the largest counter area a node can have (see
// Options.Validate).
const maxWords = 512

// newNode allocates a node for key with room for lay's counters (none
// when lay.slots is 0). Its window starts empty.
func newNode(hash uint64, key string, lay layout) *node {
	var n *node
	switch w := lay.words(); {
	case lay.slots == 0:
		n = new(node)
	case w <= 4:
		n = allocWin[[4]uint64]()
	case w <= 8:
		n = allocWin[[8]uint64]()
	case w <= 16:
		n = allocWin[[16]uint64]()
	case w <= 32:
		n = allocWin[[32]uint64]()
	case w <= 64:
		n = allocWin[[64]uint64]()
	case w <= 128:
		n = allocWin[[128]uint64]()
	case w <= 256:
		n = allocWin[[256]uint64]()
	default:
		n = allocWin[[maxWords]uint64]()
	}
	n.hash = hash
	n.key = key
	n.epoch = emptyEpoch
	return n
}

// area returns the node's counters. Caller holds n.mu.
func (n *node) area(lay layout) []uint64 { return unsafe.Slice(n.win, lay.words()) }

func floorMod(e int64, s int) int {
	m := int(e % int64(s))
	if m < 0 {
		m += s
	}
	return m
}

// slide moves the window forward so that its newest slot is epoch e,
// clearing the slots of the epochs it passes over. It does nothing when e
// is not newer than the node's newest slot. Caller holds n.mu.
func (n *node) slide(e int64, lay layout) {
	if e <= n.epoch {
		return
	}
	a := n.area(lay)
	// Epoch differences are compared as uint64: with a 1ms slot, a gap
	// between times near MinInt64 and MaxInt64 overflows int64, and the
	// wrapped, negative difference sent the loop below through ~2^64
	// epochs. The true difference is below 2^64, so its uint64 is exact.
	if n.epoch == emptyEpoch || uint64(e-n.epoch) >= uint64(lay.slots) {
		clear(a)
		n.epoch = e
		return
	}
	base, L := lay.base(), lay.lanes
	for i := n.epoch + 1; i <= e; i++ {
		row := a[base+floorMod(i, lay.slots)*L:][:L]
		if lay.sums {
			for l, v := range row {
				a[l] = subTotal(a[l], v)
			}
		}
		clear(row)
	}
	if lay.sums {
		for l := range L {
			if a[l] == maxCount {
				a[l] = n.laneTotal(a, lay, l) // a saturated total cannot be decremented
			}
		}
	}
	n.epoch = e
}

// subTotal removes a slot's count v from a running total t; a saturated
// total stays saturated until slide recomputes it.
func subTotal(t, v uint64) uint64 {
	if t == maxCount {
		return t
	}
	return t - v
}

// laneTotal sums lane l over the slots the node holds.
func (n *node) laneTotal(a []uint64, lay layout, l int) uint64 {
	var t uint64
	for i := range lay.slots {
		t = satAdd(t, a[lay.base()+i*lay.lanes+l])
	}
	return t
}

// winAdd adds d to lane 0 of the slot of epoch e. Caller holds n.mu. It
// returns false when e is older than the window the node holds (a very late
// event), in which case nothing is added to the window.
func (n *node) winAdd(e int64, d uint64, lay layout) bool {
	if e > n.epoch {
		n.slide(e, lay)
	} else if uint64(n.epoch-e) >= uint64(lay.slots) {
		return false
	}
	// The plain Touch path: one counter, addressed directly (the index is
	// below words() by construction), no slice header, no bounds check.
	c := (*uint64)(unsafe.Add(unsafe.Pointer(n.win), 8*(lay.base()+floorMod(e, lay.slots)*lay.lanes)))
	*c = satAdd(*c, d)
	if lay.sums {
		*n.win = satAdd(*n.win, d)
	}
	return true
}

// winAddLanes adds w to the lanes of the slot of epoch e, reporting false
// as winAdd does. Caller holds n.mu.
func (n *node) winAddLanes(e int64, w *Weights, lay layout) bool {
	n.slide(e, lay)
	if uint64(n.epoch-e) >= uint64(lay.slots) {
		return false
	}
	a := n.area(lay)
	row := a[lay.base()+floorMod(e, lay.slots)*lay.lanes:][:lay.lanes]
	for l := range row {
		row[l] = satAdd(row[l], w[l])
		if lay.sums {
			a[l] = satAdd(a[l], w[l])
		}
	}
	return true
}

// winTotal returns lane 0's touches in the window (e-s, e]. Caller holds
// n.mu. Slots newer than e (events "from the future" relative to a late
// reader) are not counted, so a read at time t answers "as of t".
func (n *node) winTotal(e int64, lay layout) uint64 { return n.laneWindow(e, lay, 0) }

// laneWindow is winTotal for lane l.
func (n *node) laneWindow(e int64, lay layout, l int) uint64 {
	s := lay.slots
	hi := min(e, n.epoch)
	lo := max(e, n.epoch) - int64(s) + 1
	if hi < lo {
		return 0
	}
	a := n.area(lay)
	if hi-lo+1 == int64(s) {
		if lay.sums {
			return a[l]
		}
		return n.laneTotal(a, lay, l)
	}
	var t uint64
	for i := lo; i <= hi; i++ {
		t = satAdd(t, a[lay.base()+floorMod(i, s)*lay.lanes+l])
	}
	return t
}
