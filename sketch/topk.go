package sketch

import (
	"cmp"
	"encoding/binary"
	"slices"
	"strings"
	"unsafe"

	"github.com/keyheat/keyheat/internal/faststr"
)

// DefaultTopKCapacity is the number of keys a TopK tracks when its config
// leaves Capacity at zero: ten times the top-100 a window report shows, so the
// boundary of the top-100 is decided among tracked keys, not by admission.
const DefaultTopKCapacity = 1024

// MaxTopKCapacity bounds Capacity (and what a decoded blob may declare).
const MaxTopKCapacity = 1 << 20

// MaxKeyLen is the longest key a TopK encoding may carry. Longer keys are
// still counted in memory; MarshalBinary refuses to encode them.
const MaxKeyLen = 1 << 16

// TopKConfig sizes a TopK. The zero value tracks DefaultTopKCapacity keys
// behind a default 4 × 2048 Count-Min filter.
type TopKConfig struct {
	// Capacity is how many keys are tracked with exact-since-admission
	// counts. Ask Top for at most this many; a few times more than you
	// report makes the reported boundary reliable. 0 means
	// DefaultTopKCapacity.
	Capacity int
	// Sketch sizes the Count-Min admission filter. The filter always uses
	// conservative update (Sketch.Conservative is ignored): it only has to
	// bound counts from above, and conservative bounds are tighter.
	Sketch CountMinConfig
	// Slack is how far a key's filter estimate must rise above the
	// smallest tracked count before the key is admitted in its place once
	// the TopK is full; 0 admits it as soon as it is above. Over a flat
	// tail of light keys (every key near the smallest count) each new key
	// would evict a tracked one; a slack of a few events stops that churn,
	// at a price: Floor, and the Error of a key admitted later, grow by up
	// to Slack.
	Slack uint64
}

func (c TopKConfig) withDefaults() TopKConfig {
	if c.Capacity == 0 {
		c.Capacity = DefaultTopKCapacity
	}
	c.Sketch = c.Sketch.withDefaults()
	c.Sketch.Conservative = true
	return c
}

// Validate reports whether the config (after defaults) describes a TopK
// this package can build.
func (c TopKConfig) Validate() error {
	c = c.withDefaults()
	if c.Capacity < 1 || c.Capacity > MaxTopKCapacity {
		return invalidf("top-k capacity %d: want 1..%d (0 for the default %d)", c.Capacity, MaxTopKCapacity, DefaultTopKCapacity)
	}
	return c.Sketch.Validate()
}

// Item is one key of a TopK report. The key's true total weight lies in
// [Count − Error, Count]: Count never underestimates, and Count − Error is
// weight the TopK saw for the key itself since it started tracking it.
type Item struct {
	// Key is the access key, a copy of its own: it stays valid whatever
	// the TopK does next.
	Key string
	// Count is an upper bound of the key's total weight (events, or bytes
	// for a TopK fed with AddN).
	Count uint64
	// Error is how much of Count may not be the key's own: the true total
	// is at least Count − Error.
	Error uint64
	// ID is the key's entry ID, as AddHash returned it (see AddHash).
	ID int32
}

// entry is one tracked key. The heap orders entries by upper, so the
// cheapest key to evict sits at index 0.
type entry struct {
	key   string
	h     uint64
	upper uint64 // ≥ true count: bound at admission + weight since
	lower uint64 // ≤ true count: weight since admission, held here and not in the filter
	slot  int32  // this entry's index in table
	id    int32  // stable while tracked; see AddHash
}

// TopK keeps the Capacity heaviest keys of a weighted stream with per-key
// error bounds, in memory fixed at construction.
//
// Algorithm ("filtered Space-Saving"): a tracked key's counts are updated in
// place and nothing else is touched. An untracked key's weight goes into a
// conservative Count-Min filter, and the key is admitted while there is room,
// or, when full, only if its filter estimate exceeds the smallest tracked
// upper bound, which it then evicts; an evicted key's weight since admission
// is added back into the filter. So the filter holds exactly the weight no
// tracked entry holds, and every untracked key's filter estimate bounds its
// true count. Because eviction always removes the smallest upper bound and
// admission requires a larger estimate, every untracked key's true count is
// also at most Floor(): the admitted key starts at min(estimate, Floor())
// plus its weight, and keeps exact counts from there.
//
// The filter keeps the long tail of one-off keys from churning the tracked
// set (and allocating), the weakness of plain Space-Saving (Metwally, Agrawal
// and El Abbadi, ICDT 2005). Keeping the heavy keys out of the filter, as the
// Augmented Sketch does (Roy, Khan and Alonso, SIGMOD 2016), leaves its
// counters to the tail, which tightens the tail's estimates, and makes the
// common case (a heavy key) one hash, one probe and one heap step.
//
// Build one with NewTopK (or as the target of UnmarshalBinary); the zero
// value is not usable. A TopK is not safe for concurrent use.
type TopK struct {
	cfg    TopKConfig
	filter *CountMin
	total  uint64
	heap   []entry // min-heap on (upper, lower); cap == Capacity
	// table is open addressing with linear probing: per slot the heap
	// index + 1 (0 = empty) in the low tabIdxBits bits and a fingerprint
	// of the key's hash above them, so probing past other keys (and
	// missing, the common case for the long tail of a skewed stream)
	// reads only the table and not their heap entries.
	table []uint32
	mask  uint64
	// floor is a bound on untracked keys that merges establish; streaming
	// keeps the bound in heap[0].upper. See untrackedBound.
	floor uint64
	// keys holds, per entry ID, the bytes the key of the entry with that
	// ID is copied into at admission, reused by the next key to take the
	// ID (after an eviction or a Reset), so that a stream of new keys does
	// not allocate. Nothing else points into them: AppendTop copies the keys
	// it reports. nil where an entry's key is its own string (merged or
	// decoded).
	keys [][]byte
}

// NewTopK builds an empty TopK. It returns an error wrapping
// ErrInvalidConfig when cfg does not validate.
func NewTopK(cfg TopKConfig) (*TopK, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	filter, err := NewCountMin(cfg.Sketch)
	if err != nil {
		return nil, err
	}
	return newTopK(cfg, filter), nil
}

func newTopK(cfg TopKConfig, filter *CountMin) *TopK {
	slots := tableSlots(cfg.Capacity)
	return &TopK{
		cfg:    cfg,
		filter: filter,
		heap:   make([]entry, 0, cfg.Capacity),
		table:  make([]uint32, slots),
		mask:   uint64(slots - 1),
		keys:   make([][]byte, cfg.Capacity),
	}
}

// Config returns the TopK's configuration with defaults filled in.
func (t *TopK) Config() TopKConfig { return t.cfg }

// Len is the number of keys tracked now (at most Capacity).
func (t *TopK) Len() int { return len(t.heap) }

// Total is the sum of all weights added.
func (t *TopK) Total() uint64 { return t.total }

// Floor is an upper bound of the true count of every key the TopK does not
// track: 0 until the TopK first fills, then the smallest tracked count (or a
// larger bound established by Merge).
func (t *TopK) Floor() uint64 { return t.untrackedBound() }

// Bytes is the memory held: the filter's counters, the entry array, the hash
// table and the copied keys. With keys of bounded length it is bounded by
// the configuration, whatever the number of distinct keys added.
func (t *TopK) Bytes() int {
	n := t.filter.Bytes() + cap(t.heap)*topKEntryBytes + len(t.table)*4
	for _, b := range t.keys {
		n += cap(b)
	}
	for i := range t.heap {
		if !t.ownsKey(&t.heap[i]) {
			n += roundUp8(len(t.heap[i].key))
		}
	}
	return n
}

// ownsKey reports whether e's key lives in t.keys.
func (t *TopK) ownsKey(e *entry) bool {
	b := t.keys[e.id]
	return cap(b) > 0 && len(e.key) > 0 && unsafe.StringData(e.key) == unsafe.SliceData(b)
}

// Add counts one occurrence of key. A key is copied when it is admitted
// (into memory its entry ID keeps for the next key to take it, so a stream
// of new keys does not allocate), so the TopK never keeps the caller's
// string, which may share memory with a whole decoded batch, alive.
func (t *TopK) Add(key string) { t.add(key, Hash(key), 1) }

// AddN adds weight n (for example response bytes) to key; see Add.
func (t *TopK) AddN(key string, n uint64) { t.add(key, Hash(key), n) }

// AddHash adds weight n to key, whose Hash is h, for a caller that has
// already hashed the key. It returns the ID of key's entry if key is
// tracked after the add, else -1, and whether this add admitted key.
//
// An ID lies in [0, Capacity) and names the entry for as long as the key
// stays tracked: a key admitted in place of an evicted one takes over the
// evicted key's ID, so a caller can keep figures of its own per tracked key
// (bytes, latency) in an array indexed by ID, resetting them when admitted
// is true. Top reports each key's ID. Merge and UnmarshalBinary renumber
// the entries.
func (t *TopK) AddHash(key string, h, n uint64) (id int32, admitted bool) {
	return t.add(key, h, n)
}

// add adds weight n to key, whose Hash is h, and reports as AddHash does.
// AddHash inlines, so an add is one call.
func (t *TopK) add(key string, h, n uint64) (id int32, admitted bool) {
	h = seeded(h, t.cfg.Sketch.Seed)
	if n == 0 {
		if i := t.find(key, h); i >= 0 {
			return t.heap[i].id, false
		}
		return -1, false
	}
	t.total = satAdd(t.total, n)
	fp := tabFP(h)
	// find, by hand: a call would cost more than the probe.
	for s := h & t.mask; ; s = (s + 1) & t.mask {
		v := t.table[s]
		if v == 0 {
			break
		}
		if v&^tabIdxMask != fp {
			continue
		}
		if e := &t.heap[v&tabIdxMask-1]; e.h == h && faststr.Equal(e.key, key) {
			e.lower = satAdd(e.lower, n)
			e.upper = satAdd(e.upper, n)
			id = e.id
			if i := int(v&tabIdxMask - 1); 2*i+1 < len(t.heap) {
				t.down(i) // heavy keys sink to the leaves, where there is nothing to do
			}
			return id, false
		}
	}
	// The key's weight so far is all in the filter, and at most the bound
	// on untracked keys.
	if len(t.heap) < cap(t.heap) {
		prior := t.untrackedBound() // the floor a merge left, or 0
		if prior > 0 {
			prior = min(prior, t.filter.estimateHash(h))
		}
		id = int32(len(t.heap))
		t.admit(len(t.heap), key, h, satAdd(prior, n), n, id)
		return id, true
	}
	// Full: the key is admitted if min(its estimate, the bound) + n tops
	// the smallest tracked count; the bound is at least that count, so
	// that is when its estimate + n does. If not, the weight stays with the
	// filter (a conservative update, on the counters just read).
	est, kept := t.filter.addUnder(h, n, satAdd(t.heap[0].upper, t.cfg.Slack))
	if kept {
		return -1, false
	}
	prior := min(t.untrackedBound(), est)
	ev := &t.heap[0]
	id = ev.id
	t.filter.addHash(ev.h, ev.lower)
	t.unplace(uint64(ev.slot))
	t.admit(0, key, h, satAdd(prior, n), n, id)
	return id, true
}

// admit stores key at heap index i (i == len(t.heap) appends) with entry
// ID id and restores heap order.
func (t *TopK) admit(i int, key string, h, upper, lower uint64, id int32) {
	b := t.keys[id]
	if cap(b) < len(key) {
		b = make([]byte, 0, roundUp8(len(key)))
	}
	b = append(b[:0], key...)
	t.keys[id] = b
	e := entry{key: unsafe.String(unsafe.SliceData(b), len(b)), h: h, upper: upper, lower: lower, id: id}
	if i == len(t.heap) {
		t.heap = append(t.heap, e)
		t.place(i)
		t.up(i)
		return
	}
	t.heap[i] = e
	t.place(i)
	t.down(i)
}

// untrackedBound is the largest true count an untracked key can have.
func (t *TopK) untrackedBound() uint64 {
	b := t.floor
	if len(t.heap) == cap(t.heap) && len(t.heap) > 0 {
		// With slack, a key the filter kept can have up to the smallest
		// tracked count plus the slack, and never more than the total.
		b = max(b, min(satAdd(t.heap[0].upper, t.cfg.Slack), t.total))
	}
	return b
}

// Estimate returns bounds of key's true total weight: lower ≤ true ≤ upper.
// For an untracked key lower is 0 and upper is min(filter estimate, Floor()).
func (t *TopK) Estimate(key string) (upper, lower uint64) {
	h := hashString(key, t.cfg.Sketch.Seed)
	if i := t.find(key, h); i >= 0 {
		return t.heap[i].upper, t.heap[i].lower
	}
	return min(t.filter.estimateHash(h), t.untrackedBound()), 0
}

// Top returns up to n tracked keys, heaviest first: by Count, then by the
// lower bound Count − Error, then by key, so equal inputs give equal reports.
func (t *TopK) Top(n int) []Item { return t.AppendTop(nil, n) }

// AppendTop appends Top(n) to dst.
func (t *TopK) AppendTop(dst []Item, n int) []Item {
	idx := make([]int32, len(t.heap))
	for i := range idx {
		idx[i] = int32(i)
	}
	slices.SortFunc(idx, func(a, b int32) int {
		ea, eb := &t.heap[a], &t.heap[b]
		if c := cmp.Compare(eb.upper, ea.upper); c != 0 {
			return c
		}
		if c := cmp.Compare(eb.lower, ea.lower); c != 0 {
			return c
		}
		return strings.Compare(ea.key, eb.key)
	})
	for _, i := range idx[:min(max(n, 0), len(idx))] {
		e := &t.heap[i]
		// A copy: the entry's bytes go to the next key that takes its ID.
		dst = append(dst, Item{Key: strings.Clone(e.key), Count: e.upper, Error: e.upper - e.lower, ID: e.id})
	}
	return dst
}

// AppendTracked appends every tracked key to dst, in no particular order,
// with its bounds and entry ID. Unlike AppendTop it neither sorts nor
// copies: each Item's Key aliases the TopK's memory and stays valid only
// until the next Add, AddN, AddHash, Merge, UnmarshalBinary or Reset, so a
// caller that ranks the tracked keys its own way copies only those it
// keeps.
func (t *TopK) AppendTracked(dst []Item) []Item {
	for i := range t.heap {
		e := &t.heap[i]
		dst = append(dst, Item{Key: e.key, Count: e.upper, Error: e.upper - e.lower, ID: e.id})
	}
	return dst
}

// Reset forgets every key and zeroes the filter, keeping the allocations
// (the keys' bytes too, for the keys admitted next).
func (t *TopK) Reset() {
	clear(t.heap) // drop the key strings
	t.heap = t.heap[:0]
	clear(t.table)
	t.floor = 0
	t.total = 0
	t.filter.Reset()
}

// --- hash table (linear probing, backward-shift deletion) -------------------

// find returns the heap index of key, or -1.
func (t *TopK) find(key string, h uint64) int {
	fp := tabFP(h)
	for s := h & t.mask; ; s = (s + 1) & t.mask {
		v := t.table[s]
		if v == 0 {
			return -1
		}
		if v&^tabIdxMask != fp {
			continue
		}
		if e := &t.heap[v&tabIdxMask-1]; e.h == h && faststr.Equal(e.key, key) {
			return int(v&tabIdxMask - 1)
		}
	}
}

// tabIdxBits is the width of a table slot's heap index + 1: MaxTopKCapacity
// fits. The remaining high bits hold the fingerprint.
const (
	tabIdxBits = 21
	tabIdxMask = 1<<tabIdxBits - 1
)

// tabFP is the fingerprint of hash h in a table slot: its top bits, which
// the slot number (its low bits) does not already tell apart.
func tabFP(h uint64) uint32 { return uint32(h>>(64-(32-tabIdxBits))) << tabIdxBits }

// place puts heap entry i into the first free slot of its probe sequence.
// The table is at most half full, so one exists.
func (t *TopK) place(i int) {
	s := t.heap[i].h & t.mask
	for t.table[s] != 0 {
		s = (s + 1) & t.mask
	}
	t.table[s] = tabFP(t.heap[i].h) | uint32(i+1)
	t.heap[i].slot = int32(s)
}

// unplace empties slot s and shifts later members of the probe run back so
// lookups never stop early at the hole.
func (t *TopK) unplace(s uint64) {
	for {
		t.table[s] = 0
		j := s
		for {
			j = (j + 1) & t.mask
			v := t.table[j]
			if v == 0 {
				return
			}
			home := t.heap[v&tabIdxMask-1].h & t.mask
			// The entry at j may move to the hole at s unless its home lies
			// cyclically in (s, j]: then s is before its home and a lookup
			// starting at home would never reach it.
			var stays bool
			if s <= j {
				stays = s < home && home <= j
			} else {
				stays = s < home || home <= j
			}
			if !stays {
				t.table[s] = v
				t.heap[v&tabIdxMask-1].slot = int32(s)
				s = j
				break
			}
		}
	}
}

// --- min-heap on (upper, lower) ---------------------------------------------

func (t *TopK) less(i, j int) bool {
	a, b := &t.heap[i], &t.heap[j]
	return a.upper < b.upper || (a.upper == b.upper && a.lower < b.lower)
}

func (t *TopK) swap(i, j int) {
	h := t.heap
	h[i], h[j] = h[j], h[i]
	t.table[h[i].slot] = t.table[h[i].slot]&^tabIdxMask | uint32(i+1)
	t.table[h[j].slot] = t.table[h[j].slot]&^tabIdxMask | uint32(j+1)
}

func (t *TopK) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !t.less(i, p) {
			return
		}
		t.swap(i, p)
		i = p
	}
}

func (t *TopK) down(i int) {
	n := len(t.heap)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		m := l
		if r := l + 1; r < n && t.less(r, l) {
			m = r
		}
		if !t.less(m, i) {
			return
		}
		t.swap(i, m)
		i = m
	}
}

// rebuild re-creates table and heap order from t.heap's entries, and
// numbers them afresh.
func (t *TopK) rebuild() {
	clear(t.table)
	for i := range t.heap {
		t.place(i)
	}
	for i := len(t.heap)/2 - 1; i >= 0; i-- {
		t.down(i)
	}
	// Numbered in heap order, the order the encoding writes, so a decoded
	// TopK reports the IDs of the one encoded.
	for i := range t.heap {
		t.heap[i].id = int32(i)
	}
}

// --- merge --------------------------------------------------------------------

// Merge folds other into t so that t summarizes both streams, as the window
// merger does with the partitions' summaries. For every key tracked by either
// side the bounds add up: a side that does not track the key contributes
// lower 0 and upper min(its filter estimate, its Floor()). The union is then
// cut to t's Capacity by upper bound, and t's Floor rises to cover the keys
// cut. Every key's true combined count stays within its reported bounds.
//
// The filters must have the same dimensions and seed (capacities may differ;
// t keeps its own); otherwise Merge returns a *MismatchError matching
// ErrDimensionMismatch and leaves t unchanged. other is not modified.
func (t *TopK) Merge(other *TopK) error {
	if !t.filter.sameLayout(other.filter) {
		err := t.filter.mismatch(other.filter)
		err.Kind = "top-k"
		return err
	}
	boundT, boundO := t.untrackedBound(), other.untrackedBound()
	cands := make([]entry, 0, len(t.heap)+len(other.heap))
	for i := range t.heap {
		e := t.heap[i]
		if j := other.find(e.key, e.h); j >= 0 {
			e.upper = satAdd(e.upper, other.heap[j].upper)
			e.lower = satAdd(e.lower, other.heap[j].lower)
		} else {
			e.upper = satAdd(e.upper, min(other.filter.estimateHash(e.h), boundO))
		}
		cands = append(cands, e)
	}
	for i := range other.heap {
		e := other.heap[i]
		if t.find(e.key, e.h) >= 0 {
			continue
		}
		e.upper = satAdd(e.upper, min(t.filter.estimateHash(e.h), boundT))
		cands = append(cands, e)
	}
	if err := t.filter.Merge(other.filter); err != nil {
		return err // unreachable: layouts were checked above
	}
	t.filter.cfg.Conservative = true
	t.total = satAdd(t.total, other.total)
	// The merged filter bounds the weight a key does not hold in lower.
	for i := range cands {
		c := &cands[i]
		c.upper = min(c.upper, satAdd(t.filter.estimateHash(c.h), c.lower))
	}
	slices.SortFunc(cands, func(a, b entry) int {
		if c := cmp.Compare(b.upper, a.upper); c != 0 {
			return c
		}
		if c := cmp.Compare(b.lower, a.lower); c != 0 {
			return c
		}
		return strings.Compare(a.key, b.key)
	})
	floor := satAdd(boundT, boundO)
	if len(cands) > cap(t.heap) {
		floor = max(floor, cands[cap(t.heap)].upper)
		// Keys cut from the tracked set hand their weight to the filter,
		// which must bound every untracked key.
		for i := range cands[cap(t.heap):] {
			t.filter.addHash(cands[cap(t.heap)+i].h, cands[cap(t.heap)+i].lower)
		}
		cands = cands[:cap(t.heap)]
	}
	// The entries are renumbered, and some keys live in the other TopK's
	// memory: every key gets its own string.
	for i := range cands {
		cands[i].key = strings.Clone(cands[i].key)
	}
	clear(t.keys)
	clear(t.heap)
	t.heap = append(t.heap[:0], cands...)
	t.floor = floor
	t.rebuild()
	return nil
}

// --- encoding -------------------------------------------------------------------

const topKMagic = "KHTK"

// MarshalBinary encodes the TopK (version 1): capacity, total, floor, the
// Count-Min filter, then every tracked key with its bounds, followed by a
// CRC-32C.
// It fails only if a tracked key is longer than MaxKeyLen.
func (t *TopK) MarshalBinary() ([]byte, error) { return t.AppendBinary(nil) }

// AppendBinary appends the MarshalBinary encoding to dst.
func (t *TopK) AppendBinary(dst []byte) ([]byte, error) {
	start := len(dst)
	dst = appendHeader(dst, topKMagic)
	dst = binary.AppendUvarint(dst, uint64(t.cfg.Capacity))
	dst = binary.AppendUvarint(dst, t.total)
	floor := t.floor
	if t.cfg.Slack > 0 {
		// The decoded TopK has no slack: its floor must cover it.
		floor = t.untrackedBound()
	}
	dst = binary.AppendUvarint(dst, floor)
	dst = t.filter.appendBody(dst)
	dst = binary.AppendUvarint(dst, uint64(len(t.heap)))
	for i := range t.heap {
		e := &t.heap[i]
		if len(e.key) > MaxKeyLen {
			return dst[:start], invalidf("top-k key of %d bytes exceeds MaxKeyLen %d; shorten keys at ingest", len(e.key), MaxKeyLen)
		}
		dst = binary.AppendUvarint(dst, uint64(len(e.key)))
		dst = append(dst, e.key...)
		dst = binary.AppendUvarint(dst, e.upper)
		dst = binary.AppendUvarint(dst, e.lower)
	}
	return appendCRC(dst, start), nil
}

// UnmarshalBinary replaces t with the TopK encoded in data. A truncated,
// inconsistent or checksum-failing blob returns an error wrapping ErrCorrupt
// and leaves t unchanged. It never panics.
func (t *TopK) UnmarshalBinary(data []byte) error {
	r := newReader(data, "top-k")
	r.header(topKMagic, "top-k")
	capacity := r.uvarint("capacity")
	total := r.uvarint("total")
	floor := r.uvarint("floor")
	if r.err != nil {
		return r.err
	}
	if capacity < 1 || capacity > MaxTopKCapacity {
		return corruptf("top-k: capacity %d out of range", capacity)
	}
	filter, err := decodeCountMin(r)
	if err != nil {
		return err
	}
	if !filter.cfg.Conservative {
		return corruptf("top-k: filter is not conservative")
	}
	n := r.uvarint("key count")
	if r.err != nil {
		return r.err
	}
	// Each entry takes at least 3 bytes; check before allocating.
	if n > capacity || n > uint64(r.remaining()/3) {
		return corruptf("top-k: %d keys declared for capacity %d with %d bytes left", n, capacity, r.remaining())
	}
	if floor > total {
		return corruptf("top-k: floor %d above total %d", floor, total)
	}
	cfg := TopKConfig{Capacity: int(capacity), Sketch: filter.cfg}
	nt := newTopK(cfg, filter)
	nt.floor = floor
	nt.total = total
	lowers := filter.total
	for range n {
		kl := r.uvarint("key length")
		if kl > MaxKeyLen {
			return corruptf("top-k: key length %d over %d", kl, MaxKeyLen)
		}
		key := string(r.bytes("key", kl))
		upper := r.uvarint("upper")
		lower := r.uvarint("lower")
		if r.err != nil {
			return r.err
		}
		h := hashString(key, cfg.Sketch.Seed)
		if lower == 0 || lower > upper || upper > total {
			return corruptf("top-k: key %q has bounds [%d, %d] outside [1, total %d]", key, lower, upper, total)
		}
		lowers = satAdd(lowers, lower)
		if nt.find(key, h) >= 0 {
			return corruptf("top-k: key %q appears twice", key)
		}
		nt.heap = append(nt.heap, entry{key: key, h: h, upper: upper, lower: lower})
		nt.place(len(nt.heap) - 1)
	}
	// Every unit of weight is held either by the filter or by one entry.
	if lowers != total {
		return corruptf("top-k: filter total plus tracked lower bounds is %d, total is %d", lowers, total)
	}
	if err := r.finish("top-k"); err != nil {
		return err
	}
	nt.rebuild()
	*t = *nt
	return nil
}
