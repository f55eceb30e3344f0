package clickhouse

import (
	"cmp"
	"slices"

	"github.com/keyheat/keyheat/schemas"
)

// The expect functions answer the documented queries from the fixture
// itself, in Go, so the tests compare the SQL with an independent model.

// scopeReports returns the current versions of the reports a query over
// r and app reads, in start order.
func scopeReports(cur map[string]*schemas.WindowReport, r Range, app string) []*schemas.WindowReport {
	var out []*schemas.WindowReport
	for _, rep := range cur {
		if !inRange(r, rep.StartMs) {
			continue
		}
		if (app == "" && rep.Scope == schemas.ScopeCluster) || (app != "" && rep.Scope == schemas.ScopeApp && rep.App == app) {
			out = append(out, rep)
		}
	}
	slices.SortFunc(out, func(a, b *schemas.WindowReport) int { return cmp.Compare(a.StartMs, b.StartMs) })
	return out
}

func scopeEvents(reps []*schemas.WindowReport) uint64 {
	var n uint64
	for _, r := range reps {
		n += r.Events
	}
	return max(1, n)
}

func capRows[T any](s []T, limit int) []T {
	if limit <= 0 {
		limit = DefaultLimit
	}
	return s[:min(limit, len(s))]
}

func expectTop(cur map[string]*schemas.WindowReport, r Range, app, list string, limit int) []TopRow {
	reps := scopeReports(cur, r, app)
	total := scopeEvents(reps)
	byKey := map[[2]string]*TopRow{}
	var order [][2]string
	for _, rep := range reps {
		l := map[string][]schemas.KeyCount{"events": rep.Top, "bytes": rep.TopBytes, "reads": rep.TopReads,
			"writes": rep.TopWrites, "latency": rep.TopLatency}[list]
		for _, k := range l {
			id := [2]string{k.App, k.Key}
			row, ok := byKey[id]
			if !ok {
				row = &TopRow{App: k.App, Key: k.Key, FirstMs: rep.StartMs}
				byKey[id] = row
				order = append(order, id)
			}
			row.Events += k.Count
			row.Error += k.Error
			row.Bytes += k.Bytes
			row.Reads += k.Reads
			row.Writes += k.Writes
			row.LatencyUs += k.LatencyUs
			row.Windows++
			row.FirstMs = min(row.FirstMs, rep.StartMs)
			row.LastMs = max(row.LastMs, rep.StartMs)
		}
	}
	measure := func(t TopRow) uint64 {
		return map[string]uint64{"events": t.Events, "bytes": t.Bytes, "reads": t.Reads, "writes": t.Writes,
			"latency": t.LatencyUs}[list]
	}
	var out []TopRow
	for _, id := range order {
		row := *byKey[id]
		row.Share = float64(row.Events) / float64(total)
		out = append(out, row)
	}
	slices.SortFunc(out, func(a, b TopRow) int {
		return cmp.Or(cmp.Compare(measure(b), measure(a)), cmp.Compare(a.App, b.App), cmp.Compare(a.Key, b.Key))
	})
	return capRows(out, limit)
}

func expectSkew(cur map[string]*schemas.WindowReport, r Range, app string, limit int) []SkewRow {
	var out []SkewRow
	for _, rep := range scopeReports(cur, r, app) {
		out = append(out, SkewRow{StartMs: rep.StartMs, EndMs: rep.EndMs, Events: rep.Events, MaxMean: rep.Skew.MaxMean,
			Gini: rep.Skew.Gini, NodeMaxMean: rep.Skew.NodeMaxMean, NodeGini: rep.Skew.NodeGini,
			Top1Share: rep.Skew.Top1Share, Top10Share: rep.Skew.Top10Share, DistinctKeys: rep.Distinct, Late: rep.Late,
			Partial: boolByte(rep.Partial), Missing: nonNil(rep.Missing)})
	}
	slices.SortFunc(out, func(a, b SkewRow) int {
		return cmp.Or(cmp.Compare(b.MaxMean, a.MaxMean), cmp.Compare(a.StartMs, b.StartMs))
	})
	return capRows(out, limit)
}

func expectPartitions(cur map[string]*schemas.WindowReport, r Range, app string) []PartitionRow {
	reps := scopeReports(cur, r, app)
	total := scopeEvents(reps)
	by := map[schemas.PartitionLoad]*PartitionRow{}
	var out []PartitionRow
	for _, rep := range reps {
		for _, p := range rep.Skew.Partitions {
			id := schemas.PartitionLoad{Topic: p.Topic, Partition: p.Partition}
			row, ok := by[id]
			if !ok {
				row = &PartitionRow{Topic: p.Topic, Partition: p.Partition}
				by[id] = row
			}
			row.Events += p.Events
			row.Bytes += p.Bytes
			row.PeakShare = max(row.PeakShare, p.Share)
			row.Windows++
		}
	}
	for _, row := range by {
		row.Share = float64(row.Events) / float64(total)
		out = append(out, *row)
	}
	slices.SortFunc(out, func(a, b PartitionRow) int {
		return cmp.Or(cmp.Compare(b.Events, a.Events), cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})
	return out
}

func expectNodes(cur map[string]*schemas.WindowReport, r Range, app string) []NodeRow {
	reps := scopeReports(cur, r, app)
	total := scopeEvents(reps)
	by := map[string]*NodeRow{}
	var out []NodeRow
	for _, rep := range reps { // in start order: the last window's slots win
		for _, n := range rep.Skew.Nodes {
			row, ok := by[n.Node]
			if !ok {
				row = &NodeRow{Node: n.Node}
				by[n.Node] = row
			}
			row.FirstSlot, row.LastSlot = n.FirstSlot, n.LastSlot
			row.Events += n.Events
			row.PeakShare = max(row.PeakShare, n.Share)
			row.Windows++
		}
	}
	for _, row := range by {
		row.Share = float64(row.Events) / float64(total)
		out = append(out, *row)
	}
	slices.SortFunc(out, func(a, b NodeRow) int {
		return cmp.Or(cmp.Compare(b.Events, a.Events), cmp.Compare(a.Node, b.Node))
	})
	return out
}

func expectSlots(cur map[string]*schemas.WindowReport, r Range, app string, limit int) []SlotRow {
	by := map[uint16]*SlotRow{}
	var out []SlotRow
	for _, rep := range scopeReports(cur, r, app) {
		for _, s := range rep.Skew.HotSlots {
			row, ok := by[s.Slot]
			if !ok {
				row = &SlotRow{Slot: s.Slot, FirstMs: rep.StartMs}
				by[s.Slot] = row
			}
			row.Events += s.Events
			row.Windows++
			row.LastMs = max(row.LastMs, rep.StartMs)
		}
	}
	for _, row := range by {
		out = append(out, *row)
	}
	slices.SortFunc(out, func(a, b SlotRow) int {
		return cmp.Or(cmp.Compare(b.Events, a.Events), cmp.Compare(a.Slot, b.Slot))
	})
	return capRows(out, limit)
}

// expectKey is the key query's answer: the newest windows first, or with
// order busiest the most events first (the newest among equals).
func expectKey(cur map[string]*schemas.WindowReport, r Range, app, key, order string, limit int) []KeyRow {
	var out []KeyRow
	for _, rep := range cur {
		if rep.Scope != schemas.ScopeApp || !inRange(r, rep.StartMs) || (app != "" && rep.App != app) {
			continue
		}
		for i, k := range rep.Top {
			if k.Key == key {
				out = append(out, KeyRow{StartMs: rep.StartMs, EndMs: rep.EndMs, App: k.App, Rank: uint16(i + 1),
					Events: k.Count, Error: k.Error, Bytes: k.Bytes, Reads: k.Reads, Writes: k.Writes,
					LatencyUs: k.LatencyUs, Partition: k.Partition, Share: k.Share})
			}
		}
	}
	slices.SortFunc(out, func(a, b KeyRow) int {
		byEvents := 0
		if order == KeyOrderBusiest {
			byEvents = cmp.Compare(b.Events, a.Events)
		}
		return cmp.Or(byEvents, cmp.Compare(b.StartMs, a.StartMs), cmp.Compare(a.App, b.App))
	})
	return capRows(out, limit)
}

func expectAlerts(f fixture, r Range, app, key string) []AlertRow {
	var out []AlertRow
	var ids []string
	for _, h := range f.hot {
		if !inRange(r, h.OnsetMs) || (app != "" && h.App != app) || (key != "" && h.Key != key) {
			continue
		}
		row := AlertRow{OnsetMs: h.OnsetMs, DetectedMs: h.DetectedMs, Type: h.Type, App: h.App, Key: h.Key,
			Rule: h.Rule, Rate: h.Rate, PeakRate: h.PeakRate, Threshold: h.Threshold, Events: h.Count, WindowMs: h.WindowMs,
			Topic: h.Topic, Partition: h.Partition, Reads: h.Reads, Writes: h.Writes, Bytes: h.Bytes}
		if h.Mitigation != nil {
			row.Mitigation, row.Split = h.Mitigation.Kind, uint32(h.Mitigation.Split)
		}
		out = append(out, row)
		ids = append(ids, h.ID)
	}
	// The query orders by (onset_ms, app, key, type, id): an episode's
	// hot, then its updates by the time their ids end with.
	idx := make([]int, len(out))
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(i, j int) int {
		a, b := out[i], out[j]
		return cmp.Or(cmp.Compare(a.OnsetMs, b.OnsetMs), cmp.Compare(a.App, b.App), cmp.Compare(a.Key, b.Key),
			cmp.Compare(a.Type, b.Type), cmp.Compare(ids[i], ids[j]))
	})
	sorted := make([]AlertRow, len(out))
	for i, k := range idx {
		sorted[i] = out[k]
	}
	return capRows(sorted, 0)
}
