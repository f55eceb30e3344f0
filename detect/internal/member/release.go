package member

import (
	"context"
	"time"
)

// A Part is one assigned partition's work, as its member gives it up.
type Part interface {
	// Stop ends the partition's work and waits for it: from then on its
	// state is the caller's.
	Stop()
	// Drain waits, until ctx ends, for the partition's outputs in flight
	// and returns the point it may be committed at; ok is false when
	// there is none.
	Drain(ctx context.Context) (p Point, ok bool)
	// Close releases what the partition holds.
	Close()
}

// Release says how partitions are given up.
type Release struct {
	// Now is the clock the drain's deadline is set by; nil is time.Now.
	Now func() time.Time
	// FlushTimeout bounds the drain of every part together, and then the
	// commit.
	FlushTimeout time.Duration
	// Commit commits the parts' points (a Committer's Commit, and
	// whatever the stage does with what was committed).
	Commit func(ctx context.Context, points map[TP]Point)
	// Draining, when set, is called before the drain with its deadline;
	// what it returns is called after it (a stage says what it waits for).
	Draining func(deadline time.Time) (done func())
}

// Give gives parts up the way a group member must. Every part stops
// first. Revoked (lost false), the parts drain until one deadline and
// their points are committed: Give runs in the revoke callback, so the
// group's generation is still the one that owns them. Lost, nothing is
// drained or committed: another member may own them already, and a
// commit would move theirs back. Then every part closes.
func (r Release) Give(ctx context.Context, parts map[TP]Part, lost bool) {
	for _, p := range parts {
		p.Stop()
	}
	if !lost {
		now := time.Now
		if r.Now != nil {
			now = r.Now
		}
		deadline := now().Add(r.FlushTimeout)
		fctx, cancel := context.WithDeadline(ctx, deadline)
		var said func()
		if r.Draining != nil {
			said = r.Draining(deadline)
		}
		points := map[TP]Point{}
		for tp, p := range parts {
			if pt, ok := p.Drain(fctx); ok {
				points[tp] = pt
			}
		}
		if said != nil {
			said()
		}
		cancel()
		cctx, cancel := context.WithTimeout(ctx, r.FlushTimeout)
		r.Commit(cctx, points)
		cancel()
	}
	for _, p := range parts {
		p.Close()
	}
}
