package pipeline

import (
	"encoding/binary"
	"math/bits"
	"strings"
	"unsafe"

	"github.com/keyheat/keyheat/internal/faststr"
	"github.com/keyheat/keyheat/internal/prefetch"
	"github.com/keyheat/keyheat/sketch"
)

// exactTable counts the keys of one open report window exactly, every app
// together: per key its events, bytes, reads, writes and latency, from
// the key's first event in the window. It holds at most maxKeys keys whose
// bytes add up to at most maxKeyBytes. The first key that does not fit
// makes it full for the rest of the window: every key that comes later
// goes to its app's bounded top-K, and the keys it holds stay exact. So a
// key is counted either here from its first event or by the top-K, never
// partly by both, and a summary can merge the two as disjoint.
//
// Open addressing with linear probing: index holds per slot the number of
// an entry + 1 (0 is empty) in its low exactIdxBits bits, and the top bits
// of the key's hash above them, so probing past other keys reads the index
// only. Entries lie densely in ents, in order of first event, one cache
// line each, a key of up to exactInline bytes inside its entry (most
// keys: a hit reads one index slot and one entry) and longer keys back to
// back in arena. Both grow by doubling up to the bounds, so a window with
// few keys costs little; the table is reused by later windows (winState's
// pool) and reset by clearing only the index slots it used.
//
// Once full, most lookups are of keys it does not hold (they go on to the
// top-K); a Bloom filter of the keys it holds (a byte per key, two bits
// per key in one 64-bit word) answers most of those without probing the
// index. In front of the index, a small direct-mapped cache of the entries
// last found (front) serves the heavy keys, which take most events, from
// 32 KiB instead of the index's scattered slots, so the table crowds
// detection's structures out of the cache less.
type exactTable struct {
	index    []uint32
	mask     uint64
	free     uint64 // where lookup found the key missing: insert's slot
	ents     []exactEntry
	arena    []byte
	maxKeys  int
	maxBytes int
	keyBytes int // key bytes held, inline ones included
	full     bool
	bloom    []uint64 // the keys held; consulted once full
	// front caches, per slot h mod exactFront, the top 32 bits of the
	// hash of a key found lately and its entry number + 1 (0: none).
	front [exactFront]uint64
	// high carries, per entry, what wrapped out of its 32-bit reads and
	// writes: [2^32 × reads carried, 2^32 × writes carried]. Nil until a
	// key has 2^32 reads or writes in one window.
	high map[int32][2]uint64
}

// exactEntry is one key's exact figures in the window: 64 bytes, a cache
// line.
type exactEntry struct {
	events, bytes, latencyUs uint64
	reads, writes            uint32 // low 32 bits; see exactTable.high
	keyLen                   uint32
	app                      uint16 // appAgg.idx of its app
	slot                     uint16 // Redis Cluster slot | slotShortened
	// key holds the key when it is at most exactInline bytes, else its
	// offset in arena in its first 4 bytes.
	key [exactInline]byte
}

// exactInline is the longest key an entry holds itself.
const exactInline = 24

// exactFront is the size of a table's front cache (32 KiB). At 8 KiB
// BenchmarkDetectCore took ~10 % longer at 1M events/s: a Zipf stream's
// heavy keys collided there.
const exactFront = 4096

// An index slot: the entry number + 1 in its low exactIdxBits bits (so a
// table holds fewer than 2^24 keys), 8 bits of the key's hash above.
const (
	exactIdxBits = 24
	exactIdxMask = 1<<exactIdxBits - 1
)

// slotShortened marks, in a slot field, a key cut to MaxKeyBytes (Redis
// slots take 14 bits).
const (
	slotShortened = 1 << 15
	slotMask      = RedisSlots - 1
)

// exactEntryBytes is an entry's size, for MemoryBound.
const exactEntryBytes = int64(unsafe.Sizeof(exactEntry{}))

// exactMinKeys is how many keys a new table has room for at least before
// it grows.
const exactMinKeys = 256

// newExactTable returns an empty table of at most maxKeys keys and
// maxKeyBytes of key bytes, with room for hint keys before it grows.
func newExactTable(maxKeys, maxKeyBytes, hint int) *exactTable {
	t := &exactTable{maxKeys: maxKeys, maxBytes: maxKeyBytes, bloom: make([]uint64, exactBloomWords(maxKeys))}
	t.resize(min(maxKeys, max(exactMinKeys, hint)))
	return t
}

// exactBloomWords is the Bloom filter's size for maxKeys keys: a power of
// two of 64-bit words, at least 8 bits a key.
func exactBloomWords(maxKeys int) int {
	w := 1
	for w*64 < 8*maxKeys {
		w <<= 1
	}
	return w
}

// bloomBits returns the word of hash h in the Bloom filter and the two
// bits it sets there, from bits of h that neither the slot (low bits) nor
// the fingerprint (top 8) use.
func (t *exactTable) bloomBits(h uint64) (int, uint64) {
	w := int(h>>20) & (len(t.bloom) - 1)
	return w, 1<<(h>>44&63) | 1<<(h>>50&63)
}

// mayHold reports whether the table may hold the key hashed to h: false
// means it surely does not.
func (t *exactTable) mayHold(h uint64) bool {
	w, b := t.bloomBits(h)
	return t.bloom[w]&b == b
}

// exactSlots is the index size for n entries: a power of two at least 2n,
// so the index is at most half full.
func exactSlots(n int) int {
	s := 2
	for s < 2*n {
		s <<= 1
	}
	return s
}

// resize gives the table room for n entries, rebuilding the index in entry
// order (which reset relies on).
func (t *exactTable) resize(n int) {
	ents := make([]exactEntry, len(t.ents), n)
	copy(ents, t.ents)
	t.ents = ents
	t.index = make([]uint32, exactSlots(n))
	t.mask = uint64(len(t.index) - 1)
	for i := range t.ents {
		h := sketch.Hash(t.key(&t.ents[i]))
		s := h & t.mask
		for t.index[s] != 0 {
			s = (s + 1) & t.mask
		}
		t.index[s] = exactFP(h) | uint32(i+1)
	}
}

// exactFP is the part of hash h an index slot keeps: its top bits, which
// the slot number (its low bits) does not tell.
func exactFP(h uint64) uint32 { return uint32(h>>(64-(32-exactIdxBits))) << exactIdxBits }

// key returns e's key, aliasing the entry or the arena: valid until the
// table is reset or grows.
func (t *exactTable) key(e *exactEntry) string {
	if e.keyLen <= exactInline {
		return unsafe.String(&e.key[0], int(e.keyLen))
	}
	return unsafe.String(&t.arena[binary.LittleEndian.Uint32(e.key[:4])], int(e.keyLen))
}

// touch starts loading the entry a lookup of hash h will most likely
// read, so that, called well before the lookup, its cache miss overlaps
// the work in between rather than stall it: the one the front cache
// names, else the one in the index slot of h. It reads both and picks
// with a conditional move, not a branch: whether a key is in the front
// cache goes either way from event to event, and a branch on it is
// settled only once the front slot arrives from memory, so a mispredict
// there discards the work begun after it. (Prefetching an entry of
// another key, or entry 0 for none, costs nothing but the hint.)
func (t *exactTable) touch(h uint64) {
	f := t.front[h&(exactFront-1)]
	i := int(t.index[h&t.mask] & exactIdxMask)
	if (f^h)>>32 == 0 {
		i = int(uint32(f))
	}
	if n := len(t.ents); n > 0 {
		prefetch.Line(unsafe.Pointer(&t.ents[min(max(i-1, 0), n-1)]))
	}
}

// lookup returns the entry of app's key, whose hash is h, or nil, with the
// free slot where insert would put the key in t.free (when not full).
//
// Whether an entry is the key (its app, length and bytes, inline up to
// exactInline) is written out at the front cache and in the probe loop:
// as a method it was too large for the compiler to inline, and its call
// on every event cost about 3 ns of BenchmarkDetectParts/hash+exact's 31.
func (t *exactTable) lookup(h uint64, app uint16, key string) *exactEntry {
	if f := t.front[h&(exactFront-1)]; f>>32 == h>>32 && uint32(f) != 0 {
		if e := &t.ents[uint32(f)-1]; e.app == app && int(e.keyLen) == len(key) &&
			(len(key) <= exactInline && faststr.Equal(unsafe.String(&e.key[0], len(key)), key) || len(key) > exactInline && t.key(e) == key) {
			return e
		}
	}
	if t.full && !t.mayHold(h) {
		return nil
	}
	index, mask := t.index, t.mask
	fp := exactFP(h)
	for s := h & mask; ; s = (s + 1) & mask {
		v := index[s]
		if v == 0 {
			t.free = s
			return nil
		}
		if v&^exactIdxMask != fp {
			continue
		}
		if e := &t.ents[v&exactIdxMask-1]; e.app == app && int(e.keyLen) == len(key) &&
			(len(key) <= exactInline && faststr.Equal(unsafe.String(&e.key[0], len(key)), key) || len(key) > exactInline && t.key(e) == key) {
			t.front[h&(exactFront-1)] = h>>32<<32 | uint64(v&exactIdxMask)
			return e
		}
	}
}

// count adds an event's figures to e. Reads and writes that wrap past
// 2^32 carry into t.high.
func (t *exactTable) count(e *exactEntry, nb, rd, wr, lat uint64) {
	e.events++
	e.bytes += nb
	e.latencyUs += lat
	var cr, cw uint32
	e.reads, cr = bits.Add32(e.reads, uint32(rd), 0)
	e.writes, cw = bits.Add32(e.writes, uint32(wr), 0)
	if cr|cw != 0 {
		t.carry(e, cr != 0)
	}
}

// insert adds app's key, whose hash is h, at the free slot lookup found,
// and returns its zeroed entry; nil, and the table full for the rest of
// the window, when it has no room for the key.
func (t *exactTable) insert(h uint64, app uint16, key string) *exactEntry {
	n := len(t.ents)
	if n == t.maxKeys || t.keyBytes+len(key) > t.maxBytes {
		t.full = true
		return nil
	}
	if n == cap(t.ents) {
		t.resize(min(2*n, t.maxKeys))
		t.lookup(h, app, key) // the free slot in the new index
	}
	t.ents = append(t.ents, exactEntry{keyLen: uint32(len(key)), app: app})
	e := &t.ents[n]
	if len(key) <= exactInline {
		copy(e.key[:], key)
	} else {
		if len(t.arena)+len(key) > cap(t.arena) {
			arena := make([]byte, len(t.arena), min(max(2*cap(t.arena), len(t.arena)+len(key), 4096), t.maxBytes))
			copy(arena, t.arena)
			t.arena = arena
		}
		binary.LittleEndian.PutUint32(e.key[:4], uint32(len(t.arena)))
		t.arena = append(t.arena, key...)
	}
	t.keyBytes += len(key)
	t.index[t.free] = exactFP(h) | uint32(n+1)
	w, b := t.bloomBits(h)
	t.bloom[w] |= b
	return e
}

// carry records that e's reads (or writes) wrapped past 2^32.
func (t *exactTable) carry(e *exactEntry, reads bool) {
	i := t.number(e)
	if t.high == nil {
		t.high = map[int32][2]uint64{}
	}
	c := t.high[i]
	if reads {
		c[0] += 1 << 32
	} else {
		c[1] += 1 << 32
	}
	t.high[i] = c
}

// number is e's entry number.
func (t *exactTable) number(e *exactEntry) int32 {
	return int32((uintptr(unsafe.Pointer(e)) - uintptr(unsafe.Pointer(&t.ents[0]))) / uintptr(exactEntryBytes))
}

// readsWrites returns entry i's reads and writes.
func (t *exactTable) readsWrites(i int32) (uint64, uint64) {
	e := &t.ents[i]
	c := t.high[i]
	return c[0] + uint64(e.reads), c[1] + uint64(e.writes)
}

// reset empties the table for another window, keeping its memory. A
// table that held few keys clears their slots (and Bloom words and front
// slots) only, last entry first: an entry's probe run holds only entries
// added before it (see resize).
func (t *exactTable) reset() {
	if len(t.ents) > len(t.index)/16 || len(t.ents) > exactFront/16 {
		clear(t.index)
		clear(t.bloom)
		clear(t.front[:])
	} else {
		for i := len(t.ents) - 1; i >= 0; i-- {
			h := sketch.Hash(t.key(&t.ents[i]))
			s := h & t.mask
			for t.index[s]&exactIdxMask != uint32(i+1) {
				s = (s + 1) & t.mask
			}
			t.index[s] = 0
			w, _ := t.bloomBits(h)
			t.bloom[w] = 0
			t.front[h&(exactFront-1)] = 0
		}
	}
	t.ents = t.ents[:0]
	t.arena = t.arena[:0]
	t.keyBytes = 0
	t.full = false
	t.high = nil
}

// exactBound is the most a table sized by maxKeys and maxKeyBytes holds.
func exactBound(maxKeys, maxKeyBytes int) int64 {
	if maxKeys == 0 {
		return 0
	}
	return int64(maxKeys)*exactEntryBytes + int64(exactSlots(maxKeys))*4 + int64(exactBloomWords(maxKeys))*8 +
		exactFront*8 + int64(maxKeyBytes)
}

// exactFigure names the figure of an entry a list ranks by.
type exactFigure uint8

const (
	figEvents exactFigure = iota
	figBytes
	figReads
	figWrites
	figLatency
	figCount // how many figures there are
)

// figures returns entry i's figures, in exactFigure order.
func (t *exactTable) figures(i int32) [figCount]uint64 {
	e := &t.ents[i]
	r, w := uint64(e.reads), uint64(e.writes)
	if t.high != nil {
		c := t.high[i]
		r, w = r+c[0], w+c[1]
	}
	return [figCount]uint64{e.events, e.bytes, r, w, e.latencyUs}
}

// exactCand is an entry, the figure a list ranks it by, and the first 8
// bytes of its key (keyPrefix), which settle most ties without reading
// the keys: a window of light keys ties on nearly every comparison.
type exactCand struct {
	i   int32
	f   uint64
	pre uint64
}

// keyPrefix is the first 8 bytes of key, big endian, zero-padded: keys
// whose prefixes differ compare as their prefixes do (a key that ends
// within them pads with zeros, below every byte but 0, where the prefixes
// then tie and the keys are compared).
func keyPrefix(key string) uint64 {
	if len(key) >= 8 {
		return binary.BigEndian.Uint64(unsafe.Slice(unsafe.StringData(key), 8))
	}
	var b [8]byte
	copy(b[:], key)
	return binary.BigEndian.Uint64(b[:])
}

// before reports whether candidate a ranks before b in a list: by figure,
// heaviest first, then by key. A list's candidates are distinct keys of
// one app, so this is a total order.
func (t *exactTable) before(a, b *exactCand) bool {
	if a.f != b.f {
		return a.f > b.f
	}
	if a.pre != b.pre {
		return a.pre < b.pre
	}
	return strings.Compare(t.key(&t.ents[a.i]), t.key(&t.ents[b.i])) < 0
}

// exactLists selects, in one pass over the entries idx (so every entry is
// read once), the nTop entries that rank first by events and the nBig
// first by each other figure, and returns each list best first. The lists
// live in best's storage, which the next call reuses. A figure of 0 ranks
// nothing.
func (t *exactTable) exactLists(best *[figCount]bestN[exactCand, *exactTable], idx []int32, nTop, nBig int) [figCount][]exactCand {
	for f := range best {
		n := nBig
		if f == int(figEvents) {
			n = nTop
		}
		best[f].reset(n, t)
	}
	for _, i := range idx {
		fs := t.figures(i)
		pre := keyPrefix(t.key(&t.ents[i]))
		for f := range best {
			b := &best[f]
			if fs[f] == 0 || b.n == 0 {
				continue
			}
			// Once b is full, an entry is settled here against the
			// worst kept, most often by its figure alone, rather than
			// in offer through the order's method.
			c := exactCand{i, fs[f], pre}
			switch w := b.worst(); {
			case w == nil:
				b.offer(c)
			case c.f >= w.f && t.before(&c, w):
				b.replaceWorst(c)
			}
		}
	}
	var lists [figCount][]exactCand
	for f := range best {
		lists[f] = best[f].sorted()
	}
	return lists
}
