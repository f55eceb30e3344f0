package hotring

import (
	"runtime"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/keyheat/keyheat/internal/faststr"
)

// removeStripes is the number of mutexes that serialize removals; bucket i
// uses removeMu[i%removeStripes].
const removeStripes = 64

// table is one generation of the ring: 2^bits buckets, each a singly linked
// list of nodes sorted by (hash, key).
//
// Concurrency protocol (the safety argument):
//
//   - Readers (lookup, walk) never lock. They follow next pointers and step
//     over deletion markers; a node they hold stays valid memory because the
//     GC keeps it alive, and its hash and key never change after it is
//     published.
//   - Inserters never lock. They find the insertion point (prev slot, curr)
//     with curr the first node >= the new key, set new.next = curr and CAS
//     the prev slot (the bucket head or the predecessor's next) from curr to
//     new. The CAS fails, and the inserter retries from the head, if anything
//     was spliced there meanwhile, or if the predecessor is being removed (its
//     next then holds a marker, not curr). Two inserters of the same key race
//     for the same slot, so one of them wins and the other finds the winner on
//     retry: a key never has two live nodes.
//   - Removal is two-phase. First the node is logically deleted: deadBit is
//     set in its count (under the node lock when windowed). Touches check the
//     bit after counting and retry on a new node, so no touch is lost to a
//     removal; readers skip dead nodes. Then, holding the bucket's remove
//     mutex (so removals in one bucket are serialized and at most one node is
//     mid-unlink), the remover CASes the node's next from succ to a fresh
//     marker node whose next is succ. From that moment no inserter can splice
//     after the node (their CAS expects a real node, not the marker), so succ
//     is final. Finally the remover finds the slot that points at the node and
//     CASes it to succ, retrying if an inserter spliced a node in front of it.
//     Markers are never unmarked, and markers' next is only changed by the
//     remover that owns them.
type table struct {
	buckets []atomic.Pointer[node]
	mask    uint64
	// nodes counts live (not dead) nodes; the cap is enforced against it.
	nodes    atomic.Int64
	removeMu [removeStripes]struct {
		sync.Mutex
		_ [56]byte // keep stripes on separate cache lines
	}
}

func newTable(bits int) *table {
	return &table{
		buckets: make([]atomic.Pointer[node], 1<<bits),
		mask:    1<<bits - 1,
	}
}

func (t *table) bucket(h uint64) *atomic.Pointer[node] { return &t.buckets[h&t.mask] }

// lookup returns the live node for key, or nil. Lock-free.
func (t *table) lookup(h uint64, key string) *node {
	for n := t.bucket(h).Load(); n != nil; n = n.succ() {
		if n.hash < h {
			continue
		}
		if n.hash > h {
			return nil
		}
		if n.key == key {
			if n.dead() {
				// A live replacement is always spliced in front of a dead
				// node, so there is none further on; keep walking anyway,
				// it costs nothing and needs no argument.
				continue
			}
			return n
		}
		if n.key > key {
			return nil
		}
	}
	return nil
}

// lookupNS is lookup for the key ns+key, without building ns+key: the
// hashed methods' lookup. Lock-free.
func (t *table) lookupNS(h uint64, ns, key string) *node {
	for n := t.bucket(h).Load(); n != nil; n = n.succ() {
		if n.hash < h {
			continue
		}
		if n.hash > h {
			return nil
		}
		// s == ns+key, the key first: lookups usually end on an equal hash
		// and an equal key.
		if s := n.key; len(s) == len(ns)+len(key) && faststr.Equal(s[len(ns):], key) && faststr.EqualShort(s[:len(ns)], ns) {
			if n.dead() {
				continue // as in lookup
			}
			return n
		}
		if cmpNS(n.key, ns, key) > 0 {
			return nil
		}
	}
	return nil
}

// cmpNS compares s with ns+key, as strings.Compare(s, ns+key) would.
func cmpNS(s, ns, key string) int {
	if len(ns) == 0 {
		return strings.Compare(s, key)
	}
	if len(s) < len(ns) {
		if c := strings.Compare(s, ns[:len(s)]); c != 0 {
			return c
		}
		return -1 // s is a proper prefix of ns+key
	}
	if c := strings.Compare(s[:len(ns)], ns); c != 0 {
		return c
	}
	return strings.Compare(s[len(ns):], key)
}

// findOrInsert returns the live node for nn's key, splicing nn in if there
// is none. inserted reports whether nn was used.
func (t *table) findOrInsert(nn *node) (n *node, inserted bool) {
	h, key := nn.hash, nn.key
	for spins := 0; ; spins++ {
		if spins > 0 && spins%8 == 0 {
			runtime.Gosched()
		}
		prev := t.bucket(h)
		prevMarked := false
		curr := prev.Load()
		for curr != nil && less(curr.hash, curr.key, h, key) {
			nx := curr.next.Load()
			if nx != nil && nx.marker {
				prev, prevMarked, curr = &nx.next, true, nx.next.Load()
			} else {
				prev, prevMarked, curr = &curr.next, false, nx
			}
		}
		if curr != nil && curr.hash == h && curr.key == key && !curr.dead() {
			return curr, false
		}
		if prevMarked {
			// The predecessor is being unlinked; its successor slot belongs
			// to the remover. Wait for the unlink and retry.
			runtime.Gosched()
			continue
		}
		nn.next.Store(curr)
		if prev.CompareAndSwap(curr, nn) {
			return nn, true
		}
	}
}

// unlink physically removes the dead node n. The caller holds n's bucket
// remove mutex.
func (t *table) unlink(n *node) {
	var m *node
	for {
		nx := n.next.Load()
		if nx != nil && nx.marker {
			m = nx
			break
		}
		if m == nil {
			m = &node{marker: true}
		}
		m.next.Store(nx)
		if n.next.CompareAndSwap(nx, m) {
			break
		}
	}
	succ := m.next.Load()
	for {
		prev := t.bucket(n.hash)
		c := prev.Load()
		for c != nil && c != n {
			nx := c.next.Load()
			if nx != nil && nx.marker {
				prev, c = &nx.next, nx.next.Load()
			} else {
				prev, c = &c.next, nx
			}
		}
		if c == nil {
			return // not reachable: already unlinked
		}
		if prev.CompareAndSwap(n, succ) {
			return
		}
	}
}

// lockBucket returns the remove mutex of the bucket of hash h, locked.
func (t *table) lockBucket(h uint64) *sync.Mutex {
	mu := &t.removeMu[(h&t.mask)%removeStripes].Mutex
	mu.Lock()
	return mu
}

// walk calls fn for every live node. Lock-free; nodes inserted or removed
// during the walk may or may not be visited, every other node is visited
// exactly once.
func (t *table) walk(fn func(n *node)) {
	for i := range t.buckets {
		for n := t.buckets[i].Load(); n != nil; n = n.succ() {
			if !n.dead() {
				fn(n)
			}
		}
	}
}
