package hotring

import "slices"

// TopN returns up to n keys with the highest counts at nowMs, highest
// first, ties broken by key so the order is deterministic. Keys with a zero
// count are left out. With rotation a key's count is the sum of its counts
// in both generations. The walk is lock-free and not atomic: touches made
// during it may or may not be reflected. Cost: O(Len() × log n).
func (r *Ring) TopN(n int, nowMs int64) []KeyCount {
	if n <= 0 {
		return nil
	}
	h := make(topHeap, 0, min(n, 1024))
	r.collect(nowMs, func(key string, c uint64) {
		if c == 0 {
			return
		}
		kc := KeyCount{Key: key, Count: c}
		if len(h) < n {
			h.push(kc)
		} else if better(kc, h[0]) {
			h[0] = kc
			h.down(0)
		}
	})
	if len(h) == 0 {
		return nil
	}
	out := []KeyCount(h)
	sortDesc(out)
	return out
}

// Top returns TopN(Options.TopK, nowMs).
func (r *Ring) Top(nowMs int64) []KeyCount { return r.TopN(r.opts.TopK, nowMs) }

// KeysAbove returns every key whose count at nowMs is at least threshold,
// highest first, ties broken by key. Counts are as in TopN.
func (r *Ring) KeysAbove(threshold uint64, nowMs int64) []KeyCount {
	var out []KeyCount
	r.collect(nowMs, func(key string, c uint64) {
		if c >= threshold {
			out = append(out, KeyCount{Key: key, Count: c})
		}
	})
	sortDesc(out)
	return out
}

// collect calls fn once per tracked key with its count summed over both
// generations.
//
// Both tables have the same buckets, and a key lives in the same bucket of
// each, so collect merges the two sorted lists of each bucket like a merge
// sort, combining the nodes of a key found in both. Why not walk the
// active table and then look each warm key up in it, as it once did: a
// key removed from the active table between the two passes was reported
// twice, and one inserted there between them not at all. The merge needs
// no second look. A walk of one list visits live keys in strictly
// ascending order (next pointers, even those of unlinked nodes, only point
// forward, and a replacement node is always spliced in front of the dead
// one), so once the merge has passed a key neither list can yield it
// again; and a key that stays live in either table throughout is visited.
func (r *Ring) collect(nowMs int64, fn func(key string, c uint64)) {
	if nowMs >= r.nextMaint.Load() {
		r.maintain(nowMs)
	}
	e := r.epoch(nowMs)
	g := r.gens.Load()
	a, w := g.active, g.warm
	if w == nil {
		a.walk(func(n *node) { fn(n.key, r.score(n, e)) })
		return
	}
	for i := range a.buckets {
		an, wn := liveFrom(a.buckets[i].Load()), liveFrom(w.buckets[i].Load())
		for an != nil || wn != nil {
			switch {
			case wn == nil || an != nil && less(an.hash, an.key, wn.hash, wn.key):
				fn(an.key, r.score(an, e))
				an = liveFrom(an.succ())
			case an == nil || less(wn.hash, wn.key, an.hash, an.key):
				fn(wn.key, r.score(wn, e))
				wn = liveFrom(wn.succ())
			default: // the same key in both generations
				fn(an.key, satAdd(r.score(an, e), r.score(wn, e)))
				an, wn = liveFrom(an.succ()), liveFrom(wn.succ())
			}
		}
	}
}

// liveFrom returns the first live node from n on, in list order, or nil.
func liveFrom(n *node) *node {
	for n != nil && n.dead() {
		n = n.succ()
	}
	return n
}

// better reports whether a ranks before b: higher count, then smaller key.
func better(a, b KeyCount) bool {
	if a.Count != b.Count {
		return a.Count > b.Count
	}
	return a.Key < b.Key
}

func sortDesc(s []KeyCount) {
	slices.SortFunc(s, func(a, b KeyCount) int {
		switch {
		case better(a, b):
			return -1
		case better(b, a):
			return 1
		}
		return 0
	})
}

// topHeap is a min-heap by rank: h[0] is the worst of the kept keys.
type topHeap []KeyCount

func (h *topHeap) push(kc KeyCount) {
	*h = append(*h, kc)
	s := *h
	for i := len(s) - 1; i > 0; {
		p := (i - 1) / 2
		if !better(s[p], s[i]) {
			break
		}
		s[p], s[i] = s[i], s[p]
		i = p
	}
}

func (h topHeap) down(i int) {
	for {
		l := 2*i + 1
		if l >= len(h) {
			return
		}
		m := l
		if r := l + 1; r < len(h) && better(h[l], h[r]) {
			m = r
		}
		if !better(h[i], h[m]) {
			return
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
}
