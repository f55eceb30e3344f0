package pipeline

import (
	"slices"

	"github.com/keyheat/keyheat/schemas"
)

// This file selects what a report's rankings are cut from. A window's
// reports rank the same keys several times: each app's keys in its own
// report, and all of them again in the cluster's. Two facts keep that
// cheap, and neither changes a report:
//
//   - every ranking is a total order, so the first n keys of a union of
//     scopes are among the first n of each scope: the cluster's rankings
//     (and those of any scope combining apps that have rankings) are
//     selected from its apps' rankings, a few hundred keys, rather than
//     from every key of the window;
//   - a figure's ranking drops the keys without the figure, which rank
//     last: they are left out before selecting, so a window of reads
//     only spends nothing on TopWrites.
//
// Keys are compared as small records (rankRec): the two figures a ranking
// orders by, the key's app as its rank among the scope's apps, and the
// key's first eight bytes, so that only keys alike in all of them compare
// their strings. A quiet window, whose keys all have a count of 1, is all
// ties: its rankings are string orders, and the prefix settles most of
// them.

// scopeRanking is what the rankings of one scope's report are cut from,
// each list a copy of the scope's keys in its ranking's order: the first
// TopN+1 keys by count (the last one raises the Floor) and, per figure,
// the first TopN keys that have it (nil when none does).
type scopeRanking struct {
	top  []schemas.KeyCount
	figs [numFigures][]schemas.KeyCount
}

// numFigures is how many keyFigures there are.
const numFigures = 4

// rankRec is a key as a ranking compares it.
type rankRec struct {
	first, second uint64 // the ranking's figures, both largest first
	// prefix is the key's first 8 bytes, big-endian, zero-padded: where
	// two keys' prefixes differ they order as the keys do.
	prefix uint64
	app    uint32 // rank of the key's app among the scope's apps, by name
	idx    int32  // in the keys ranked
}

// ranker selects rankings; its buffers are reused across scopes and
// windows.
type ranker struct {
	keys []schemas.KeyCount // the keys being ranked
	apps []uint32           // by index in keys: the rank of its app
	pre  []uint64           // by index in keys: its prefix
	recs []rankRec
	best bestN[rankRec, *ranker]
	cat  []schemas.KeyCount // parts' lists, concatenated
	seen []string           // distinct apps
}

// before reports whether x ranks before y: by first, then second, both
// largest first, then by app and key. Keys of one scope differ in app or
// key, so this is a total order.
func (r *ranker) before(x, y *rankRec) bool {
	if x.first != y.first {
		return x.first > y.first
	}
	if x.second != y.second {
		return x.second > y.second
	}
	if x.app != y.app {
		return x.app < y.app
	}
	if x.prefix != y.prefix {
		return x.prefix < y.prefix
	}
	return r.keys[x.idx].Key < r.keys[y.idx].Key
}

// rankPrefix is the first 8 bytes of key, big-endian, zero-padded.
func rankPrefix(key string) uint64 {
	var p uint64
	n := min(len(key), 8)
	for i := range n {
		p |= uint64(key[i]) << (56 - 8*i)
	}
	return p
}

// load makes keys the keys ranked: their apps' ranks and prefixes.
func (r *ranker) load(keys []schemas.KeyCount) {
	r.keys = keys
	r.apps = slices.Grow(r.apps[:0], len(keys))[:len(keys)]
	r.pre = slices.Grow(r.pre[:0], len(keys))[:len(keys)]
	// A scope's keys come app by app: a new app name is looked up only
	// where it changes.
	r.seen = r.seen[:0]
	last := ""
	for i := range keys {
		if a := keys[i].App; i == 0 || a != last {
			if !slices.Contains(r.seen, a) {
				r.seen = append(r.seen, a)
			}
			last = a
		}
	}
	if len(r.seen) > 1 {
		slices.Sort(r.seen)
	}
	var rank uint32
	for i := range keys {
		if a := keys[i].App; i == 0 || a != last {
			j, _ := slices.BinarySearch(r.seen, a)
			rank, last = uint32(j), a
		}
		r.apps[i] = rank
		r.pre[i] = rankPrefix(keys[i].Key)
	}
}

// selectCount returns the first n loaded keys by count: by Count, then by
// the lower bound Count − Error, largest first.
func (r *ranker) selectCount(n int) []schemas.KeyCount {
	r.recs = r.recs[:0]
	for i := range r.keys {
		k := &r.keys[i]
		r.recs = append(r.recs, rankRec{first: k.Count, second: k.Count - k.Error, prefix: r.pre[i], app: r.apps[i], idx: int32(i)})
	}
	return r.pick(n)
}

// selectFigure returns the first n loaded keys with a non-zero figure f,
// by it, then by Count, largest first; nil when no key has it.
func (r *ranker) selectFigure(n int, f keyFigure) []schemas.KeyCount {
	r.recs = r.recs[:0]
	for i := range r.keys {
		k := &r.keys[i]
		if v := f.of(k); v > 0 {
			r.recs = append(r.recs, rankRec{first: v, second: k.Count, prefix: r.pre[i], app: r.apps[i], idx: int32(i)})
		}
	}
	if len(r.recs) == 0 {
		return nil
	}
	return r.pick(n)
}

// pick returns copies of the keys of the first n records, in order, as a
// new slice.
func (r *ranker) pick(n int) []schemas.KeyCount {
	b := &r.best
	b.reset(n, r)
	for i := range r.recs {
		x := &r.recs[i]
		// Once b is full, r's own inlined before settles each record
		// against the worst kept, most often for good.
		switch w := b.worst(); {
		case w == nil:
			b.offer(*x)
		case r.before(x, w):
			b.replaceWorst(*x)
		}
	}
	h := b.sorted()
	out := make([]schemas.KeyCount, len(h))
	for i := range h {
		out[i] = r.keys[h[i].idx]
	}
	return out
}

// rankScope selects the rankings of a scope of keys.
func (m *Merger) rankScope(keys []schemas.KeyCount) *scopeRanking {
	r := &m.ranker
	r.load(keys)
	rk := &scopeRanking{top: r.selectCount(m.cfg.TopN + 1)}
	for f := range keyFigure(numFigures) {
		rk.figs[f] = r.selectFigure(m.cfg.TopN, f)
	}
	r.keys = nil
	return rk
}

// rankParts selects the rankings of a scope combining parts, scopes of
// distinct apps, from theirs: the first n of the union are among the
// first n of each part.
func (m *Merger) rankParts(parts []*scopeRanking) *scopeRanking {
	rk := &scopeRanking{}
	if len(parts) == 1 {
		// A window of one app: its rankings, copied (the reports set
		// their keys' shares).
		rk.top = slices.Clone(parts[0].top)
		for f := range rk.figs {
			rk.figs[f] = slices.Clone(parts[0].figs[f])
		}
		return rk
	}
	r := &m.ranker
	r.cat = r.cat[:0]
	for _, p := range parts {
		r.cat = append(r.cat, p.top...)
	}
	r.load(r.cat)
	rk.top = r.selectCount(m.cfg.TopN + 1)
	for f := range keyFigure(numFigures) {
		r.cat = r.cat[:0]
		for _, p := range parts {
			r.cat = append(r.cat, p.figs[f]...)
		}
		r.load(r.cat)
		rk.figs[f] = r.selectFigure(m.cfg.TopN, f)
	}
	clear(r.cat) // holds keys' strings
	r.keys = nil
	return rk
}
