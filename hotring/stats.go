package hotring

import "sync/atomic"

// Stats is a snapshot of a ring's counters. Counters are cumulative since
// New; node counts are current.
type Stats struct {
	// Nodes is the number of keys tracked by the active generation.
	Nodes int
	// WarmNodes is the number of keys tracked by the warm (previous)
	// generation; 0 without rotation.
	WarmNodes int
	// Touches is the total weight counted (1 per Touch, n per TouchN),
	// excluding touches that were refused or clamped.
	Touches uint64
	// Clamped counts TouchAndClamp calls refused because the key had
	// reached the limit.
	Clamped uint64
	// RefusedByCap counts touches of new keys refused by a strict node cap.
	RefusedByCap uint64
	// SampledOut counts touches of new keys refused by cap sampling
	// (SampleBits > 0).
	SampledOut uint64
	// ForceAdmitted counts keys admitted past the cap by Admit or the
	// Options.Admit hook.
	ForceAdmitted uint64
	// Evicted counts cold nodes removed by sweeps and EvictCold.
	Evicted uint64
	// Removed counts nodes removed by Remove.
	Removed uint64
	// Rotations counts generation rotations; a gap spanning several
	// rotation intervals counts each interval.
	Rotations uint64
	// Decays counts decay passes applied; as with Rotations, a long gap
	// counts each interval.
	Decays uint64
}

// Stats returns a snapshot of the ring's counters. Fields are read one by
// one, so under concurrent use they may be mutually slightly inconsistent.
func (r *Ring) Stats() Stats {
	g := r.gens.Load()
	s := Stats{
		Nodes:         int(g.active.nodes.Load()),
		Touches:       r.touches.load() + r.singleTouches,
		Clamped:       r.clamped.load(),
		RefusedByCap:  r.refused.load(),
		SampledOut:    r.sampledOut.load(),
		ForceAdmitted: r.forced.Load(),
		Evicted:       r.evicted.Load(),
		Removed:       r.removed.Load(),
		Rotations:     r.rotations.Load(),
		Decays:        r.decays.Load(),
	}
	if w := g.warm; w != nil {
		s.WarmNodes = int(w.nodes.Load())
	}
	return s
}

// stripes spreads a hot counter over cache lines, indexed by key hash, so
// goroutines touching different keys do not contend on one counter.
const stripes = 8

type striped struct {
	c [stripes]struct {
		v atomic.Uint64
		_ [56]byte
	}
}

func (s *striped) add(h, d uint64) { s.c[(h>>40)&(stripes-1)].v.Add(d) }

func (s *striped) load() uint64 {
	var t uint64
	for i := range s.c {
		t += s.c[i].v.Load()
	}
	return t
}
