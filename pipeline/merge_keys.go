package pipeline

import (
	"math"
	"unsafe"

	"github.com/keyheat/keyheat/internal/prefetch"
	"github.com/keyheat/keyheat/schemas"
)

// This file holds the key table one app's merge folds its summaries'
// listed keys into, and the scratch the merger keeps for it between
// windows (a window of 1,000 partitions lists a million keys: allocating
// and collecting that every second costs more than the merge itself).

// keyAcc accumulates one key of one app over the app windows that list
// it: the sums of what each of them says (windowKey), before the
// contributions of the windows that do not list it.
type keyAcc struct {
	key  string
	hash uint64 // sketch.Hash(key)
	// upper and lower are the sums of the listing windows' count bounds;
	// bytes … latencyUs the sums of their figures' lower bounds.
	upper, lower                    uint64
	bytes, reads, writes, latencyUs uint64
	// floorListed sums the Floors of the listing windows of topics not
	// keyed by access key: Floors the key does not take as its bound.
	floorListed uint64
	listings    int32 // app windows that list the key
	firstWin    int32 // the first of them
	more        int32 // the others, a list in mergeScratch.more; -1 for none
	// curWin is the app window whose entries the scratch entry cur
	// gathers, -1 before the first.
	curWin, cur int32
	shortened   bool
}

// listNode is one more app window listing a key, in a list through next
// (-1 ends it).
type listNode struct{ win, next int32 }

// curEntry is what one app window's lists say of key id (windowKey),
// gathered before it adds to the key's sums.
type curEntry struct {
	id int32
	windowKey
}

// mergeScratch is what merging one app's windows works in, kept by the
// merger for the next window: emptied, not freed.
type mergeScratch struct {
	// tab is an open-addressing table of the keys: each slot 0 (empty) or
	// the key's hash with its low 32 bits replaced by its index in accs + 1.
	tab  []uint64
	accs []keyAcc
	more []listNode
	cur  []curEntry
	// stamp marks, per app window, the key whose exact count is being
	// worked out (its id + 1) when the window lists it.
	stamp []int32
	heaps [5]largest // selection of thresholds: the figures', the count's
	cands []int32    // keys the reports may show
	// usedAccs and usedMore are the most entries of accs and more any
	// app of the window being merged used: what release clears, and
	// what the buffers' sizes are held to.
	usedAccs, usedMore int
	// sums, pass and lower rule keys out before the fold (prune);
	// usedSums is the most slots any app used.
	sums     []slotSums
	pass     []uint64
	lower    [5]distinctTop
	usedSums int
}

// minScratchKeys is the fewest keys the scratch is sized for: a window
// below it costs no allocation after the first.
const minScratchKeys = 1 << 12

// reset empties s for an app whose windows list at most listed keys
// (with repeats); keyed says that no key is expected in two windows.
func (s *mergeScratch) reset(listed int, keyed bool, wins int) {
	s.noteUse()
	s.accs = s.accs[:0]
	s.more = s.more[:0]
	// Keyed, the keys are about as many as the listed entries; otherwise
	// they repeat over the partitions and the table grows as needed.
	want := minScratchKeys
	if keyed {
		want = max(want, listed)
	}
	if cap(s.accs) < want {
		s.accs = make([]keyAcc, 0, want)
	}
	size := 2 << bitsFor(want)
	if len(s.tab) < size || len(s.tab) > 4*size {
		s.tab = make([]uint64, size)
	} else {
		clear(s.tab)
	}
	if cap(s.stamp) < wins {
		s.stamp = make([]int32, wins)
	}
	s.stamp = s.stamp[:wins]
	clear(s.stamp)
}

// noteUse records what the app last merged used of the buffers.
func (s *mergeScratch) noteUse() {
	s.usedAccs = max(s.usedAccs, len(s.accs))
	s.usedMore = max(s.usedMore, len(s.more))
}

// release ends a window's merge. It drops the keys' strings, which would
// otherwise keep the reported summaries' keys reachable until a later
// window overwrote them, and frees every buffer more than four times the
// size this window needed: a spike (a window listing many more keys, as a
// backlog or a burst of distinct keys brings) must not pin its peak for
// good, while windows of a steady size reuse the buffers as they are.
// Clearing costs what the window's merge wrote, not the buffers' size.
func (s *mergeScratch) release() {
	s.noteUse()
	clear(s.accs[:min(s.usedAccs, cap(s.accs))])
	s.accs = s.accs[:0]
	keys := max(s.usedAccs, minScratchKeys)
	if cap(s.accs) > 4*keys {
		s.accs = nil
	}
	if cap(s.cur) > 4*keys {
		s.cur = nil
	}
	if cap(s.cands) > 4*keys {
		s.cands = nil
	}
	if cap(s.more) > 4*max(s.usedMore, minScratchKeys) {
		s.more = nil
	}
	if len(s.tab) > 4*(2<<bitsFor(keys)) {
		s.tab = nil
	}
	if cap(s.sums) > 4*s.usedSums {
		s.sums, s.pass = nil, nil
	}
	s.usedAccs, s.usedMore, s.usedSums = 0, 0, 0
}

// bitsFor is the number of bits n takes (0 for 0).
func bitsFor(n int) int {
	b := 0
	for n > 0 {
		n >>= 1
		b++
	}
	return b
}

// intern returns the index in accs of key, whose sketch.Hash is h,
// adding it.
func (s *mergeScratch) intern(key string, h uint64) int32 {
	mask := uint64(len(s.tab) - 1)
	tag := h &^ math.MaxUint32
	for i := h & mask; ; i = (i + 1) & mask {
		e := s.tab[i]
		if e == 0 {
			if 2*(len(s.accs)+1) > len(s.tab) {
				s.grow()
				return s.intern(key, h)
			}
			id := int32(len(s.accs))
			s.accs = append(s.accs, keyAcc{key: key, hash: h, more: -1, curWin: -1})
			s.tab[i] = tag | uint64(id+1)
			return id
		}
		if e&^math.MaxUint32 == tag {
			id := int32(uint32(e) - 1)
			if a := &s.accs[id]; a.hash == h && a.key == key {
				return id
			}
		}
	}
}

// grow doubles the table, placing every key again.
func (s *mergeScratch) grow() {
	s.tab = make([]uint64, 2*len(s.tab))
	mask := uint64(len(s.tab) - 1)
	for id := range s.accs {
		h := s.accs[id].hash
		i := h & mask
		for s.tab[i] != 0 {
			i = (i + 1) & mask
		}
		s.tab[i] = h&^math.MaxUint32 | uint64(id+1)
	}
}

// fold adds app window wi's lists, whose keys' hashes are hashes (list
// by list), to the keys' sums, skipping the keys prune ruled out (none
// when pruned is nil); it returns how many entries it skipped.
func (s *mergeScratch) fold(wi int32, a *schemas.AppWindow, hashes *[numLists][]uint64, keyed bool, pruned *pruneSet) (skipped int) {
	floorListed := uint64(0) // what the window's Floor adds to floorListed
	if !keyed {
		floorListed = a.Floor
	}
	// A key in several of the window's lists takes the tightest bounds
	// they give (windowKey.and) before it adds to its sums. Top lists a
	// key once (decode checks it) and is by far the longest, so the
	// other lists are gathered first, and a Top entry whose key they do
	// not list adds at once, without the gathering.
	s.cur = s.cur[:0]
	for li, l := range [numLists][]schemas.KeyCount{nil, a.Big, a.TopReads, a.TopWrites, a.TopLatency} {
		hs := hashes[li]
		for i := range l {
			e := &l[i]
			if pruned != nil && !pruned.keeps(hs[i]) {
				skipped++
				continue
			}
			id := s.intern(e.Key, hs[i])
			acc := &s.accs[id]
			if acc.curWin == wi {
				s.cur[acc.cur].and(windowKeyOf(e))
				continue
			}
			acc.curWin, acc.cur = wi, int32(len(s.cur))
			s.cur = append(s.cur, curEntry{id: id, windowKey: windowKeyOf(e)})
		}
	}
	hs := hashes[0]
	for i := range a.Top {
		e := &a.Top[i]
		if pruned != nil && !pruned.keeps(hs[i]) {
			skipped++
			continue
		}
		if i+prefetchAhead < len(hs) {
			prefetch.Line(unsafe.Pointer(&s.tab[hs[i+prefetchAhead]&uint64(len(s.tab)-1)]))
		}
		id := s.intern(e.Key, hs[i])
		acc := &s.accs[id]
		if acc.curWin == wi {
			s.cur[acc.cur].and(windowKeyOf(e))
			continue
		}
		s.add(acc, wi, windowKeyOf(e), floorListed)
	}
	for i := range s.cur {
		c := &s.cur[i]
		s.add(&s.accs[c.id], wi, c.windowKey, floorListed)
	}
	return skipped
}

// add adds what app window wi says of a key, k, to its sums; floorListed
// is the window's Floor when its topic is not keyed, else 0.
func (s *mergeScratch) add(acc *keyAcc, wi int32, k windowKey, floorListed uint64) {
	acc.upper = saturatingAdd(acc.upper, k.upper)
	acc.lower = saturatingAdd(acc.lower, min(k.lower, k.upper))
	acc.bytes = saturatingAdd(acc.bytes, k.bytes)
	acc.reads = saturatingAdd(acc.reads, k.reads)
	acc.writes = saturatingAdd(acc.writes, k.writes)
	acc.latencyUs = saturatingAdd(acc.latencyUs, k.latencyUs)
	acc.shortened = acc.shortened || k.shortened
	acc.floorListed = saturatingAdd(acc.floorListed, floorListed)
	if acc.listings == 0 {
		acc.firstWin = wi
	} else {
		s.more = append(s.more, listNode{win: wi, next: acc.more})
		acc.more = int32(len(s.more) - 1)
	}
	acc.listings++
}

// prefetchAhead is how many keys ahead fold asks for the table slot a
// key will probe: with a million keys the table is far larger than the
// caches, and a miss per key is most of the fold's time.
const prefetchAhead = 8

// numLists is the number of key lists an app window has: Top, Big,
// TopReads, TopWrites, TopLatency.
const numLists = 5

// largest keeps the n largest of the values offered, in a min-heap:
// most values fail the test against its root, one comparison each.
type largest struct {
	n int
	h []uint64
}

// offer considers v.
func (l *largest) offer(v uint64) {
	if len(l.h) == l.n {
		if v > l.h[0] {
			l.replaceRoot(v)
		}
		return
	}
	l.h = append(l.h, v)
	h := l.h
	for j := len(h) - 1; j > 0; {
		p := (j - 1) / 2
		if h[p] <= h[j] {
			break
		}
		h[j], h[p] = h[p], h[j]
		j = p
	}
}

func (l *largest) replaceRoot(v uint64) {
	h := l.h
	h[0] = v
	for j := 0; ; {
		c := 2*j + 1
		if c >= len(h) {
			return
		}
		if r := c + 1; r < len(h) && h[r] < h[c] {
			c = r
		}
		if h[j] <= h[c] {
			return
		}
		h[j], h[c] = h[c], h[j]
		j = c
	}
}

// least returns the n-th largest value offered, and false when fewer
// than n were.
func (l *largest) least() (uint64, bool) {
	if l.n == 0 {
		return math.MaxUint64, true
	}
	if len(l.h) < l.n {
		return 0, false
	}
	return l.h[0], true
}

// thresholds returns the (n+1)-th largest upper bound of the keys
// (0 when there are at most n+1 keys) and, per figure (keyFigure), the
// n-th largest non-zero figure (1 when fewer than n keys have one): a key
// below both cannot be among the first n+1 by count nor the first n by
// the figure.
func (s *mergeScratch) thresholds(n int) (upper uint64, figs [4]uint64) {
	for i := range s.heaps {
		s.heaps[i].n = n
		s.heaps[i].h = s.heaps[i].h[:0]
	}
	s.heaps[4].n = n + 1
	for i := range s.accs {
		a := &s.accs[i]
		for f, v := range [4]uint64{a.bytes, a.reads, a.writes, a.latencyUs} {
			if v > 0 {
				s.heaps[f].offer(v)
			}
		}
		s.heaps[4].offer(a.upper)
	}
	for f := range figs {
		v, full := s.heaps[f].least()
		if !full {
			v = 1
		}
		figs[f] = v
	}
	upper, _ = s.heaps[4].least()
	return upper, figs
}
