package pipeline

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"reflect"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/keyheat/keyheat/schemas"
	"github.com/keyheat/keyheat/sketch"
)

// MergerConfig configures a Merger: its options and what it runs with.
type MergerConfig struct {
	MergerOptions
	// Window is the report window's length, the same on every partition;
	// a summary of another length is refused.
	Window time.Duration
	// Lateness is the partitions' allowed lateness: a partition that never
	// had an event and follows the wall clock (PartitionStatus.IdleClockMs)
	// has none in the windows ending by that clock minus Lateness.
	Lateness time.Duration
	// Topics are the events topics expected from the start, with their
	// partition counts, as the service knows them from its subscription.
	// Without them a topic is expected from its first summary on, so a
	// window could complete before a slower topic's first summary arrives.
	// Summaries may name more topics and raise the counts.
	Topics map[string]int32
	// Threshold gives each key's hot threshold for the reports' advice;
	// nil gives no advice.
	Threshold ThresholdFunc
	// SplitCapacity is the write rate, per second, one physical key takes
	// (DetectOptions.SplitCapacity, which the alerts use too): a
	// write-heavy hot key is advised to split into enough keys that each
	// stays below it. 0 means the default detect options' value.
	SplitCapacity float64
	// DoneThroughMs resumes after a restart: windows ending at or before it
	// were reported and acknowledged by an earlier run (its DoneThroughMs,
	// kept with the committed offset), so their summaries, which the
	// restart reads again, are dropped rather than reported a second time.
	// 0 on a first start.
	DoneThroughMs int64
	// Registerer receives the merger's metrics (MergerStats); nil
	// registers none.
	Registerer prometheus.Registerer
	// Logger reports conflicting duplicates; nil discards.
	Logger *slog.Logger
}

// MergedWindow is one report window's output: the cluster report first,
// then one report per app, by app name.
type MergedWindow struct {
	StartMs int64
	EndMs   int64
	Reports []schemas.WindowReport
}

// Merger turns the partitions' window summaries into window reports. It
// holds the summaries of each window until every expected partition has
// reported it, then merges them; windows are reported in order, each once.
//
// Which partitions are expected: what SetExpected said last (live, the
// topics the detect group is assigned); before it, partitions
// 0..Partitions−1 of every topic in MergerConfig.Topics or named by any
// summary, Partitions being the largest count configured or carried by a
// summary of that topic. A
// partition has nothing more to say about a window W once it reported W,
// or reported a later window without W, or marked an earlier window Final.
// The second rule relies on a partition emitting its windows in order onto
// the single-partition windows topic, so its summaries arrive in that
// order (a re-sent duplicate may come any time later): a partition that
// skipped W had no events in W (it started later, or --from skipped them).
// A topic neither configured nor named by a summary read since the merger
// started is not expected.
//
// The merger waits on progress, not on the clock: a partition that is
// slow (a backfill, a restart over a backlog, a starved machine) is
// waited for however slowly it moves, as Flink fires a window once the
// slowest of its inputs' watermarks passed it. Only two things release a
// window with partitions missing, Partial with them named: every missing
// partition is silent (Ready's status says so: the service heard nothing
// from it, no summary and no progress record, for its partition timeout;
// its owner died or it is stuck), or more than MaxPendingWindows windows
// are held (a memory bound that alignment keeps the partitions from
// reaching; a warning names the missing partitions). Releasing a window
// releases every earlier one, to keep the order.
//
// Empty summaries (no event, no late event) say only how far their
// partition has come: they are not held and do not count towards
// MaxPendingWindows, and a window no partition had an event in is not
// reported. A partition jumping over a gap in event time therefore costs
// the merger nothing, however many empty windows it closes.
//
// A summary for a window already reported is a duplicate (a partition
// restarted from its commit sends again what it had sent; counted,
// dropped) unless its partition was missing from that report: then its
// events are in no report, and it is counted as Late (its events in
// LateEvents), logged at most every ten seconds, and dropped. No report is
// issued twice.
//
// Memory: a held summary costs about its decoded size: ~100 bytes plus the
// key per listed key, 16 bytes per non-zero slot (up to 256 KiB per app),
// its distinct sketch (up to 2^precision bytes) and, when not keyed, its
// Count-Min sketch (depth × width × 8 bytes, 64 KiB by default). The
// merger holds at most MaxPendingWindows × partitions of them, and per
// partition a few ranges of windows it was reported missing from. It
// keeps the Count-Min sketches of the last window merged, at most, to
// decode the next summaries' into.
//
// The merger is pure: no I/O, no goroutines, no clock. The same summaries,
// interleaved across partitions in any way and with duplicates, give
// byte-identical reports, as long as no window was released for a silent
// partition or by the cap. A Merger is not safe for concurrent use.
type Merger struct {
	cfg      MergerConfig
	windowMs int64
	layout   *nodeLayout
	log      *slog.Logger
	stats    *MergerStats

	topics map[string]*topicState
	// expected, once SetExpected was called, is what is waited for;
	// until then every topic of topics is.
	expected map[string]int32
	// lastStatus is the status Ready had last, for windows the cap
	// releases in Add.
	lastStatus StatusFunc
	pending    map[int64]*pendingWindow // by StartMs
	order      []int64                  // StartMs of pending windows, ascending
	queued     []MergedWindow           // released by the cap, returned by the next Ready

	emittedThroughMs int64 // end of the last window reported, by this run or before
	unacked          []emittedWindow
	doneThroughMs    int64 // end of the acknowledged prefix of reported windows
	nextOffset       int64 // highest offset added + 1; -1 before any
	// Late summaries logged: when last (nowMs), and those dropped since
	// without a log line.
	lateLoggedMs     int64
	lateLogged       bool
	lateUnlogged     int64
	lateUnloggedEvts uint64
	// Windows reported without silent partitions: the partitions named
	// last, and the windows reported since that log line.
	silentLast     []string
	silentUnlogged int
	hllPrecision   int                     // of every Distinct sketch; 0 until the first
	slotScratch    []uint64                // events per slot while merging; all 0 between uses
	slotTouched    [RedisSlots / 64]uint64 // bitmap of the slots of slotScratch made non-zero
	scratch        mergeScratch
	ranker         ranker
	// guaranteeScratch and scopeKeys are buffers reused by every window's
	// reports; scopeKeys holds the key slices of scopes merged before,
	// cleared, to gather the next windows' keys in.
	guaranteeScratch guaranteeScratch
	scopeKeys        [][]schemas.KeyCount
	// seenTab finds keys listed twice in a Top (decode): an
	// open-addressing table of indices into it + 1.
	seenTab []int32
	// freeCMS are Count-Min sketches of summaries merged or dropped,
	// decoded into again by the next summaries (a window of 1,000
	// unkeyed partitions decodes 64 MiB of them): at most as many as the
	// last window merged released, so a spike does not stay pinned.
	freeCMS []*sketch.CountMin
	// pruneMin is the listed entries (with repeats) from which an app's
	// keys are ruled out before the fold when they can be (prune); tests
	// change it to hold both ways to the same reports.
	pruneMin int
}

type topicState struct {
	partitions int32
	parts      map[int32]*partProgress
	// sinceExpect: a summary of the topic came after the last SetExpected,
	// which did not list it. The group's description may predate the
	// member that reads it, so it stays expected until a later one leaves
	// it out.
	sinceExpect bool
}

// partProgress is what the merger knows of one partition's progress.
type partProgress struct {
	lastStartMs int64 // the latest window it reported
	lastFinal   bool  // and whether that summary was Final
	// missed are the windows reported without this partition, as
	// ascending, disjoint [from, to) ranges of start times, the oldest
	// dropped past maxMissedRanges: what its late summaries would have
	// counted in.
	missed []msRange
}

type msRange struct{ from, to int64 }

// maxMissedRanges bounds the ranges a partition's missed windows are
// remembered in. A partition given up on misses consecutive windows, one
// range; a partition that comes and goes adds one per absence.
const maxMissedRanges = 64

// doneWith reports whether the partition will not report window startMs
// (or already did: a summary with events is held, an empty one is not).
func (p *partProgress) doneWith(startMs int64) bool {
	return p.lastStartMs >= startMs || (p.lastFinal && p.lastStartMs < startMs)
}

// miss records that the window startMs (of length windowMs) was reported
// without the partition.
func (p *partProgress) miss(startMs, windowMs int64) {
	if n := len(p.missed); n > 0 && p.missed[n-1].to == startMs {
		p.missed[n-1].to = startMs + windowMs
		return
	}
	p.missed = append(p.missed, msRange{startMs, startMs + windowMs})
	if len(p.missed) > maxMissedRanges {
		p.missed = p.missed[1:]
	}
}

// wasMissed reports whether the window startMs was reported without the
// partition (as far as the ranges kept remember).
func (p *partProgress) wasMissed(startMs int64) bool {
	for _, r := range p.missed {
		if startMs >= r.from && startMs < r.to {
			return true
		}
	}
	return false
}

// PartitionStatus is what the service running a merger knows of an
// events partition besides its summaries: from the progress records
// every detect instance publishes for the partitions it holds.
type PartitionStatus struct {
	// Silent: nothing was heard of the partition, no progress record, for
	// the service's partition timeout: its owner died, or it is stuck.
	// Windows are then reported without it.
	Silent bool
	// IdleClockMs, when positive: the partition never had an event and is
	// idle, its clock following the wall clock to this time; it has no
	// event in the windows that end by IdleClockMs − Lateness.
	IdleClockMs int64
}

// StatusFunc tells the merger a partition's status (see Ready).
type StatusFunc func(topic string, partition int32) PartitionStatus

type mergePart struct {
	topic     string
	partition int32
}

type pendingWindow struct {
	startMs   int64
	minOffset int64 // lowest input offset of its summaries
	parts     map[mergePart]*heldSummary
}

// heldSummary is a held PartitionWindow with its sketches decoded (and the
// encoded bytes dropped, so a pending summary holds one copy of each).
type heldSummary struct {
	w    *schemas.PartitionWindow
	apps []decodedApp // parallel to w.Apps
}

type decodedApp struct {
	// distinct refers to the app window's encoded Distinct (the merger
	// keeps the summary it was given) when it is dense: held so, it costs
	// no decoded copy, and folds faster into a report's union.
	distinct *sketch.CardinalityBlob // nil when the app window carried none
	cms      *sketch.CountMin        // nil when the app window carried none
	// hashes are the sketch.Hash of every listed key, list by list (Top,
	// Big, TopReads, TopWrites, TopLatency): hashed once, they check Top
	// for repeats here and place the keys when the window is merged.
	hashes [numLists][]uint64
}

type emittedWindow struct {
	startMs   int64
	minOffset int64
	acked     bool
}

// NewMerger validates cfg and returns an empty Merger.
func NewMerger(cfg MergerConfig) (*Merger, error) {
	if err := cfg.MergerOptions.Validate(); err != nil {
		return nil, fmt.Errorf("merger options: %w", err)
	}
	if cfg.Window < time.Millisecond || cfg.Window%time.Millisecond != 0 {
		return nil, fmt.Errorf("merger: window %v, want a positive whole number of milliseconds", cfg.Window)
	}
	if cfg.Lateness < 0 {
		return nil, fmt.Errorf("merger: lateness %v, want 0 or more", cfg.Lateness)
	}
	switch {
	case cfg.SplitCapacity == 0:
		cfg.SplitCapacity = DefaultOptions().Detect.SplitCapacity
	case !(cfg.SplitCapacity > 0) || math.IsInf(cfg.SplitCapacity, 0):
		return nil, fmt.Errorf("merger: split capacity %v, want a positive number of writes per second", cfg.SplitCapacity)
	}
	layout, err := cfg.RedisCluster.layout()
	if err != nil {
		return nil, fmt.Errorf("merger options: redis_cluster.%w", err) // unreachable: Validate checked it
	}
	m := &Merger{
		cfg:              cfg,
		windowMs:         cfg.Window.Milliseconds(),
		layout:           layout,
		log:              cfg.Logger,
		stats:            &MergerStats{},
		topics:           map[string]*topicState{},
		pending:          map[int64]*pendingWindow{},
		emittedThroughMs: cfg.DoneThroughMs,
		doneThroughMs:    cfg.DoneThroughMs,
		nextOffset:       -1,
		pruneMin:         defaultPruneMin,
	}
	if m.log == nil {
		m.log = slog.New(slog.DiscardHandler)
	}
	for topic, n := range cfg.Topics {
		if topic == "" || n < 1 || n > MaxMergePartitions {
			return nil, fmt.Errorf("merger: topic %q with %d partitions, want a name and 1..%d partitions", topic, n, MaxMergePartitions)
		}
		m.topics[topic] = &topicState{partitions: n, parts: map[int32]*partProgress{}}
	}
	if err := m.stats.register(cfg.Registerer); err != nil {
		return nil, err
	}
	return m, nil
}

// SetExpected tells the merger which partitions exist to be read: every
// partition 0..n−1 of each topic, by partition count, as the service
// learns them from its consumer group (the topics the group is assigned).
// From then on only those are waited for and named missing; a topic the
// group no longer reads is no longer expected, even if summaries of it
// came before; one whose summaries come after the call stays expected
// until the next call (the group was described before its reader
// joined). Until it is called, the expected topics are those of
// MergerConfig.Topics and of every summary read. Counts outside
// 1..MaxMergePartitions are ignored.
func (m *Merger) SetExpected(topics map[string]int32) {
	exp := make(map[string]int32, len(topics))
	for _, t := range m.topics {
		t.sinceExpect = false // this description is newer than its summaries
	}
	for topic, n := range topics {
		if topic == "" || n < 1 || n > MaxMergePartitions {
			continue
		}
		exp[topic] = n
		t := m.topics[topic]
		if t == nil {
			t = &topicState{parts: map[int32]*partProgress{}}
			m.topics[topic] = t
		}
		t.partitions = max(t.partitions, n)
	}
	m.expected = exp
}

// Stats returns the merger's running totals.
func (m *Merger) Stats() *MergerStats { return m.stats }

// Add hands the merger one summary, read at offset of the windows topic.
// nowMs is any clock, used only to rate-limit the warnings about late
// summaries (replays pass a constant). The merger keeps w; the caller
// must not change it afterwards.
//
// An empty summary (no event, no late event) only tells how far its
// partition has come. A summary whose ID was seen before for a pending
// window is dropped, counted as a duplicate, or as a conflict when its
// content other than WatermarkMs differs (the first is kept); one for a
// window already reported is a duplicate, or Late when its partition was
// missing from that report. Add returns an error, and keeps nothing, only
// for a summary that cannot be merged: inconsistent fields, a window
// length other than the merger's, undecodable sketches. The caller logs
// it and goes on; such a summary does not hold back CommitOffset.
func (m *Merger) Add(w *schemas.PartitionWindow, offset, nowMs int64) error {
	s, err := m.decode(w)
	if err != nil {
		m.stats.Invalid.Add(1)
		return err
	}
	if !m.hold(s, w, offset, nowMs) {
		m.recycle(s)
	}
	return nil
}

// hold files the decoded summary s of w, read at offset, and reports
// whether it keeps it (Add).
func (m *Merger) hold(s *heldSummary, w *schemas.PartitionWindow, offset, nowMs int64) bool {
	m.nextOffset = max(m.nextOffset, offset+1)
	ps := m.track(w)
	empty := w.Events == 0 && w.Late == 0 && len(w.Apps) == 0
	switch {
	case w.EndMs <= m.cfg.DoneThroughMs:
		m.stats.Resumed.Add(1)
		return false
	case w.EndMs <= m.emittedThroughMs:
		if ps.wasMissed(w.StartMs) && !empty {
			m.stats.Late.Add(1)
			m.stats.LateEvents.Add(int64(w.Events))
			m.logLate(w, nowMs)
		} else {
			// Sent again (a restart re-reads from its commit), or empty:
			// the report has what it says.
			m.stats.Duplicates.Add(1)
		}
		return false
	case empty:
		m.stats.Empty.Add(1)
		return false
	}
	p := m.pending[w.StartMs]
	if p == nil {
		p = &pendingWindow{startMs: w.StartMs, minOffset: offset, parts: map[mergePart]*heldSummary{}}
		m.pending[w.StartMs] = p
		i, _ := slices.BinarySearch(m.order, w.StartMs)
		m.order = slices.Insert(m.order, i, w.StartMs)
	}
	k := mergePart{w.Topic, w.Partition}
	if held := p.parts[k]; held != nil {
		// The watermark is not part of the content: a live partition that
		// re-emits a window after a restart may have closed it at another
		// wall-clock moment, and no report shows it.
		again := *s.w
		again.WatermarkMs = held.w.WatermarkMs
		if reflect.DeepEqual(held.w, &again) && sameApps(held.apps, s.apps) {
			m.stats.Duplicates.Add(1)
		} else {
			m.stats.Conflicts.Add(1)
			m.log.Warn("partition window summary re-sent with other content; keeping the first",
				"id", w.ID, "first_offset", p.minOffset, "offset", offset)
		}
		return false
	}
	p.parts[k] = s
	p.minOffset = min(p.minOffset, offset)
	m.stats.Accepted.Add(1)
	for len(m.order) > m.cfg.MaxPendingWindows {
		// The status Ready had last: an idle or silent partition is not
		// named missing here either.
		m.queued = append(m.queued, m.emitOldest(&m.stats.Capped, m.lastStatus))
	}
	m.stats.Pending.Store(int64(len(m.order)))
	return true
}

// track learns topics, partition counts and progress from w, and returns
// its partition's progress.
func (m *Merger) track(w *schemas.PartitionWindow) *partProgress {
	t := m.topics[w.Topic]
	if t == nil {
		t = &topicState{parts: map[int32]*partProgress{}}
		m.topics[w.Topic] = t
	}
	t.partitions = max(t.partitions, w.Partitions)
	if m.expected != nil && m.expected[w.Topic] == 0 {
		t.sinceExpect = true
	}
	ps := t.parts[w.Partition]
	if ps == nil {
		ps = &partProgress{lastStartMs: w.StartMs, lastFinal: w.Final}
		if m.emittedThroughMs > m.cfg.DoneThroughMs {
			// Unknown until now, so in none of the reports so far.
			ps.missed = []msRange{{m.cfg.DoneThroughMs, m.emittedThroughMs}}
		}
		t.parts[w.Partition] = ps
		return ps
	}
	if w.StartMs > ps.lastStartMs {
		ps.lastStartMs, ps.lastFinal = w.StartMs, w.Final
	} else if w.StartMs == ps.lastStartMs {
		ps.lastFinal = ps.lastFinal || w.Final
	}
	return ps
}

// Ready returns the windows that can be reported now, oldest first:
// complete ones, ones whose missing partitions are all silent, and ones
// the cap released since the last call. Each window is returned once.
// status tells what the service knows of each partition besides its
// summaries; nil (a replay) knows nothing: only complete windows are
// ready, and Finish reports the rest.
func (m *Merger) Ready(status StatusFunc) []MergedWindow {
	m.lastStatus = status
	out := m.queued
	m.queued = nil
	for len(m.order) > 0 {
		p := m.pending[m.order[0]]
		missing, _ := m.missingParts(p, status)
		if len(missing) == 0 {
			out = append(out, m.emitOldest(&m.stats.Complete, status))
			continue
		}
		if status == nil {
			break
		}
		silent := true
		for _, k := range missing {
			silent = silent && status(k.topic, k.partition).Silent
		}
		if !silent {
			break
		}
		out = append(out, m.emitOldest(&m.stats.Silent, status))
	}
	m.stats.Pending.Store(int64(len(m.order)))
	return out
}

// Waiting returns the oldest window held and the partitions it waits for
// (status as for Ready), as "topic/partition"; ok is false when no window
// is held.
func (m *Merger) Waiting(status StatusFunc) (startMs int64, missing []string, ok bool) {
	if len(m.order) == 0 {
		return 0, nil, false
	}
	p := m.pending[m.order[0]]
	parts, _ := m.missingParts(p, status)
	for _, k := range parts {
		missing = append(missing, k.topic+"/"+strconv.Itoa(int(k.partition)))
	}
	return p.startMs, missing, true
}

// Finish reports every pending window, oldest first, Partial where
// partitions are missing: the end of the input (a replay, --exit-at-end).
func (m *Merger) Finish() []MergedWindow {
	out := m.queued
	m.queued = nil
	for len(m.order) > 0 {
		how := &m.stats.Finished
		if missing, _ := m.missingParts(m.pending[m.order[0]], nil); len(missing) == 0 {
			how = &m.stats.Complete
		}
		out = append(out, m.emitOldest(how, nil))
	}
	m.stats.Pending.Store(0)
	return out
}

// emitOldest merges and removes the oldest pending window, counting it in
// how, or as complete when no partition is missing (the cap may release a
// window that was complete already, when one read brought many).
func (m *Merger) emitOldest(how *atomic.Int64, status StatusFunc) MergedWindow {
	p := m.pending[m.order[0]]
	missingParts, idle := m.missingParts(p, status)
	if len(missingParts) == 0 {
		how = &m.stats.Complete
	}
	var missing []string
	for _, k := range missingParts {
		missing = append(missing, k.topic+"/"+strconv.Itoa(int(k.partition)))
		m.topics[k.topic].progress(k.partition).miss(p.startMs, m.windowMs)
	}
	var held uint64 // events in the window's summaries, for the warnings
	for _, h := range p.parts {
		held += h.w.Events
	}
	mw := m.merge(p, missing, idle)
	// The window's sketches are decoded into again by the summaries of
	// the next ones; beyond what this window released the free list
	// drops them, so a window of many sketches does not pin them.
	released := 0
	for _, h := range p.parts {
		released += m.recycle(h)
	}
	if len(m.freeCMS) > released {
		clear(m.freeCMS[released:])
		m.freeCMS = m.freeCMS[:released]
	}
	delete(m.pending, p.startMs)
	m.order = m.order[1:]
	m.emittedThroughMs = p.startMs + m.windowMs
	m.unacked = append(m.unacked, emittedWindow{startMs: p.startMs, minOffset: p.minOffset})
	how.Add(1)
	if len(missing) > 0 {
		m.stats.Partial.Add(1)
		// A window without events (a restart re-sends the empty windows
		// of idle partitions, which close by the wall clock) loses
		// nothing to speak of: said at debug only.
		level := slog.LevelWarn
		if held == 0 {
			level = slog.LevelDebug
		}
		switch how {
		case &m.stats.Capped:
			m.log.Log(context.Background(), level, "merger holds more than merge.max_pending_windows windows: reporting the oldest partial; "+
				"the missing partitions' summaries of it will be dropped (their partitions run too far behind the others)",
				"window_start_ms", p.startMs, "events", held, "missing", missing, "max_pending_windows", m.cfg.MaxPendingWindows)
		case &m.stats.Silent:
			m.logSilent(level, p.startMs, held, missing)
		}
	}
	return mw
}

// logSilent warns of a window with events reported without silent
// partitions: at once when the set of them changed, else at most every
// silentLogEvery windows. One without events (level below warn) is
// logged at debug.
func (m *Merger) logSilent(level slog.Level, startMs int64, events uint64, missing []string) {
	if level < slog.LevelWarn {
		m.log.Debug("reporting a window without events and without partitions that said nothing for the partition timeout",
			"window_start_ms", startMs, "missing", missing)
		return
	}
	m.silentUnlogged++
	if slices.Equal(missing, m.silentLast) && m.silentUnlogged < silentLogEvery {
		return
	}
	m.log.Warn("reporting a window without partitions that said nothing for the partition timeout (their detect instance stopped, or they are stuck); "+
		"what they send for it later is in no report",
		"window_start_ms", startMs, "events", events, "missing", missing, "windows_since_last_log", m.silentUnlogged)
	m.silentLast, m.silentUnlogged = missing, 0
}

// silentLogEvery bounds the windows reported without the same silent
// partitions between two warnings.
const silentLogEvery = 100

// Late summaries are logged at most once per lateLogEveryMs of the
// merger's clock, or per lateLogEvery summaries when the clock stands
// (replays and --exit-at-end runs pass a constant).
const (
	lateLogEveryMs = 10_000
	lateLogEvery   = 1000
)

// logLate logs, rate-limited, a summary dropped for a window already
// reported: its events are in no report.
func (m *Merger) logLate(w *schemas.PartitionWindow, nowMs int64) {
	if w.Events == 0 {
		// Only late events (already outside every window) or no count
		// at all: no event of a window is lost.
		m.log.Debug("partition window summary without events dropped: its window was already reported without this partition",
			"id", w.ID, "late", w.Late, "reported_through_ms", m.emittedThroughMs)
		return
	}
	m.lateUnlogged++
	m.lateUnloggedEvts += w.Events
	if m.lateLogged && nowMs-m.lateLoggedMs < lateLogEveryMs && m.lateUnlogged < lateLogEvery {
		return
	}
	m.log.Warn("partition window summary dropped: its window was already reported without this partition; its events are in no report",
		"id", w.ID, "events", w.Events, "reported_through_ms", m.emittedThroughMs,
		"dropped_since_last_log", m.lateUnlogged, "events_since_last_log", m.lateUnloggedEvts)
	m.lateLogged, m.lateLoggedMs, m.lateUnlogged, m.lateUnloggedEvts = true, nowMs, 0, 0
}

// missingParts returns the expected partitions that have not reported p
// and may still, by topic then partition, and those that have no event
// in it because they never had one (status, when not nil, tells of
// partitions that never had an event and follow the wall clock).
func (m *Merger) missingParts(p *pendingWindow, status StatusFunc) (missing, idle []mergePart) {
	for _, topic := range m.sortedTopics() {
		t := m.topics[topic]
		n := t.partitions
		if m.expected != nil && !t.sinceExpect {
			n = m.expected[topic] // 0 for a topic no longer read
		}
		for part := int32(0); part < n; part++ {
			if m.doneWith(p, topic, t, part) {
				continue
			}
			if status != nil {
				if c := status(topic, part).IdleClockMs; c > 0 && p.startMs+m.windowMs <= c-m.cfg.Lateness.Milliseconds() {
					idle = append(idle, mergePart{topic, part})
					continue
				}
			}
			missing = append(missing, mergePart{topic, part})
		}
	}
	return missing, idle
}

// doneWith reports whether partition part of topic reported p or will not.
func (m *Merger) doneWith(p *pendingWindow, topic string, t *topicState, part int32) bool {
	if p.parts[mergePart{topic, part}] != nil {
		return true
	}
	ps := t.parts[part]
	return ps != nil && ps.doneWith(p.startMs)
}

// progress returns the progress of partition part, creating it.
func (t *topicState) progress(part int32) *partProgress {
	ps := t.parts[part]
	if ps == nil {
		ps = &partProgress{lastStartMs: math.MinInt64}
		t.parts[part] = ps
	}
	return ps
}

func (m *Merger) sortedTopics() []string {
	ts := make([]string, 0, len(m.topics))
	for t := range m.topics {
		ts = append(ts, t)
	}
	slices.Sort(ts)
	return ts
}

// Acked records that every report of the window starting at startMs was
// written (acknowledged by Kafka). Unknown or repeated windows are ignored.
func (m *Merger) Acked(startMs int64) {
	for i := range m.unacked {
		if m.unacked[i].startMs == startMs {
			m.unacked[i].acked = true
		}
	}
	for len(m.unacked) > 0 && m.unacked[0].acked {
		m.doneThroughMs = m.unacked[0].startMs + m.windowMs
		m.unacked = m.unacked[1:]
	}
}

// DoneThroughMs is the end of the last window such that it and every window
// before it was reported and acknowledged. Keep it with the committed
// offset and pass it back as MergerConfig.DoneThroughMs on a restart.
func (m *Merger) DoneThroughMs() int64 { return m.doneThroughMs }

// CommitOffset is the offset of the windows topic a restart must read
// from: the lowest offset of a summary whose window is not yet reported and
// acknowledged, or, when there is none, the offset after the last one
// added. ok is false before anything was added.
func (m *Merger) CommitOffset() (offset int64, ok bool) {
	if m.nextOffset < 0 {
		return 0, false
	}
	offset = m.nextOffset
	for _, p := range m.pending {
		offset = min(offset, p.minOffset)
	}
	for _, e := range m.unacked {
		offset = min(offset, e.minOffset)
	}
	return offset, true
}

// decode checks w and decodes its sketches into a summary that holds one
// copy of each: a dense distinct sketch stays encoded (checked), in w.
func (m *Merger) decode(w *schemas.PartitionWindow) (*heldSummary, error) {
	if w == nil {
		return nil, errors.New("merge: nil partition window")
	}
	bad := func(format string, args ...any) error {
		return fmt.Errorf("merge partition window %s: "+format, append([]any{w.ID}, args...)...)
	}
	switch {
	case w.Topic == "":
		return nil, bad("no topic")
	case w.Partitions < 1 || w.Partitions > MaxMergePartitions || w.Partition < 0 || w.Partition >= w.Partitions:
		return nil, bad("partition %d of %d, want 0 ≤ partition < partitions ≤ %d", w.Partition, w.Partitions, MaxMergePartitions)
	case w.EndMs <= w.StartMs:
		return nil, bad("end %d is not after start %d", w.EndMs, w.StartMs)
	case w.ID != schemas.PartitionWindowID(w.Topic, w.Partition, w.StartMs):
		return nil, bad("id does not match topic, partition and start (want %s)",
			schemas.PartitionWindowID(w.Topic, w.Partition, w.StartMs))
	case w.EndMs-w.StartMs != m.windowMs || ((w.StartMs%m.windowMs)+m.windowMs)%m.windowMs != 0:
		return nil, bad("window [%d, %d) is not an aligned window of %d ms; run every detect with the same report window as the merger",
			w.StartMs, w.EndMs, m.windowMs)
	}
	var appEvents uint64
	for i := range w.Apps {
		appEvents += w.Apps[i].Events
	}
	if appEvents != w.Events {
		return nil, bad("events %d, but its apps' events add up to %d", w.Events, appEvents)
	}
	s := &heldSummary{apps: make([]decodedApp, len(w.Apps))}
	stripped := *w
	stripped.Apps = slices.Clone(w.Apps)
	apps := make(map[string]bool, len(w.Apps))
	for i := range stripped.Apps {
		a := &stripped.Apps[i]
		if apps[a.App] {
			return nil, bad("app %q listed twice", a.App)
		}
		apps[a.App] = true
		hashes := make([]uint64, len(a.Top)+len(a.Big)+len(a.TopReads)+len(a.TopWrites)+len(a.TopLatency))
		for li, l := range [numLists][]schemas.KeyCount{a.Top, a.Big, a.TopReads, a.TopWrites, a.TopLatency} {
			hs := hashes[:len(l):len(l)]
			hashes = hashes[len(l):]
			for j := range l {
				hs[j] = sketch.Hash(l[j].Key)
			}
			s.apps[i].hashes[li] = hs
		}
		if k, dup, ok := m.checkTop(a.Top, s.apps[i].hashes[0]); !ok {
			if dup {
				return nil, bad("app %q key %q listed twice in top", a.App, k.Key)
			}
			return nil, bad("app %q key %q: error %d exceeds count %d", a.App, k.Key, k.Error, k.Count)
		}
		for _, sc := range a.Slots {
			if sc.Slot >= RedisSlots {
				return nil, bad("app %q: slot %d out of range", a.App, sc.Slot)
			}
		}
		if len(a.Distinct) > 0 {
			c, err := sketch.ParseCardinality(a.Distinct)
			if err != nil {
				return nil, bad("app %q distinct: %w", a.App, err)
			}
			p := int(c.Precision())
			if m.hllPrecision != 0 && p != m.hllPrecision {
				return nil, bad("app %q distinct sketch has precision %d, earlier summaries %d; run every detect with the same cardinality precision",
					a.App, p, m.hllPrecision)
			}
			m.hllPrecision = p
			s.apps[i].distinct = c
		}
		if len(a.Sketch) > 0 {
			c := m.newCMS()
			if err := c.UnmarshalBinaryReuse(a.Sketch); err != nil {
				return nil, bad("app %q sketch: %w", a.App, err)
			}
			s.apps[i].cms = c
		}
		a.Distinct, a.Sketch = nil, nil
	}
	s.w = &stripped
	return s, nil
}

// sameApps reports whether two summaries' decoded app windows are alike:
// their distinct sketches the same estimate however each was encoded (as
// when both were decoded), the rest deeply equal.
func sameApps(a, b []decodedApp) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		da, db := a[i].distinct, b[i].distinct
		if (da == nil) != (db == nil) || (da != nil && !da.Equal(db)) ||
			!reflect.DeepEqual(a[i].cms, b[i].cms) || !reflect.DeepEqual(a[i].hashes, b[i].hashes) {
			return false
		}
	}
	return true
}

// checkTop returns the first entry of top, whose keys' hashes are
// hashes, with an Error above its Count or a key listed before (dup), and
// ok true when there is none.
func (m *Merger) checkTop(top []schemas.KeyCount, hashes []uint64) (bad *schemas.KeyCount, dup, ok bool) {
	size := 2 << bitsFor(len(top))
	if len(m.seenTab) < size || len(m.seenTab) > 4*size {
		m.seenTab = make([]int32, size)
	} else {
		clear(m.seenTab)
	}
	mask := uint64(len(m.seenTab) - 1)
	for j := range top {
		k := &top[j]
		if k.Error > k.Count {
			return k, false, false
		}
		h := hashes[j]
		i := h & mask
		for ; m.seenTab[i] != 0; i = (i + 1) & mask {
			if o := m.seenTab[i] - 1; hashes[o] == h && top[o].Key == k.Key {
				return k, true, false
			}
		}
		m.seenTab[i] = int32(j + 1)
	}
	return nil, false, true
}

// comparePart orders summaries by topic, then partition.
func comparePart(a, b *heldSummary) int {
	if c := cmp.Compare(a.w.Topic, b.w.Topic); c != 0 {
		return c
	}
	return cmp.Compare(a.w.Partition, b.w.Partition)
}

// newCMS returns a Count-Min sketch to decode into: a recycled one when
// there is one.
func (m *Merger) newCMS() *sketch.CountMin {
	if n := len(m.freeCMS); n > 0 {
		c := m.freeCMS[n-1]
		m.freeCMS[n-1] = nil
		m.freeCMS = m.freeCMS[:n-1]
		return c
	}
	return new(sketch.CountMin)
}

// recycle hands the Count-Min sketches of s, which nothing else refers
// to any more, to newCMS, and returns how many.
func (m *Merger) recycle(s *heldSummary) int {
	n := 0
	for i := range s.apps {
		if c := s.apps[i].cms; c != nil {
			m.freeCMS = append(m.freeCMS, c)
			s.apps[i].cms = nil
			n++
		}
	}
	return n
}
