package member

import (
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Why is a set of reasons a partition's fetching is paused.
type Why uint8

const (
	// Behind: what the partition feeds (a worker's queue, a sink's
	// buffer) has no room; fetching resumes once it has.
	Behind Why = 1 << iota
	// AtEnd: a run that stops at the end of its input read it; the
	// partition stays paused, since a fetch of partitions with nothing
	// more to read waits at the broker and holds up the fetches of those
	// that have.
	AtEnd
)

// Pauses keeps which partitions' fetching is paused, and why. A
// partition is paused while any reason holds: the first reason pauses
// it, removing the last resumes it, and saying a reason again changes
// nothing. Every client call of a stage's pauses goes through it, so it
// agrees with the client. Pausing throws away what the client already
// fetched for the partition (it fetches it again on resume). It is safe
// for concurrent use; the zero value pauses nothing yet.
type Pauses struct {
	mu  sync.Mutex
	why map[TP]Why
}

// Pause adds why to tp's reasons and reports whether that paused it (it
// was fetched before).
func (p *Pauses) Pause(cl *kgo.Client, tp TP, why Why) (paused bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	old := p.why[tp]
	if why == 0 || old|why == old {
		return false
	}
	if p.why == nil {
		p.why = map[TP]Why{}
	}
	p.why[tp] = old | why
	if old != 0 {
		return false
	}
	cl.PauseFetchPartitions(map[string][]int32{tp.Topic: {tp.Partition}})
	return true
}

// Resume removes why from tp's reasons and reports whether that resumed
// it (no reason is left).
func (p *Pauses) Resume(cl *kgo.Client, tp TP, why Why) (resumed bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	old := p.why[tp]
	if old == 0 || old&why == 0 {
		return false
	}
	if left := old &^ why; left != 0 {
		p.why[tp] = left
		return false
	}
	delete(p.why, tp)
	cl.ResumeFetchPartitions(map[string][]int32{tp.Topic: {tp.Partition}})
	return true
}

// Why returns tp's reasons; none when it is fetched.
func (p *Pauses) Why(tp TP) Why {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.why[tp]
}

// Forget resumes tp whatever its reasons, as when it is given up: a
// partition paused in the client stays paused across rebalances, and a
// later owner here must not inherit it.
func (p *Pauses) Forget(cl *kgo.Client, tp TP) {
	p.Resume(cl, tp, ^Why(0))
}
