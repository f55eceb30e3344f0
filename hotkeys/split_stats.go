package hotkeys

import (
	"math"
	"sync/atomic"
	"time"
)

// splitLatencyBounds are the upper bounds of the latency buckets a
// Splitter keeps, from a round trip to a Redis node on the same host to a
// command stuck behind a slow one; a last bucket takes what exceeds them.
var splitLatencyBounds = [...]time.Duration{
	10 * time.Microsecond, 25 * time.Microsecond, 50 * time.Microsecond,
	100 * time.Microsecond, 250 * time.Microsecond, 500 * time.Microsecond,
	time.Millisecond, 2500 * time.Microsecond, 5 * time.Millisecond,
	10 * time.Millisecond, 25 * time.Millisecond, 50 * time.Millisecond,
	100 * time.Millisecond, 250 * time.Millisecond, 500 * time.Millisecond,
	time.Second, 2500 * time.Millisecond, 5 * time.Second, 10 * time.Second,
}

const splitBuckets = len(splitLatencyBounds) + 1

// splitCounters are a Splitter's totals since it was built. A call passed
// through costs one atomic add here; a split call one latency observation
// (see splitLatency.observe), a split read a second one, its key's.
type splitCounters struct {
	// passed counts, per operation, the calls passed through; each on its
	// own cache line, so that pass-through calls of different operations
	// do not contend, nor slow the reads of the fields before (the
	// Splitter's, which every call reads).
	_      [64]byte
	passed [splitOps]struct {
		atomic.Uint64
		_ [56]byte
	}
	// split holds, per operation, the latency of the calls on split keys,
	// whose count is the number of those calls.
	split                           [splitOps]splitLatency
	folds, foldErrors, foldedShards atomic.Uint64
}

// splitKeyCounters are what a Splitter counts of one key it remembers.
// They outlive the key's states while it stays remembered (a factor
// raised or lowered keeps them) and go with it when a fold forgets it.
type splitKeyCounters struct {
	since time.Time
	// writes counts the split writes Redis acknowledged; a fold compares
	// it before and after to learn whether one may have landed behind it
	// (see forget).
	writes atomic.Uint64
	reads  splitLatency
}

// splitLatency is a lock-free latency distribution: per bucket a count,
// and the sum and maximum in nanoseconds.
type splitLatency struct {
	maxNs, sumNs atomic.Uint64
	buckets      [splitBuckets]atomic.Uint64
}

// observe records one call that took d; a d below the clock's resolution
// counts as 1 ns. The maximum and the sum are written before the bucket
// and snapshot reads the buckets first, so a call a snapshot counts is in
// its Total and Max.
func (l *splitLatency) observe(d time.Duration) {
	ns := uint64(max(d, 1))
	for {
		m := l.maxNs.Load()
		if ns <= m || l.maxNs.CompareAndSwap(m, ns) {
			break
		}
	}
	l.sumNs.Add(ns)
	i := 0
	for i < len(splitLatencyBounds) && d > splitLatencyBounds[i] {
		i++
	}
	l.buckets[i].Add(1)
}

// count is how many calls l holds.
func (l *splitLatency) count() uint64 {
	var n uint64
	for i := range l.buckets {
		n += l.buckets[i].Load()
	}
	return n
}

func (l *splitLatency) snapshot() SplitLatency {
	out := SplitLatency{Buckets: make([]SplitBucket, splitBuckets)}
	for i := range l.buckets {
		n := l.buckets[i].Load()
		out.Buckets[i] = SplitBucket{UpperBound: splitBucketBound(i), Count: n}
		out.Count += n
	}
	out.Total = time.Duration(l.sumNs.Load())
	out.Max = time.Duration(l.maxNs.Load())
	return out
}

func splitBucketBound(i int) time.Duration {
	if i < len(splitLatencyBounds) {
		return splitLatencyBounds[i]
	}
	return math.MaxInt64
}

// SplitStats is a snapshot of a Splitter's counters since it was built,
// and of the keys it remembers now.
type SplitStats struct {
	// Per operation, the calls on split keys and those passed through.
	Incr, Get, SAdd, SRem, SMembers, ZAdd, ZRem, ZRange SplitOpStats
	// FanOutReads joins the latencies of Get, SMembers and ZRange on split
	// keys: the reads that touch the key and every shard it may have.
	FanOutReads SplitLatency
	// Folds counts the Folds (Reconcile's too) that completed, FoldErrors
	// those that returned an error; a Fold of a key the Splitter does not
	// remember, given no factor, has nothing to do and counts in neither.
	// FoldedShards counts the shards that held something when a fold
	// moved it into their key.
	Folds, FoldErrors, FoldedShards uint64
	// Keys are the keys the Splitter remembers now, in no particular
	// order: those it was called on while the registry had them split,
	// until a fold after they cooled forgot them (see Splitter).
	Keys []SplitKeyStats
}

// SplitOpStats counts one operation's calls.
//
// For the writes (Incr, SAdd, ZAdd), Split counts the calls that wrote to
// a shard, and Passed those that wrote to the key itself (a ZAdd of a key
// that cooled but is not folded yet also removes the members from the
// shards). For the reads and removals (Get, SMembers, ZRange, SRem, ZRem),
// Split counts the calls that touched the key and its shards, and Passed
// those that touched the key alone.
type SplitOpStats struct {
	// Split counts the calls on split keys that returned, with an error
	// or not; Passed the calls passed through, counted before their
	// command was sent.
	Split, Passed uint64
	// Latency is the distribution of the split calls' latencies, each
	// from the moment the call knew the key split until its result was
	// ready (its Redis round trips, and merging what they returned);
	// Latency.Count is Split.
	Latency SplitLatency
}

// SplitKeyStats are what a Splitter counted of one key since it began to
// remember it.
type SplitKeyStats struct {
	App, Key string
	// KeyHash is the xxh3 hash of Key, as Entry.KeyHash.
	KeyHash uint64
	// Shards is how many shards the Splitter reads the key with: the
	// largest factor it used since the key's last fold, or the factor in
	// force at that fold.
	Shards int
	// Since is when the Splitter began to remember the key: its first
	// call on the key while the registry had it split, since the Splitter
	// was built or since the last fold that forgot the key.
	Since time.Time
	// Writes counts the split writes (Incr, SAdd, ZAdd to a shard) Redis
	// acknowledged; Reads the split reads (Get, SMembers, ZRange) that
	// returned, with an error or not, and ReadLatency their latencies
	// (ReadLatency.Count is Reads).
	Writes, Reads uint64
	ReadLatency   SplitLatency
}

// SplitLatency is a distribution of call latencies in fixed buckets.
// Every call Count counts is in Total and Max; a snapshot taken while
// calls run may have Total and Max include a call that Count does not yet.
type SplitLatency struct {
	Count uint64
	// Total is the sum of the latencies, Max the largest.
	Total, Max time.Duration
	// Buckets count the calls by latency, in ascending order of
	// UpperBound: a call is counted in the first bucket whose UpperBound
	// it does not exceed. The last bucket's UpperBound is the largest
	// Duration. The bounds are the same in every SplitLatency, so buckets
	// from several snapshots (or processes) add up.
	Buckets []SplitBucket
}

// SplitBucket is one bucket of a SplitLatency.
type SplitBucket struct {
	UpperBound time.Duration
	Count      uint64
}

// Mean is Total / Count, 0 before any call.
func (l SplitLatency) Mean() time.Duration {
	if l.Count == 0 {
		return 0
	}
	return l.Total / time.Duration(l.Count)
}

// Quantile estimates the q-quantile (0 < q <= 1) of the latencies, the
// ceil(q*Count)-th smallest, from above: the upper bound of the bucket
// that holds it, or Max when that is less. The true quantile lies between
// the bucket's lower bound (exclusive) and what Quantile returns. It is 0
// before any call, and it never decreases as q grows.
func (l SplitLatency) Quantile(q float64) time.Duration {
	if l.Count == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(l.Count)))
	rank = min(max(rank, 1), l.Count)
	var seen uint64
	for _, b := range l.Buckets {
		seen += b.Count
		if seen >= rank {
			return min(b.UpperBound, l.Max)
		}
	}
	return l.Max
}

// P50 is Quantile(0.5).
func (l SplitLatency) P50() time.Duration { return l.Quantile(0.5) }

// P99 is Quantile(0.99).
func (l SplitLatency) P99() time.Duration { return l.Quantile(0.99) }

// add adds o's calls to l; l's buckets must be its own.
func (l *SplitLatency) add(o SplitLatency) {
	if l.Buckets == nil {
		l.Buckets = make([]SplitBucket, len(o.Buckets))
		copy(l.Buckets, o.Buckets)
	} else {
		for i := range l.Buckets {
			l.Buckets[i].Count += o.Buckets[i].Count
		}
	}
	l.Count += o.Count
	l.Total += o.Total
	l.Max = max(l.Max, o.Max)
}

// Stats returns a snapshot of the Splitter's counters and of the keys it
// remembers. It reads the counters without locks, so figures of calls
// that ran meanwhile may be in some of them and not yet in others; it
// takes the Splitter's read lock to list the keys: call it for a debug
// page or a report, not per request.
func (s *Splitter) Stats() SplitStats {
	c := &s.stats
	op := func(i int) SplitOpStats {
		l := c.split[i].snapshot()
		return SplitOpStats{Split: l.Count, Passed: c.passed[i].Load(), Latency: l}
	}
	out := SplitStats{
		Incr: op(splitOpIncr), Get: op(splitOpGet),
		SAdd: op(splitOpSAdd), SRem: op(splitOpSRem), SMembers: op(splitOpSMembers),
		ZAdd: op(splitOpZAdd), ZRem: op(splitOpZRem), ZRange: op(splitOpZRange),
		Folds: c.folds.Load(), FoldErrors: c.foldErrors.Load(), FoldedShards: c.foldedShards.Load(),
	}
	for _, o := range []SplitOpStats{out.Get, out.SMembers, out.ZRange} {
		out.FanOutReads.add(o.Latency)
	}
	type held struct {
		k  splitKey
		st *splitState
	}
	s.mu.RLock()
	list := make([]held, 0, len(s.keys))
	for k, st := range s.keys {
		list = append(list, held{k, st})
	}
	s.mu.RUnlock()
	out.Keys = make([]SplitKeyStats, 0, len(list))
	for _, h := range list {
		kc := h.st.kc
		reads := kc.reads.snapshot()
		out.Keys = append(out.Keys, SplitKeyStats{
			App: h.k.app, Key: h.k.key, KeyHash: h.st.names.keyHash(),
			Shards: h.st.factor, Since: kc.since,
			Writes: kc.writes.Load(), Reads: reads.Count, ReadLatency: reads,
		})
	}
	return out
}
