package hotkeys

import (
	"container/heap"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/zeebo/xxh3"

	"github.com/keyheat/keyheat/schemas"
)

// How the follower turns records into the set.
//
// The state of each key the registry mentions is its detector entry (nil
// when the detector has none) and its manual override (nil when none is in
// force). What readers see follows from the two (followedKey.visible), and the
// set holds exactly the keys whose visible entry is not nil. Two writers
// change the state, one at a time under Follower.mu: the fetch loop, one
// batch of records at a time, and the expiry loop, which ends overrides
// whose TTL ran out. Each writer's batch ends by publishing the shards it
// changed and, once the follower is ready, by reporting every key whose
// visible entry differs from before the batch.

// followedKey is what the registry says about one key.
type followedKey struct {
	det *Entry    // the detector's entry; nil: not hot by the detector
	man *override // the manual override in force; nil: none
	vis *Entry    // what readers see: visible() when last settled
}

// override is a manual entry in force until expMs.
type override struct {
	entry *Entry // a promote's entry; nil for a demote
	expMs int64
}

// visible is what readers see of the key: an override wins over the
// detector while it lasts.
func (s *followedKey) visible() *Entry {
	if s.man != nil {
		return s.man.entry
	}
	return s.det
}

func (s *followedKey) demoted() bool { return s.man != nil && s.man.entry == nil }

// registryState is the writers' state; Follower.mu guards it.
type registryState struct {
	keys   map[setKey]*followedKey
	w      *setWriter
	expiry expiryHeap
	live   int // overrides in force, to bound the heap's stale items

	// Counts of the set, stored in the Follower's atomics (for Stats) at
	// the end of each batch, after its changes were reported.
	nDetector, nManual, nDemoted int

	// apps interns app names: every entry of an app shares one string,
	// which a lookup's comparison finds in cache.
	apps map[string]string

	// The current batch, when its changes are reported: each key touched
	// with its visible entry before the batch, in the order first touched.
	track   bool
	touched []touched
	seen    map[setKey]struct{}
}

type touched struct {
	k      setKey
	before *Entry
}

func (s *registryState) init(set *entrySet) {
	s.keys = map[setKey]*followedKey{}
	s.w = newSetWriter(set)
	s.seen = map[setKey]struct{}{}
	s.apps = map[string]string{}
}

func (s *registryState) intern(app string) string {
	if a, ok := s.apps[app]; ok {
		return a
	}
	s.apps[app] = app
	return app
}

// nextExpiry is the earliest instant an override may end.
func (s *registryState) nextExpiry() (time.Time, bool) {
	if len(s.expiry) == 0 {
		return time.Time{}, false
	}
	return time.UnixMilli(s.expiry[0].atMs), true
}

// recordOp is one decoded registry record.
type recordOp struct {
	k      setKey
	manual bool
	det    *schemas.HotKeyEvent // detector record; nil: tombstone
	man    *schemas.ManualEntry // manual record; nil: tombstone
	mit    Mitigation           // det's or man's mitigation
	split  int
}

// decodeRecord decodes a registry record. Its errors never quote the key.
func decodeRecord(r *kgo.Record) (recordOp, error) {
	var op recordOp
	var err error
	if schemas.IsManualRecordKey(r.Key) {
		op.manual = true
		if op.k.app, op.k.key, err = schemas.ParseManualRecordKey(r.Key); err != nil {
			return op, err
		}
		if r.Value == nil {
			return op, nil
		}
		if op.man, err = schemas.DecodeManualEntry(r.Value); err != nil {
			return op, err
		}
		if op.man.App != op.k.app || op.man.Key != op.k.key {
			return op, errors.New("manual entry: its app and key are not those of its record key")
		}
		op.mit, op.split = mitigation(op.man.Mitigation)
		return op, nil
	}
	if op.k.app, op.k.key, err = schemas.ParseHotKeyRecordKey(r.Key); err != nil {
		return op, err
	}
	if r.Value == nil {
		return op, nil
	}
	if op.det, err = schemas.DecodeHotKeyEvent(r.Value); err != nil {
		return op, err
	}
	if op.det.App != op.k.app || op.det.Key != op.k.key {
		return op, errors.New("hot-key event: its app and key are not those of its record key")
	}
	if op.det.Type != schemas.HotKeyCooled && op.det.Mitigation != nil {
		if err := schemas.ValidateMitigation(op.det.Mitigation); err != nil {
			return op, fmt.Errorf("hot-key event: %w", err)
		}
		op.mit, op.split = mitigation(op.det.Mitigation)
	}
	return op, nil
}

// decodeRecords decodes recs, ops[i] and errs[i] being recs[i]'s. JSON
// decoding is most of a bootstrap's work, so a large poll is decoded on
// every CPU; the order of applying stays the records' order.
func decodeRecords(recs []*kgo.Record) (ops []recordOp, errs []error) {
	ops, errs = make([]recordOp, len(recs)), make([]error, len(recs))
	decode := func(lo, hi int) {
		for i := lo; i < hi; i++ {
			ops[i], errs[i] = decodeRecord(recs[i])
		}
	}
	workers := min(runtime.GOMAXPROCS(0), len(recs)/decodeChunk)
	if workers <= 1 {
		decode(0, len(recs))
		return ops, errs
	}
	var wg sync.WaitGroup
	per := (len(recs) + workers - 1) / workers
	for lo := 0; lo < len(recs); lo += per {
		wg.Go(func() { decode(lo, min(lo+per, len(recs))) })
	}
	wg.Wait()
	return ops, errs
}

// decodeChunk is the fewest records worth a goroutine of their own.
const decodeChunk = 256

// mitigation maps a validated record mitigation; nil is MitigationNone.
func mitigation(m *schemas.Mitigation) (Mitigation, int) {
	if m == nil {
		return MitigationNone, 0
	}
	switch m.Kind {
	case schemas.MitigationLocalCache:
		return MitigationLocalCache, 0
	case schemas.MitigationSplit:
		return MitigationSplit, m.Split
	case schemas.MitigationCoalesce:
		return MitigationCoalesce, 0
	}
	return MitigationNone, 0
}

// apply applies a poll's records: it decodes them, then, under mu, ends
// the overrides that ran out, applies the records as one batch, publishes
// and reports it, and moves the readiness position.
func (f *Follower) apply(fs kgo.Fetches) {
	var recs []*kgo.Record
	var lagChanged bool
	fs.EachPartition(func(p kgo.FetchTopicPartition) {
		for _, r := range p.Records {
			f.progress.advance(p.Partition, r.Offset)
			if !r.Attrs.IsControl() {
				recs = append(recs, r)
			}
		}
		if p.Err == nil && p.HighWatermark >= 0 {
			f.progress.hw[p.Partition] = p.HighWatermark
			lagChanged = true
		}
	})
	if lagChanged {
		l := f.progress.lag()
		f.lag.Store(l)
		f.m.lag.Set(float64(l))
	}
	f.records.Add(uint64(len(recs)))
	f.m.records.Add(float64(len(recs)))
	ops, errs := decodeRecords(recs)
	for i, err := range errs {
		if err == nil {
			continue
		}
		f.decodeErrors.Add(1)
		f.m.decodeErrors.Inc()
		if ok, skipped := f.badLog.allow(time.Now()); ok {
			f.log.Warn("hotkeys follower: skipped a registry record", "partition", recs[i].Partition, "offset", recs[i].Offset,
				"err", err, "similar_logs_skipped", skipped)
		}
	}

	f.mu.Lock()
	defer f.mu.Unlock()
	now := f.clock.now()
	f.sweepLocked(now)
	if len(ops) > 0 {
		f.beginLocked()
		nowMs := now.UnixMilli()
		for i := range ops {
			if errs[i] == nil {
				f.applyOpLocked(&ops[i], nowMs)
			}
		}
		f.finishLocked(StatusCooled)
	}
	if !f.ready.Load() && f.progress.done() {
		// The batch that completes the bootstrap is part of it: finished
		// above before ready is set, so it reported nothing.
		f.setReady()
	}
}

func (f *Follower) applyOpLocked(op *recordOp, nowMs int64) {
	op.k.app = f.st.intern(op.k.app)
	st, prevVis, prevDemoted := f.touchLocked(op.k)
	if !op.manual {
		switch {
		case op.det == nil, op.det.Type == schemas.HotKeyCooled:
			st.det = nil
		case op.det.Type == schemas.HotKeyUpdate:
			st.det = detectorEntry(op, st.det)
		default:
			st.det = detectorEntry(op, nil)
		}
	} else if op.man == nil || op.man.ExpiresMs() <= nowMs {
		// A tombstone, or an entry read after it ended: whichever override
		// the key had is over.
		f.endOverrideLocked(st)
	} else {
		f.endOverrideLocked(st)
		ov := &override{expMs: op.man.ExpiresMs()}
		if op.man.Action == schemas.ManualPromote {
			ov.entry = manualEntry(op)
		}
		st.man = ov
		f.st.live++
		f.pushExpiryLocked(op.k, ov)
	}
	f.settleLocked(op.k, st, prevVis, prevDemoted)
}

// detectorEntry is the entry of a detector record; prev, on an update, is
// the detector's entry the update refreshes (nil if none).
func detectorEntry(op *recordOp, prev *Entry) *Entry {
	h := op.det
	e := &Entry{App: op.k.app, Key: op.k.key, KeyHash: xxh3.HashString(op.k.key), Source: SourceDetector, Status: StatusHot,
		Mitigation: op.mit, SplitFactor: op.split, Rate: h.Rate, PeakRate: max(h.Rate, h.PeakRate),
		Onset: time.UnixMilli(h.OnsetMs), Detected: time.UnixMilli(h.DetectedMs)}
	if prev != nil {
		e.Onset = prev.Onset
		e.PeakRate = max(e.PeakRate, prev.PeakRate)
		if h.Mitigation == nil {
			e.Mitigation, e.SplitFactor = prev.Mitigation, prev.SplitFactor
		}
	}
	return e
}

// manualEntry is the entry of a manual promote.
func manualEntry(op *recordOp) *Entry {
	m := op.man
	created := time.UnixMilli(m.CreatedMs)
	return &Entry{App: op.k.app, Key: op.k.key, KeyHash: xxh3.HashString(op.k.key), Source: SourceManual, Status: StatusHot,
		Mitigation: op.mit, SplitFactor: op.split, Onset: created, Detected: created,
		TTL: time.Duration(m.TTLMs) * time.Millisecond, Expires: time.UnixMilli(m.ExpiresMs()),
		LocalTTL: time.Duration(m.LocalTTLMs) * time.Millisecond}
}

// sweepLocked ends the overrides whose TTL ran out by now, as a batch of
// its own whose removals report StatusExpired.
func (f *Follower) sweepLocked(now time.Time) {
	nowMs := now.UnixMilli()
	if len(f.st.expiry) == 0 || f.st.expiry[0].atMs > nowMs {
		return
	}
	f.beginLocked()
	for len(f.st.expiry) > 0 && f.st.expiry[0].atMs <= nowMs {
		it := heap.Pop(&f.st.expiry).(expiryItem)
		st := f.st.keys[it.k]
		if st == nil || st.man != it.ov {
			continue // replaced or removed since
		}
		st, prevVis, prevDemoted := f.touchLocked(it.k)
		f.endOverrideLocked(st)
		f.settleLocked(it.k, st, prevVis, prevDemoted)
		f.m.expired.Inc()
	}
	f.finishLocked(StatusExpired)
}

func (f *Follower) endOverrideLocked(st *followedKey) {
	if st.man != nil {
		st.man = nil
		f.st.live--
	}
}

// beginLocked starts a batch; its changes are reported when the follower
// is ready and someone listens.
func (f *Follower) beginLocked() {
	f.st.track = f.ready.Load() && len(*f.cbs.Load()) > 0
}

// touchLocked returns k's state (new if the registry did not know k) and
// what readers and the demote count saw of it before the change the
// caller is about to make, and notes k as changed in the batch.
func (f *Follower) touchLocked(k setKey) (st *followedKey, prevVis *Entry, prevDemoted bool) {
	st = f.st.keys[k]
	if st == nil {
		st = &followedKey{}
		f.st.keys[k] = st
	}
	if f.st.track {
		if _, ok := f.st.seen[k]; !ok {
			f.st.seen[k] = struct{}{}
			f.st.touched = append(f.st.touched, touched{k, st.vis})
		}
	}
	return st, st.vis, st.demoted()
}

// settleLocked brings k's visible entry, the set's writer and the counts in
// line with st after a change.
func (f *Follower) settleLocked(k setKey, st *followedKey, prevVis *Entry, prevDemoted bool) {
	if vis := st.visible(); vis != prevVis {
		if vis != nil {
			f.st.w.put(vis)
		} else {
			f.st.w.del(k.app, k.key)
		}
		f.countLocked(prevVis, -1)
		f.countLocked(vis, 1)
		st.vis = vis
	}
	if d := st.demoted(); d != prevDemoted {
		if d {
			f.st.nDemoted++
		} else {
			f.st.nDemoted--
		}
	}
	if st.det == nil && st.man == nil {
		delete(f.st.keys, k)
	}
}

func (f *Follower) countLocked(e *Entry, n int) {
	switch {
	case e == nil:
	case e.Source == SourceManual:
		f.st.nManual += n
	default:
		f.st.nDetector += n
	}
}

// finishLocked publishes the batch, reports its changes (a key that left
// the set with removed), then updates the counts: Stats showing a batch's
// entries means its changes were all queued or dropped.
func (f *Follower) finishLocked(removed Status) {
	f.st.w.publish()
	for _, t := range f.st.touched {
		var after *Entry
		if st := f.st.keys[t.k]; st != nil {
			after = st.vis
		}
		switch {
		case after == t.before:
		case after != nil:
			f.emit(*after)
		default:
			e := *t.before
			e.Status = removed
			f.emit(e)
		}
	}
	clear(f.st.seen)
	clear(f.st.touched)
	f.st.touched = f.st.touched[:0]
	f.st.track = false
	f.nDetector.Store(int64(f.st.nDetector))
	f.nManual.Store(int64(f.st.nManual))
	f.nDemoted.Store(int64(f.st.nDemoted))
	f.m.entries.WithLabelValues(SourceDetector.String()).Set(float64(f.st.nDetector))
	f.m.entries.WithLabelValues(SourceManual.String()).Set(float64(f.st.nManual))
	f.m.demoted.Set(float64(f.st.nDemoted))
}

// pushExpiryLocked schedules ov's end and wakes the expiry loop, which may
// be waiting for a later one.
func (f *Follower) pushExpiryLocked(k setKey, ov *override) {
	// Replaced overrides stay in the heap until their time; rebuild it
	// when they outnumber the live ones, so that a control plane that
	// renews entries often does not grow it without bound.
	if len(f.st.expiry) > 2*f.st.live+64 {
		live := f.st.expiry[:0]
		for _, it := range f.st.expiry {
			if st := f.st.keys[it.k]; st != nil && st.man == it.ov {
				live = append(live, it)
			}
		}
		clear(f.st.expiry[len(live):])
		f.st.expiry = live
		heap.Init(&f.st.expiry)
	}
	heap.Push(&f.st.expiry, expiryItem{atMs: ov.expMs, k: k, ov: ov})
	select {
	case f.rearm <- struct{}{}:
	default:
	}
}

// expiryHeap orders overrides by the instant they end.
type expiryHeap []expiryItem

type expiryItem struct {
	atMs int64
	k    setKey
	ov   *override // the override scheduled; stale if the key's differs
}

func (h expiryHeap) Len() int           { return len(h) }
func (h expiryHeap) Less(i, j int) bool { return h[i].atMs < h[j].atMs }
func (h expiryHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *expiryHeap) Push(x any)        { *h = append(*h, x.(expiryItem)) }
func (h *expiryHeap) Pop() any {
	old := *h
	it := old[len(old)-1]
	old[len(old)-1] = expiryItem{}
	*h = old[:len(old)-1]
	return it
}

// progress tracks how far the fetch loop has read each partition, against
// the offsets it must reach to be ready. The position is the offset after
// the last record handed out, transaction markers included (the client
// keeps them for this), so a partition whose last offsets are markers is
// read once the marker arrives. A position past the wanted offset also
// counts: records compacted away at the end leave no record at the offset
// just before it. Owned by the fetch loop.
type progress struct {
	listed bool
	want   map[int32]int64 // partitions not read up to their offset yet
	next   map[int32]int64
	hw     map[int32]int64
}

func (p *progress) start(want, start map[int32]int64) {
	p.listed, p.want, p.next = true, want, start
	if p.hw == nil {
		p.hw = map[int32]int64{}
	}
}

func (p *progress) advance(partition int32, offset int64) {
	if p.next == nil {
		p.next = map[int32]int64{}
	}
	if offset+1 > p.next[partition] {
		p.next[partition] = offset + 1
	}
	if w, ok := p.want[partition]; ok && offset+1 >= w {
		delete(p.want, partition)
	}
}

func (p *progress) done() bool { return p.listed && len(p.want) == 0 }

// lag sums how far each partition's position is behind its high watermark.
func (p *progress) lag() int64 {
	var n int64
	for part, hw := range p.hw {
		n += max(0, hw-p.next[part])
	}
	return n
}
