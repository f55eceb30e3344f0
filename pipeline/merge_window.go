package pipeline

import (
	"cmp"
	"math"
	"math/bits"
	"slices"
	"strings"

	"github.com/keyheat/keyheat/schemas"
	"github.com/keyheat/keyheat/sketch"
)

// This file merges one window's summaries into its reports. Every step
// walks the summaries in topic and partition order and ends in a sort with
// a total order, so no map iteration order reaches a report.
//
// Count bounds. Every list of a partition's summary (Top, Big, TopReads,
// TopWrites, TopLatency) gives a key it lists [Count − Error, Count]
// around its true count there, and the partition bounds every key its Top
// does not list by its Floor. A key listed in several lists of one summary
// takes the tightest bounds they give, and, figure by figure, the largest
// lower bound (a figure is a lower bound, exact when Error is 0; Bytes in
// a list ranked by bytes is bounded below by Bytes − BytesError). Per
// topic:
//
//   - keyed by access key: a key lives on one partition. Listed there, its
//     bounds are that partition's; listed nowhere, it lies in
//     [0, max of the partitions' Floors].
//   - not keyed: a key's events are spread, so the bounds add up over the
//     partitions; one that does not list the key contributes 0 below and
//     min(its Count-Min estimate, its Floor) above, as sketch.TopK.Merge
//     does.
//
// Topics add up. A key listed nowhere is bounded by the same sums with
// every partition unlisting, which is the report's Floor (raised to the
// largest Count cut from Top).
//
// A key is its app window's app and the key string. A partition that
// folded an app into schemas.OtherApp lists that app's keys under
// OtherApp, so they merge there, and the app's own report covers the
// partitions that did not fold it: give the partitions an app limit at
// least as high as the merger's MaxApps.

// reportScope accumulates what one report covers: one app, the folded apps, or
// the whole cluster.
type reportScope struct {
	events, bytes, reads, writes, latencyUs, late uint64
	partEvents, partBytes                         []uint64 // by load partition
	slots                                         []schemas.SlotCount
	distinct                                      *sketch.CardinalityUnion
	keys                                          []schemas.KeyCount
	floor                                         uint64
	// inexact: some summary's lists are approximate, or a partition of a
	// topic not keyed by access key cut its list (so a key's events on it
	// may be unknown): the report cannot claim to be exact.
	inexact bool
}

// appWin is one app's window in one summary.
type appWin struct {
	s    *heldSummary
	app  int // index in s.w.Apps
	load int // index of the summary's partition among the load partitions
}

func (a appWin) window() *schemas.AppWindow { return &a.s.w.Apps[a.app] }

// windowKey is what one summary's lists say of a key: the tightest count
// bounds and the largest lower bound of every figure.
type windowKey struct {
	upper, lower                    uint64
	bytes, reads, writes, latencyUs uint64
	shortened                       bool
}

// of is what entry e alone says.
func windowKeyOf(e *schemas.KeyCount) windowKey {
	return windowKey{upper: e.Count, lower: e.Count - min(e.Error, e.Count), bytes: e.Bytes - min(e.BytesError, e.Bytes),
		reads: e.Reads, writes: e.Writes, latencyUs: e.LatencyUs, shortened: e.Shortened}
}

// and narrows k by another entry of the same key in the same summary:
// both bound the same events.
func (k *windowKey) and(o windowKey) {
	k.upper, k.lower = min(k.upper, o.upper), max(k.lower, o.lower)
	k.bytes, k.reads, k.writes, k.latencyUs = max(k.bytes, o.bytes), max(k.reads, o.reads), max(k.writes, o.writes), max(k.latencyUs, o.latencyUs)
	k.shortened = k.shortened || o.shortened
}

// merge turns a pending window into its reports. idle are partitions
// with no event in it that have not said so by a summary.
func (m *Merger) merge(p *pendingWindow, missing []string, idle []mergePart) MergedWindow {
	sums := make([]*heldSummary, 0, len(p.parts))
	for _, s := range p.parts {
		sums = append(sums, s)
	}
	slices.SortFunc(sums, comparePart)

	// Topics merged, and whether each was keyed on every partition.
	var topics []string
	keyed := map[string]bool{}
	for _, s := range sums {
		if _, seen := keyed[s.w.Topic]; !seen {
			topics = append(topics, s.w.Topic)
			keyed[s.w.Topic] = true
		}
		keyed[s.w.Topic] = keyed[s.w.Topic] && s.w.Keyed
	}
	allKeyed := true
	for _, t := range topics {
		allKeyed = allKeyed && keyed[t]
	}

	// The partitions whose load the window shows: those that reported it,
	// those that reported a later window without it and the idle ones (no
	// events in it). Missing ones are unknown; finished ones are no longer
	// there.
	var loads []mergePart
	loadIndex := map[mergePart]int{}
	for _, topic := range m.sortedTopics() {
		t := m.topics[topic]
		for part := int32(0); part < t.partitions; part++ {
			k := mergePart{topic, part}
			ps := t.parts[part]
			if p.parts[k] != nil || (ps != nil && ps.lastStartMs >= p.startMs) || slices.Contains(idle, k) {
				loadIndex[k] = len(loads)
				loads = append(loads, k)
			}
		}
	}

	// Each app's windows, in summary order.
	wins := map[string][]appWin{}
	for _, s := range sums {
		for i := range s.w.Apps {
			name := s.w.Apps[i].App
			wins[name] = append(wins[name], appWin{s: s, app: i, load: loadIndex[mergePart{s.w.Topic, s.w.Partition}]})
		}
	}
	apps := make([]*reportScope, 0, len(wins))
	names := make([]string, 0, len(wins))
	for name := range wins {
		names = append(names, name)
	}
	slices.Sort(names)
	byName := map[string]*reportScope{}
	for _, name := range names {
		sc := m.mergeApp(name, wins[name], keyed, len(loads))
		apps = append(apps, sc)
		byName[name] = sc
	}

	// The cluster needs no keys of its own: its rankings come from its
	// apps' (rankParts).
	cluster := m.combine(apps, len(loads), false)
	for _, s := range sums {
		cluster.late += s.w.Late
	}

	// Apps beyond MaxApps by events fold into OtherApp with any OtherApp
	// the partitions sent.
	ranked := slices.DeleteFunc(slices.Clone(names), func(n string) bool { return n == schemas.OtherApp })
	slices.SortStableFunc(ranked, func(a, b string) int { return cmp.Compare(byName[b].events, byName[a].events) })
	var kept []string
	var folded []*reportScope
	for i, n := range ranked {
		if i < m.cfg.MaxApps {
			kept = append(kept, n)
		} else {
			folded = append(folded, byName[n])
		}
	}
	if sc := byName[schemas.OtherApp]; sc != nil {
		folded = append(folded, sc)
	}

	w := reportWindow{startMs: p.startMs, topics: topics, keyed: allKeyed, missing: missing, loads: loads}
	out := MergedWindow{StartMs: p.startMs, EndMs: p.startMs + m.windowMs}
	reportApps := kept
	if len(folded) > 0 {
		byName[schemas.OtherApp] = m.combine(folded, len(loads), true)
		reportApps = append(reportApps, schemas.OtherApp)
	}
	slices.Sort(reportApps)
	// Between them the reported apps have every key of the window.
	rankings := make([]*scopeRanking, len(reportApps))
	for i, name := range reportApps {
		rankings[i] = m.rankScope(byName[name].keys)
	}
	out.Reports = make([]schemas.WindowReport, 1, 1+len(reportApps))
	for i, name := range reportApps {
		out.Reports = append(out.Reports, m.report(byName[name], rankings[i], schemas.ScopeApp, name, w))
	}
	out.Reports[0] = m.report(cluster, m.rankParts(rankings), schemas.ScopeCluster, "", w)
	// The reports hold copies of the keys they list: the scopes' keys go
	// back to be gathered into again.
	for _, sc := range apps {
		m.giveKeys(sc.keys)
	}
	if len(folded) > 0 {
		m.giveKeys(byName[schemas.OtherApp].keys)
	}
	m.scratch.release()
	return out
}

// mergeApp merges one app's windows into its scope with merged key
// bounds. Of the keys it keeps only those a report can show (candidates,
// below): each with the figures and bounds it would have had with every
// key kept.
func (m *Merger) mergeApp(name string, wins []appWin, keyed map[string]bool, nLoads int) *reportScope {
	sc := &reportScope{partEvents: make([]uint64, nLoads), partBytes: make([]uint64, nLoads)}
	listed, allKeyed := 0, true
	for _, aw := range wins {
		a := aw.window()
		listed += len(a.Top) + len(a.Big) + len(a.TopReads) + len(a.TopWrites) + len(a.TopLatency)
		allKeyed = allKeyed && keyed[aw.s.w.Topic]
	}
	s := &m.scratch
	// Keyed, the table is sized for every listed key, unless prune may
	// rule most of them out.
	s.reset(listed, allKeyed && listed < m.pruneMin, len(wins))
	slotLists := make([][]schemas.SlotCount, 0, len(wins))
	for _, aw := range wins {
		a := aw.window()
		sc.events += a.Events
		sc.bytes += a.Bytes
		sc.reads += a.Reads
		sc.writes += a.Writes
		sc.latencyUs += a.LatencyUs
		sc.partEvents[aw.load] += a.Events
		sc.partBytes[aw.load] += a.Bytes
		sc.inexact = sc.inexact || a.Approximate || (!keyed[aw.s.w.Topic] && a.Floor > 0)
		slotLists = append(slotLists, a.Slots)
		if d := &aw.s.apps[aw.app]; d.distinct != nil {
			sc.distinct = m.addDistinct(sc.distinct, d.distinct)
		}
	}
	sc.slots = m.sumSlots(slotLists)

	// What the windows that do not list a key may add to its count, topic
	// by topic (wins are in topic order): keyed, the largest Floor of the
	// topic's windows when none lists it; not keyed, every unlisting
	// window's Floor, or its Count-Min estimate of the key when lower.
	// topicOf[wi] is the index in topics of window wi's topic.
	type topicSpan struct {
		lo, hi int
		keyed  bool
		floor  uint64 // keyed: the largest Floor
	}
	var spans []topicSpan
	topicOf := make([]int32, len(wins))
	// most bounds what the unlisting windows add to any key: the keyed
	// topics' floors plus the unkeyed windows' Floors (floorSum), of which
	// a key's own listing windows' (keyAcc.floorListed) do not count.
	var keyedFloors, floorSum uint64
	for lo := 0; lo < len(wins); {
		topic := wins[lo].s.w.Topic
		hi := lo
		for hi < len(wins) && wins[hi].s.w.Topic == topic {
			topicOf[hi] = int32(len(spans))
			hi++
		}
		sp := topicSpan{lo: lo, hi: hi, keyed: keyed[topic]}
		for _, aw := range wins[lo:hi] {
			f := aw.window().Floor
			if sp.keyed {
				sp.floor = max(sp.floor, f)
			} else {
				sc.floor = saturatingAdd(sc.floor, f)
				floorSum = saturatingAdd(floorSum, f)
			}
		}
		if sp.keyed {
			sc.floor = saturatingAdd(sc.floor, sp.floor)
			keyedFloors = saturatingAdd(keyedFloors, sp.floor)
		}
		spans = append(spans, sp)
		lo = hi
	}

	// Keys folded: all, or, for an app of many listed entries whose
	// unlisting windows add little (no Floors of unkeyed windows), those
	// prune does not rule out.
	var pruned *pruneSet
	if listed >= m.pruneMin && floorSum == 0 {
		pruned = s.prune(wins, m.cfg.TopN, keyedFloors)
	}
	skipped := 0
	for wi, aw := range wins {
		skipped += s.fold(int32(wi), aw.window(), &aw.s.apps[aw.app].hashes, keyed[aw.s.w.Topic], pruned)
	}
	if pruned != nil {
		m.stats.KeysPrunedFolded.Add(int64(len(s.accs)))
		m.stats.EntriesPruned.Add(int64(skipped))
	} else {
		m.stats.KeysFolded.Add(int64(len(s.accs)))
	}

	// Candidates. A report lists the first TopN+1 keys by count (the
	// last to raise its Floor) and the first TopN by each figure, ties by
	// count. A key's count is at least its listed upper bounds' sum and
	// at most that plus every Floor of the windows not listing it; its
	// figures are final. So a key whose most is below the (TopN+1)-th
	// largest least is after TopN+1 keys by count, and one whose figure
	// is below the TopN-th largest after TopN keys by it: neither can
	// show, in this scope or in one combining it with other apps (whose
	// keys only add competitors). Only the others' counts are worked out.
	least, figMin := s.thresholds(m.cfg.TopN)
	s.cands = s.cands[:0]
	for id := range s.accs {
		a := &s.accs[id]
		most := uint64(math.MaxUint64)
		if floorSum != math.MaxUint64 {
			most = saturatingAdd(a.upper, saturatingAdd(keyedFloors, floorSum-a.floorListed))
		}
		cand := most >= least
		for f := range figMin {
			cand = cand || keyFigure(f).ofAcc(a) >= figMin[f]
		}
		if cand {
			s.cands = append(s.cands, int32(id))
		}
	}

	sc.keys = m.takeKeys(len(s.cands))
	listedTopic := make([]bool, len(spans))
	for _, id := range s.cands {
		a := &s.accs[id]
		stamp := id + 1
		clear(listedTopic)
		s.stamp[a.firstWin] = stamp
		listedTopic[topicOf[a.firstWin]] = true
		for i := a.more; i >= 0; i = s.more[i].next {
			wi := s.more[i].win
			s.stamp[wi] = stamp
			listedTopic[topicOf[wi]] = true
		}
		count, spread := a.upper, false
		for ti, sp := range spans {
			if sp.keyed {
				if !listedTopic[ti] && sp.floor > 0 {
					count = saturatingAdd(count, sp.floor)
					spread = true
				}
				continue
			}
			for wi := sp.lo; wi < sp.hi; wi++ {
				if s.stamp[wi] == stamp {
					continue
				}
				aw := wins[wi]
				bound := aw.window().Floor
				if cms := aw.s.apps[aw.app].cms; cms != nil && bound > 0 {
					bound = min(bound, cms.EstimateHash(a.hash))
				}
				if bound > 0 {
					count = saturatingAdd(count, bound)
					spread = true
				}
			}
		}
		kc := schemas.KeyCount{
			App: name, Key: a.key, Count: count, Error: count - a.lower,
			Bytes: a.bytes, Reads: a.reads, Writes: a.writes, LatencyUs: a.latencyUs,
			Partition: -1, Shortened: a.shortened,
		}
		if a.listings == 1 && !spread {
			kc.Partition = wins[a.firstWin].s.w.Partition
		}
		sc.keys = append(sc.keys, kc)
	}
	return sc
}

// combine merges scopes of distinct apps (their keys never collide) into
// one: totals and loads add, distinct sketches merge, floors take the
// largest (each bounds its own app's keys); with keys, their keys
// gather.
func (m *Merger) combine(parts []*reportScope, nLoads int, keys bool) *reportScope {
	sc := &reportScope{partEvents: make([]uint64, nLoads), partBytes: make([]uint64, nLoads)}
	if keys {
		n := 0
		for _, p := range parts {
			n += len(p.keys)
		}
		sc.keys = m.takeKeys(n)
	}
	slotLists := make([][]schemas.SlotCount, 0, len(parts))
	for _, p := range parts {
		sc.events += p.events
		sc.bytes += p.bytes
		sc.reads += p.reads
		sc.writes += p.writes
		sc.latencyUs += p.latencyUs
		sc.late += p.late
		for i := range nLoads {
			sc.partEvents[i] += p.partEvents[i]
			sc.partBytes[i] += p.partBytes[i]
		}
		slotLists = append(slotLists, p.slots)
		if p.distinct != nil {
			sc.distinct = m.mergeDistinct(sc.distinct, p.distinct)
		}
		if keys {
			sc.keys = append(sc.keys, p.keys...)
		}
		sc.floor = max(sc.floor, p.floor)
		sc.inexact = sc.inexact || p.inexact
	}
	sc.slots = m.sumSlots(slotLists)
	return sc
}

// Scopes' key slices are kept for the next windows' scopes only up to
// maxScopeKeys slices of at most maxScopeKeyCap keys each, so a window of
// many keys does not stay pinned.
const (
	maxScopeKeys   = 8
	maxScopeKeyCap = 1 << 14
)

// takeKeys returns an empty key slice with room for n keys: a kept one
// when there is one.
func (m *Merger) takeKeys(n int) []schemas.KeyCount {
	if k := len(m.scopeKeys); k > 0 {
		l := m.scopeKeys[k-1]
		m.scopeKeys[k-1] = nil
		m.scopeKeys = m.scopeKeys[:k-1]
		return slices.Grow(l, n)
	}
	return make([]schemas.KeyCount, 0, n)
}

// giveKeys keeps l, which nothing refers to any more, for takeKeys.
func (m *Merger) giveKeys(l []schemas.KeyCount) {
	if cap(l) == 0 || cap(l) > maxScopeKeyCap || len(m.scopeKeys) >= maxScopeKeys {
		return
	}
	clear(l) // drops the keys' strings
	m.scopeKeys = append(m.scopeKeys, l[:0])
}

// addDistinct folds the summary's distinct sketch d into acc, a fresh
// union when acc is nil.
func (m *Merger) addDistinct(acc *sketch.CardinalityUnion, d *sketch.CardinalityBlob) *sketch.CardinalityUnion {
	if acc == nil {
		if acc = m.newDistinct(); acc == nil {
			return nil
		}
	}
	// Add fails only on differing precisions, which Add refuses.
	_ = acc.Add(d)
	return acc
}

// mergeDistinct merges the union d into acc, a fresh union when acc is
// nil (so d stays as it was).
func (m *Merger) mergeDistinct(acc, d *sketch.CardinalityUnion) *sketch.CardinalityUnion {
	if acc == nil {
		if acc = m.newDistinct(); acc == nil {
			return nil
		}
	}
	// Merge fails only on differing precisions, which Add refuses.
	_ = acc.Merge(d)
	return acc
}

// newDistinct is an empty union of the summaries' precision, or nil
// (unreachable: the precision came from a decoded sketch). It starts
// sparse, as a report of few keys is estimated by linear counting.
func (m *Merger) newDistinct() *sketch.CardinalityUnion {
	u, err := sketch.NewCardinalityUnion(uint8(m.hllPrecision))
	if err != nil {
		return nil
	}
	return u
}

// sumSlots adds slot lists (each sorted by slot) into one sorted list,
// counting in the merger's dense scratch array of every slot. The slots
// made non-zero are marked in a bitmap, whose 256 words are read in
// order: a window of few keys touches few of the 16,384 slots, and this
// neither scans them all nor sorts the touched ones.
func (m *Merger) sumSlots(lists [][]schemas.SlotCount) []schemas.SlotCount {
	if m.slotScratch == nil {
		m.slotScratch = make([]uint64, RedisSlots)
	}
	n := 0
	for _, l := range lists {
		for _, sc := range l {
			if m.slotScratch[sc.Slot] == 0 && sc.Events > 0 {
				m.slotTouched[sc.Slot/64] |= 1 << (sc.Slot % 64)
				n++
			}
			m.slotScratch[sc.Slot] += sc.Events
		}
	}
	if n == 0 {
		return nil
	}
	out := make([]schemas.SlotCount, 0, n)
	for wi, word := range m.slotTouched {
		for word != 0 {
			slot := uint16(wi*64 + bits.TrailingZeros64(word))
			word &= word - 1
			// A slot's sum that wrapped around to 0 (counts of a summary
			// are not checked against its events) is left out, as when
			// every slot was scanned.
			if events := m.slotScratch[slot]; events > 0 {
				out = append(out, schemas.SlotCount{Slot: slot, Events: events})
				m.slotScratch[slot] = 0
			}
		}
		m.slotTouched[wi] = 0
	}
	return out
}

// reportWindow is what every report of one window shares.
type reportWindow struct {
	startMs int64
	topics  []string
	keyed   bool
	missing []string
	loads   []mergePart
}

// report builds the report of one scope from its rankings, which it
// takes.
func (m *Merger) report(sc *reportScope, rk *scopeRanking, scopeName, app string, w reportWindow) schemas.WindowReport {
	r := schemas.WindowReport{
		Version: schemas.ReportVersion, ID: schemas.WindowReportID(scopeName, app, w.startMs),
		Scope: scopeName, App: app, StartMs: w.startMs, EndMs: w.startMs + m.windowMs,
		Topics: w.topics, Events: sc.events, Bytes: sc.bytes, Reads: sc.reads, Writes: sc.writes,
		LatencyUs: sc.latencyUs, Late: sc.late, Keyed: w.keyed, Partial: len(w.missing) > 0, Missing: w.missing,
	}
	if sc.distinct != nil {
		r.Distinct = sc.distinct.Estimate()
	}
	// A key's share is of this scope's events.
	for _, l := range [][]schemas.KeyCount{rk.top, rk.figs[byBytes], rk.figs[byReads], rk.figs[byWrites], rk.figs[byLatency]} {
		for i := range l {
			l[i].Share = shareOf(l[i].Count, sc.events)
		}
	}

	// Top by events; the largest count cut raises the floor.
	top := rk.top
	r.Floor = sc.floor
	if len(top) > m.cfg.TopN {
		r.Floor = max(r.Floor, top[m.cfg.TopN].Count)
		top = top[:m.cfg.TopN]
	}
	r.Guaranteed = guarantee(top, r.Floor, &m.guaranteeScratch)
	r.Top = top
	r.TopBytes = rk.figs[byBytes]
	r.TopReads = rk.figs[byReads]
	r.TopWrites = rk.figs[byWrites]
	r.TopLatency = rk.figs[byLatency]
	r.Approximate = sc.inexact || r.Guaranteed < len(r.Top)
	for _, l := range [][]schemas.KeyCount{r.Top, r.TopBytes, r.TopReads, r.TopWrites, r.TopLatency} {
		for i := range l {
			r.Approximate = r.Approximate || l[i].Error > 0
		}
	}

	loads := make([]schemas.PartitionLoad, len(w.loads))
	for i, k := range w.loads {
		loads[i] = schemas.PartitionLoad{Topic: k.topic, Partition: k.partition, Events: sc.partEvents[i], Bytes: sc.partBytes[i]}
	}
	partitionSkew(&r.Skew, loads)
	keySkew(&r.Skew, r.Top, sc.events)
	slotSkew(&r.Skew, sc.slots, m.layout, m.cfg.HotSlots)
	r.Advice = advise(r.Top, m.windowMs, m.cfg.Threshold, m.cfg.SplitCapacity)
	return r
}

// guarantee returns how many keys of top (ranked by Count) are surely the
// heaviest of the window, and moves them to its front: the largest g for
// which some g listed keys each have a lower bound (Count − Error) at
// least the upper bound of every other listed key and of every key left
// out (floor). Those g keys are then a true top g (ties aside), which is
// Metwally, Agrawal and El Abbadi's guaranteed top-k. Taking the keys by
// lower bound finds the largest such set. Ranked by Count, they already
// come first, save for ties, so the move keeps Top's order in practice.
func guarantee(top []schemas.KeyCount, floor uint64, gs *guaranteeScratch) int {
	n := len(top)
	if n == 0 {
		return 0
	}
	lower := func(k *schemas.KeyCount) uint64 { return k.Count - min(k.Error, k.Count) }
	byLower := slices.Grow(gs.byLower[:0], n)[:n]
	for i := range byLower {
		byLower[i] = i
	}
	slices.SortStableFunc(byLower, func(a, b int) int { return cmp.Compare(lower(&top[b]), lower(&top[a])) })
	// rest[i]: the largest count any key but the first i by lower bound
	// can have.
	rest := slices.Grow(gs.rest[:0], n+1)[:n+1]
	rest[n] = floor
	for i := n - 1; i >= 0; i-- {
		rest[i] = max(rest[i+1], top[byLower[i]].Count)
	}
	g, least := 0, uint64(math.MaxUint64)
	for i := range n {
		least = min(least, lower(&top[byLower[i]]))
		if least >= rest[i+1] {
			g = i + 1
		}
	}
	gs.byLower, gs.rest = byLower, rest
	// Already first, as they are in practice, the g keys need no move.
	in := make([]bool, n)
	moves := false
	for _, i := range byLower[:g] {
		in[i] = true
		moves = moves || i >= g
	}
	if !moves {
		return g
	}
	moved := make([]schemas.KeyCount, 0, n)
	for pass := range 2 {
		for i := range top {
			if in[i] == (pass == 0) {
				moved = append(moved, top[i])
			}
		}
	}
	copy(top, moved)
	return g
}

// guaranteeScratch is guarantee's buffers, reused across reports.
type guaranteeScratch struct {
	byLower []int
	rest    []uint64
}

// keyFigure names the per-key figure a secondary ranking sorts by.
type keyFigure int

const (
	byBytes keyFigure = iota
	byReads
	byWrites
	byLatency
)

// ofAcc is the figure of a key being merged.
func (f keyFigure) ofAcc(a *keyAcc) uint64 {
	switch f {
	case byBytes:
		return a.bytes
	case byReads:
		return a.reads
	case byWrites:
		return a.writes
	default:
		return a.latencyUs
	}
}

func (f keyFigure) of(k *schemas.KeyCount) uint64 {
	switch f {
	case byBytes:
		return k.Bytes
	case byReads:
		return k.Reads
	case byWrites:
		return k.Writes
	default:
		return k.LatencyUs
	}
}

// selectTop returns the first n keys in the order of compare (a total
// order), sorted, as a new slice that is never nil.
func selectTop(keys []schemas.KeyCount, n int, compare func(a, b *schemas.KeyCount) int) []schemas.KeyCount {
	n = min(n, len(keys))
	// Room for n kept and the one offered past them: one allocation.
	b := bestN[int32, keyOrder]{h: make([]int32, 0, n+1)}
	b.reset(n, keyOrder{keys, compare})
	for i := range keys {
		b.offer(int32(i))
	}
	h := b.sorted()
	out := make([]schemas.KeyCount, len(h))
	for i, k := range h {
		out[i] = keys[k]
	}
	return out
}

// keyOrder ranks indices into keys by compare of the keys.
type keyOrder struct {
	keys    []schemas.KeyCount
	compare func(a, b *schemas.KeyCount) int
}

func (o keyOrder) before(a, b *int32) bool { return o.compare(&o.keys[*a], &o.keys[*b]) < 0 }

func compareAppKey(a, b *schemas.KeyCount) int {
	if c := strings.Compare(a.App, b.App); c != 0 {
		return c
	}
	return strings.Compare(a.Key, b.Key)
}

// saturatingAdd is a + b, saturating at the largest uint64 instead of wrapping.
func saturatingAdd(a, b uint64) uint64 {
	if s := a + b; s >= a {
		return s
	}
	return math.MaxUint64
}
