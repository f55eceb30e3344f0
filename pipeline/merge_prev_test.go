package pipeline

import (
	"cmp"
	"math"
	"slices"

	"github.com/keyheat/keyheat/schemas"
)

// This file is the merge stage as it was before its rankings were
// selected once per window and its buffers reused (a verbatim copy of
// those functions, renamed with a Prev suffix), for
// merge_prev_diff_test.go to hold today's reports to, byte for byte.

// merge turns a pending window into its reports. idle are partitions
// with no event in it that have not said so by a summary.
func (m *Merger) mergePrev(p *pendingWindow, missing []string, idle []mergePart) MergedWindow {
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
		sc := m.mergeAppPrev(name, wins[name], keyed, len(loads))
		apps = append(apps, sc)
		byName[name] = sc
	}

	cluster := m.combinePrev(apps, len(loads))
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
	out.Reports = append(out.Reports, m.reportPrev(cluster, schemas.ScopeCluster, "", w))
	reportApps := kept
	if len(folded) > 0 {
		byName[schemas.OtherApp] = m.combinePrev(folded, len(loads))
		reportApps = append(reportApps, schemas.OtherApp)
	}
	slices.Sort(reportApps)
	for _, name := range reportApps {
		out.Reports = append(out.Reports, m.reportPrev(byName[name], schemas.ScopeApp, name, w))
	}
	m.scratch.release()
	return out
}

// mergeApp merges one app's windows into its scope with merged key
// bounds. Of the keys it keeps only those a report can show (candidates,
// below): each with the figures and bounds it would have had with every
// key kept.
func (m *Merger) mergeAppPrev(name string, wins []appWin, keyed map[string]bool, nLoads int) *reportScope {
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
	sc.slots = m.sumSlotsPrev(slotLists)

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

	sc.keys = make([]schemas.KeyCount, 0, len(s.cands))
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
// largest (each bounds its own app's keys).
func (m *Merger) combinePrev(parts []*reportScope, nLoads int) *reportScope {
	sc := &reportScope{partEvents: make([]uint64, nLoads), partBytes: make([]uint64, nLoads)}
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
		sc.keys = append(sc.keys, p.keys...)
		sc.floor = max(sc.floor, p.floor)
		sc.inexact = sc.inexact || p.inexact
	}
	sc.slots = m.sumSlotsPrev(slotLists)
	return sc
}

// sumSlots adds slot lists (each sorted by slot) into one sorted list,
// counting in the merger's dense scratch array of every slot.
func (m *Merger) sumSlotsPrev(lists [][]schemas.SlotCount) []schemas.SlotCount {
	if m.slotScratch == nil {
		m.slotScratch = make([]uint64, RedisSlots)
	}
	n := 0
	for _, l := range lists {
		for _, sc := range l {
			if m.slotScratch[sc.Slot] == 0 && sc.Events > 0 {
				n++
			}
			m.slotScratch[sc.Slot] += sc.Events
		}
	}
	if n == 0 {
		return nil
	}
	out := make([]schemas.SlotCount, 0, n)
	for slot, events := range m.slotScratch {
		if events > 0 {
			out = append(out, schemas.SlotCount{Slot: uint16(slot), Events: events})
			m.slotScratch[slot] = 0
		}
	}
	return out
}

// report builds the report of one scope.
func (m *Merger) reportPrev(sc *reportScope, scopeName, app string, w reportWindow) schemas.WindowReport {
	r := schemas.WindowReport{
		Version: schemas.ReportVersion, ID: schemas.WindowReportID(scopeName, app, w.startMs),
		Scope: scopeName, App: app, StartMs: w.startMs, EndMs: w.startMs + m.windowMs,
		Topics: w.topics, Events: sc.events, Bytes: sc.bytes, Reads: sc.reads, Writes: sc.writes,
		LatencyUs: sc.latencyUs, Late: sc.late, Keyed: w.keyed, Partial: len(w.missing) > 0, Missing: w.missing,
	}
	if sc.distinct != nil {
		r.Distinct = sc.distinct.Estimate()
	}
	for i := range sc.keys {
		sc.keys[i].Share = shareOf(sc.keys[i].Count, sc.events)
	}

	// Top by events; the largest count cut raises the floor.
	top := selectTop(sc.keys, m.cfg.TopN+1, func(a, b *schemas.KeyCount) int {
		if c := cmp.Compare(b.Count, a.Count); c != 0 {
			return c
		}
		if c := cmp.Compare(b.Count-b.Error, a.Count-a.Error); c != 0 {
			return c
		}
		return compareAppKey(a, b)
	})
	r.Floor = sc.floor
	if len(top) > m.cfg.TopN {
		r.Floor = max(r.Floor, top[m.cfg.TopN].Count)
		top = top[:m.cfg.TopN]
	}
	r.Guaranteed = guaranteePrev(top, r.Floor)
	r.Top = top
	r.TopBytes = m.rankPrev(sc.keys, byBytes)
	r.TopReads = m.rankPrev(sc.keys, byReads)
	r.TopWrites = m.rankPrev(sc.keys, byWrites)
	r.TopLatency = m.rankPrev(sc.keys, byLatency)
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
func guaranteePrev(top []schemas.KeyCount, floor uint64) int {
	n := len(top)
	if n == 0 {
		return 0
	}
	lower := func(k *schemas.KeyCount) uint64 { return k.Count - min(k.Error, k.Count) }
	byLower := make([]int, n)
	for i := range byLower {
		byLower[i] = i
	}
	slices.SortStableFunc(byLower, func(a, b int) int { return cmp.Compare(lower(&top[b]), lower(&top[a])) })
	// rest[i]: the largest count any key but the first i by lower bound
	// can have.
	rest := make([]uint64, n+1)
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
	in := make([]bool, n)
	for _, i := range byLower[:g] {
		in[i] = true
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

// rank returns up to TopN keys with a non-zero figure f, largest first,
// ties by count, then app and key; nil when no key has the figure.
func (m *Merger) rankPrev(keys []schemas.KeyCount, f keyFigure) []schemas.KeyCount {
	out := selectTop(keys, m.cfg.TopN, func(a, b *schemas.KeyCount) int {
		// Keys without the figure rank last, and are dropped below.
		if c := cmp.Compare(f.of(b), f.of(a)); c != 0 {
			return c
		}
		if c := cmp.Compare(b.Count, a.Count); c != 0 {
			return c
		}
		return compareAppKey(a, b)
	})
	for len(out) > 0 && f.of(&out[len(out)-1]) == 0 {
		out = out[:len(out)-1]
	}
	if len(out) == 0 {
		return nil
	}
	return out
}
