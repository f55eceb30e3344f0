package hotring

import "math"

// noEpoch marks a memo that holds nothing.
const noEpoch = math.MaxInt64

// memo is what the last whole walks of a single-writer ring learned, so
// that the calls after them in the same window slot need not walk again.
// A caller whose ring is full may call EvictLowest (after a full
// SweepCold) once per admitted key; with many keys over its threshold
// (a dense, unkeyed stream) that was two walks of the ring per event.
//
// Why it is exact. Within one epoch e, as of which both methods read, a
// node's window counts only grow: a touch or credit adds, and a slide to
// an epoch up to e clears only slots that lie outside the window ending
// at e. A count as of e falls only when a node slides past e, which takes
// an epoch computation later than e (every such computation runs through
// epoch, which then forgets the memo), or when the slot cache already
// holds a later epoch (no memo is made then). Rotation, which replaces
// whole tables, is out: rings that rotate keep no memo. So:
//
//   - cold: after a full SweepCold at epoch e, another one at e finds
//     nothing to remove until a node is created cold (a zero count, a
//     credit with nothing in lane 0, or made as of an earlier epoch);
//   - lowest: a walk picks the least (count, place), place being the
//     ring's order (bucket, then the bucket's sort order). heap holds
//     every node the walk saw and every node created since, each with a
//     count it has at least (counts only grow): a lazy min-heap. When its
//     top still has the count it is filed with, no node comes before it,
//     and it is the node a walk would pick; when not, it is filed again
//     with its count, and the next top is tried.
//
// Only a SingleWriter ring keeps it (one goroutine at a time reads and
// writes it); every other ring leaves both epochs at noEpoch, so epoch's
// test never writes.
type memo struct {
	coldE int64 // the epoch of a full SweepCold that left nothing cold

	lowE int64 // the epoch of the last EvictLowest walk
	lane int   // the lane it compared
	t    *table
	heap []counted
}

// counted is a node and a count it has at least.
type counted struct {
	n *node
	c uint64
}

func (m *memo) reset() {
	m.coldE = noEpoch
	m.forgetLowest()
}

func (m *memo) forgetLowest() {
	m.lowE, m.t = noEpoch, nil
	clear(m.heap)
	m.heap = m.heap[:0]
}

// saw forgets what held as of epochs before e: a node may slide to e.
func (m *memo) saw(e int64) {
	if e > m.coldE {
		m.coldE = noEpoch
	}
	if e > m.lowE {
		m.forgetLowest()
	}
}

// memoizes reports whether r may keep a memo made as of epoch e.
func (r *Ring) memoizes(e int64) bool {
	c := &r.slotCache
	return r.single && r.windowed && r.rotMs == 0 && !r.noMemo && e != noEpoch &&
		r.gens.Load().warm == nil && (c.loMs > c.hiMs || c.e <= e)
}

// created tells the memo about a node just made live in the active
// table: filed for EvictLowest with a count of 0 (which it has at least),
// and maybe cold.
func (r *Ring) created(n *node, maybeCold bool) {
	m := &r.memo
	if maybeCold {
		m.coldE = noEpoch
	}
	if m.lowE == noEpoch {
		return
	}
	// Nodes removed by other calls stay filed until they reach the top:
	// start afresh when they outnumber the live ones.
	if len(m.heap) >= 2*r.Len()+64 {
		m.forgetLowest()
		return
	}
	m.heap = append(m.heap, counted{n, 0})
	m.up(len(m.heap) - 1)
}

// lowestCount is the count EvictLowest compares: lane's window as of e,
// 0 if the node is cold; live is false for a dead node.
func (r *Ring) lowestCount(n *node, e int64, lane int) (c uint64, live bool) {
	n.lock()
	defer n.unlock()
	if n.dead() {
		return 0, false
	}
	if n.laneWindow(e, r.lay, 0) > 0 {
		c = n.laneWindow(e, r.lay, lane)
	}
	return c, true
}

// below reports whether a comes before b: a smaller count, or the same
// count and a place first in a walk of t.
func (t *table) below(a, b counted) bool {
	if a.c != b.c {
		return a.c < b.c
	}
	ba, bb := a.n.hash&t.mask, b.n.hash&t.mask
	if ba != bb {
		return ba < bb
	}
	return less(a.n.hash, a.n.key, b.n.hash, b.n.key)
}

func (m *memo) up(i int) {
	h := m.heap
	for i > 0 {
		p := (i - 1) / 2
		if !m.t.below(h[i], h[p]) {
			return
		}
		h[i], h[p] = h[p], h[i]
		i = p
	}
}

func (m *memo) down(i int) {
	h := m.heap
	for {
		l := 2*i + 1
		if l >= len(h) {
			return
		}
		j := l
		if r := l + 1; r < len(h) && m.t.below(h[r], h[l]) {
			j = r
		}
		if !m.t.below(h[j], h[i]) {
			return
		}
		h[i], h[j] = h[j], h[i]
		i = j
	}
}

// knownLowest returns the node a walk at epoch e would pick for
// EvictLowest by lane, and its count, from the memo; nil if the memo
// cannot tell.
func (r *Ring) knownLowest(e int64, lane int) (victim *node, least uint64) {
	m := &r.memo
	if m.lowE != e || m.lane != lane || !r.memoizes(e) || m.t != r.gens.Load().active {
		return nil, 0
	}
	for len(m.heap) > 0 {
		top := &m.heap[0]
		c, live := r.lowestCount(top.n, e, lane)
		switch {
		case !live:
			last := len(m.heap) - 1
			m.heap[0] = m.heap[last]
			m.heap[last] = counted{}
			m.heap = m.heap[:last]
		case c == top.c:
			return top.n, c
		default:
			top.c = c
		}
		m.down(0)
	}
	return nil, 0
}

// lowestWalk walks every node of both tables for EvictLowest, returning
// the least-counting node (the first in walk order among equals) and its
// table, and files every node in the memo when r may. Without a memo it
// writes nothing of r's: EvictLowest may run concurrently then.
func (r *Ring) lowestWalk(e int64, lane int) (victim *node, vt *table, least uint64) {
	m := &r.memo
	keep := r.memoizes(e)
	if r.single {
		m.forgetLowest()
	}
	for _, t := range r.tables() {
		if t == nil {
			continue
		}
		t.walk(func(n *node) {
			c, live := r.lowestCount(n, e, lane)
			if !live {
				return
			}
			if victim == nil || c < least {
				victim, vt, least = n, t, c
			}
			if keep {
				m.heap = append(m.heap, counted{n, c})
			}
		})
	}
	if keep {
		m.lowE, m.lane, m.t = e, lane, r.gens.Load().active
		for i := len(m.heap)/2 - 1; i >= 0; i-- {
			m.down(i)
		}
	}
	return victim, vt, least
}
