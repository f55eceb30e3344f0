package hotring

import "slices"

// TopN returns up to n keys with the highest counts now (per
// Options.Clock), highest first, ties broken by key so the order is
// deterministic. Keys with a zero count are left out. With rotation a key's
// count is the sum of its counts in both generations. The walk is lock-free
// and not atomic: touches made during it may or may not be reflected.
// Cost: O(Len() × log n).
func (r *Ring) TopN(n int) []KeyCount { return r.TopNAt(n, r.now()) }

// Top returns TopN(Options.TopK).
func (r *Ring) Top() []KeyCount { return r.TopN(r.opts.TopK) }

// TopNAt is TopN at time now, in nanoseconds since the Unix epoch.
func (r *Ring) TopNAt(n int, now int64) []KeyCount {
	if n <= 0 {
		return nil
	}
	h := make(topHeap, 0, min(n, 1024))
	r.collect(now, func(key string, c uint64) {
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

// KeysAbove returns every key whose count now (per Options.Clock) is at
// least threshold, highest first, ties broken by key. Counts are as in
// TopN.
func (r *Ring) KeysAbove(threshold uint64) []KeyCount {
	return r.KeysAboveAt(threshold, r.now())
}

// KeysAboveAt is KeysAbove at time now, in nanoseconds since the Unix
// epoch.
func (r *Ring) KeysAboveAt(threshold uint64, now int64) []KeyCount {
	var out []KeyCount
	r.collect(now, func(key string, c uint64) {
		if c >= threshold {
			out = append(out, KeyCount{Key: key, Count: c})
		}
	})
	sortDesc(out)
	return out
}

// collect calls fn once per tracked key with its count summed over both
// generations.
func (r *Ring) collect(now int64, fn func(key string, c uint64)) {
	if now >= r.nextMaint.Load() {
		r.maintain(now)
	}
	e := r.epoch(now)
	g := r.gens.Load()
	a, w := g.active, g.warm
	a.walk(func(n *node) {
		c := r.score(n, e)
		if w != nil {
			c = satAdd(c, r.score(w.lookup(n.hash, n.key), e))
		}
		fn(n.key, c)
	})
	if w != nil {
		w.walk(func(n *node) {
			if a.lookup(n.hash, n.key) == nil {
				fn(n.key, r.score(n, e))
			}
		})
	}
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
