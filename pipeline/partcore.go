package pipeline

import (
	"errors"
	"fmt"
	"strings"

	"github.com/keyheat/keyheat/internal/faststr"
	"github.com/keyheat/keyheat/schemas"
	"github.com/keyheat/keyheat/sketch"
)

// Source names the events partition a Partition counts.
type Source struct {
	Topic     string
	Partition int32
	// Partitions is the topic's partition count, copied into every
	// summary: how many summaries of a window the merger waits for.
	Partitions int32
	// Keyed reports that the topic's records are keyed by access key, so
	// every key lives on this one partition; when false each app's part of
	// a window also carries its Count-Min sketch for the merger to sum.
	Keyed bool
}

// Start is where a Partition starts: the offset its first event will have
// (the committed offset, or where a group with no commit starts) and the
// metadata committed with it ("" when there is none).
type Start struct {
	Offset   int64
	Metadata string
	// ClockMs, when not 0, is a clock the partition already had before
	// its first event: the wall clock a live partition without events
	// followed while idle (see Idle), which the merger may have reported
	// windows by. The partition starts with at least that clock, so that
	// an older first event is late here too, counted in the Late of the
	// oldest open window, rather than in a window already reported.
	ClockMs int64
}

// Output collects what Process, Idle and End produce. The caller hands
// Windows to keyheat.windows and HotKeys to keyheat.hotkeys (setting their
// DetectedMs), acknowledges each with Acked and AckedHotKey once Kafka has
// it, and calls Reset before reusing the Output.
//
// On a topic not keyed by access key (Source.Keyed false, more than one
// partition) the partition publishes no hot-key events: it hands out a
// candidate batch per rule window at every detection slot boundary
// instead (Candidates), for keyheat.windows and the cluster stage
// (ClusterAlerts), acknowledged with AckedCandidates.
type Output struct {
	Windows    []schemas.PartitionWindow
	HotKeys    []schemas.HotKeyEvent
	Candidates []schemas.Candidates
}

// Reset empties o, keeping its capacity. The summaries it held stay valid.
func (o *Output) Reset() {
	clear(o.Windows)
	clear(o.HotKeys)
	clear(o.Candidates)
	o.Windows, o.HotKeys, o.Candidates = o.Windows[:0], o.HotKeys[:0], o.Candidates[:0]
}

// Stats are a partition's counters, cumulative since NewPartition, for the
// caller to export as metrics.
type Stats struct {
	// Events is every event given to Process; WarmUp those before the
	// resume offset, which only warmed up detection.
	Events, WarmUp uint64
	// Late counts late events (in a window's Late); Dropped events of
	// windows already acknowledged before a restart.
	Late, Dropped uint64
	// TruncatedKeys counts events whose key was longer than MaxKeyBytes
	// (reported shortened); Whitelisted events whose key the whitelist
	// names.
	TruncatedKeys, Whitelisted uint64
	// AppsFolded counts events counted under schemas.OtherApp.
	AppsFolded uint64
	// Windows counts PartitionWindows emitted; Hot, Updates and Cooled the
	// hot-key events published by type, AlertsWarmUp those decided during
	// warm-up and not published. HandedOver counts hot keys of a window a
	// reload retired whose episode ended without a cooled record, because
	// the window that watches them now holds them hot.
	Windows, Hot, Updates, Cooled, AlertsWarmUp, HandedOver uint64
	// RingAdmitted counts keys admitted to exact counting; RingRefused
	// keys that passed their gate but found the ring full, and RingEvicted
	// tracked keys evicted to make room for a heavier one. While they grow
	// the ring is too small for the traffic (raise detect.ring_nodes): a
	// hot key can be missed, and restarts no longer reproduce alerts
	// exactly.
	RingAdmitted, RingRefused, RingEvicted uint64
	// AlertsDropped counts keys that crossed their threshold while the
	// alert state was full (2 × ring_nodes keys per rule window).
	AlertsDropped uint64
	// Candidates counts candidate batches handed out, CandidateKeys the
	// keys they listed and CandidatesCapped the keys left out of batches
	// that reached DetectOptions.MaxCandidates.
	Candidates, CandidateKeys, CandidatesCapped uint64
}

// Partition is what one partition of the events topic computes, fed its
// events one at a time in offset order: report windows and their
// summaries, hot-key detection, and the commit point. It reads no clock,
// starts no goroutine and does no I/O; it is not safe for concurrent use
// (one goroutine per partition owns it).
type Partition struct {
	o     Options
	src   Source
	rules *Rules
	// cluster: the topic is not keyed and has several partitions, so a
	// key's rate is decided across them (ClusterAlerts): the partition
	// detects with local pre-thresholds and sends candidates, no alerts.
	cluster bool

	// maxTs is the newest event time seen (or the wall clock an idle
	// partition advanced to): the partition's clock. started: maxTs is set.
	maxTs   int64
	started bool
	// resume is the first offset whose events count in windows; before it
	// events only warm up detection. windowMode: an event at or after it
	// (or End) came.
	resume     int64
	windowMode bool
	nextWindow int64 // from the start's metadata: first window not acknowledged
	nextOffset int64
	ended      bool

	// curOffset and curMaxTsBefore describe the event being processed (for
	// Idle and End: the next offset and the current clock), for the claims
	// outputs make on the commit point; curShortened says its key was cut
	// to MaxKeyBytes, for the alerts it raises.
	curOffset, curMaxTsBefore int64
	curShortened              bool

	// Idle bookkeeping: whether an event came since the last Idle call, and
	// the wall time at which activity was last noticed.
	activeSinceIdle  bool
	lastActiveWallMs int64

	det    *detector
	win    *windows
	commit *commitState
	stats  Stats

	// ops caches the classes of the last two operations seen: logs
	// alternate between few of them.
	ops [2]opCache
	// opNames are the ops the cache has held, each copied once (at most
	// maxOpNames): the cache never keeps an event's own string, which
	// may point into the record it was decoded from.
	opNames map[string]string
}

// maxOpNames bounds Partition.opNames; ops past it are classified
// without the cache.
const maxOpNames = 64

type opCache struct {
	op  string
	cls opClass
}

// Unkey tells p that its records are not all keyed by access key after
// all: its Source said Keyed, and a record came whose key is not its
// event's. Every summary p emits from now on says Keyed false, those of
// the windows open now included, so the merger bounds each key by what
// every partition of the topic may hold of it instead of taking one
// partition's count for the key's. An app already counted in an open
// window carries no sketch in that window's summary (it would lack the
// events before the call), so the merger bounds a key it does not list by
// its Floor; an app first counted after the call carries one, as with a
// Source not keyed. Windows emitted before the call are not changed.
// Detection is not: p keeps alerting on its own events as a keyed
// partition does, rather than sending candidates (ClusterAlerts), whose
// decisions would leave the keys it already published hot unanswered.
func (p *Partition) Unkey() { p.src.Keyed = false }

// ErrRulesMismatch is returned by SetRules for Rules compiled for other
// detection options than the partition's.
var ErrRulesMismatch = errors.New("pipeline: rules compiled for other detect options")

// NewPartition returns the partition core for src, starting at start. With
// metadata a previous run committed, it resumes that run: events before
// the metadata's resume offset only warm up detection, and windows the
// previous run had acknowledged are not emitted again. Metadata it cannot
// parse, or written for another window length, is an error; the caller
// may then start without it, accepting that windows open at the commit
// are emitted again from partial counts.
func NewPartition(o Options, src Source, start Start) (*Partition, error) {
	rules, err := NewRules(o)
	if err != nil {
		return nil, err
	}
	if start.Offset < 0 {
		return nil, fmt.Errorf("pipeline: start offset %d is negative; pass the first offset the partition will read", start.Offset)
	}
	meta := schemas.CommitMeta{ResumeOffset: start.Offset, MaxTsMs: noTime, NextWindowMs: noTime, WindowMs: o.Window.Milliseconds()}
	if start.Metadata != "" {
		m, err := schemas.ParseCommitMeta(start.Metadata)
		if err != nil {
			return nil, fmt.Errorf("pipeline: partition %s/%d: %w", src.Topic, src.Partition, err)
		}
		if m.WindowMs != meta.WindowMs {
			return nil, fmt.Errorf("pipeline: partition %s/%d: %w %q: written with %d ms windows, configured %d ms; start without it",
				src.Topic, src.Partition, schemas.ErrCommitMeta, start.Metadata, m.WindowMs, meta.WindowMs)
		}
		if m.ResumeOffset < start.Offset {
			// The caller committed less than we asked for (a sink held it
			// back): nothing to warm up, the metadata's clock still holds.
			m.ResumeOffset = start.Offset
		}
		meta = m
	}
	if start.ClockMs != 0 && (meta.MaxTsMs == noTime || start.ClockMs > meta.MaxTsMs) {
		meta.MaxTsMs = start.ClockMs
	}
	p := &Partition{
		o: o, src: src, rules: rules,
		maxTs: meta.MaxTsMs, started: meta.MaxTsMs != noTime,
		resume: meta.ResumeOffset, nextWindow: meta.NextWindowMs, nextOffset: start.Offset,
		cluster: !src.Keyed && src.Partitions > 1,
	}
	p.det = newDetector(p)
	p.win = newWindows(p)
	p.commit = newCommitState(p, CommitPoint{Offset: start.Offset, Metadata: meta.String()}, meta.NextWindowMs, meta.MaxTsMs)
	return p, nil
}

// SetRules replaces the rules between two events. Counts survive: a rule
// window that stays keeps its sketches, exact counts and alert state; a new
// one starts empty; keys already hot under a window no rule uses any more
// are published cooled after the cool-down. The Rules must be compiled
// from Options with the same DetectOptions.
func (p *Partition) SetRules(r *Rules) error {
	if r.slots != p.o.Detect.Slots || r.gate != p.o.Detect.Gate {
		return ErrRulesMismatch
	}
	p.rules = r
	p.ops = [2]opCache{}
	p.det.setRules(r)
	return nil
}

// Rules returns the rules in force.
func (p *Partition) Rules() *Rules { return p.rules }

// Process counts one event read at offset. Offsets must increase from
// Start.Offset (gaps are fine). Events pass through, in this order: the
// clock (the watermark, closing windows, and a detection tick on each new
// slot), the report windows, and hot-key detection.
func (p *Partition) Process(e *schemas.AccessEvent, offset int64, out *Output) {
	if p.ended {
		return
	}
	p.stats.Events++
	p.curOffset, p.curMaxTsBefore = offset, p.clockBefore()
	if p.curMaxTsBefore >= p.commit.nextBucketMs { // observe's own test, inlined
		p.commit.observe(offset, p.curMaxTsBefore)
	}
	p.nextOffset = offset + 1
	p.activeSinceIdle = true

	key, short := e.Key, false
	if len(key) > p.o.MaxKeyBytes {
		key, short = truncateKey(key, p.o.MaxKeyBytes), true
		p.stats.TruncatedKeys++
	}
	p.curShortened = short
	if !p.windowMode && offset >= p.resume {
		p.windowMode = true
		p.win.activate(p.nextWindow, e.TimeMs)
	}
	v, startMs := vDrop, int64(0)
	if p.windowMode {
		if p.win.counts(e.TimeMs) {
			v, startMs = vCount, p.win.sCache
		} else {
			v, startMs = p.win.judge(e.TimeMs)
		}
	} else {
		p.stats.WarmUp++
	}
	if !p.started || e.TimeMs > p.maxTs {
		p.advance(e.TimeMs, out)
	}

	h := sketch.Hash(key)
	if v == vCount {
		// Detection comes first, and takes long enough to hide the cache
		// misses of the window's exact table, started here.
		p.win.touch(startMs, h)
	}
	// The app and the operation of the event before, usually, tested here
	// rather than in a call.
	ad := p.det.last
	if ad == nil || !(len(e.App) <= 8 && faststr.EqualShort(ad.app, e.App) || len(e.App) > 8 && faststr.Equal(ad.app, e.App)) {
		ad = p.det.app(e.App)
	}
	white := len(ad.white) > 0 && ad.whitelisted(key)
	if white {
		p.stats.Whitelisted++
	}
	var cls opClass
	if c := &p.ops[0]; len(e.Op) < 4 && faststr.EqualTiny(c.op, e.Op) || len(e.Op) >= 4 && faststr.EqualShort(c.op, e.Op) {
		cls = c.cls
	} else {
		cls = p.classify(e.Op)
	}
	if !white {
		if x, g := ad.match(key); x != nil {
			p.det.process(ad, x, g, e, key, h, cls, out)
		}
	}
	if p.windowMode {
		switch v {
		case vCount:
			p.win.add(startMs, e, key, h, cls, white, short)
		case vLate:
			p.win.addLate(startMs)
			p.stats.Late++
		default:
			p.stats.Dropped++
		}
	}
}

// clockBefore is maxTs, or noTime before the first event.
func (p *Partition) clockBefore() int64 {
	if !p.started {
		return noTime
	}
	return p.maxTs
}

// advance moves the clock to nowMs: detection ticks on each new slot, and
// windows the new watermark passes close.
func (p *Partition) advance(nowMs int64, out *Output) {
	p.maxTs, p.started = nowMs, true
	p.det.tick(out)
	if p.windowMode {
		p.win.clock()
		p.win.closeUpTo(p.win.watermark(), out)
	}
}

func (p *Partition) classify(op string) opClass {
	if len(op) < 4 && faststr.EqualTiny(op, p.ops[0].op) || len(op) >= 4 && faststr.EqualShort(op, p.ops[0].op) {
		return p.ops[0].cls
	}
	if len(op) < 4 && faststr.EqualTiny(op, p.ops[1].op) || len(op) >= 4 && faststr.EqualShort(op, p.ops[1].op) {
		p.ops[0], p.ops[1] = p.ops[1], p.ops[0]
		return p.ops[0].cls
	}
	c := p.rules.ops.classify(op)
	name, ok := p.opNames[op]
	if !ok {
		if len(p.opNames) >= maxOpNames {
			return c
		}
		if p.opNames == nil {
			p.opNames = make(map[string]string)
		}
		name = strings.Clone(op)
		p.opNames[name] = name
	}
	p.ops[1], p.ops[0] = p.ops[0], opCache{op: name, cls: c}
	return c
}

// Idle lets a live partition's windows close while no events come: called
// every so often with the wall clock, it advances the partition's clock to
// wallMs (so the watermark to wallMs − Lateness) once no event came for
// IdleTimeout, as measured between its own calls. Idle makes the output
// depend on when it was called, so replays and --exit-at-end runs do not
// call it; windows it closed are not rebuilt identically after a restart.
// It does nothing before the first event, during warm-up, or after End.
func (p *Partition) Idle(wallMs int64, out *Output) { p.IdleTo(wallMs, wallMs, out) }

// IdleTo is Idle with the clock advanced no further than toMs, and
// reports whether it advanced it. A caller keeping its partitions
// aligned (detect) moves an idle partition's clock to the wall clock in
// steps, so that its empty windows do not reach the merger far ahead of
// the other partitions'.
func (p *Partition) IdleTo(wallMs, toMs int64, out *Output) bool {
	if p.ended || !p.started {
		return false
	}
	if !p.windowMode {
		// A restart re-reads the crashed or stopped run's events up to
		// the resume offset to warm up; once it has every one of them and
		// nothing more comes, the windows it owes (after the last
		// acknowledged one) are rebuilt as that run had them, and must
		// close by the wall clock as that run's would have, not wait for
		// the next event (End does the same at the end of the input).
		if p.nextWindow == noTime || p.nextOffset < p.resume {
			return false
		}
		p.windowMode = true
		p.win.activate(p.nextWindow, p.maxTs)
	}
	if p.activeSinceIdle {
		p.activeSinceIdle, p.lastActiveWallMs = false, wallMs
		return false
	}
	toMs = min(toMs, wallMs)
	if wallMs-p.lastActiveWallMs < p.o.IdleTimeout.Milliseconds() || toMs <= p.maxTs {
		return false
	}
	p.curOffset, p.curMaxTsBefore = p.nextOffset, p.maxTs
	p.advance(toMs, out)
	return true
}

// End closes every window up to the newest event's and marks the last one
// Final: the end of the input (a replay, an --exit-at-end run). Later calls
// do nothing.
func (p *Partition) End(out *Output) {
	if p.ended {
		return
	}
	p.ended = true
	if !p.windowMode && p.nextWindow != noTime {
		// The input ended inside the warm-up: the crashed run's windows
		// after the last acknowledged one are still owed.
		p.windowMode = true
		p.win.activate(p.nextWindow, p.maxTs)
	}
	if !p.windowMode {
		return
	}
	p.curOffset, p.curMaxTsBefore = p.nextOffset, p.clockBefore()
	p.win.closeAll(out)
}

// CommitPoint returns the offset the partition may commit and the
// metadata to commit with it: a restart from them (NewPartition with
// Start{Offset, Metadata}) rebuilds everything not yet acknowledged. See
// doc.go for the rule and what a restart guarantees. The caller may commit
// a lower offset (another sink's hold) with the same metadata, never a
// higher one.
func (p *Partition) CommitPoint() CommitPoint { return p.commit.point() }

// Acked records that the window starting at startMs reached Kafka.
func (p *Partition) Acked(startMs int64) { p.commit.ackWindow(startMs) }

// AckedHotKey records that the hot-key event with this ID reached Kafka.
func (p *Partition) AckedHotKey(id string) { p.commit.ackAlert(id) }

// AckedCandidates records that the candidate batch with this ID reached
// Kafka.
func (p *Partition) AckedCandidates(id string) { p.commit.ackAlert(id) }

// Stats returns the partition's counters.
func (p *Partition) Stats() Stats { return p.stats }

// ClockMs returns the partition's clock: its newest event time, or the
// wall clock Idle advanced it to; ok is false before the first event.
func (p *Partition) ClockMs() (ms int64, ok bool) { return p.maxTs, p.started }
