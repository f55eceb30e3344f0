package hotkeys

import (
	"hash/maphash"
	"math/bits"
	"sync"
	"sync/atomic"
	"unsafe"
)

// The cache's table is written by hand rather than taken from an LRU
// library, for three reasons measured or required (cache_bench_test.go has
// the figures for ours):
//
//   - A hit must not write shared memory. A true LRU moves the entry to the
//     front on every hit, under a lock: with every core reading the one hot
//     key, that lock's cache line bounces between cores on every read,
//     which is the contention a hot-key cache exists to remove. Here a hit
//     is atomic loads along a hash chain, a clock bit set only when it is
//     not set already, and a counter on a stripe of its own.
//   - Both bounds hold at every instant: entries and bytes. The libraries
//     bound one or the other, or evict in a background pass that lets the
//     total run over for a moment.
//   - The "fetch in progress" placeholder of cache.go must be checked and
//     replaced atomically with the invalidations that race it; here both
//     happen under the table's one write lock.
//
// Eviction is CLOCK (second chance), the usual approximation of LRU: a hit
// sets the entry's visited bit; the hand sweeps the ring, clearing set bits
// and evicting the first entry whose bit is clear. An entry read since the
// hand last passed it survives one more sweep, as under LRU it would sit
// near the front.

// hitStripes is the number of counters a key's hits are spread over, so
// that cores hitting the same key do not all add to one cache line.
const hitStripes = 8

// paddedCounter is a counter alone on its cache line (128 bytes: adjacent
// line prefetch pairs lines on amd64).
type paddedCounter struct {
	n atomic.Uint64
	_ [120]byte
}

// stripedCounter is a counter that many cores add to at once: each add
// goes to one of its stripes, and the total is their sum.
type stripedCounter [hitStripes]paddedCounter

// add picks the stripe from the address of a variable on the calling
// goroutine's stack: goroutines running at once on different cores have
// different stacks, so mostly different stripes, and reading a stack
// address costs nothing, where a random number costs more than the rest
// of a hit. Any stripe is correct; this only spreads the contention.
func (s *stripedCounter) add() {
	var here byte
	a := uintptr(unsafe.Pointer(&here)) >> 11 // stacks are 2 KiB at least
	s[(a^a>>3^a>>6)&(hitStripes-1)].n.Add(1)
}

func (s *stripedCounter) load() uint64 {
	var n uint64
	for i := range s {
		n += s[i].n.Load()
	}
	return n
}

// cachedValue is a loaded value as the cache keeps it; immutable once
// published.
type cachedValue struct {
	data []byte
	// loadedNs is when the load that returned data was started (the
	// cache's clock): data is at least as new as the store was then.
	loadedNs int64
	// staleUntilNs ends the time it may still be served stale (see
	// CacheConfig.MaxStaleAge).
	staleUntilNs int64
	// fresh is true until the value's time to live ends: a timer clears
	// it, stop stops that timer (nil when there is none).
	fresh atomic.Bool
	stop  func() bool
}

// release stops v's timer, if any: v left the table.
func (v *cachedValue) release() {
	if v != nil && v.stop != nil {
		v.stop()
	}
}

// keyState is one key the table holds: its value (if any), its load in
// flight (if any) and its counters. A keyState stays in the table across
// loads and invalidations until the key is evicted, cools or changes to a
// mitigation the cache does not serve.
type keyState struct {
	// Read without a lock by Get; set once before the keyState is
	// published.
	app, key string
	hash     uint64 // the table's hash of app and key
	keyHash  uint64 // xxh3 of key, as Entry.KeyHash
	hnext    atomic.Pointer[keyState]
	val      atomic.Pointer[cachedValue]
	visited  atomic.Bool

	// Guarded by table.mu.
	prev, next *keyState // the clock ring
	inTable    bool
	flight     *flight // the load whose result may be stored; nil when none
	bytes      int64   // len(app)+len(key)+len(val.data), as table.bytes counts it
	counters   keyCounters

	_    [64]byte // keep hits off the lines the fields above share
	hits stripedCounter
}

// keyCounters are a key's counters other than hits: each changes on a
// miss, a load or an invalidation, under table.mu or atomically.
type keyCounters struct {
	misses, loads, coalesced, stale, timeouts, invalidations atomic.Uint64
}

// table maps (app, key) to keyStates. Lookups take no lock; every change
// holds mu. Buckets are chains linked through hnext, published with atomic
// stores, so a reader walking a chain while a writer unlinks a keyState
// still reaches the rest of the chain (an unlinked keyState's hnext is left
// as it was).
type table struct {
	seed    maphash.Seed
	buckets []atomic.Pointer[keyState]
	mask    uint64

	maxEntries int
	maxBytes   int64

	mu      sync.Mutex
	hand    *keyState // the clock hand; nil when the table is empty
	count   int
	bytes   int64
	evicted uint64 // keyStates evicted to make room
	// retired holds the counters of keyStates that left the table, so
	// that totals summed over the table never go down.
	retiredHits uint64
}

func newTable(maxEntries int, maxBytes int64) *table {
	// Twice as many buckets as entries keeps chains about one long.
	n := 1 << bits.Len(uint(2*maxEntries-1))
	return &table{
		seed:       maphash.MakeSeed(),
		buckets:    make([]atomic.Pointer[keyState], n),
		mask:       uint64(n - 1),
		maxEntries: maxEntries,
		maxBytes:   maxBytes,
	}
}

func (t *table) hash(key string) uint64 {
	// The app is compared along the chain, not hashed: most processes
	// serve one app, and hashing it would double the cost of a hit.
	return maphash.String(t.seed, key)
}

// lookup returns the keyState of (app, key), or nil. It takes no lock.
func (t *table) lookup(h uint64, app, key string) *keyState {
	for ks := t.buckets[h&t.mask].Load(); ks != nil; ks = ks.hnext.Load() {
		if ks.hash == h && ks.key == key && ks.app == app {
			return ks
		}
	}
	return nil
}

// keyBytes is what a keyState without a value counts against maxBytes.
func keyBytes(app, key string) int64 { return int64(len(app) + len(key)) }

// insertLocked adds a new keyState for (app, key), evicting others to make
// room. It returns nil when the key alone is larger than maxBytes.
func (t *table) insertLocked(h uint64, app, key string, keyHash uint64) *keyState {
	kb := keyBytes(app, key)
	if kb > t.maxBytes {
		return nil
	}
	for t.count >= t.maxEntries || t.bytes+kb > t.maxBytes {
		if !t.evictLocked(nil) {
			return nil
		}
	}
	ks := &keyState{app: app, key: key, hash: h, keyHash: keyHash, inTable: true, bytes: kb}
	// Link into the ring just behind the hand: the last the hand reaches.
	if t.hand == nil {
		ks.prev, ks.next = ks, ks
		t.hand = ks
	} else {
		ks.next, ks.prev = t.hand, t.hand.prev
		ks.prev.next = ks
		t.hand.prev = ks
	}
	b := &t.buckets[h&t.mask]
	ks.hnext.Store(b.Load())
	b.Store(ks)
	t.count++
	t.bytes += kb
	return ks
}

// removeLocked takes ks out of the table. Its load in flight, if any, is
// detached: its result reaches the callers waiting for it and is not
// stored.
func (t *table) removeLocked(ks *keyState) {
	if !ks.inTable {
		return
	}
	b := &t.buckets[ks.hash&t.mask]
	if b.Load() == ks {
		b.Store(ks.hnext.Load())
	} else {
		for p := b.Load(); p != nil; p = p.hnext.Load() {
			if p.hnext.Load() == ks {
				p.hnext.Store(ks.hnext.Load())
				break
			}
		}
	}
	if ks.next == ks {
		t.hand = nil
	} else {
		if t.hand == ks {
			t.hand = ks.next
		}
		ks.prev.next = ks.next
		ks.next.prev = ks.prev
	}
	ks.prev, ks.next = nil, nil
	ks.inTable = false
	ks.flight = nil
	ks.val.Swap(nil).release()
	t.count--
	t.bytes -= ks.bytes
	ks.bytes = 0
	t.retiredHits += ks.hits.load()
}

// evictLocked evicts one keyState other than protect by the clock. It
// reports false when there is nothing else to evict.
func (t *table) evictLocked(protect *keyState) bool {
	// Two sweeps at most: the first clears every visited bit it passes.
	for range 2*t.count + 1 {
		ks := t.hand
		if ks == nil {
			return false
		}
		t.hand = ks.next
		if ks == protect {
			if t.count == 1 {
				return false
			}
			continue
		}
		if ks.visited.Load() {
			ks.visited.Store(false)
			continue
		}
		t.removeLocked(ks)
		t.evicted++
		return true
	}
	return false
}

// setValueLocked replaces ks's value with v (nil drops it), evicting other
// keys to make room. It reports false, and drops ks's value, when v does not
// fit even alone.
func (t *table) setValueLocked(ks *keyState, v *cachedValue) bool {
	if !ks.inTable {
		v.release()
		return false
	}
	kb := keyBytes(ks.app, ks.key)
	// Drop the old value first, so that its bytes count as room.
	t.bytes -= ks.bytes - kb
	ks.bytes = kb
	ks.val.Swap(nil).release()
	if v == nil {
		return true
	}
	need := int64(len(v.data))
	if kb+need > t.maxBytes {
		v.release()
		return false
	}
	for t.bytes+need > t.maxBytes {
		if !t.evictLocked(ks) {
			v.release()
			return false
		}
	}
	t.bytes += need
	ks.bytes += need
	ks.val.Store(v)
	return true
}

// dropValuesLocked drops every value (stopping its timer) and detaches
// every flight.
func (t *table) dropValuesLocked() {
	ks := t.hand
	for range t.count {
		t.setValueLocked(ks, nil)
		ks.flight = nil
		ks = ks.next
	}
}
