package hotring

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
	en := r.epoch(nowMs)
	et := en
	if tsMs != nowMs {
		et = r.epoch(tsMs)
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
		row := a[lay.base()+floorMod(et, lay.slots)*lay.lanes:][:lay.lanes]
		for l := range row {
			row[l] = satAdd(row[l], w[l])
			if lay.sums {
				a[l] = satAdd(a[l], w[l])
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
				r.credit(n, credit)
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
	old := a[lay.base()+floorMod(n.epoch-int64(lay.slots)+1, lay.slots)*lay.lanes:][:lay.lanes]
	for l := range lay.lanes {
		win.Sum[l] = laneSum(a, lay, l)
		win.Oldest[l] = old[l]
	}
	for l := lay.lanes; l < MaxLanes; l++ {
		win.Sum[l], win.Oldest[l] = 0, 0
	}
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
	return total
}

// EvictLowest removes the tracked key whose lane total over the window as
// of nowMs is the smallest, if that total is below below, and reports
// whether it removed one; ties go to the key first in the ring's order.
// Cold keys count as 0. It is how a caller whose ring is full makes room
// for a key it knows to be heavier than some tracked one (Space-Saving's
// rule), and it walks every node: O(Len()).
func (r *Ring) EvictLowest(nowMs int64, lane int, below uint64) bool {
	if !r.windowed || lane < 0 || lane >= r.lay.lanes {
		return false
	}
	e := r.epoch(nowMs)
	var (
		victim *node
		vt     *table
		least  uint64
	)
	for _, t := range r.tables() {
		if t == nil {
			continue
		}
		t.walk(func(n *node) {
			n.lock()
			var c uint64
			if !n.dead() && n.laneWindow(e, r.lay, 0) > 0 {
				c = n.laneWindow(e, r.lay, lane)
			}
			n.unlock()
			if victim == nil || c < least {
				victim, vt, least = n, t, c
			}
		})
	}
	if victim == nil || least >= below || !r.kill(vt, victim, false, 0) {
		return false
	}
	r.evicted.Add(1)
	return true
}
