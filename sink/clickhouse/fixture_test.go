package clickhouse

import (
	"cmp"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"slices"

	"github.com/keyheat/keyheat/schemas"
)

// fixture is a deterministic set of window reports and hot-key events, in
// the order they are written, with partial versions of some windows.
type fixture struct {
	reports []*schemas.WindowReport
	hot     []*schemas.HotKeyEvent
}

const (
	fixtureTopic = "keyheat.events"
	fixtureParts = 4
	fixtureTopN  = 8
)

var fixtureNodes = []schemas.NodeLoad{
	{Node: "node-a", FirstSlot: 0, LastSlot: 5460},
	{Node: "node-b", FirstSlot: 5461, LastSlot: 10922},
	{Node: "node-c", FirstSlot: 10923, LastSlot: 16383},
}

type fixtureKey struct {
	app, key                             string
	count, bytes, reads, writes, latency uint64
}

func keyHash(app, key string) uint32 {
	h := fnv.New32a()
	_, _ = h.Write([]byte(app + "/" + key))
	return h.Sum32()
}

func keyPartition(k fixtureKey) int32 { return int32(keyHash(k.app, k.key) % fixtureParts) }
func keySlot(k fixtureKey) uint16     { return uint16(keyHash(k.key, k.app) % 16384) }

// makeFixture builds windows one-second windows from baseMs: for each,
// a cluster report and one report per app, and a hot-key event for every
// app whose key-00 counted more than 900, with two updates. Window 2's cluster report is
// written partial first, then complete; window 3's complete first, then
// partial (the complete one must still win); window 4's only partial.
func makeFixture(seed uint64, windows int, apps []string, baseMs int64) fixture {
	r := rand.New(rand.NewPCG(seed, 7))
	var f fixture
	for w := range windows {
		startMs := baseMs + int64(w)*1000
		var all []fixtureKey
		for _, app := range apps {
			var keys []fixtureKey
			for i := range 20 {
				c := uint64(r.IntN(1000) + 1)
				if i == 0 {
					c += uint64(r.IntN(400))
				}
				reads := c * uint64(r.IntN(4)+1) / 5
				keys = append(keys, fixtureKey{app: app, key: fmt.Sprintf("key-%02d", i), count: c,
					bytes: c * uint64(r.IntN(100)+1), reads: reads, writes: c - reads, latency: c * 10})
			}
			all = append(all, keys...)
			f.reports = append(f.reports, buildReport(r, schemas.ScopeApp, app, startMs, keys, nil))
			if k := keys[0]; k.count > 900 {
				id := schemas.HotKeyID(fixtureTopic, keyPartition(k), "hot-api", schemas.HotKeyHot, app, k.key, startMs+17)
				f.hot = append(f.hot, &schemas.HotKeyEvent{Version: schemas.HotKeyVersion, ID: id, Type: schemas.HotKeyHot,
					App: app, Key: k.key, KeyHash: fmt.Sprintf("%016x", keyHash(app, k.key)), Rule: "hot-api",
					Rate: float64(k.count), Threshold: 900, Count: k.count, WindowMs: 1000, Topic: fixtureTopic,
					Partition: keyPartition(k), OnsetMs: startMs + 17, DetectedMs: startMs + 25, Reads: k.reads,
					Writes: k.writes, Bytes: k.bytes, Mitigation: &schemas.Mitigation{Kind: schemas.MitigationLocalCache},
					Shortened: app == apps[len(apps)-1]})
				f.hot[len(f.hot)-1].PeakRate = f.hot[len(f.hot)-1].Rate
				// Two refreshes of the episode, at its onset: its rate up
				// by half, then back down a third, under the peak.
				for i, mult := range []float64{1.5, 1} {
					up := *f.hot[len(f.hot)-1]
					atMs := startMs + 500 + int64(i)*300
					up.ID = schemas.HotKeyID(fixtureTopic, up.Partition, "hot-api", schemas.HotKeyUpdate, app, k.key, atMs)
					up.Type, up.Rate, up.PeakRate = schemas.HotKeyUpdate, mult*float64(k.count), 1.5*float64(k.count)
					up.Count, up.DetectedMs = uint64(mult*float64(k.count)), atMs+8
					up.Mitigation = &schemas.Mitigation{Kind: schemas.MitigationSplit, Split: 2 << i}
					f.hot = append(f.hot, &up)
				}
			}
		}
		complete := buildReport(r, schemas.ScopeCluster, "", startMs, all, nil)
		// A partial version lacks partition 3's keys.
		var seen []fixtureKey
		for _, k := range all {
			if keyPartition(k) != 3 {
				seen = append(seen, k)
			}
		}
		partial := buildReport(r, schemas.ScopeCluster, "", startMs, seen, []string{fixtureTopic + "/3"})
		switch w {
		case 2:
			f.reports = append(f.reports, partial, complete)
		case 3:
			f.reports = append(f.reports, complete, partial)
		case 4:
			f.reports = append(f.reports, partial)
		default:
			f.reports = append(f.reports, complete)
		}
	}
	return f
}

func topBy(keys []fixtureKey, n int, by func(fixtureKey) uint64) []fixtureKey {
	s := slices.Clone(keys)
	slices.SortFunc(s, func(a, b fixtureKey) int {
		if c := cmp.Compare(by(b), by(a)); c != 0 {
			return c
		}
		return cmp.Or(cmp.Compare(a.app, b.app), cmp.Compare(a.key, b.key))
	})
	return s[:min(n, len(s))]
}

func buildReport(r *rand.Rand, scope, app string, startMs int64, keys []fixtureKey, missing []string) *schemas.WindowReport {
	rep := &schemas.WindowReport{Version: schemas.ReportVersion, ID: schemas.WindowReportID(scope, app, startMs),
		Scope: scope, App: app, StartMs: startMs, EndMs: startMs + 1000, Topics: []string{fixtureTopic},
		Keyed: true, Partial: len(missing) > 0, Missing: missing}
	parts := make([]schemas.PartitionLoad, fixtureParts)
	for i := range parts {
		parts[i] = schemas.PartitionLoad{Topic: fixtureTopic, Partition: int32(i)}
	}
	nodes := slices.Clone(fixtureNodes)
	slots := map[uint16]uint64{}
	for _, k := range keys {
		rep.Events += k.count
		rep.Bytes += k.bytes
		rep.Reads += k.reads
		rep.Writes += k.writes
		rep.LatencyUs += k.latency
		p := keyPartition(k)
		parts[p].Events += k.count
		parts[p].Bytes += k.bytes
		s := keySlot(k)
		slots[s] += k.count
		for i := range nodes {
			if s >= nodes[i].FirstSlot && s <= nodes[i].LastSlot {
				nodes[i].Events += k.count
			}
		}
	}
	kc := func(k fixtureKey) schemas.KeyCount {
		return schemas.KeyCount{App: k.app, Key: k.key, Count: k.count, Error: uint64(r.IntN(3)), Bytes: k.bytes,
			Reads: k.reads, Writes: k.writes, LatencyUs: k.latency, Partition: keyPartition(k),
			Share: float64(k.count) / float64(rep.Events), Shortened: k.key == "key-19"}
	}
	lists := []struct {
		dst *[]schemas.KeyCount
		n   int
		by  func(fixtureKey) uint64
	}{
		{&rep.Top, fixtureTopN, func(k fixtureKey) uint64 { return k.count }},
		{&rep.TopBytes, 4, func(k fixtureKey) uint64 { return k.bytes }},
		{&rep.TopReads, 3, func(k fixtureKey) uint64 { return k.reads }},
		{&rep.TopWrites, 3, func(k fixtureKey) uint64 { return k.writes }},
		{&rep.TopLatency, 3, func(k fixtureKey) uint64 { return k.latency }},
	}
	for _, l := range lists {
		for _, k := range topBy(keys, l.n, l.by) {
			*l.dst = append(*l.dst, kc(k))
		}
	}
	// Guaranteed: the keys before the first one with an error; with one,
	// the report is approximate.
	for rep.Guaranteed < len(rep.Top) && rep.Top[rep.Guaranteed].Error == 0 {
		rep.Guaranteed++
	}
	rep.Approximate = rep.Guaranteed < len(rep.Top)
	var maxEvents uint64
	for i := range parts {
		parts[i].Share = float64(parts[i].Events) / float64(rep.Events)
		maxEvents = max(maxEvents, parts[i].Events)
	}
	for i := range nodes {
		nodes[i].Share = float64(nodes[i].Events) / float64(rep.Events)
	}
	var hot []schemas.SlotCount
	for s, n := range slots {
		hot = append(hot, schemas.SlotCount{Slot: s, Events: n})
	}
	slices.SortFunc(hot, func(a, b schemas.SlotCount) int {
		return cmp.Or(cmp.Compare(b.Events, a.Events), cmp.Compare(a.Slot, b.Slot))
	})
	rep.Skew = schemas.Skew{Partitions: parts, MaxMean: float64(maxEvents) * fixtureParts / float64(rep.Events),
		Gini: r.Float64(), Top1Share: rep.Top[0].Share, Nodes: nodes, NodeMaxMean: r.Float64() + 1,
		NodeGini: r.Float64(), HotSlots: hot[:3]}
	for _, k := range rep.Top[:min(10, len(rep.Top))] {
		rep.Skew.Top10Share += k.Share
	}
	rep.Distinct = uint64(len(keys))
	rep.Late = uint64(r.IntN(5))
	if top := rep.Top[0]; top.Count > 1000 {
		rep.Advice = []schemas.KeyAdvice{{App: top.App, Key: top.Key, Rate: float64(top.Count),
			ReadShare:  float64(top.Reads) / float64(top.Reads+top.Writes),
			Mitigation: schemas.Mitigation{Kind: schemas.MitigationSplit, Split: 4}}}
	}
	return rep
}

// current returns, per report ID, the version the queries must read: the
// complete one if written, else the last partial one written.
func (f fixture) current() map[string]*schemas.WindowReport {
	out := map[string]*schemas.WindowReport{}
	for _, r := range f.reports {
		if old, ok := out[r.ID]; ok && !old.Partial && r.Partial {
			continue
		}
		out[r.ID] = r
	}
	return out
}

// rows counts the logical rows f becomes, per table.
func (f fixture) rows() map[string]int {
	type version struct {
		id  string
		rev uint64
	}
	seen := map[version]bool{}
	n := map[string]int{"hotkey_events": len(f.hot)}
	reports := map[string]bool{}
	for _, r := range f.reports {
		reports[r.ID] = true
		v := version{r.ID, reportRev(r)}
		if seen[v] {
			continue
		}
		seen[v] = true
		n["report_keys"] += len(r.Top) + len(r.TopBytes) + len(r.TopReads) + len(r.TopWrites) + len(r.TopLatency)
		n["report_partitions"] += len(r.Skew.Partitions)
		n["report_nodes"] += len(r.Skew.Nodes)
		n["report_slots"] += len(r.Skew.HotSlots)
		n["report_advice"] += len(r.Advice)
	}
	n["reports"] = len(reports)
	return n
}
