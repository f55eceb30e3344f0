package pipeline

import (
	"math"
	"unsafe"

	"github.com/keyheat/keyheat/internal/prefetch"
	"github.com/keyheat/keyheat/schemas"
)

// This file rules out, before an app's keys are folded, the keys that
// cannot reach a report, so that a window listing a million keys (a
// topic keyed by access key over a thousand partitions) places and sums
// only the few that can.
//
// mergeApp keeps a key as a candidate when its most possible count
// reaches the (TopN+1)-th largest summed upper bound of the app's keys
// (least), or one of its figures the TopN-th largest of that figure
// (figMin). Both thresholds are known from below before folding: any
// TopN+1 distinct keys each with a summed upper bound of at least u put
// least at u or above, and a key's summed upper bound is at least what
// any one window says of it (the smallest Count its entries there give).
// And every key is known from above: its listed entries' Counts, and
// their figures, hash to one of a table of slots, whose sums bound every
// key of the slot. A key whose slot's sums, plus what the windows not
// listing it may add, stay below both lower thresholds cannot be a
// candidate; it is skipped, entry by entry, and never placed.
//
// Skipping it changes nothing a report shows: the thresholds are the
// same without it (it was below the TopN+1 and TopN values that set
// them), so the candidates are, and with them every bound and figure.

// pruneSlotsMax bounds the slots of the sums table (40 bytes each): 2^17
// keep a table of a million keys at about eight keys a slot, in the
// caches of a server.
const pruneSlotsMax = 1 << 17

// defaultPruneMin is Merger.pruneMin: an app listing fewer entries
// (with repeats) folds them all, its table in the caches anyway.
const defaultPruneMin = 1 << 15

// slotSums bounds the keys of one slot: the sums of their entries'
// Counts and figures.
type slotSums struct {
	upper, bytes, reads, writes, latencyUs uint64
}

// pruneSet says which slots hold keys that may be candidates.
type pruneSet struct {
	shift uint     // slot of hash h: h >> shift
	pass  []uint64 // bitset by slot
}

func (p *pruneSet) keeps(h uint64) bool {
	i := h >> p.shift
	return p.pass[i>>6]&(1<<(i&63)) != 0
}

// distinctTop keeps the n largest values offered by distinct hashes
// (a hash offered again keeps its largest value), with where each came
// from: a min-heap on value, most offers failing the test on its root.
type distinctTop struct {
	n     int
	items []distinctItem
	pos   map[uint64]int // hash → index in items
}

type distinctItem struct {
	v, h uint64
	at   entryAt
}

// entryAt is a listed entry: app window, list and index.
type entryAt struct {
	win, list, i int32
}

func (d *distinctTop) reset(n int) {
	d.n = n
	d.items = d.items[:0]
	if d.pos == nil {
		d.pos = map[uint64]int{}
	}
	clear(d.pos)
}

func (d *distinctTop) offer(v, h uint64, at entryAt) {
	if len(d.items) == d.n && (d.n == 0 || v <= d.items[0].v) {
		return
	}
	if i, ok := d.pos[h]; ok {
		if v > d.items[i].v {
			d.items[i] = distinctItem{v, h, at}
			d.down(i)
		}
		return
	}
	if len(d.items) == d.n {
		delete(d.pos, d.items[0].h)
		d.items[0] = distinctItem{v, h, at}
		d.pos[h] = 0
		d.down(0)
		return
	}
	d.items = append(d.items, distinctItem{v, h, at})
	j := len(d.items) - 1
	d.pos[h] = j
	for j > 0 {
		p := (j - 1) / 2
		if d.items[p].v <= d.items[j].v {
			break
		}
		d.swap(p, j)
		j = p
	}
}

func (d *distinctTop) down(j int) {
	for {
		c := 2*j + 1
		if c >= len(d.items) {
			return
		}
		if r := c + 1; r < len(d.items) && d.items[r].v < d.items[c].v {
			c = r
		}
		if d.items[j].v <= d.items[c].v {
			return
		}
		d.swap(j, c)
		j = c
	}
}

func (d *distinctTop) swap(i, j int) {
	d.items[i], d.items[j] = d.items[j], d.items[i]
	d.pos[d.items[i].h], d.pos[d.items[j].h] = i, j
}

// prune works out which keys of wins may be candidates for a top n, the
// windows not listing a key adding at most slack to it (mergeApp's
// keyed floors and floor sums). It returns nil when it can rule none
// out.
func (s *mergeScratch) prune(wins []appWin, n int, slack uint64) *pruneSet {
	if slack == math.MaxUint64 {
		return nil
	}
	listed := 0
	for _, aw := range wins {
		for _, hs := range aw.s.apps[aw.app].hashes {
			listed += len(hs)
		}
	}
	bits := min(max(bitsFor(listed/8), 10), bitsFor(pruneSlotsMax-1))
	slots := 1 << bits
	shift := uint(64 - bits)
	if cap(s.sums) < slots {
		s.sums = make([]slotSums, slots)
	}
	s.usedSums = max(s.usedSums, slots)
	sums := s.sums[:slots]
	clear(sums)
	for i := range s.lower {
		s.lower[i].reset(n)
	}
	s.lower[4].reset(n + 1)
	for wi, aw := range wins {
		a := aw.window()
		hashes := &aw.s.apps[aw.app].hashes
		for li, l := range [numLists][]schemas.KeyCount{a.Top, a.Big, a.TopReads, a.TopWrites, a.TopLatency} {
			hs := hashes[li]
			for i := range l {
				if i+prefetchAhead < len(hs) {
					// The table is larger than the nearer caches.
					prefetch.Line(unsafe.Pointer(&sums[hs[i+prefetchAhead]>>shift]))
				}
				h := hs[i]
				k := windowKeyOf(&l[i])
				sl := &sums[h>>shift]
				sl.upper = saturatingAdd(sl.upper, k.upper)
				sl.bytes = saturatingAdd(sl.bytes, k.bytes)
				sl.reads = saturatingAdd(sl.reads, k.reads)
				sl.writes = saturatingAdd(sl.writes, k.writes)
				sl.latencyUs = saturatingAdd(sl.latencyUs, k.latencyUs)
				at := entryAt{int32(wi), int32(li), int32(i)}
				for f, v := range [4]uint64{k.bytes, k.reads, k.writes, k.latencyUs} {
					if v > 0 {
						s.lower[f].offer(v, h, at)
					}
				}
				// Offered by its Count; checked against the window's
				// other entries of the key below.
				s.lower[4].offer(k.upper, h, at)
			}
		}
	}
	// least is at least the smallest of TopN+1 distinct keys' bounds in
	// one window each: the smallest Count each window's entries of the
	// key give (windowKey.and).
	least := uint64(0)
	if l := &s.lower[4]; len(l.items) == l.n {
		least = math.MaxUint64
		for _, it := range l.items {
			aw := wins[it.at.win]
			a := aw.window()
			hashes := &aw.s.apps[aw.app].hashes
			lists := [numLists][]schemas.KeyCount{a.Top, a.Big, a.TopReads, a.TopWrites, a.TopLatency}
			key := lists[it.at.list][it.at.i].Key
			u := uint64(math.MaxUint64)
			for li, l := range lists {
				for i := range l {
					if hashes[li][i] == it.h && l[i].Key == key {
						u = min(u, l[i].Count)
					}
				}
			}
			least = min(least, u)
		}
	}
	var figMin [4]uint64
	for f := range figMin {
		figMin[f] = 1 // fewer than n keys with the figure: every one that has it
		if l := &s.lower[f]; len(l.items) == l.n && l.n > 0 {
			figMin[f] = l.items[0].v
		}
	}
	words := (slots + 63) / 64
	if cap(s.pass) < words {
		s.pass = make([]uint64, words)
	}
	pass := s.pass[:words]
	clear(pass)
	ruled := 0
	for i := range sums {
		sl := &sums[i]
		may := saturatingAdd(sl.upper, slack) >= least ||
			sl.bytes >= figMin[0] || sl.reads >= figMin[1] || sl.writes >= figMin[2] || sl.latencyUs >= figMin[3]
		if may {
			pass[i>>6] |= 1 << (i & 63)
		} else if sl.upper > 0 || sl.bytes > 0 {
			ruled++
		}
	}
	if ruled == 0 {
		return nil
	}
	return &pruneSet{shift: shift, pass: pass}
}
