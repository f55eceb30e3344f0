package hotring

import "math"

// Maintenance: rotation, decay and cold sweeps. There is no background
// goroutine. Every method that takes nowMs, except EvictCold, compares it
// with nextMaint (one atomic load) and, when due, runs maintain inline.
// Schedules are aligned to multiples of their interval since the Unix
// epoch, so a replay that starts mid-stream rotates at the same instants
// as the live run did.

// Tick runs the rotation, decay and cold sweep that are due at nowMs
// without touching any key. Call it on idle partitions so time still moves
// for them.
func (r *Ring) Tick(nowMs int64) {
	if nowMs >= r.nextMaint.Load() {
		r.maintain(nowMs)
	}
}

// nextAfter returns the first multiple of ivMs strictly after nowMs, or
// math.MaxInt64 if that is not representable. (It used to wrap negative
// near math.MaxInt64, so that every later call rotated.)
func nextAfter(nowMs, ivMs int64) int64 {
	q := nowMs / ivMs
	if nowMs%ivMs < 0 {
		q--
	}
	if q >= math.MaxInt64/ivMs {
		return math.MaxInt64
	}
	return (q + 1) * ivMs
}

// crossed returns how many multiples of ivMs lie in [nextMs, nowMs], given
// nowMs >= nextMs and nextMs a multiple of ivMs. nowMs-nextMs may exceed
// MaxInt64 (a gap from a time near MinInt64 to one near MaxInt64): as an
// int64 it wrapped negative, so a gap of many intervals counted as fewer
// than two and rotation kept a stale generation. The wrapped difference
// read as a uint64 is exact.
func crossed(nowMs, nextMs, ivMs int64) uint64 {
	return uint64(nowMs-nextMs)/uint64(ivMs) + 1
}

// maintain runs what is due at nowMs. If another goroutine is already
// maintaining, it returns at once and the caller proceeds with the current
// generations, which is safe: every state the caller can observe is valid.
// Time that moves backwards (late events) never undoes maintenance.
func (r *Ring) maintain(nowMs int64) {
	if !r.maintMu.TryLock() {
		return
	}
	defer r.maintMu.Unlock()
	if nowMs < r.nextMaint.Load() {
		return // another caller just did it
	}
	if !r.started {
		r.started = true
		r.nextRot, r.nextDecay, r.nextSweep = math.MaxInt64, math.MaxInt64, math.MaxInt64
		if r.rotMs > 0 {
			r.nextRot = nextAfter(nowMs, r.rotMs)
		}
		if r.decayMs > 0 {
			r.nextDecay = nextAfter(nowMs, r.decayMs)
		}
		if r.sweepMs > 0 {
			r.nextSweep = nextAfter(nowMs, r.sweepMs)
		}
	}
	if nowMs >= r.nextRot {
		r.rotate(crossed(nowMs, r.nextRot, r.rotMs))
		r.nextRot = nextAfter(nowMs, r.rotMs)
	}
	if nowMs >= r.nextDecay {
		r.decay(crossed(nowMs, r.nextDecay, r.decayMs))
		r.nextDecay = nextAfter(nowMs, r.decayMs)
	}
	if nowMs >= r.nextSweep {
		r.sweep(nowMs, true)
		r.nextSweep = nextAfter(nowMs, r.sweepMs)
	}
	r.nextMaint.Store(min(r.nextRot, r.nextDecay, r.nextSweep))
}

// rotate moves the generations k rotation boundaries forward: the active
// one becomes warm and a fresh one becomes active; after two or more
// boundaries both old generations are out of date and are dropped.
//
// A touch that loaded the old active table just before the swap lands in
// what is now the warm generation; it is still counted by every read. Only
// if the table is dropped while the touch is in flight (a gap of two or more
// intervals, or two rotations) does the touch go with it, as if it had been
// made just before the drop.
func (r *Ring) rotate(k uint64) {
	// One store publishes both tables (see generations). Only maintain,
	// holding maintMu, stores gens, so the load cannot miss a rotation.
	next := &generations{active: newTable(r.opts.Bits)}
	if k < 2 {
		next.warm = r.gens.Load().active
	}
	r.gens.Store(next)
	r.rotations.Add(k)
}

// decay shifts every lifetime count right by k × DecayShift bits.
func (r *Ring) decay(k uint64) {
	shift := uint64(64) // k >= 64 shifts everything out; the product could wrap
	if k < 64 {
		shift = uint64(r.opts.DecayShift) * k
	}
	for _, t := range r.tables() {
		if t == nil {
			continue
		}
		t.walk(func(n *node) {
			for {
				c := n.count.Load()
				if c&deadBit != 0 {
					return
				}
				var nc uint64
				if shift < 64 {
					nc = c >> shift
				}
				if n.count.CompareAndSwap(c, nc) {
					return
				}
			}
		})
	}
	r.decays.Add(k)
}

// EvictCold removes every node that is cold at nowMs and returns how many
// it removed. A node is cold when its window count is zero and it holds no
// touch later than nowMs, or, without a window, when its lifetime count
// decayed to zero. Without a window and without decay nothing is ever
// cold; rotation is then what frees memory. EvictCold walks every node:
// O(Len()). It does not run rotation or decay that are due.
func (r *Ring) EvictCold(nowMs int64) int { return r.sweep(nowMs, false) }

// sweep removes cold nodes. With onlyFull it skips generations that are
// below 3/4 of the cap, where the room is not needed.
func (r *Ring) sweep(nowMs int64, onlyFull bool) int {
	e := r.epoch(nowMs)
	total := 0
	for _, t := range r.tables() {
		if t == nil {
			continue
		}
		if onlyFull && r.maxNodes > 0 && t.nodes.Load()*4 < r.maxNodes*3 {
			continue
		}
		var cold []*node
		t.walk(func(n *node) {
			if r.score(n, e) == 0 {
				cold = append(cold, n)
			}
		})
		for _, n := range cold {
			// kill re-checks coldness atomically with the deletion, so a
			// node touched since the walk survives.
			if r.kill(t, n, true, e) {
				total++
			}
		}
	}
	r.evicted.Add(uint64(total))
	return total
}
