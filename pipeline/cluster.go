package pipeline

import (
	"cmp"
	"slices"
	"sync/atomic"

	"github.com/keyheat/keyheat/schemas"
	"github.com/keyheat/keyheat/sketch"
)

// ClusterAlerts decides hot keys across the partitions of a topic that is
// not keyed by access key, from the partitions' candidate batches
// (schemas.Candidates): a rule's rate is the key's rate over the whole
// topic. It does no I/O and reads no clock: its clock is the batches'
// slot ends. It is not safe for concurrent use.
//
// Per (topic, rule window) it keeps each partition's latest batch. A
// round is a slot end R: it is evaluated once every partition it knows
// of has sent a batch for R or later (a batch comes at every slot
// boundary a partition's clock passes), except partitions the caller's
// status says are silent and partitions more than the hold behind the
// newest slot end seen, which are not waited for. At a round, per
// (rule, app, key) listed by some partition:
//
//   - lower is the sum of the counts the partitions listed in their
//     latest batches at or before R (a partition's counts lapse when it
//     sent no batch for a whole window: it had no event since);
//   - upper is lower plus, for each other partition with a batch in
//     force, its floor less one: each had fewer events of the key.
//
// A key is hot when upper (or lower, for a rule with cluster_bound
// lower) reaches the rule's rate × window, with the cool-down and
// suppression of a partition's alerts (doc.go) on the rounds' clock: one
// "hot" per episode, one "cooled" once it stayed below for CoolDown.
// Events have Partition schemas.ClusterPartition and deterministic IDs,
// so the same batches in the same order give the same events.
type ClusterAlerts struct {
	rules  *Rules
	d      DetectOptions
	holdMs int64
	groups map[clusterGroupKey]*clusterGroup
	nkeys  int
	stats  *ClusterStats
	keys   []*clusterKey // scratch
	// startMs: rounds before it only apply their batches (see SetStart).
	startMs int64
}

// ClusterStats are the cluster stage's counters and gauges. The stage's
// caller writes them; anyone may read them (they are atomics), and
// ClusterAlerts.Register exports them to Prometheus.
type ClusterStats struct {
	// Batches counts the candidate batches added; Stale those that came
	// for a slot their partition had already sent, or after their round
	// was evaluated without them (their counts still replace the
	// partition's older ones).
	Batches, Stale atomic.Uint64
	// Rounds counts rounds evaluated; Hot, Updates and Cooled the events
	// raised, by type.
	Rounds, Hot, Updates, Cooled atomic.Uint64
	// KeysRefused counts keys listed while ClusterKeys entries were held:
	// their counts from that batch are not summed.
	KeysRefused atomic.Uint64
	// Keys is the number of (rule, app, key) entries held now, over every
	// topic: at most DetectOptions.ClusterKeys.
	Keys atomic.Int64
	// RoundLagMs is, over the topics, the largest distance in event time
	// from the newest slot end received to the last round evaluated (to
	// the first slot end before any): how far rounds are held back waiting
	// for slower partitions, as of the last Ready or Finish.
	RoundLagMs atomic.Int64
}

type clusterGroupKey struct {
	topic    string
	windowMs int64
}

type clusterGroup struct {
	topic      string
	windowMs   int64
	partitions int32
	parts      map[int32]*clusterPart
	keys       map[clusterKeyID]*clusterKey
	maxEndMs   int64 // newest slot end received
	firstEndMs int64 // first slot end received
	doneMs     int64 // last round evaluated; noTime before the first
}

type clusterPart struct {
	id      int32
	latest  int64                // newest slot end received
	applied int64                // slot end of the batch in force; noTime if none
	clockMs int64                // its ClockMs
	queue   []schemas.Candidates // copies: the caller may reuse its batches
	floors  []schemas.CandidateRule
	listed  []*clusterKey
}

type clusterKeyID struct{ rule, app, key string }

type clusterKey struct {
	id                clusterKeyID
	short             bool
	counts            map[int32]schemas.CandidateKey
	hot, deferred     bool
	belowMs, cooledMs int64
	raisedMs          int64 // round of the last hot; noTime before any
	ep                epState
}

// NewClusterAlerts returns a cluster stage deciding by rules (compiled
// with the cluster-wide rates, as given) and d's cool-down, suppression,
// split capacity and ClusterKeys. holdMs bounds how far (in slot ends)
// a partition may fall behind the newest before rounds stop waiting for
// it; at least the rule window is sensible.
func NewClusterAlerts(rules *Rules, d DetectOptions, holdMs int64) *ClusterAlerts {
	return &ClusterAlerts{rules: rules, d: d, holdMs: max(holdMs, 1), groups: map[clusterGroupKey]*clusterGroup{},
		stats: &ClusterStats{}, startMs: noTime}
}

// SetStart makes the rounds before startMs apply their batches without
// deciding anything: a stage fed from a commit point (an offset on the
// windows topic) gets every batch of a slot from startMs on, but of the
// slots before it only the batches the partitions sent after the commit
// (a lagging partition's), so their sums lack the others' counts. The
// stage that chose the commit point says startMs (CommitStartMs).
func (c *ClusterAlerts) SetStart(startMs int64) { c.startMs = startMs }

// DoneMs is the lowest, over the stage's groups still fed (batches up
// to within the hold of the newest any group got), of the last round
// evaluated; ok is false before any. A group no partition feeds any more
// (a rule window reloaded away, a topic no longer read) holds nothing.
func (c *ClusterAlerts) DoneMs() (doneMs int64, ok bool) {
	newest := int64(noTime)
	for _, g := range c.groups {
		newest = max(newest, g.maxEndMs)
	}
	for _, g := range c.groups {
		if g.doneMs == noTime || g.maxEndMs < newest-c.holdMs {
			continue
		}
		if !ok || g.doneMs < doneMs {
			doneMs, ok = g.doneMs, true
		}
	}
	return doneMs, ok
}

// SetRules replaces the rules; state is kept, keys of a rule no longer
// defined are treated as below every threshold (so they cool).
func (c *ClusterAlerts) SetRules(r *Rules) { c.rules = r }

// Stats returns the counters, live: they keep changing.
func (c *ClusterAlerts) Stats() *ClusterStats { return c.stats }

// EpisodeStartMs returns the earliest round (slot end) at which a key
// whose episode still bears on what the stage raises was raised hot: a
// key hot now, or above while suppressed, or cooled less than the
// suppression and two longest rule windows ago (see bearsMs). ok is
// false when there is none. A stage fed the same batches from far enough
// before that round (a rule window of counts) raises that episode's
// events again, with the same IDs; one fed from inside the episode would
// raise the key hot anew.
func (c *ClusterAlerts) EpisodeStartMs() (startMs int64, ok bool) {
	bearsMs := c.bearsMs()
	for _, g := range c.groups {
		for _, k := range g.keys {
			if k.raisedMs == noTime {
				continue
			}
			if k.hot || k.deferred || k.cooledMs != noTime && g.doneMs < k.cooledMs+bearsMs {
				if !ok || k.raisedMs < startMs {
					startMs, ok = k.raisedMs, true
				}
			}
		}
	}
	return startMs, ok
}

// bearsMs is how long after its cooled a key's episode still bears on
// where a new stage may start: the suppression (a stage started in it
// would not suppress the key), and two longest rule windows more. A
// caller keeping a new stage's start two windows, the cool-down and the
// suppression before its newest round (detect's merger) keeps it inside
// the episode until its newest round passes the cooled by the
// suppression and two windows: from then on that start is at or after
// the first round the key was below, where a new stage finds it below.
// Until then it must start before the episode (EpisodeStartMs).
func (c *ClusterAlerts) bearsMs() int64 {
	return c.d.Suppress.Milliseconds() + 2*c.rules.MaxWindow().Milliseconds()
}

// Add queues a partition's candidate batch. Batches of one partition
// must come in slot order (they do on keyheat.windows); partitions may
// interleave in any order.
func (c *ClusterAlerts) Add(b *schemas.Candidates) {
	c.stats.Batches.Add(1)
	gk := clusterGroupKey{b.Topic, b.WindowMs}
	g := c.groups[gk]
	if g == nil {
		g = &clusterGroup{topic: b.Topic, windowMs: b.WindowMs, parts: map[int32]*clusterPart{},
			keys: map[clusterKeyID]*clusterKey{}, maxEndMs: noTime, doneMs: noTime, firstEndMs: b.SlotEndMs}
		c.groups[gk] = g
	}
	g.partitions = max(g.partitions, b.Partitions)
	p := g.parts[b.Partition]
	if p == nil {
		p = &clusterPart{id: b.Partition, latest: noTime, applied: noTime}
		g.parts[b.Partition] = p
	}
	if b.SlotEndMs <= p.latest {
		c.stats.Stale.Add(1) // sent again (a restarted partition): already have it
		return
	}
	p.latest = b.SlotEndMs
	g.maxEndMs = max(g.maxEndMs, b.SlotEndMs)
	if b.SlotEndMs <= g.doneMs {
		// Its round went without it: its counts still replace older ones.
		c.stats.Stale.Add(1)
		c.apply(g, p, b)
		return
	}
	p.queue = append(p.queue, *b)
}

// Ready evaluates every round whose partitions all reported (see
// ClusterAlerts) and appends the events raised to out. status may be nil;
// a partition it says is Silent, or idle without events past the round,
// is not waited for. A partition that had events and went quiet is
// waited for until its clock moves again (live, detect moves an idle
// partition's clock after the pipeline's idle timeout) or the hold.
func (c *ClusterAlerts) Ready(status StatusFunc, out []schemas.HotKeyEvent) []schemas.HotKeyEvent {
	return c.run(status, false, out)
}

// Finish evaluates every round queued, waiting for nobody: the end of
// the input.
func (c *ClusterAlerts) Finish(out []schemas.HotKeyEvent) []schemas.HotKeyEvent {
	return c.run(nil, true, out)
}

func (c *ClusterAlerts) run(status StatusFunc, all bool, out []schemas.HotKeyEvent) []schemas.HotKeyEvent {
	gks := make([]clusterGroupKey, 0, len(c.groups))
	for k := range c.groups {
		gks = append(gks, k)
	}
	slices.SortFunc(gks, func(a, b clusterGroupKey) int {
		return cmp.Or(cmp.Compare(a.topic, b.topic), cmp.Compare(a.windowMs, b.windowMs))
	})
	lag := int64(0)
	for _, gk := range gks {
		g := c.groups[gk]
		for {
			r, ok := g.nextRound()
			if !ok || !all && !c.complete(g, r, status) {
				break
			}
			out = c.round(g, r, out)
		}
		done := g.doneMs
		if done == noTime {
			done = g.firstEndMs
		}
		lag = max(lag, g.maxEndMs-done)
	}
	c.stats.RoundLagMs.Store(lag)
	return out
}

// nextRound is the oldest slot end queued.
func (g *clusterGroup) nextRound() (int64, bool) {
	r, ok := int64(0), false
	for _, p := range g.parts {
		if len(p.queue) > 0 && (!ok || p.queue[0].SlotEndMs < r) {
			r, ok = p.queue[0].SlotEndMs, true
		}
	}
	return r, ok
}

func (c *ClusterAlerts) complete(g *clusterGroup, r int64, status StatusFunc) bool {
	for id := range g.partitions {
		// A partition not heard from yet is waited for as one just behind
		// the first batch: up to the hold from the start.
		latest := g.firstEndMs - 1
		if p := g.parts[id]; p != nil {
			latest = p.latest
		}
		switch {
		case latest >= r:
		case latest <= g.maxEndMs-c.holdMs:
		case status != nil && waitless(status(g.topic, id), r):
		default:
			return false
		}
	}
	return true
}

// waitless reports whether a partition with status st need not be
// waited for at slot end r: it is silent, or it never had an event and
// its idle clock passed r.
func waitless(st PartitionStatus, r int64) bool {
	return st.Silent || st.IdleClockMs > 0 && st.IdleClockMs >= r
}

// round applies the batches of slot end r, lapses partitions with no
// batch for a window, and evaluates every key.
func (c *ClusterAlerts) round(g *clusterGroup, r int64, out []schemas.HotKeyEvent) []schemas.HotKeyEvent {
	c.stats.Rounds.Add(1)
	ids := make([]int32, 0, len(g.parts))
	for id := range g.parts {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		p := g.parts[id]
		for len(p.queue) > 0 && p.queue[0].SlotEndMs <= r {
			c.apply(g, p, &p.queue[0])
			p.queue[0] = schemas.Candidates{}
			p.queue = p.queue[1:]
		}
		if p.applied != noTime && p.applied+g.windowMs <= r {
			c.lapse(g, p)
		}
	}
	g.doneMs = r
	if r < c.startMs {
		return out // before the start: sums may lack partitions (SetStart)
	}
	keys := c.keys[:0]
	for _, k := range g.keys {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b *clusterKey) int {
		return cmp.Or(cmp.Compare(a.id.rule, b.id.rule), cmp.Compare(a.id.app, b.id.app), cmp.Compare(a.id.key, b.id.key))
	})
	coolMs, suppressMs, bearsMs := c.d.CoolDown.Milliseconds(), c.d.Suppress.Milliseconds(), c.bearsMs()
	for _, k := range keys {
		x := c.rules.byName(k.id.rule)
		lv := c.measure(g, k, ids)
		above := x != nil && x.alert && lv.reaches(x, g.windowMs)
		switch {
		case k.hot && above:
			k.belowMs = noTime
			ws := float64(g.windowMs) / 1000
			if k.ep.due(r, g.windowMs, x.rate > 0, x.bytes > 0, float64(lv.events)/ws, float64(lv.bytes)/ws, c.d.RefreshChange) {
				// The rounds' counts are over the window ending at r, so
				// the update's rate is the key's over it; its event time
				// is r, the round that decided it.
				ev := c.event(g, x, k, lv, schemas.HotKeyUpdate, r)
				m := suggest(lv.reads, lv.writes, float64(lv.writes)/ws, c.d.SplitCapacity)
				ev.Mitigation = &m
				k.ep.update(&ev, r)
				out = append(out, ev)
				c.stats.Updates.Add(1)
			}
		case k.hot:
			if k.belowMs == noTime {
				k.belowMs = r
			}
			if r-k.belowMs >= coolMs {
				k.hot, k.cooledMs = false, k.belowMs+coolMs
				ev := c.event(g, x, k, lv, schemas.HotKeyCooled, k.cooledMs)
				ev.PeakRate = k.ep.peak
				out = append(out, ev)
				c.stats.Cooled.Add(1)
			}
		case above && (k.cooledMs == noTime || r >= k.cooledMs+suppressMs):
			k.hot, k.deferred, k.belowMs, k.raisedMs = true, false, noTime, r
			// The onset is the newest event time among the partitions whose
			// counts crossed: an idle partition's clock follows the wall
			// clock, ahead of the events.
			onsetMs := int64(noTime)
			for _, id := range lv.parts {
				onsetMs = max(onsetMs, g.parts[id].clockMs)
			}
			if onsetMs == noTime {
				onsetMs = r - 1
			}
			ev := c.event(g, x, k, lv, schemas.HotKeyHot, onsetMs)
			ws := float64(g.windowMs) / 1000
			m := suggest(lv.reads, lv.writes, float64(lv.writes)/ws, c.d.SplitCapacity)
			ev.Mitigation = &m
			k.ep.start(&ev, r)
			out = append(out, ev)
			c.stats.Hot.Add(1)
		case above:
			k.deferred = true
		default:
			k.deferred = false
		}
		if len(k.counts) == 0 && !k.hot && !k.deferred && (k.cooledMs == noTime || r >= k.cooledMs+bearsMs) {
			delete(g.keys, k.id)
			c.nkeys--
			c.stats.Keys.Store(int64(c.nkeys))
		}
	}
	clear(keys)
	c.keys = keys[:0]
	return out
}

// apply makes b its partition's batch in force: the keys it listed
// before and not now drop their counts from it.
func (c *ClusterAlerts) apply(g *clusterGroup, p *clusterPart, b *schemas.Candidates) {
	for _, k := range p.listed {
		delete(k.counts, p.id)
	}
	p.listed = p.listed[:0]
	p.applied, p.clockMs, p.floors = b.SlotEndMs, b.ClockMs, slices.Clone(b.Rules)
	for i := range b.Keys {
		ck := &b.Keys[i]
		id := clusterKeyID{ck.Rule, ck.App, ck.Key}
		k := g.keys[id]
		if k == nil {
			if c.nkeys >= c.d.ClusterKeys {
				c.stats.KeysRefused.Add(1)
				continue
			}
			k = &clusterKey{id: id, short: ck.Shortened, counts: map[int32]schemas.CandidateKey{}, belowMs: noTime, cooledMs: noTime, raisedMs: noTime}
			g.keys[id] = k
			c.nkeys++
			c.stats.Keys.Store(int64(c.nkeys))
		}
		k.counts[p.id] = *ck // strings only: nothing of b is kept
		p.listed = append(p.listed, k)
	}
}

// lapse drops a partition's counts and floors: it sent no batch for a
// window, so it had no event in it.
func (c *ClusterAlerts) lapse(g *clusterGroup, p *clusterPart) {
	for _, k := range p.listed {
		delete(k.counts, p.id)
	}
	p.listed, p.floors, p.applied = p.listed[:0], nil, noTime
}

// clusterLevel is a key's cluster-wide counts at a round.
type clusterLevel struct {
	events, bytes     uint64 // lower bounds: sums of the listed counts
	upEvents, upBytes uint64 // upper bounds
	reads, writes     uint64
	parts             []int32
}

func (c *ClusterAlerts) measure(g *clusterGroup, k *clusterKey, ids []int32) clusterLevel {
	var lv clusterLevel
	for _, id := range ids {
		p := g.parts[id]
		if ck, ok := k.counts[id]; ok {
			lv.events += ck.Events
			lv.bytes += ck.Bytes
			lv.reads += ck.Reads
			lv.writes += ck.Writes
			lv.parts = append(lv.parts, id)
			continue
		}
		for _, f := range p.floors {
			if f.Name == k.id.rule {
				// Fewer than the floor: at most floor − 1.
				lv.upEvents += max(f.Floor, 1) - 1
				lv.upBytes += max(f.FloorBytes, 1) - 1
			}
		}
	}
	lv.upEvents += lv.events
	lv.upBytes += lv.bytes
	return lv
}

// reaches reports whether the level reaches x's cluster-wide thresholds
// over a window of windowMs, by the bound x compares.
func (lv clusterLevel) reaches(x *rule, windowMs int64) bool {
	ev, by := lv.events, lv.bytes
	if x.upper {
		ev, by = lv.upEvents, lv.upBytes
	}
	return x.rate > 0 && float64(ev)*1000 >= x.rate*float64(windowMs) ||
		x.bytes > 0 && float64(by)*1000 >= x.bytes*float64(windowMs)
}

// event builds a cluster event of type typ from the key's level at a
// round, its ID and OnsetMs from atMs (an update's OnsetMs is set to the
// episode's onset after).
func (c *ClusterAlerts) event(g *clusterGroup, x *rule, k *clusterKey, lv clusterLevel, typ string, atMs int64) schemas.HotKeyEvent {
	ws := float64(g.windowMs) / 1000
	ev := schemas.HotKeyEvent{
		Version: schemas.HotKeyVersion,
		ID:      schemas.HotKeyID(g.topic, schemas.ClusterPartition, k.id.rule, typ, k.id.app, k.id.key, atMs),
		Type:    typ, App: k.id.app, Key: k.id.key, KeyHash: string(hexHash(nil, sketch.Hash(k.id.key))), Rule: k.id.rule,
		Rate: float64(lv.events) / ws, Count: lv.events, Error: lv.upEvents - lv.events,
		BytesRate: float64(lv.bytes) / ws, WindowMs: g.windowMs,
		Topic: g.topic, Partition: schemas.ClusterPartition, Partitions: lv.parts, OnsetMs: atMs,
		Reads: lv.reads, Writes: lv.writes, Bytes: lv.bytes, Shortened: k.short,
	}
	if x != nil {
		ev.Threshold, ev.BytesThreshold = x.rate, x.bytes
	}
	return ev
}
