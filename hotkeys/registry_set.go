package hotkeys

import (
	"hash/maphash"
	"sync/atomic"
)

// The follower's published set, which IsHot and Get read on every access
// an application makes, so it is built for lookups: no lock, no
// allocation, one hash.
//
// Keys are spread over setShards shards by the top byte of a seeded hash of
// the key. Each shard is an immutable table behind an atomic pointer: a
// reader loads the pointer and probes a table nobody writes to any more,
// and the one writer (the follower, under its mutex) builds a new table
// for each shard a batch of records changed and swaps it in. An update
// thus copies one shard's table, about 1/256 of the set, and a bootstrap
// batch rebuilds each shard once, whatever number of the batch's records
// fell in it.
//
// A table is open addressing with linear probing at most half full. The
// hash covers the key only, not the app: apps are few and a key hot in two
// apps is rare, so the probe compares the app with the key, and a lookup
// hashes one string. Before probing, a lookup tests one bit of the table's
// filter (8 bits per slot, one set per entry): most keys an application
// asks about are not hot, and the filter answers them from a bitmap that
// stays in cache when the slots of a large set do not.
//
// What a lookup reads is laid out for the CPU's caches, which decide its
// cost once the set outgrows them: a slot is one cache line with the hash,
// the app's index in a list all tables share and the key's bytes (up to
// inlineKey of them), so a hit reads the table's header, a filter word and
// one slot line. The entries a table's slots point to are copies in one
// array, their keys in one string, not entries strewn over the heap
// between the garbage of decoding them: a lookup of a set of 100k keys
// built from the registry cost about 3 times as much that way.
//
// The hash is maphash with a seed of the follower's own, so which keys
// collide differs per process and cannot be chosen by whoever makes keys
// hot.

// setShards is the number of shards; a shard is chosen by the hash's top
// byte.
const setShards = 256

// setSlot is one slot of a table: a cache line holding what a lookup
// compares, so that a hit reads the slot and nothing else of the table but
// the filter. Keys of up to inlineKey bytes are copied into the slot;
// longer ones are compared with the entry's.
type setSlot struct {
	hash uint64
	e    *Entry // nil: empty slot
	klen uint32 // len(e.Key)
	app  uint16 // e.App is the table's apps[app]; noApp: compare e.App
	key  [inlineKey]byte
}

// inlineKey makes setSlot 64 bytes, a cache line.
const inlineKey = 42

// noApp marks a slot whose app is not in its table's apps (past 65535
// apps, which only a registry full of garbage has).
const noApp = 1<<16 - 1

// setTable is one shard's immutable table.
type setTable struct {
	mask   uint64 // len(slots) - 1; len(slots) is a power of two
	fmask  uint64 // number of filter bits - 1
	filter []uint64
	slots  []setSlot
	// apps are the apps slots name by index: the writer's list, which
	// only grows, as it was when the table was built, shared by all
	// tables so that it stays in cache.
	apps []string
	// entries holds the entries the slots point to; their keys share one
	// string.
	entries []Entry
}

// emptyTable is the table of a shard without entries: its filter rejects
// every key.
var emptyTable = &setTable{filter: make([]uint64, 1), slots: make([]setSlot, 1)}

// filterBit is the filter bit of hash h: bits other than the shard's (top
// 8) and the slot index's (low bits), so the three are independent.
func (t *setTable) filterBit(h uint64) uint64 { return (h >> 24) & t.fmask }

// entrySet is the published set.
type entrySet struct {
	seed   maphash.Seed
	shards [setShards]atomic.Pointer[setTable]
}

func newEntrySet() *entrySet {
	s := &entrySet{seed: maphash.MakeSeed()}
	for i := range s.shards {
		s.shards[i].Store(emptyTable)
	}
	return s
}

func (s *entrySet) hash(key string) uint64 { return maphash.String(s.seed, key) }

// lookup returns the entry of (app, key), nil when there is none. It is
// safe for concurrent use with publish, and does not allocate.
func (s *entrySet) lookup(app, key string) *Entry {
	h := maphash.String(s.seed, key)
	t := s.shards[h>>56].Load()
	if b := t.filterBit(h); t.filter[b>>6]&(1<<(b&63)) == 0 {
		return nil
	}
	for i := h & t.mask; ; i = (i + 1) & t.mask {
		sl := &t.slots[i]
		if sl.e == nil {
			return nil
		}
		if sl.hash == h && sl.klen == uint32(len(key)) && t.slotApp(sl) == app {
			if len(key) <= inlineKey {
				if string(sl.key[:len(key)]) == key {
					return sl.e
				}
			} else if sl.e.Key == key {
				return sl.e
			}
		}
	}
}

func (t *setTable) slotApp(sl *setSlot) string {
	if sl.app == noApp {
		return sl.e.App
	}
	return t.apps[sl.app]
}

// setKey identifies a key in the writer's maps.
type setKey struct{ app, key string }

// setItem is an entry in the writer's maps, with its hash.
type setItem struct {
	hash uint64
	e    *Entry
}

// setWriter is the writer's side of an entrySet: the entries of each shard
// in a dense slice it alone touches (indexed by key), and which shards
// changed since the last publish. It is not safe for concurrent use.
type setWriter struct {
	set    *entrySet
	apps   []string
	appIdx map[string]uint16
	shards [setShards]shardItems
	dirty  [setShards]bool
	list   []uint8 // dirty shards, in the order they became dirty
}

// shardItems are a shard's entries, dense so that a rebuild walks a slice.
type shardItems struct {
	items []setItem
	index map[setKey]int
}

func newSetWriter(s *entrySet) *setWriter {
	w := &setWriter{set: s, appIdx: map[string]uint16{}}
	for i := range w.shards {
		w.shards[i].index = map[setKey]int{}
	}
	return w
}

// put makes e the entry of (e.App, e.Key) at the next publish.
func (w *setWriter) put(e *Entry) {
	h := w.set.hash(e.Key)
	i := uint8(h >> 56)
	s, k := &w.shards[i], setKey{e.App, e.Key}
	if j, ok := s.index[k]; ok {
		s.items[j] = setItem{hash: h, e: e}
	} else {
		s.index[k] = len(s.items)
		s.items = append(s.items, setItem{hash: h, e: e})
	}
	w.markDirty(i)
}

// del removes the entry of (app, key) at the next publish.
func (w *setWriter) del(app, key string) {
	i := uint8(w.set.hash(key) >> 56)
	s, k := &w.shards[i], setKey{app, key}
	j, ok := s.index[k]
	if !ok {
		return
	}
	last := len(s.items) - 1
	if j != last {
		moved := s.items[last]
		s.items[j] = moved
		s.index[setKey{moved.e.App, moved.e.Key}] = j
	}
	s.items[last] = setItem{}
	s.items = s.items[:last]
	delete(s.index, k)
	w.markDirty(i)
}

func (w *setWriter) markDirty(i uint8) {
	if !w.dirty[i] {
		w.dirty[i] = true
		w.list = append(w.list, i)
	}
}

// publish builds a new table for every shard changed since the last
// publish and swaps it in. Readers see each shard's changes at once, and
// shards one after the other.
func (w *setWriter) publish() {
	for _, i := range w.list {
		w.set.shards[i].Store(w.buildTable(w.shards[i].items))
		w.dirty[i] = false
	}
	w.list = w.list[:0]
}

// appIndex is app's index in the list slots name apps by, noApp when the
// list is full.
func (w *setWriter) appIndex(app string) uint16 {
	if a, ok := w.appIdx[app]; ok {
		return a
	}
	if len(w.apps) == noApp {
		return noApp
	}
	a := uint16(len(w.apps))
	w.appIdx[app] = a
	w.apps = append(w.apps, app)
	return a
}

// buildTable returns the table of a shard's entries: their copies in one
// array, their keys in one string.
func (w *setWriter) buildTable(items []setItem) *setTable {
	if len(items) == 0 {
		return emptyTable
	}
	n := 8
	for n < 2*len(items) {
		n *= 2
	}
	size := 0
	for _, it := range items {
		size += len(it.e.Key)
	}
	arena := make([]byte, 0, size)
	for _, it := range items {
		arena = append(arena, it.e.Key...)
	}
	keys := string(arena)
	// 8 filter bits per slot, 16 or more per entry: about one miss in 16
	// gets past the filter to probe.
	t := &setTable{mask: uint64(n - 1), fmask: uint64(8*n - 1), filter: make([]uint64, n/8), slots: make([]setSlot, n),
		entries: make([]Entry, len(items))}
	lastApp, lastIdx := "", uint16(0) // apps are few: most entries have the last one's
	off := 0
	for j, it := range items {
		e := &t.entries[j]
		*e = *it.e
		e.Key = keys[off : off+len(e.Key)]
		off += len(e.Key)
		if j == 0 || e.App != lastApp {
			lastApp, lastIdx = e.App, w.appIndex(e.App)
		}
		i := it.hash & t.mask
		for t.slots[i].e != nil {
			i = (i + 1) & t.mask
		}
		sl := &t.slots[i]
		sl.hash, sl.e, sl.klen, sl.app = it.hash, e, uint32(len(e.Key)), lastIdx
		copy(sl.key[:], e.Key) // all of a short key, a prefix of a long one
		b := t.filterBit(it.hash)
		t.filter[b>>6] |= 1 << (b & 63)
	}
	// After the loop: appIndex may have grown the list.
	t.apps = w.apps
	return t
}
