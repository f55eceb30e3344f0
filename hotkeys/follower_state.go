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
	// manMs is the created_ms of the newest manual entry applied while
	// the key had state: an older one read later (a change retried
	// through another server while the first attempt was still on its
	// way, or written to another partition) does not replace it.
	manMs int64
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
// and reports it, and moves the readiness position. While a resync is
// under way the records go to the state it builds aside, which replaces
// the live one once read to the offsets listed when the resync began.
//
// A record at or below an offset already read on its partition means the
// partition's log started again (the topic was recreated on a broker that
// does not report topic IDs, or it lost records): apply then applies
// nothing of the poll and returns true, for the caller to resync.
func (f *Follower) apply(fs kgo.Fetches) (rewound bool) {
	var recs []*kgo.Record
	var lagChanged bool
	for _, ft := range fs {
		for _, t := range ft.Topics {
			for _, p := range t.Partitions {
				if len(p.Records) > 0 && f.progress.rewound(p.Partition, p.Records[0].Offset) {
					return true
				}
			}
		}
	}
	fs.EachTopic(func(t kgo.FetchTopic) {
		for _, p := range t.Partitions {
			if len(p.Records) > 0 && t.TopicID != ([16]byte{}) {
				f.topicID = t.TopicID
			}
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
	s := &f.st
	if f.aside != nil {
		s = f.aside
	}
	now := f.clock.now()
	f.sweepLocked(s, now)
	if len(ops) > 0 {
		f.beginLocked(s)
		nowMs := now.UnixMilli()
		for i := range ops {
			if errs[i] == nil {
				f.applyOpLocked(s, &ops[i], nowMs)
			}
		}
		f.finishLocked(s, StatusCooled)
	}
	if f.aside != nil && f.progress.done() {
		f.swapLocked(now)
	}
	if !f.ready.Load() && f.progress.done() {
		// The batch that completes the bootstrap is part of it: finished
		// above before ready is set, so it reported nothing.
		f.setReady()
	}
	return false
}

// newAside returns an empty state for a resync to build: its set has the
// live set's seed, so that its tables can replace the live ones.
func (f *Follower) newAside() *registryState {
	set := &entrySet{seed: f.set.seed}
	for i := range set.shards {
		set.shards[i].Store(emptyTable)
	}
	s := &registryState{}
	s.init(set)
	return s
}

// swapLocked makes the state a resync built the live one: readers see the
// new set shard by shard, as they see any batch, and the callbacks get
// the difference, once per key: StatusCooled with the old entry for a key
// the new topic does not hold, StatusHot for a key new or changed.
func (f *Follower) swapLocked(now time.Time) {
	s := f.aside
	f.aside = nil
	f.sweepLocked(s, now) // overrides that ended while it was read
	s.w.publish()
	for i := range f.set.shards {
		f.set.shards[i].Store(s.w.set.shards[i].Load())
	}
	s.w.set = f.set
	if f.ready.Load() && len(*f.cbs.Load()) > 0 {
		for k, old := range f.st.keys {
			if old.vis == nil {
				continue
			}
			if st := s.keys[k]; st == nil || st.vis == nil {
				e := *old.vis
				e.Status = StatusCooled
				f.emit(e)
			}
		}
		for k, st := range s.keys {
			if st.vis == nil {
				continue
			}
			if old := f.st.keys[k]; old == nil || old.vis == nil || *old.vis != *st.vis {
				f.emit(*st.vis)
			}
		}
	}
	f.st = *s
	f.storeCountsLocked()
	f.resyncing.Store(false)
	f.rearmExpiry()
	f.log.Info("hotkeys follower: resync done; the set is the recreated topic's",
		"entries", f.st.nDetector+f.st.nManual)
}

func (f *Follower) applyOpLocked(s *registryState, op *recordOp, nowMs int64) {
	op.k.app = s.intern(op.k.app)
	st, prevVis, prevDemoted := s.touch(op.k)
	if !op.manual {
		switch {
		case op.det == nil, op.det.Type == schemas.HotKeyCooled:
			st.det = nil
		case op.det.Type == schemas.HotKeyUpdate:
			st.det = detectorEntry(op, st.det)
		default:
			st.det = detectorEntry(op, nil)
		}
	} else if op.man != nil && op.man.CreatedMs < st.manMs {
		// Made before the manual entry the key has: the newer one stands.
		if s == &f.st {
			f.staleManual.Add(1)
		}
	} else if op.man == nil || op.man.ExpiresMs() <= nowMs {
		// A tombstone, or an entry read after it ended: whichever override
		// the key had is over.
		if op.man != nil {
			st.manMs = op.man.CreatedMs
		}
		s.endOverride(st)
	} else {
		st.manMs = op.man.CreatedMs
		s.endOverride(st)
		ov := &override{expMs: op.man.ExpiresMs()}
		if op.man.Action == schemas.ManualPromote {
			ov.entry = manualEntry(op)
		}
		st.man = ov
		s.live++
		f.pushExpiryLocked(s, op.k, ov)
	}
	s.settle(op.k, st, prevVis, prevDemoted)
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

// sweepLocked ends the overrides of s whose TTL ran out by now, as a batch
// of its own whose removals report StatusExpired.
func (f *Follower) sweepLocked(s *registryState, now time.Time) {
	nowMs := now.UnixMilli()
	if len(s.expiry) == 0 || s.expiry[0].atMs > nowMs {
		return
	}
	f.beginLocked(s)
	for len(s.expiry) > 0 && s.expiry[0].atMs <= nowMs {
		it := heap.Pop(&s.expiry).(expiryItem)
		st := s.keys[it.k]
		if st == nil || st.man != it.ov {
			continue // replaced or removed since
		}
		st, prevVis, prevDemoted := s.touch(it.k)
		s.endOverride(st)
		s.settle(it.k, st, prevVis, prevDemoted)
		if s == &f.st {
			f.m.expired.Inc()
		}
	}
	f.finishLocked(s, StatusExpired)
}

func (s *registryState) endOverride(st *followedKey) {
	if st.man != nil {
		st.man = nil
		s.live--
	}
}

// beginLocked starts a batch on s; its changes are reported when s is the
// live state, the follower is ready and someone listens. A resync's state
// reports nothing as it is built: its difference from the live state is
// reported when it replaces it.
func (f *Follower) beginLocked(s *registryState) {
	s.track = s == &f.st && f.ready.Load() && len(*f.cbs.Load()) > 0
}

// touch returns k's state (new if the registry did not know k) and what
// readers and the demote count saw of it before the change the caller is
// about to make, and notes k as changed in the batch.
func (s *registryState) touch(k setKey) (st *followedKey, prevVis *Entry, prevDemoted bool) {
	st = s.keys[k]
	if st == nil {
		st = &followedKey{}
		s.keys[k] = st
	}
	if s.track {
		if _, ok := s.seen[k]; !ok {
			s.seen[k] = struct{}{}
			s.touched = append(s.touched, touched{k, st.vis})
		}
	}
	return st, st.vis, st.demoted()
}

// settle brings k's visible entry, the set's writer and the counts in line
// with st after a change.
func (s *registryState) settle(k setKey, st *followedKey, prevVis *Entry, prevDemoted bool) {
	if vis := st.visible(); vis != prevVis {
		if vis != nil {
			s.w.put(vis)
		} else {
			s.w.del(k.app, k.key)
		}
		s.count(prevVis, -1)
		s.count(vis, 1)
		st.vis = vis
	}
	if d := st.demoted(); d != prevDemoted {
		if d {
			s.nDemoted++
		} else {
			s.nDemoted--
		}
	}
	if st.det == nil && st.man == nil {
		delete(s.keys, k)
	}
}

func (s *registryState) count(e *Entry, n int) {
	switch {
	case e == nil:
	case e.Source == SourceManual:
		s.nManual += n
	default:
		s.nDetector += n
	}
}

// finishLocked publishes the batch, reports its changes (a key that left
// the set with removed), then, for the live state, updates the counts:
// Stats showing a batch's entries means its changes were all queued or
// dropped.
func (f *Follower) finishLocked(s *registryState, removed Status) {
	s.w.publish()
	for _, t := range s.touched {
		var after *Entry
		if st := s.keys[t.k]; st != nil {
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
	clear(s.seen)
	clear(s.touched)
	s.touched = s.touched[:0]
	s.track = false
	if s == &f.st {
		f.storeCountsLocked()
	}
}

// storeCountsLocked copies the live state's counts to the atomics Stats
// reads and to the metrics.
func (f *Follower) storeCountsLocked() {
	f.nDetector.Store(int64(f.st.nDetector))
	f.nManual.Store(int64(f.st.nManual))
	f.nDemoted.Store(int64(f.st.nDemoted))
	f.m.entries.WithLabelValues(SourceDetector.String()).Set(float64(f.st.nDetector))
	f.m.entries.WithLabelValues(SourceManual.String()).Set(float64(f.st.nManual))
	f.m.demoted.Set(float64(f.st.nDemoted))
}

// pushExpiryLocked schedules ov's end and wakes the expiry loop, which may
// be waiting for a later one.
func (f *Follower) pushExpiryLocked(s *registryState, k setKey, ov *override) {
	// Replaced overrides stay in the heap until their time; rebuild it
	// when they outnumber the live ones, so that a control plane that
	// renews entries often does not grow it without bound.
	if len(s.expiry) > 2*s.live+64 {
		live := s.expiry[:0]
		for _, it := range s.expiry {
			if st := s.keys[it.k]; st != nil && st.man == it.ov {
				live = append(live, it)
			}
		}
		clear(s.expiry[len(live):])
		s.expiry = live
		heap.Init(&s.expiry)
	}
	heap.Push(&s.expiry, expiryItem{atMs: ov.expMs, k: k, ov: ov})
	f.rearmExpiry()
}

func (f *Follower) rearmExpiry() {
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
	read   map[int32]int64 // the highest offset handed out, per partition
}

// start begins tracking a listing: at the follower's start, or a resync's.
func (p *progress) start(want, start map[int32]int64) {
	p.listed, p.want, p.next = true, want, start
	p.hw, p.read = map[int32]int64{}, map[int32]int64{}
}

// rewound reports whether a record at offset on partition comes from a
// log that started again: an offset already handed out.
func (p *progress) rewound(partition int32, offset int64) bool {
	r, ok := p.read[partition]
	return ok && offset <= r
}

func (p *progress) advance(partition int32, offset int64) {
	if p.next == nil {
		p.next = map[int32]int64{}
	}
	if p.read == nil {
		p.read = map[int32]int64{}
	}
	if r, ok := p.read[partition]; !ok || offset > r {
		p.read[partition] = offset
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
