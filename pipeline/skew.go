package pipeline

import (
	"slices"

	"github.com/keyheat/keyheat/schemas"
)

// gini is the Gini coefficient of loads: 0 when all are equal, (n−1)/n
// when one of n carries everything, 0 for no load. With the loads sorted
// ascending, x₁ ≤ … ≤ xₙ and S their sum,
//
//	G = Σᵢ (2i − n − 1)·xᵢ / (n·S)
//
// which is the mean absolute difference of all pairs over twice the mean.
// The sum runs in a fixed order over integers that float64 holds exactly
// up to 2⁵³, so equal loads give exactly 0 and equal inputs equal outputs.
func gini(loads []uint64) float64 {
	n := len(loads)
	var sum float64
	for _, x := range loads {
		sum += float64(x)
	}
	if n == 0 || sum == 0 {
		return 0
	}
	sorted := slices.Clone(loads)
	slices.Sort(sorted)
	var num float64
	for i, x := range sorted {
		num += float64(2*(i+1)-n-1) * float64(x)
	}
	return max(num/(float64(n)*sum), 0)
}

// maxMean is the largest load over the mean load: 1 when all are equal, n
// when one of n carries everything, 0 for no load.
func maxMean(loads []uint64) float64 {
	var sum, top float64
	for _, x := range loads {
		sum += float64(x)
		top = max(top, float64(x))
	}
	if sum == 0 {
		return 0
	}
	return top * float64(len(loads)) / sum
}

// share is part / whole, 0 when whole is 0.
func shareOf(part, whole uint64) float64 {
	if whole == 0 {
		return 0
	}
	return float64(part) / float64(whole)
}

// partitionSkew fills s.Partitions, s.MaxMean and s.Gini from loads, which
// are in topic and partition order.
func partitionSkew(s *schemas.Skew, loads []schemas.PartitionLoad) {
	var total uint64
	events := make([]uint64, len(loads))
	for i, l := range loads {
		total += l.Events
		events[i] = l.Events
	}
	for i := range loads {
		loads[i].Share = shareOf(loads[i].Events, total)
	}
	s.Partitions = loads
	s.MaxMean = maxMean(events)
	s.Gini = gini(events)
}

// keySkew fills s.Top1Share and s.Top10Share from a ranked top of a scope
// with events events. Counts are upper bounds, so the ten-key share is
// capped at 1.
func keySkew(s *schemas.Skew, top []schemas.KeyCount, events uint64) {
	if len(top) == 0 || events == 0 {
		return
	}
	s.Top1Share = min(shareOf(top[0].Count, events), 1)
	var ten uint64
	for _, k := range top[:min(10, len(top))] {
		ten += k.Count
	}
	s.Top10Share = min(shareOf(ten, events), 1)
}

// slotSkew fills the Redis Cluster view of s from a scope's events per
// slot (non-zero slots, sorted by slot): the load of each node of layout
// (if it has any), their max/mean and Gini, and the hotSlots busiest slots,
// busiest first, ties by slot.
func slotSkew(s *schemas.Skew, slots []schemas.SlotCount, layout *nodeLayout, hotSlots int) {
	var total uint64
	for _, sc := range slots {
		total += sc.Events
	}
	if hotSlots > 0 && len(slots) > 0 {
		s.HotSlots = busiestSlots(slots, hotSlots)
	}
	if len(layout.names) == 0 {
		return
	}
	loads := make([]uint64, len(layout.names))
	for _, sc := range slots {
		loads[layout.node[sc.Slot]] += sc.Events
	}
	s.Nodes = make([]schemas.NodeLoad, len(layout.names))
	for i, name := range layout.names {
		rs := layout.ranges[i]
		nl := schemas.NodeLoad{
			Node: name, FirstSlot: uint16(rs[0].First), LastSlot: uint16(rs[len(rs)-1].Last),
			Events: loads[i], Share: shareOf(loads[i], total),
		}
		if len(rs) > 1 {
			nl.Ranges = make([]schemas.SlotRange, len(rs))
			for j, r := range rs {
				nl.Ranges[j] = schemas.SlotRange{First: uint16(r.First), Last: uint16(r.Last)}
			}
		}
		s.Nodes[i] = nl
	}
	s.NodeMaxMean = maxMean(loads)
	s.NodeGini = gini(loads)
}

// busiestSlots returns the n busiest of slots, busiest first, ties by
// slot. Insertion into a short sorted list: n is small (a report shows a
// handful) while slots may hold all 16384.
func busiestSlots(slots []schemas.SlotCount, n int) []schemas.SlotCount {
	before := func(a, b schemas.SlotCount) bool {
		return a.Events > b.Events || (a.Events == b.Events && a.Slot < b.Slot)
	}
	out := make([]schemas.SlotCount, 0, min(n, len(slots)))
	for _, sc := range slots {
		if len(out) == n && !before(sc, out[n-1]) {
			continue
		}
		i := len(out)
		for i > 0 && before(sc, out[i-1]) {
			i--
		}
		if len(out) < n {
			out = append(out, schemas.SlotCount{})
		}
		copy(out[i+1:], out[i:len(out)-1])
		out[i] = sc
	}
	return out
}
