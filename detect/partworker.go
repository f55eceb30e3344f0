package detect

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/keyheat/keyheat/detect/internal/ledger"
	"github.com/keyheat/keyheat/detect/internal/member"
	"github.com/keyheat/keyheat/logparse"
	"github.com/keyheat/keyheat/pipeline"
	"github.com/keyheat/keyheat/schemas"
	"github.com/keyheat/keyheat/sink/archive"
)

// Tuning of a partition worker.
const (
	// maxQueued batches wait for a worker before the poll loop waits for
	// it (up to pollTick, see waitRoom) and, past that, pauses its
	// partition's fetching: the poll loop never blocks on a worker. A
	// pause throws away what franz-go already fetched for the partition
	// (it fetches it again on resume), so pauses should be rare: fetching
	// resumes once resumeQueued batches are left, which keeps the worker
	// busy while the next fetch comes, instead of once it ran dry.
	maxQueued    = 4
	resumeQueued = 1
	// idleEvery is how often a live partition's core hears the wall
	// clock, so windows close while no event comes.
	idleEvery = 500 * time.Millisecond
)

// startInfo is where a partition starts, learnt from the group's offset
// fetch.
type startInfo struct {
	committed int64  // committed offset; -1 for none
	meta      string // metadata committed with it
	first     int64  // first offset to read when known (committed, or the reset's); -1 unknown
	end       int64  // ExitAtEnd: stop here; -1 for a live run
}

// partWorker owns one assigned events partition: one goroutine that
// decodes its records in offset order, dead-letters bad ones, feeds the
// core, publishes the core's outputs and tracks their acknowledgements,
// and publishes the commit point the poll loop commits.
//
// Ownership: every field below "worker-owned" belongs to the run
// goroutine while it runs, and to the rebalance callback after stop
// returned (done is closed, which orders the two).
type partWorker struct {
	s     *Service
	tp    tp
	parts int32 // the topic's partition count
	// idPrefix is the schemas.RecordID prefix of the partition's records,
	// for the keyheat-id header of their dead letters.
	idPrefix string
	// winHint sizes the window summaries' values.
	winHint sizeHint

	// qmu guards queue and atEnd, and orders the partition's pauses
	// (Service.pauses) with them.
	qmu   sync.Mutex
	queue [][]*kgo.Record
	// atEnd: ExitAtEnd, the records up to the end were fetched; the
	// partition stays paused.
	atEnd bool
	wake  chan struct{}

	// led counts the outputs in flight (partOut) and holds the commit
	// at the oldest dead letter not acknowledged.
	led  *ledger.Ledger[partOut]
	ctx  context.Context // ends when the partition is given up
	quit context.CancelFunc
	done chan struct{}

	startMu  sync.Mutex
	start    startInfo
	hasStart bool

	// align keeps the partition within a few windows of the others, of
	// every instance (see aligner); alignPos is its published position,
	// alignClock the window of its clock (alignUnknown before any event).
	align      *aligner
	alignPos   atomic.Int64
	alignClock atomic.Int64
	// lag is the records between the last one fetched and the end of the
	// partition, as of the last fetch (or of the assignment): a partition
	// with records waiting is not idle, whatever the wall clock says.
	// lagUnknown until the end offset was first learnt: a partition whose
	// backlog is not known yet is not idle either.
	lag atomic.Int64

	point      atomic.Pointer[pipeline.CommitPoint] // the commit point, as published
	finishedCh chan struct{}                        // ExitAtEnd: closed once ended and acknowledged

	mRecords, mEvents, mLate, mMismatch prometheus.Counter
	mLag, mCommitted, mPause            prometheus.Gauge

	// worker-owned
	st        startInfo
	started   bool // st is set
	core      *pipeline.Partition
	out       pipeline.Output
	next      int64 // offset after the last record handled; -1 before any
	evs       []schemas.AccessEvent
	tally     readTally                // read since the last applyAcks, for Service.read
	archive   *archive.PartitionWriter // nil without an archive
	hotArch   *archive.HotKeyWriter
	hotLed    *ledger.Archive[partOut, *schemas.HotKeyEvent] // acknowledges hotArch's flushed events
	lastFlush time.Time
	// judgedKeyed: the partition was found keyed at its first event
	// (detect.keyed true, or auto and that record's key was its access
	// key); from then on every record is checked. keyed: its core counts
	// it as keyed (until auto meets a record that is not, see notKeyed).
	judgedKeyed, keyed bool
	// refused: detect.keyed is true and a record was not keyed; the
	// worker handles nothing more (the service stops).
	refused   bool
	rulesGen  uint64
	cappedLog time.Time // when capped candidate batches were last logged
	prevStats pipeline.Stats
	ended     bool // End was called (ExitAtEnd)
	// alignWin is the window of the newest event time taken, alignUnknown
	// before any; alignIdle: alignFree is published instead (ended, or
	// idle). Events before alignNextMs do not move the position;
	// alignLimit is the limit last asked of the aligner, good for the
	// batch (a position up to it goes on without asking again).
	alignWin, alignNextMs, alignLimit int64
	alignGen                          uint64 // the aligner's gen when alignLimit was asked
	alignIdle                         bool
	lastEventAt                       time.Time // wall clock of the last batch with events
	// clockMs is the partition's clock: the newest event time taken, or
	// where Idle moved it; valid once alignWin is known.
	clockMs int64
	// unackedWins are the starts of the windows whose summaries were
	// produced and not yet acknowledged, oldest first: they hold the
	// partition's alignment position back (see alignPosition).
	unackedWins []int64
	// The progress record last sent (see sendProgress): when, its state
	// and its position.
	progSent  time.Time
	progState string
	progWin   int64
	// idleClockMs is the newest wall clock this partition, idle without
	// events, said it followed (0 if it never did): its core, once built,
	// starts with that clock (pipeline.Start.ClockMs), so that the merger
	// and the core agree on what is late.
	idleClockMs int64
	// progSnap is the partition's progress as of the worker's last look,
	// which the board sends again every beat: a worker held up (by a full
	// producer, a sink, a fetch that fails) is alive, and waited for.
	progSnap atomic.Pointer[schemas.Progress]
}

// partKind says what a partition's output is.
type partKind uint8

const (
	outWindow     partKind = iota // a PartitionWindow for keyheat.windows
	outHotKey                     // a HotKeyEvent for the registry and the sinks
	outDLQ                        // a dead letter for the DLQ
	outCandidates                 // a schemas.Candidates for keyheat.windows
)

// partOut is what a partition's output is for.
type partOut struct {
	kind    partKind
	startMs int64  // outWindow: the window's start
	id      string // outHotKey, outCandidates: the event's or batch's ID
	reason  schemas.Reason
}

func newPartWorker(s *Service, t tp, parts int32, a *aligner) *partWorker {
	ctx, cancel := context.WithCancel(context.Background())
	l := prometheus.Labels{"topic": t.topic, "partition": partitionLabel(t.partition)}
	w := &partWorker{
		s: s, tp: t, parts: parts, align: a,
		alignWin: alignUnknown, alignNextMs: math.MinInt64, alignLimit: math.MinInt64, clockMs: math.MinInt64,
		lastEventAt: s.now(),
		idPrefix:    schemas.RecordID{Kind: schemas.IDTopic, Topic: t.topic, Partition: t.partition}.Prefix(),
		wake:        make(chan struct{}, 1),
		ctx:         ctx,
		quit:        cancel,
		done:        make(chan struct{}),
		finishedCh:  make(chan struct{}),
		mRecords:    s.m.records.With(l),
		mEvents:     s.m.events.With(l),
		mLate:       s.m.late.With(l),
		mMismatch:   s.m.keyMismatch.WithLabelValues(t.topic),
		mLag:        s.m.lag.With(l),
		mCommitted:  s.m.committed.With(l),
		mPause:      s.m.paused.With(l),
		next:        -1,
		rulesGen:    s.rulesGen.Load(),
	}
	w.led = ledger.New(w.acked, w.refusedOut)
	w.alignPos.Store(alignUnknown)
	w.alignClock.Store(alignUnknown)
	w.lag.Store(lagUnknown)
	return w
}

// lagUnknown is a partition's lag before its end offset is known.
const lagUnknown = -1

// setStart hands the worker where its partition starts.
func (w *partWorker) setStart(st startInfo) {
	w.startMu.Lock()
	w.start, w.hasStart = st, true
	w.startMu.Unlock()
	w.signal()
}

func (w *partWorker) signal() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// enqueue hands the worker a polled batch. Past maxQueued batches the
// partition's fetching pauses until the worker has taken all but
// resumeQueued. In an ExitAtEnd run a batch that reaches the end pauses
// the partition for good at once: a fetch of partitions with nothing
// more to read waits at the broker, and holds up the fetches of the
// partitions that have.
func (w *partWorker) enqueue(recs []*kgo.Record) {
	end := w.end()
	w.qmu.Lock()
	w.queue = append(w.queue, recs)
	if end >= 0 && recs[len(recs)-1].Offset+1 >= end {
		w.atEnd = true
	}
	var why member.Why
	if w.atEnd {
		why |= member.AtEnd
	}
	if len(w.queue) >= maxQueued {
		why |= member.Behind
	}
	if w.s.pauses.Pause(w.s.consumer(), w.memberTP(), why) {
		w.mPause.Set(1)
	}
	w.qmu.Unlock()
	w.signal()
}

// full reports whether the worker has maxQueued batches waiting (it has
// no room for another) while its partition is fetched.
func (w *partWorker) full() bool {
	w.qmu.Lock()
	defer w.qmu.Unlock()
	return len(w.queue) >= maxQueued && w.s.pauses.Why(w.memberTP()) == 0
}

func (w *partWorker) memberTP() member.TP {
	return member.TP{Topic: w.tp.topic, Partition: w.tp.partition}
}

// end is the offset an ExitAtEnd run stops at, -1 if none or not known
// yet.
func (w *partWorker) end() int64 {
	w.startMu.Lock()
	defer w.startMu.Unlock()
	if !w.hasStart {
		return -1
	}
	return w.start.end
}

// takeBatch returns the oldest waiting batch, resuming a paused partition
// once no more than resumeQueued wait.
func (w *partWorker) takeBatch() []*kgo.Record {
	w.qmu.Lock()
	defer w.qmu.Unlock()
	if len(w.queue) == 0 {
		return nil
	}
	b := w.queue[0]
	w.queue[0] = nil
	w.queue = w.queue[1:]
	if len(w.queue) < maxQueued {
		w.s.signalRoom()
	}
	// An ended partition stays paused: ended or atEnd, it is paused
	// AtEnd too.
	if len(w.queue) <= resumeQueued && w.s.pauses.Resume(w.s.consumer(), w.memberTP(), member.Behind) {
		w.mPause.Set(0)
	}
	return b
}

func (w *partWorker) isFinished() bool {
	select {
	case <-w.finishedCh:
		return true
	default:
		return false
	}
}

// run is the worker's goroutine.
func (w *partWorker) run() {
	defer close(w.done)
	// Live, the tick lets the core hear the wall clock (idleEvery); in
	// both modes it sends the partition's progress at least every beat.
	every := idleEvery
	if b := w.s.board; b != nil {
		every = min(every, b.beat)
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	w.sendProgress(true)
	for {
		select {
		case <-w.ctx.Done():
			return
		case <-w.wake:
			if !w.started && !w.loadStart() {
				continue
			}
			for b := w.takeBatch(); b != nil && w.ctx.Err() == nil; b = w.takeBatch() {
				w.handle(b)
				w.applyAcks()
			}
		case <-w.led.Ready():
			w.applyAcks()
		case <-tick.C:
			if !w.s.cfg.ExitAtEnd {
				now := w.s.now()
				w.checkIdle(now)
				if w.core != nil && !w.ended {
					w.idle(now)
				}
				w.flushArchive(false)
			}
		}
		if w.ctx.Err() != nil {
			return
		}
		w.checkRules()
		w.checkEnd()
		w.publish()
		w.sendProgress(false)
	}
}

// loadStart takes the start info once onFetched has set it.
func (w *partWorker) loadStart() bool {
	w.startMu.Lock()
	st, ok := w.start, w.hasStart
	w.startMu.Unlock()
	if ok {
		w.st, w.started = st, true
		// The idle timeout counts from when the partition could first be
		// read, not from the assignment: under a starved CPU the offsets
		// can take longer than the timeout to arrive.
		w.lastEventAt = w.s.now()
	}
	return ok
}

// caughtUp reports whether the partition has nothing left to read, as
// far as the last fetch knows: it started, no batch waits, and the end
// offset is known and was reached.
func (w *partWorker) caughtUp() bool {
	if !w.started {
		return false
	}
	w.qmu.Lock()
	queued := len(w.queue)
	w.qmu.Unlock()
	return queued == 0 && w.lag.Load() == 0
}

// progressEvery bounds how often a partition whose position moves sends
// a progress record; the board sends it again every beat besides.
const progressEvery = 100 * time.Millisecond

// sendProgress takes the partition's progress (schemas.Progress) as the
// board will send it every beat, and sends it at once with force, or when
// its position or state changed and progressEvery passed.
func (w *partWorker) sendProgress(force bool) {
	b := w.s.board
	if b == nil {
		return
	}
	now := w.s.now()
	p := schemas.Progress{Version: schemas.ProgressVersion, Group: w.s.cfg.Group, Member: b.member, AtMs: now.UnixMilli(),
		Topic: w.tp.topic, Partition: w.tp.partition, Partitions: w.parts, Offset: w.position()}
	switch {
	case w.ended:
		p.State, p.ClockMs = schemas.ProgressEnded, w.clockMs
	case w.alignIdle:
		p.State = schemas.ProgressIdle
		if c, ok := w.coreClock(); ok {
			p.ClockMs = c
		} else {
			// Never an event. Once quiet for the idle timeout, it has
			// none in what the other partitions have passed: its clock is
			// the lowest of theirs (not beyond the wall clock), and its
			// own first events, if older, are late. Until then (nothing
			// to read when assigned), or while no other partition has a
			// clock, it holds nothing back, but the merger waits for it.
			p.NoEvents = true
			if now.Sub(w.lastEventAt) >= w.s.cfg.Pipeline.IdleTimeout {
				if low, ok := w.align.lowClock(w); ok {
					w.idleClockMs = max(w.idleClockMs, min(low, now.UnixMilli()))
				}
			}
			p.ClockMs = w.idleClockMs
		}
	case w.alignWin == alignUnknown:
		p.State = schemas.ProgressWaiting
	default:
		p.State, p.ClockMs = schemas.ProgressReading, w.clockMs
		p.PositionMs = w.alignPosition() * w.align.windowMs
	}
	snap := p
	w.progSnap.Store(&snap)
	pos := w.alignPosition()
	changed := p.State != w.progState || pos != w.progWin
	if !force && !(changed && now.Sub(w.progSent) >= progressEvery) {
		return
	}
	w.progSent, w.progState, w.progWin = now, p.State, pos
	b.sendPartition(w.ctxOrBackground(), p)
}

// coreClock is the core's clock, when it has one.
func (w *partWorker) coreClock() (int64, bool) {
	if w.core == nil {
		return 0, false
	}
	return w.core.ClockMs()
}

// handle runs one polled batch through decoding and the core.
func (w *partWorker) handle(recs []*kgo.Record) {
	if w.ended || w.refused {
		return // ExitAtEnd: past the end, or refused; the partition is paused
	}
	w.checkRules() // rules reloaded since the last batch apply to this one
	s := w.s
	nowMs := s.now().UnixMilli()
	before := w.coreStats()
	var events int
	defer func() {
		if events > 0 {
			w.lastEventAt = s.now()
		}
		// The decoded events may point into the batch's records (see
		// decode), whose Values share franz-go's fetch buffer: kept in
		// the scratch until the partition's next record, the last one
		// would keep that whole buffer alive, for ever on a partition
		// gone quiet.
		clear(w.evs[:cap(w.evs)])
	}()
	// Positions of partitions assigned since the last batch count from
	// this one on.
	w.alignLimit = math.MinInt64
	stop := w.ctx.Done()
	for _, r := range recs {
		select {
		case <-stop:
			return
		default:
		}
		if w.st.end >= 0 && r.Offset >= w.st.end {
			break
		}
		if w.archive == nil && s.cfg.Archive != nil {
			if err := w.openArchive(r.Offset); err != nil {
				s.fail(err)
				return
			}
		}
		if r.Attrs.IsControl() {
			w.advance(r.Offset + 1)
			continue
		}
		evs, err := w.decode(r, nowMs)
		switch {
		case errors.Is(err, logparse.ErrSkip):
			s.m.skipped.Inc()
			w.advance(r.Offset + 1)
			continue
		case err != nil:
			w.deadLetter(r, err, nowMs)
			continue
		}
		if ts := latest(evs); ts >= w.alignNextMs {
			if !w.await(ts) {
				return
			}
		}
		if w.core == nil {
			if err := w.newCore(r.Offset, r.Key, evs[0].Key); err != nil {
				s.fail(err)
				return
			}
		}
		if w.judgedKeyed {
			if i := notKeyedAt(r.Key, evs); i >= 0 && !w.notKeyed(r, evs[i].Key) {
				return
			}
		}
		for i := range evs {
			w.core.Process(&evs[i], r.Offset, &w.out)
		}
		events += len(evs)
		if w.archive != nil {
			if err := w.archive.Append(r.Offset, evs...); err != nil {
				s.fail(fmt.Errorf("detect: archive %s/%d: %w", w.tp.topic, w.tp.partition, err))
				return
			}
		}
		w.next = r.Offset + 1
		if len(w.out.Windows)+len(w.out.HotKeys)+len(w.out.Candidates) > 0 {
			// At once, not at the end of the batch: a hot key's delay is
			// what the registry is for.
			w.emit()
		}
	}
	w.mRecords.Add(float64(len(recs)))
	w.mEvents.Add(float64(events))
	w.countStats(before)
}

// decode turns a record into events: an AccessEvent in either codec, or
// the events of a raw log line; every event is validated (Service.check).
// A record is used whole or not at all.
func (w *partWorker) decode(r *kgo.Record, nowMs int64) ([]schemas.AccessEvent, error) {
	s := w.s
	if cap(w.evs) == 0 {
		w.evs = make([]schemas.AccessEvent, 0, 4)
	}
	evs := w.evs[:0]
	var err error
	if s.parser == nil {
		evs = evs[:1]
		evs[0] = schemas.AccessEvent{}
		if s.cfg.Archive == nil {
			// The core copies what it keeps beyond the event, and
			// franz-go never reuses a record's buffer: the strings may
			// point into it. The archive keeps its events' strings until
			// it rolls a file, so with it they are copied, as before.
			err = schemas.DecodeAnyShared(r.Value, &evs[0])
		} else {
			err = schemas.DecodeAny(r.Value, &evs[0])
		}
	} else {
		line := bytes.TrimSuffix(bytes.TrimSuffix(r.Value, []byte{'\n'}), []byte{'\r'})
		var dropped logparse.Fields
		evs, dropped, err = s.parser.Parse(evs, line)
		for f := range dropped.All() {
			s.m.dropped.WithLabelValues(f.String()).Inc()
		}
		for i := range evs {
			if evs[i].TimeMs == 0 {
				evs[i].TimeMs = r.Timestamp.UnixMilli()
			}
		}
	}
	producedMs := r.Timestamp.UnixMilli()
	for i := 0; err == nil && i < len(evs); i++ {
		err = s.check(&evs[i], producedMs, nowMs)
	}
	w.evs = evs
	w.tally.count(len(evs), err)
	return evs, err
}

// newCore builds the core at the partition's first event, deciding
// whether the partition is keyed from it when the configuration does not
// say.
func (w *partWorker) newCore(firstOffset int64, recordKey []byte, eventKey string) error {
	s := w.s
	switch s.cfg.Keyed {
	case KeyedTrue:
		w.keyed = true
	case KeyedFalse:
		w.keyed = false
	default:
		w.keyed = bytes.Equal(recordKey, []byte(eventKey))
	}
	w.judgedKeyed = w.keyed
	s.keyedLog.decided(w.tp.topic, w.tp.partition, firstOffset, w.keyed, recordKey, eventKey)
	return w.buildCore(firstOffset)
}

// notKeyed handles record r of a partition judged keyed whose key is not
// the access key of its event accessKey, and reports whether r is to be
// counted. Every such record is counted in keyheat_detect_key_mismatch_total.
//
// With detect.keyed: auto the partition switches to not keyed at the
// first: its core marks the windows open now and every later one not
// keyed (pipeline.Partition.Unkey), so the merger bounds their keys over
// all the topic's partitions instead of reporting this partition's count
// as exact. The windows it already emitted held only keyed records. No
// restart is needed, and nothing is read twice.
//
// With detect.keyed: true the user said every record is keyed, and it is
// not: going on would either lie (exact-looking counts that undercount)
// or silently do something else than configured. The service stops with
// a *KeyMismatchError instead; r is not counted nor passed, so the commit
// point stays before it (only acknowledged windows move it) and a run
// with the setting fixed reads it again.
func (w *partWorker) notKeyed(r *kgo.Record, accessKey string) bool {
	s := w.s
	w.mMismatch.Inc()
	if s.cfg.Keyed == KeyedTrue {
		w.refused = true
		s.fail(&KeyMismatchError{Topic: w.tp.topic, Partition: w.tp.partition, Offset: r.Offset,
			RecordKey: string(r.Key), AccessKey: strings.Clone(accessKey)})
		return false
	}
	if w.keyed {
		w.keyed = false
		w.core.Unkey()
		s.keyedLog.unkeyed(w.tp.topic, w.tp.partition, r.Offset, r.Key, accessKey)
	}
	return true
}

func (w *partWorker) buildCore(firstOffset int64) error {
	s := w.s
	src := pipeline.Source{Topic: w.tp.topic, Partition: w.tp.partition, Partitions: w.parts, Keyed: w.keyed}
	start := pipeline.Start{Offset: firstOffset, ClockMs: w.idleClockMs}
	if w.st.committed >= 0 {
		start = pipeline.Start{Offset: w.st.committed, Metadata: w.st.meta, ClockMs: w.idleClockMs}
	}
	core, err := pipeline.NewPartition(s.cfg.Pipeline, src, start)
	if err != nil && start.Metadata != "" {
		// Not ours (another consumer committed here), or from another
		// version or window length: start from the offset alone.
		s.log.Warn("commit metadata not usable; windows open at the committed offset are emitted again from partial counts",
			"topic", w.tp.topic, "partition", w.tp.partition, "metadata", start.Metadata, "err", err)
		start.Metadata = ""
		core, err = pipeline.NewPartition(s.cfg.Pipeline, src, start)
	}
	if err != nil {
		return fmt.Errorf("detect: partition %s/%d: %w", w.tp.topic, w.tp.partition, err)
	}
	w.core = core
	if s.rulesGen.Load() > 0 {
		// Rules reloaded since start: the core compiled the configured ones.
		if err := core.SetRules(s.rules.Load()); err != nil {
			return fmt.Errorf("detect: partition %s/%d: reloaded rules: %w", w.tp.topic, w.tp.partition, err)
		}
	}
	w.prevStats = core.Stats()
	s.log.Debug("partition started", "topic", w.tp.topic, "partition", w.tp.partition, "offset", start.Offset, "metadata", start.Metadata, "keyed", w.keyed)
	return nil
}

func (w *partWorker) openArchive(firstOffset int64) error {
	s := w.s
	start := firstOffset
	if w.st.committed >= 0 {
		start = w.st.committed
	}
	pw, err := s.cfg.Archive.Partition(w.ctx, w.tp.topic, w.tp.partition, start)
	if err != nil {
		return fmt.Errorf("detect: archive %s/%d: %w", w.tp.topic, w.tp.partition, err)
	}
	hw, err := s.cfg.Archive.HotKeys(w.tp.topic + "-" + partitionLabel(w.tp.partition))
	if err != nil {
		return errors.Join(fmt.Errorf("detect: archive hot keys of %s/%d: %w", w.tp.topic, w.tp.partition, err), pw.Close())
	}
	w.archive, w.hotArch, w.lastFlush = pw, hw, s.now()
	w.hotLed = ledger.NewArchive(w.led, hw)
	return nil
}

// advance moves the partition's position past a record that held no
// event (a control record, a dead letter, a line with no access).
func (w *partWorker) advance(next int64) {
	w.next = next
	if w.archive != nil {
		if err := w.archive.Advance(next); err != nil {
			w.s.fail(fmt.Errorf("detect: archive %s/%d: %w", w.tp.topic, w.tp.partition, err))
		}
	}
}

// deadLetter produces r's dead letter. The record's offset is held back
// from commits until the DLQ topic has it.
func (w *partWorker) deadLetter(r *kgo.Record, cause error, nowMs int64) {
	s := w.s
	d := schemas.NewDeadLetter(nowMs, schemas.KafkaSource(w.tp.topic, w.tp.partition, r.Offset), cause, r.Value, s.cfg.DLQMaxRaw)
	off, reason := r.Offset, d.Reason
	rec := &kgo.Record{Topic: s.cfg.Topics.DLQ, Value: schemas.AppendDeadLetter(nil, &d),
		Headers: []kgo.RecordHeader{{Key: schemas.HeaderRecordID, Value: schemas.AppendRecordID(nil, w.idPrefix, off, 0)}}}
	t := w.led.AddHeld(partOut{kind: outDLQ, reason: reason}, 1, off)
	s.produce(w.ctx, rec, w.led.Sent(t))
	w.advance(off + 1)
}

// emit publishes what the core produced: summaries to the windows topic,
// hot-key events to the registry and the sinks. The core hears of each
// once every destination acknowledged it.
func (w *partWorker) emit() {
	s := w.s
	nowMs := s.now().UnixMilli()
	for i := range w.out.Windows {
		win := &w.out.Windows[i]
		// Binary: the merger reads a busy window's summary (a count per
		// Redis Cluster slot, a 16 KiB sketch) 50 times faster than its
		// JSON (schemas.BenchmarkPartitionWindow), and Kafka carries a
		// ninth of the bytes.
		v := win.AppendBinary(w.winHint.buf())
		w.winHint.saw(v)
		startMs := win.StartMs
		w.unackedWins = append(w.unackedWins, startMs)
		t := w.led.Add(partOut{kind: outWindow, startMs: startMs}, 1)
		s.produce(w.ctx, &kgo.Record{Topic: s.cfg.Topics.Windows, Key: []byte(win.ID), Value: v}, w.led.Sent(t))
	}
	for i := range w.out.HotKeys {
		h := w.out.HotKeys[i] // a copy the sinks may keep
		h.DetectedMs = nowMs
		o := partOut{kind: outHotKey, id: h.ID}
		publishHotKey(w.ctx, s, w.led, w.hotLed, &h, func(need int) ledger.Ticket { return w.led.Add(o, need) }, "archive hot keys")
	}
	for i := range w.out.Candidates {
		// To the merger, beside the summaries: its cluster stage decides
		// the keys of a topic not keyed by access key.
		c := &w.out.Candidates[i]
		v, err := c.AppendJSON(nil)
		if err != nil {
			s.fail(fmt.Errorf("detect: %w", err))
			return
		}
		t := w.led.Add(partOut{kind: outCandidates, id: c.ID}, 1)
		s.produce(w.ctx, &kgo.Record{Topic: s.cfg.Topics.Windows, Key: []byte(c.ID), Value: v}, w.led.Sent(t))
	}
	w.out.Reset()
}

// flushArchive makes the hot-key events appended to the archive durable,
// every ArchiveFlush or at once with force, and counts them acknowledged.
func (w *partWorker) flushArchive(force bool) {
	if w.hotArch == nil || w.hotLed.Unflushed() == 0 || !force && w.s.now().Sub(w.lastFlush) < w.s.cfg.ArchiveFlush {
		return
	}
	if err := w.hotLed.Flush(w.ctxOrBackground()); err != nil {
		w.s.fail(fmt.Errorf("detect: archive hot keys of %s/%d: %w", w.tp.topic, w.tp.partition, err))
		return
	}
	w.lastFlush = w.s.now()
}

// ctxOrBackground is the worker's context while it runs; a drain after
// stop runs on the callback's.
func (w *partWorker) ctxOrBackground() context.Context {
	if w.ctx.Err() != nil {
		return context.Background()
	}
	return w.ctx
}

// applyAcks hands the acknowledgements that arrived to the core and the
// dead-letter hold.
func (w *partWorker) applyAcks() {
	// The records read first, so a dead letter is never counted before its
	// record (see readStats.snapshot).
	w.s.read.add(&w.tally)
	w.led.Apply()
}

// acked hears of an output every destination acknowledged.
func (w *partWorker) acked(o partOut) {
	s := w.s
	switch o.kind {
	case outWindow:
		s.m.windows.Inc()
		if w.core != nil {
			w.core.Acked(o.startMs)
		}
		if i := slices.Index(w.unackedWins, o.startMs); i >= 0 {
			w.unackedWins = slices.Delete(w.unackedWins, i, i+1)
			if i == 0 && !w.alignIdle && w.alignWin != alignUnknown {
				w.align.set(w, w.alignPosition())
			}
		}
	case outHotKey:
		if w.core != nil {
			w.core.AckedHotKey(o.id)
		}
	case outCandidates:
		if w.core != nil {
			w.core.AckedCandidates(o.id)
		}
	case outDLQ:
		s.m.dlq.WithLabelValues(string(o.reason)).Inc()
		s.read.deadLetter(o.reason)
	}
}

// refusedOut stops the service on an output refused for good, unless the
// partition was given up (its produce calls were cancelled).
func (w *partWorker) refusedOut(o partOut, err error) {
	if w.ctx.Err() != nil {
		return
	}
	w.s.fail(fmt.Errorf("detect: partition %s/%d: an output was refused for good (%s): %w", w.tp.topic, w.tp.partition, kindName(o.kind), err))
}

func kindName(k partKind) string {
	switch k {
	case outWindow:
		return "window summary"
	case outHotKey:
		return "hot-key event"
	case outDLQ:
		return "dead letter"
	case outCandidates:
		return "candidate batch"
	}
	return "output"
}

// checkRules swaps in rules reloaded since the last look.
func (w *partWorker) checkRules() {
	gen := w.s.rulesGen.Load()
	if gen == w.rulesGen {
		return
	}
	w.rulesGen = gen
	if w.core == nil {
		return // built with them
	}
	if err := w.core.SetRules(w.s.rules.Load()); err != nil {
		w.s.log.Error("reloaded rules refused; the partition keeps its rules", "topic", w.tp.topic, "partition", w.tp.partition, "err", err)
	}
}

// position is the offset the partition reached: after the last record
// handled, or where it starts.
func (w *partWorker) position() int64 {
	if w.next >= 0 {
		return w.next
	}
	return w.st.first
}

// checkEnd ends the partition once an ExitAtEnd run reached its end:
// every window closes, and once everything is acknowledged the partition
// is finished.
func (w *partWorker) checkEnd() {
	if !w.started || w.st.end < 0 || w.isFinished() {
		return
	}
	if !w.ended {
		pos := w.position()
		if pos < 0 || pos < w.st.end {
			return
		}
		w.ended = true
		w.alignIdle = true
		w.align.set(w, alignFree)
		w.sendProgress(true)
		w.qmu.Lock()
		w.s.pauses.Pause(w.s.consumer(), w.memberTP(), member.AtEnd)
		w.queue = nil
		w.qmu.Unlock()
		if w.core == nil && w.st.committed >= 0 && w.st.meta != "" {
			// Nothing read since the commit, but the windows the last run
			// had not published are still owed.
			w.keyed = w.s.cfg.Keyed != KeyedFalse
			if err := w.buildCore(w.st.committed); err != nil {
				w.s.fail(err)
				return
			}
		}
		if w.core != nil {
			w.core.End(&w.out)
			w.emit()
		}
	}
	if w.led.Pending() > 0 {
		return
	}
	w.flushArchive(true)
	if w.archive != nil {
		if err := w.archive.Flush(w.ctx); err != nil {
			// A revoke cancels w.ctx: the partition's new owner reads
			// again from the commit, which this flush never passed.
			if w.ctx.Err() == nil {
				w.s.fail(fmt.Errorf("detect: archive %s/%d: %w", w.tp.topic, w.tp.partition, err))
			}
			return
		}
	}
	w.publish()
	close(w.finishedCh)
	w.s.checkFinished()
}

// publish computes the commit point: the core's (its oldest window or hot
// key not acknowledged, with its metadata), held back further by the
// oldest dead letter not acknowledged and by the archive's durable
// offset.
func (w *partWorker) publish() {
	var p pipeline.CommitPoint
	switch {
	case w.core != nil:
		p = w.core.CommitPoint()
	case w.next >= 0:
		// Only records without events so far: the committed metadata
		// still describes everything before next.
		p = pipeline.CommitPoint{Offset: w.next, Metadata: w.st.meta}
	default:
		return
	}
	if f, ok := w.led.Floor(); ok {
		p.Offset = min(p.Offset, f) // the oldest dead letter not acknowledged
	}
	if w.archive != nil {
		p.Offset = min(p.Offset, w.archive.Durable())
	}
	if old := w.point.Load(); old != nil && *old == p {
		return
	}
	w.point.Store(&p)
}

// countStats adds what the core counted since before to the metrics.
func (w *partWorker) countStats(before pipeline.Stats) {
	if w.core == nil {
		return
	}
	now := w.core.Stats()
	w.mLate.Add(float64(now.Late - before.Late))
	c := w.s.m.core
	for _, d := range []struct {
		name    string
		now, bf uint64
	}{
		{"warm_up", now.WarmUp, before.WarmUp}, {"dropped", now.Dropped, before.Dropped},
		{"truncated_keys", now.TruncatedKeys, before.TruncatedKeys}, {"whitelisted", now.Whitelisted, before.Whitelisted},
		{"apps_folded", now.AppsFolded, before.AppsFolded}, {"alerts_warm_up", now.AlertsWarmUp, before.AlertsWarmUp},
		{"ring_admitted", now.RingAdmitted, before.RingAdmitted}, {"ring_refused", now.RingRefused, before.RingRefused},
		{"ring_evicted", now.RingEvicted, before.RingEvicted},
		{"alerts_dropped", now.AlertsDropped, before.AlertsDropped},
		{"candidate_batches", now.Candidates, before.Candidates},
		{"candidate_keys", now.CandidateKeys, before.CandidateKeys},
		{"candidate_keys_capped", now.CandidatesCapped, before.CandidatesCapped},
	} {
		if d.now > d.bf {
			c.WithLabelValues(d.name).Add(float64(d.now - d.bf))
		}
	}
	if now.CandidatesCapped > before.CandidatesCapped && w.s.now().Sub(w.cappedLog) >= time.Minute {
		w.cappedLog = w.s.now()
		w.s.log.Warn("candidate batches capped: keys over the local pre-threshold were left out and the batches' floor rose, "+
			"so cluster bounds are looser and a hot key may be alerted late or not at all under cluster_bound: lower; raise pipeline.detect.max_candidates",
			"topic", w.tp.topic, "partition", w.tp.partition, "left_out", now.CandidatesCapped-before.CandidatesCapped,
			"max_candidates", w.s.cfg.Pipeline.Detect.MaxCandidates)
	}
	w.prevStats = now
}

func (w *partWorker) coreStats() pipeline.Stats {
	if w.core == nil {
		return w.prevStats
	}
	return w.core.Stats()
}

// stop ends the run goroutine and waits for it.
func (w *partWorker) stop() {
	w.quit()
	<-w.done
}

// drain, after stop, waits for the outputs in flight until ctx ends,
// hands their acknowledgements to the core, makes the archive durable,
// and publishes the final commit point.
func (w *partWorker) drain(ctx context.Context) {
	w.s.read.add(&w.tally)
	if !w.led.Wait(ctx) {
		w.s.log.Warn("outputs still in flight at the commit; a restart publishes them again", "topic", w.tp.topic,
			"partition", w.tp.partition, "pending", w.led.Pending())
		w.publish()
		return
	}
	if w.hotArch != nil {
		_ = w.hotLed.Flush(ctx) // on an error the events stay held
	}
	if w.archive != nil {
		if err := w.archive.Flush(ctx); err != nil {
			w.s.log.Warn("archive flush before the commit", "topic", w.tp.topic, "partition", w.tp.partition, "err", err)
		}
	}
	w.publish()
}

// close releases the partition's archive writers and metrics. A lost
// partition's writers are closed too, which rolls what they buffered:
// durable but not committed, so the next owner reads those offsets again
// (the archive has no way yet to drop a buffer unwritten).
func (w *partWorker) close() {
	w.qmu.Lock()
	w.s.pauses.Forget(w.s.consumer(), w.memberTP())
	w.queue = nil
	w.qmu.Unlock()
	if w.hotArch != nil {
		if err := w.hotArch.Close(); err != nil {
			w.s.log.Warn("close archive hot keys", "topic", w.tp.topic, "partition", w.tp.partition, "err", err)
		}
	}
	if w.archive != nil {
		if err := w.archive.Close(); err != nil {
			w.s.log.Warn("close archive partition", "topic", w.tp.topic, "partition", w.tp.partition, "err", err)
		}
	}
	w.s.m.forget(w.tp.topic, w.tp.partition)
}
