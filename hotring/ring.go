package hotring

import (
	"math"
	"sync"
	"sync/atomic"

	"github.com/zeebo/xxh3"
)

// emptyEpoch marks a window that holds no slot yet.
const emptyEpoch = math.MinInt64

// Ring tracks how often each key is touched and answers which keys are hot.
// It is safe for concurrent use (unless Options.SingleWriter says it will
// not be used so); lookups and counting never take a lock shared by the
// whole ring. It starts no goroutines: rotation, decay and
// cold sweeps run inline in whichever call first observes that they are due.
//
// Every method that depends on time takes it as nowMs, in milliseconds
// since the Unix epoch: normally the event's own timestamp, so that a
// replay gives the answers of the live run. A caller on wall-clock time
// passes time.Now().UnixMilli().
type Ring struct {
	opts     Options
	windowed bool
	lay      layout // window counters; lay.slots is 0 without a window
	slotMs   int64  // WindowSlotDuration
	rotMs    int64  // RotationInterval; 0 = off
	decayMs  int64  // DecayInterval; 0 = off
	sweepMs  int64  // ColdSweepInterval; 0 = off
	maxNodes int64
	sample   uint // SampleBits
	admit    func(string) bool

	// gens holds the active and warm tables as one pointer, so that a
	// reader loading it once never pairs tables of different moments.
	gens atomic.Pointer[generations]

	// nextMaint is the earliest time (Unix ms) at which maintain has work
	// to do; math.MaxInt64 when there is none. It is the only maintenance
	// state the hot path reads.
	nextMaint atomic.Int64
	maintMu   sync.Mutex // guards the fields below
	started   bool
	nextRot   int64
	nextDecay int64
	nextSweep int64

	// sweepCursor is the next bucket SweepCold visits (modulo the table).
	sweepCursor atomic.Uint64
	// single is Options.SingleWriter; singleTouches counts the hashed
	// methods' touches then, without atomics.
	single        bool
	singleTouches uint64
	// slotCache is the slot slotOf computed last, kept only with
	// SingleWriter: a detector's events fall in the same slot for a slot's
	// length, and each of them then saves two divisions.
	slotCache struct {
		loMs, hiMs int64 // the slot's first and last millisecond
		e          int64
		i          int
	}
	// memo spares a SingleWriter ring's EvictLowest and full SweepCold
	// most of their walks; noMemo turns it off (tests compare).
	memo   memo
	noMemo bool

	touches, clamped, refused, sampledOut striped
	forced, evicted, removed, rotations   atomic.Uint64
	decays                                atomic.Uint64
}

// generations is the active and warm tables, published together.
//
// They used to be two atomic pointers, stored warm first and active second.
// A reader loading active, then warm, between those two stores got the old
// active table as both generations and summed its counts twice: TopN and
// windowed Frequency read double and TouchAndClamp clamped at half the
// limit. rotate now builds a new pair and publishes it with one store, and
// every method loads the pair once, so it sees the generations either
// before the rotation or after it.
type generations struct {
	active *table
	warm   *table // nil until the first rotation
}

// KeyCount is a key and its count, as returned by TopN and KeysAbove.
type KeyCount struct {
	Key   string
	Count uint64
}

// New returns an empty ring configured by opts. It returns an error
// wrapping ErrInvalidOptions if opts.Validate fails.
func New(opts Options) (*Ring, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if opts.Bits == 0 {
		opts.Bits = SizeBits(opts.NodeCap)
	}
	r := &Ring{
		opts:     opts,
		windowed: opts.windowed(),
		lay:      opts.layout(),
		slotMs:   opts.WindowSlotDuration.Milliseconds(),
		rotMs:    opts.RotationInterval.Milliseconds(),
		decayMs:  opts.DecayInterval.Milliseconds(),
		sweepMs:  opts.ColdSweepInterval.Milliseconds(),
		maxNodes: int64(opts.NodeCap),
		sample:   uint(opts.SampleBits),
		admit:    opts.Admit,
		single:   opts.SingleWriter,
	}
	if r.rotMs > 0 || r.decayMs > 0 || r.sweepMs > 0 {
		r.nextMaint.Store(math.MinInt64) // first call initializes the schedule
	} else {
		r.nextMaint.Store(math.MaxInt64)
	}
	r.gens.Store(&generations{active: newTable(opts.Bits)})
	r.slotCache.loMs, r.slotCache.hiMs = math.MaxInt64, math.MinInt64 // empty
	r.memo.reset()
	return r, nil
}

// Options returns the options the ring runs with; Bits is filled in when
// it was 0.
func (r *Ring) Options() Options { return r.opts }

// epoch returns the number of the window slot holding nowMs (floor
// division, so times before 1970 work too); 0 without a window.
func (r *Ring) epoch(nowMs int64) int64 {
	if !r.windowed {
		return 0
	}
	e := nowMs / r.slotMs
	if nowMs%r.slotMs < 0 {
		e--
	}
	r.memo.saw(e)
	return e
}

// slotOf returns epoch(ms) and its window slot index, floorMod(e,
// WindowSlots), remembering them when keep is set. Windowed rings only.
func (r *Ring) slotOf(ms int64, keep bool) (e int64, i int) {
	c := &r.slotCache
	if r.single && ms >= c.loMs && ms <= c.hiMs {
		return c.e, c.i
	}
	e = r.epoch(ms)
	i = floorMod(e, r.lay.slots)
	// Kept only where the slot's bounds are representable.
	if keep && r.single && e > math.MinInt64/r.slotMs+1 && e < math.MaxInt64/r.slotMs-1 {
		c.loMs, c.hiMs, c.e, c.i = e*r.slotMs, e*r.slotMs+r.slotMs-1, e, i
	}
	return e, i
}

// Touch counts one access to key at nowMs and reports whether key is
// tracked. It returns false when the node cap refused a new key. The ring
// keeps the key string itself as the node's key, so key must be an
// ordinary immutable string (see the package documentation).
func (r *Ring) Touch(key string, nowMs int64) bool { return r.touch(key, 1, nowMs) }

// TouchN counts n accesses to key at nowMs (or a weight of n, e.g. bytes)
// and reports whether key is tracked. TouchN(key, 0, nowMs) tracks key
// without counting.
func (r *Ring) TouchN(key string, n uint64, nowMs int64) bool { return r.touch(key, n, nowMs) }

// touch is the hot path.
func (r *Ring) touch(key string, d uint64, nowMs int64) bool {
	h := xxh3.HashString(key)
	if nowMs >= r.nextMaint.Load() {
		r.maintain(nowMs)
	}
	t := r.gens.Load().active
	e := r.epoch(nowMs)
	for {
		n := t.lookup(h, key)
		if n == nil {
			if n, _ = r.insert(t, h, key, false); n == nil {
				return false
			}
		}
		if r.add(n, d, e) {
			r.touches.add(h, d)
			return true
		}
		// n was deleted between lookup and add: count on its replacement.
	}
}

// add counts d touches at epoch e on n. It returns false, having counted
// nothing that anyone will read, if n is dead.
func (r *Ring) add(n *node, d uint64, e int64) bool {
	if !r.windowed {
		// A CAS loop, not Add: Add could carry into deadBit (see maxCount).
		// The CAS fails if kill set deadBit since the load, so the touch
		// is either counted before the deletion or retried after it.
		for {
			c := n.count.Load()
			if c&deadBit != 0 {
				return false
			}
			if n.count.CompareAndSwap(c, satAdd(c, d)) {
				return true
			}
		}
	}
	n.lock()
	if n.dead() {
		n.unlock()
		return false
	}
	// Windowed, every write of count happens under n.mu (kill sets
	// deadBit under it too, and Validate rules out decay), so
	// load-then-store is safe.
	n.count.Store(satAdd(n.count.Load(), d))
	n.winAdd(e, d, r.lay)
	n.unlock()
	return true
}

// insert creates a node for key in t unless the cap refuses it, and returns
// the live node for key (new or existing), or nil if refused. force admits
// past the cap. The node keeps key itself, without copying it.
func (r *Ring) insert(t *table, h uint64, key string, force bool) (n *node, inserted bool) {
	if !r.reserve(t) {
		switch {
		case force:
			r.forced.Add(1)
		case r.sample > 0 && h>>(64-r.sample) == 0:
			// Sampled in. The top hash bits are independent of the bucket
			// (low bits), so sampling does not favour some buckets.
		case r.admit != nil && r.admit(key):
			r.forced.Add(1)
		case r.sample > 0:
			r.sampledOut.add(h, 1)
			return nil, false
		default:
			r.refused.add(h, 1)
			return nil, false
		}
		t.nodes.Add(1)
	}
	n, inserted = t.findOrInsert(newNode(h, key, r.lay))
	if !inserted {
		t.nodes.Add(-1) // another goroutine inserted key first
	} else if r.single {
		r.created(n, true) // with a zero count until its touch
	}
	return n, inserted
}

// reserve takes one node of t's cap, reporting false if it is full.
func (r *Ring) reserve(t *table) bool {
	if r.maxNodes == 0 {
		t.nodes.Add(1)
		return true
	}
	if t.nodes.Load() >= r.maxNodes {
		return false
	}
	if t.nodes.Add(1) > r.maxNodes {
		t.nodes.Add(-1)
		return false
	}
	return true
}

// Admit makes sure key is tracked by the active generation, creating its
// node with a zero count even when the node cap or sampling would refuse
// it. Use it for keys known to matter, e.g. whose Count-Min estimate passed
// a gate, so that a key turning hot after the ring filled is still tracked
// exactly. It reports whether a node was created.
func (r *Ring) Admit(key string) bool {
	h := xxh3.HashString(key)
	t := r.gens.Load().active
	if t.lookup(h, key) != nil {
		return false
	}
	_, inserted := r.insert(t, h, key, true)
	return inserted
}

// score is n's count as of epoch e: its window total when windowed, its
// lifetime count otherwise; 0 if n is dead or nil.
func (r *Ring) score(n *node, e int64) uint64 {
	if n == nil {
		return 0
	}
	if !r.windowed {
		c := n.count.Load()
		if c&deadBit != 0 {
			return 0
		}
		return c
	}
	n.lock()
	var s uint64
	if !n.dead() {
		s = n.winTotal(e, r.lay)
	}
	n.unlock()
	return s
}

// combine merges a key's counts in the active and warm generations for
// point reads (Frequency, TouchAndClamp). Windowed counts are summed: each
// touch lives in exactly one generation and the window drops old ones, so
// the sum is the exact window count, whereas the maximum would let a key
// whose window straddles a rotation read low and escape its clamp.
// Lifetime counts take the maximum, as NoKV's hotring does, so a key reads
// about one generation's worth of touches rather than up to two.
func (r *Ring) combine(a, w uint64) uint64 {
	if r.windowed {
		return satAdd(a, w)
	}
	return max(a, w)
}

// Frequency returns key's count at nowMs: its touches in the sliding
// window ending at nowMs if one is configured, else its lifetime count
// (decayed, if decay is on). With rotation it merges both generations (see
// the package documentation). An untracked key reads 0.
func (r *Ring) Frequency(key string, nowMs int64) uint64 {
	h := xxh3.HashString(key)
	if nowMs >= r.nextMaint.Load() {
		r.maintain(nowMs)
	}
	e := r.epoch(nowMs)
	g := r.gens.Load()
	a := r.score(g.active.lookup(h, key), e)
	var w uint64
	if wt := g.warm; wt != nil {
		w = r.score(wt.lookup(h, key), e)
	}
	return r.combine(a, w)
}

// TouchAndClamp counts one access to key at nowMs unless key's count (as
// Frequency reports it) already reached limit. It returns the count after
// the call and whether the access was refused (limited). Callers use it to
// throttle: limited means "over the limit, back off". A key the node cap
// refuses is not counted; it reports its warm-generation count, limited if
// that reached limit.
//
// Within one generation check and count are atomic, so concurrent callers
// never push a key past limit; the warm generation's share is read just
// before, so a rotation at that instant can let one extra touch through.
func (r *Ring) TouchAndClamp(key string, limit uint64, nowMs int64) (count uint64, limited bool) {
	h := xxh3.HashString(key)
	if nowMs >= r.nextMaint.Load() {
		r.maintain(nowMs)
	}
	e := r.epoch(nowMs)
	g := r.gens.Load()
	t := g.active
	var w uint64
	if wt := g.warm; wt != nil {
		w = r.score(wt.lookup(h, key), e)
	}
	for {
		n := t.lookup(h, key)
		if n == nil {
			if n, _ = r.insert(t, h, key, false); n == nil {
				return w, w >= limit
			}
		}
		count, limited, ok := r.clamp(n, limit, w, e)
		if !ok {
			continue // n was deleted meanwhile; retry on its replacement
		}
		if limited {
			r.clamped.add(h, 1)
		} else {
			r.touches.add(h, 1)
		}
		return count, limited
	}
}

// clamp is TouchAndClamp on one node; w is the warm generation's count.
func (r *Ring) clamp(n *node, limit, w uint64, e int64) (count uint64, limited, ok bool) {
	if !r.windowed {
		for {
			c := n.count.Load()
			if c&deadBit != 0 {
				return 0, false, false
			}
			if cur := max(c, w); cur >= limit {
				return cur, true, true
			}
			if n.count.CompareAndSwap(c, satAdd(c, 1)) {
				return max(satAdd(c, 1), w), false, true
			}
		}
	}
	n.lock()
	defer n.unlock()
	if n.dead() {
		return 0, false, false
	}
	cur := satAdd(n.winTotal(e, r.lay), w)
	if cur >= limit {
		return cur, true, true
	}
	n.count.Store(satAdd(n.count.Load(), 1)) // under n.mu, as in add
	if !n.winAdd(e, 1, r.lay) {
		return cur, false, true // too late for the window: counted for life only
	}
	return satAdd(cur, 1), false, true
}

// Remove stops tracking key in both generations and reports whether it was
// tracked. Its counts are discarded; a later touch starts from zero.
func (r *Ring) Remove(key string) bool {
	h := xxh3.HashString(key)
	found := false
	for _, t := range r.tables() {
		for t != nil {
			n := t.lookup(h, key)
			if n == nil {
				break
			}
			if r.kill(t, n, false, 0) {
				found = true
				r.removed.Add(1)
			}
		}
	}
	return found
}

// kill logically deletes n from t, then unlinks it. With onlyCold it
// deletes n only if its score at epoch e is zero. It reports whether n was
// deleted by this call.
func (r *Ring) kill(t *table, n *node, onlyCold bool, e int64) bool {
	if !r.windowed {
		for {
			c := n.count.Load()
			if c&deadBit != 0 || (onlyCold && c != 0) {
				return false
			}
			if n.count.CompareAndSwap(c, c|deadBit) {
				break
			}
		}
	} else {
		n.lock()
		// Cold means an empty window as of e, or as of the node's newest
		// slot if that is later. A sweep runs at the time of the call that
		// reached its deadline, while other goroutines may be touching at
		// later event times; their touches sit in slots after e, which
		// winTotal(e) leaves out, and the touches have already returned
		// true. Checked under n.mu, atomically with setting deadBit, so a
		// touch either lands before (and keeps the node) or retries after.
		if n.dead() || (onlyCold && n.winTotal(max(e, n.epoch), r.lay) != 0) {
			n.unlock()
			return false
		}
		n.count.Or(deadBit)
		n.unlock()
	}
	t.nodes.Add(-1)
	mu := t.lockBucket(n.hash)
	t.unlink(n)
	mu.Unlock()
	return true
}

// tables returns the generations, active first; the warm one is nil
// before the first rotation. An array, so that callers do not allocate.
func (r *Ring) tables() [2]*table {
	g := r.gens.Load()
	return [2]*table{g.active, g.warm}
}

// Len returns the number of nodes in both generations. A key tracked by
// both counts twice; this is the number that the memory bound is about.
func (r *Ring) Len() int {
	g := r.gens.Load()
	n := g.active.nodes.Load()
	if w := g.warm; w != nil {
		n += w.nodes.Load()
	}
	return int(n)
}
