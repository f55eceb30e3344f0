package hotring

import (
	"unsafe"

	"github.com/keyheat/keyheat/internal/faststr"
)

// The hashed, namespaced entry points: what a detector that has already
// hashed its key, counts several weights per access, and keys its counts
// by (namespace, key) needs on its per-event path.

// Weights are the amounts one access adds to a key's lanes
// (Options.Lanes): W[l] to lane l. Entries beyond the ring's lanes are
// ignored.
type Weights [MaxLanes]uint64

// Window is a key's counts per lane over its sliding window as of one
// instant; entries beyond the ring's lanes are zero.
type Window struct {
	// Sum is each lane's total over the window's WindowSlots slots.
	Sum Weights
	// Oldest is each lane's count in the oldest of those slots, the next
	// to leave the window. A caller that wants the counts over exactly the
	// last L milliseconds, with L one slot shorter than the ring's window,
	// takes Sum − Oldest plus the part of Oldest that still falls inside.
	Oldest Weights
	// Tag is the word SetTagHash last stored for the key, 0 if none was
	// stored since its node was created or reset by InsertHash: a caller
	// keeps there what it would otherwise look up per touch elsewhere.
	Tag uint64
}

// TouchHash counts one access to the key ns+key, adding w to its lanes in
// the slot of event time tsMs, and reports the key's window as of nowMs in
// win. nowMs is the caller's clock (for a detector, the newest event time
// it has seen); a nowMs before tsMs is taken as tsMs.
//
// It is Touch for a caller on a hot path:
//
//   - h is the caller's 64-bit hash of (ns, key). The ring uses it where
//     other methods use xxh3 of the key (bucket and list order), so the
//     caller must pass the same h for the same ns and key every time. Such
//     a key is found by TouchHash, InsertHash and WindowHash; TopN,
//     KeysAbove, EvictCold and SweepCold see it as ns+key.
//   - ns and key are compared, never kept (InsertHash stores a copy of
//     ns+key), so either may alias a buffer the caller reuses.
//   - It never inserts. A key that is not tracked, or is cold as of nowMs
//     (its lane-0 window total is zero before this touch), is not counted
//     and TouchHash reports tracked false. Reading a cold node as absent
//     makes what the caller sees independent of when sweeps remove cold
//     nodes.
//   - counted is false when tsMs is older than the key's window as of
//     nowMs: nothing was added, and win is filled all the same.
//
// TouchHash needs a window and looks only at the active generation (use it
// without rotation); without a window it reports false, false.
func (r *Ring) TouchHash(h uint64, ns, key string, w *Weights, tsMs, nowMs int64, win *Window) (tracked, counted bool) {
	if !r.single || !r.lay.sums {
		return r.touchHash(h, ns, key, w, tsMs, nowMs, win)
	}
	// One writer and lane totals: a detector's ring, and its per-event
	// path for every watched key. The lookup (lookupNS) and the touch are
	// written out in this one function, with no lock, the slots from the
	// cache, the counters addressed directly and one pass over the lanes:
	// calls and their saved registers were a good part of the cost.
	nowMs = max(nowMs, tsMs)
	if nowMs >= r.nextMaint.Load() {
		r.maintain(nowMs)
	}
	t := r.gens.Load().active
	var n *node
	for c := t.bucket(h).Load(); c != nil; c = c.succ() {
		if c.hash < h {
			continue
		}
		if c.hash > h {
			break
		}
		if s := c.key; len(s) == len(ns)+len(key) && faststr.Equal(s[len(ns):], key) && faststr.EqualShort(s[:len(ns)], ns) {
			if c.dead() {
				continue // as in lookup
			}
			n = c
			break
		}
		if cmpNS(c.key, ns, key) > 0 {
			break
		}
	}
	if n == nil {
		return false, false
	}
	c := &r.slotCache
	en, ien := c.e, c.i
	if nowMs < c.loMs || nowMs > c.hiMs {
		en, ien = r.slotOf(nowMs, true)
	}
	lay := r.lay
	if en > n.epoch {
		n.slide(en, lay)
	}
	a := unsafe.Add(unsafe.Pointer(n), nodeBytes) // lane totals, then the slots' rows
	if n.count.Load()&deadBit != 0 || *word(a, 0) == 0 {
		return false, false
	}
	L := lay.lanes
	et, iet := en, ien
	if tsMs != nowMs {
		et, iet = r.slotOf(tsMs, false)
	}
	oldest := ien + 1
	if n.epoch != en {
		oldest = floorMod(n.epoch, lay.slots) + 1
	}
	if oldest == lay.slots {
		oldest = 0
	}
	old := unsafe.Add(a, 8*L*(1+oldest))
	if uint64(n.epoch-et) < uint64(lay.slots) {
		counted = true
		// Add w to the row of et and to the totals, and report the window,
		// in one pass over the lanes. Counters never exceed maxCount, so a
		// sum wraps or passes it only if it or the weight has the top bit
		// set, and a row never holds more than its total: one test on the
		// totals covers every counter.
		row := unsafe.Add(a, 8*L*(1+iet))
		var top uint64
		// Unrolled by lane count: on a detector's per-event path the loop's
		// own overhead was as large as its work.
		lane := func(l int) {
			d := w[l]
			v := *word(a, l) + d
			*word(row, l) += d
			*word(a, l) = v
			top |= v | d
			win.Sum[l] = v
			win.Oldest[l] = *word(old, l) // after the add: et may be the oldest slot
		}
		switch L {
		case 8:
			lane(7)
			fallthrough
		case 7:
			lane(6)
			fallthrough
		case 6:
			lane(5)
			fallthrough
		case 5:
			lane(4)
			fallthrough
		case 4:
			lane(3)
			fallthrough
		case 3:
			lane(2)
			fallthrough
		case 2:
			lane(1)
			fallthrough
		default:
			lane(0)
		}
		if top>>63 != 0 {
			for l := range L {
				d := w[l&(MaxLanes-1)]
				*word(row, l) = satAdd(*word(row, l)-d, d) // undo the wrapping add, saturate
				*word(a, l) = satAdd(*word(a, l)-d, d)
				win.Sum[l&(MaxLanes-1)] = *word(a, l)
				win.Oldest[l&(MaxLanes-1)] = *word(old, l)
			}
		}
		r.singleTouches = satAdd(r.singleTouches, w[0])
	} else {
		for l := range L {
			win.Sum[l&(MaxLanes-1)] = *word(a, l)
			win.Oldest[l&(MaxLanes-1)] = *word(old, l)
		}
	}
	switch L { // zero the lanes past the ring's, unrolled as above
	case 1:
		win.Sum[1], win.Oldest[1] = 0, 0
		fallthrough
	case 2:
		win.Sum[2], win.Oldest[2] = 0, 0
		fallthrough
	case 3:
		win.Sum[3], win.Oldest[3] = 0, 0
		fallthrough
	case 4:
		win.Sum[4], win.Oldest[4] = 0, 0
		fallthrough
	case 5:
		win.Sum[5], win.Oldest[5] = 0, 0
		fallthrough
	case 6:
		win.Sum[6], win.Oldest[6] = 0, 0
		fallthrough
	case 7:
		win.Sum[7], win.Oldest[7] = 0, 0
	}
	win.Tag = n.tag
	return true, counted
}

// touchHash is TouchHash on any other windowed ring.
func (r *Ring) touchHash(h uint64, ns, key string, w *Weights, tsMs, nowMs int64, win *Window) (tracked, counted bool) {
	if !r.windowed {
		return false, false
	}
	nowMs = max(nowMs, tsMs)
	if nowMs >= r.nextMaint.Load() {
		r.maintain(nowMs)
	}
	n := r.gens.Load().active.lookupNS(h, ns, key)
	if n == nil {
		return false, false
	}
	en, ien := r.slotOf(nowMs, true)
	et, iet := en, ien
	if tsMs != nowMs {
		et, iet = r.slotOf(tsMs, false)
	}
	lay := r.lay
	r.lock(n)
	n.slide(en, lay) // a no-op when en is not newer; dead nodes are never read again
	a := n.area(lay)
	if n.dead() || laneSum(a, lay, 0) == 0 {
		r.unlock(n)
		return false, false
	}
	if uint64(n.epoch-et) < uint64(lay.slots) {
		counted = true
		row := a[lay.base()+iet*lay.lanes:][:lay.lanes]
		if lay.sums {
			sums := a[:len(row)]
			for l := range row {
				row[l] = satAdd(row[l], w[l])
				sums[l] = satAdd(sums[l], w[l])
			}
		} else {
			for l := range row {
				row[l] = satAdd(row[l], w[l])
			}
		}
		// node.count is not kept: a windowed ring reads only its dead bit.
	}
	fill(n, a, lay, win)
	r.unlock(n)
	if counted && w[0] != 0 {
		if r.single {
			r.singleTouches = satAdd(r.singleTouches, w[0])
		} else {
			r.touches.add(h, w[0])
		}
	}
	return true, counted
}

// word is the i-th counter from p.
func word(p unsafe.Pointer, i int) *uint64 { return (*uint64)(unsafe.Add(p, 8*i)) }

// MayTrackHash reports whether a key hashed to h (as for TouchHash) may
// be tracked: false means that TouchHash, WindowHash and SetTagHash would
// find no such key. It reads one bucket head and inlines, so a caller on a
// hot path can skip those calls for most untracked keys; it runs no
// maintenance (see Tick).
func (r *Ring) MayTrackHash(h uint64) bool {
	t := r.gens.Load().active
	return t.buckets[h&t.mask].Load() != nil
}

// lock and unlock guard a node on the hashed paths, unless the caller
// promised a single goroutine (Options.SingleWriter).
func (r *Ring) lock(n *node) {
	if !r.single {
		n.lock()
	}
}

func (r *Ring) unlock(n *node) {
	if !r.single {
		n.unlock()
	}
}

// WindowHash reports the window of ns+key as of nowMs in win, counting
// nothing; it returns false for a key that is untracked or cold, as
// TouchHash would. h, ns and key are as for TouchHash.
func (r *Ring) WindowHash(h uint64, ns, key string, nowMs int64, win *Window) bool {
	if !r.windowed {
		return false
	}
	if nowMs >= r.nextMaint.Load() {
		r.maintain(nowMs)
	}
	n := r.gens.Load().active.lookupNS(h, ns, key)
	if n == nil {
		return false
	}
	r.lock(n)
	defer r.unlock(n)
	n.slide(r.epoch(nowMs), r.lay)
	a := n.area(r.lay)
	if n.dead() || laneSum(a, r.lay, 0) == 0 {
		return false
	}
	fill(n, a, r.lay, win)
	return true
}

// SetTagHash stores tag for ns+key, for Window.Tag to report until the
// next SetTagHash or until the key's node is created or reset anew, and
// reports whether the key has a node. h, ns and key are as for TouchHash.
func (r *Ring) SetTagHash(h uint64, ns, key string, tag uint64) bool {
	if !r.windowed {
		return false
	}
	n := r.gens.Load().active.lookupNS(h, ns, key)
	if n == nil {
		return false
	}
	r.lock(n)
	n.tag = tag
	r.unlock(n)
	return true
}

// InsertHash starts tracking ns+key with a window made of credit: credit[k]
// is counted in the slot k slots before nowMs's slot (credit[0] in nowMs's
// own slot); credits older than the window are dropped. A detector uses it
// to admit a key with the counts a sketch bounds it had before, so that
// the exact count starts from an upper bound instead of from zero. It
// reports the new window in win.
//
// A key already tracked and warm as of nowMs is left alone: InsertHash
// returns false and fills win with its window. A cold node of the key is
// reset to the credit. Like Admit, InsertHash ignores NodeCap; the node
// keeps a copy of ns+key, one allocation besides the node's. A credit with
// nothing in lane 0 leaves the key cold, so untracked for TouchHash. h, ns
// and key are as for TouchHash; without a window InsertHash does nothing
// and returns false.
func (r *Ring) InsertHash(h uint64, ns, key string, credit []Weights, nowMs int64, win *Window) bool {
	if !r.windowed {
		return false
	}
	if nowMs >= r.nextMaint.Load() {
		r.maintain(nowMs)
	}
	t := r.gens.Load().active
	en := r.epoch(nowMs)
	for {
		if n := t.lookupNS(h, ns, key); n != nil {
			r.lock(n)
			n.slide(en, r.lay)
			if a := n.area(r.lay); !n.dead() {
				if laneSum(a, r.lay, 0) != 0 {
					fill(n, a, r.lay, win)
					r.unlock(n)
					return false
				}
				clear(a)
				n.tag = 0
				r.credit(n, credit)
				if r.single {
					r.memo.coldE = noEpoch // it was cold, and may stay so
				}
				fill(n, a, r.lay, win)
				r.unlock(n)
				return true
			}
			r.unlock(n)
			// Dead: being unlinked. Insert a replacement below.
		}
		nn := newNode(h, ns+key, r.lay)
		nn.epoch = en
		r.credit(nn, credit)
		if !r.reserve(t) {
			r.forced.Add(1)
			t.nodes.Add(1)
		}
		if n, inserted := t.findOrInsert(nn); inserted {
			r.lock(n)
			fill(n, n.area(r.lay), r.lay, win)
			if r.single {
				// Made as of an earlier epoch, it may be cold as of the
				// memo's.
				r.created(n, en != r.memo.coldE || n.winTotal(en, r.lay) == 0)
			}
			r.unlock(n)
			return true
		}
		t.nodes.Add(-1) // another goroutine inserted the key first; look again
	}
}

// credit writes credit into the window of n, whose newest slot is n.epoch
// and which is empty. Caller holds n.mu or owns an unpublished n.
func (r *Ring) credit(n *node, credit []Weights) {
	a := n.area(r.lay)
	L := r.lay.lanes
	for k := range min(len(credit), r.lay.slots) {
		row := a[r.lay.base()+floorMod(n.epoch-int64(k), r.lay.slots)*L:][:L]
		for l := range row {
			row[l] = credit[k][l]
			if r.lay.sums {
				a[l] = satAdd(a[l], credit[k][l])
			}
		}
	}
}

// laneSum is lane l's total over the window held in a, a node's counters.
// Caller holds the node's mu.
func laneSum(a []uint64, lay layout, l int) uint64 {
	if lay.sums {
		return a[l]
	}
	var t uint64
	for i := range lay.slots {
		t = satAdd(t, a[i*lay.lanes+l])
	}
	return t
}

// fill reports the window of n, whose counters are a, as of n.epoch.
// Caller holds n.mu.
func fill(n *node, a []uint64, lay layout, win *Window) {
	oldest := floorMod(n.epoch, lay.slots) + 1 // the slot after the newest
	if oldest == lay.slots {
		oldest = 0
	}
	L := lay.lanes
	old := a[lay.base()+oldest*L:][:L]
	sum, first := win.Sum[:L], win.Oldest[:L]
	if lay.sums {
		for l, v := range a[:L] {
			sum[l] = v
		}
	} else {
		for l := range sum {
			sum[l] = laneSum(a, lay, l)
		}
	}
	for l, v := range old {
		first[l] = v
	}
	for l := L; l < MaxLanes; l++ {
		win.Sum[l], win.Oldest[l] = 0, 0
	}
	win.Tag = n.tag
}

// SweepCold removes the cold nodes (as EvictCold defines them) of the next
// buckets buckets of each generation, continuing where the previous call
// stopped, and returns how many it removed. Called a little at a time it
// spreads the O(Len()) walk of EvictCold (and of an automatic cold sweep,
// which runs inline in one unlucky call) over many calls: buckets per call
// b sweep the whole table every 2^Bits / b calls.
func (r *Ring) SweepCold(nowMs int64, buckets int) int {
	if buckets <= 0 {
		return 0
	}
	e := r.epoch(nowMs)
	start := r.sweepCursor.Add(uint64(buckets)) - uint64(buckets)
	whole := true
	for _, t := range r.tables() {
		whole = whole && (t == nil || buckets >= len(t.buckets))
	}
	if whole && r.memo.coldE == e && r.memoizes(e) {
		return 0 // nothing turned cold since the last whole sweep
	}
	total := 0
	var cold []*node
	for _, t := range r.tables() {
		if t == nil {
			continue
		}
		for i := range uint64(min(buckets, len(t.buckets))) {
			b := &t.buckets[(start+i)&t.mask]
			for n := b.Load(); n != nil; n = n.succ() {
				if !n.dead() && r.score(n, e) == 0 {
					cold = append(cold, n)
				}
			}
		}
		for _, n := range cold {
			// kill re-checks coldness atomically with the deletion, so a
			// node touched since the walk survives.
			if r.kill(t, n, true, e) {
				total++
			}
		}
		cold = cold[:0]
	}
	r.evicted.Add(uint64(total))
	if whole && r.memoizes(e) {
		r.memo.coldE = e
	}
	return total
}

// EvictLowest removes the tracked key whose lane total over the window as
// of nowMs is the smallest, if that total is below below, and reports
// whether it removed one; ties go to the key first in the ring's order.
// Cold keys count as 0. It is how a caller whose ring is full makes room
// for a key it knows to be heavier than some tracked one (Space-Saving's
// rule). It walks every node, O(Len()), except on a SingleWriter ring
// that does not rotate: there a walk's findings serve the later calls as
// of the same window slot, each in O(log Len()) (see memo).
func (r *Ring) EvictLowest(nowMs int64, lane int, below uint64) bool {
	if !r.windowed || lane < 0 || lane >= r.lay.lanes {
		return false
	}
	e := r.epoch(nowMs)
	victim, least := r.knownLowest(e, lane)
	vt := r.gens.Load().active // the memo's table
	if victim == nil {
		victim, vt, least = r.lowestWalk(e, lane)
	}
	if victim == nil || least >= below || !r.kill(vt, victim, false, 0) {
		return false
	}
	r.evicted.Add(1)
	return true
}
