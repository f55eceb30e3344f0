package pipeline

import (
	"cmp"
	"slices"

	"github.com/keyheat/keyheat/hotring"
	"github.com/keyheat/keyheat/schemas"
)

// candidates hands out group g's candidate batch at the slot boundary the
// tick just crossed (see Output): the keys with alert state whose count
// over the window ending at the boundary reaches the local pre-threshold,
// with those counts.
//
// The tick runs before the event that moved the clock into the new slot
// is counted, so the ring holds no event of that slot: a key's window
// sum is its count over exactly the Slots slots before the boundary,
// [slotEnd − W, slotEnd), with no pro-rata part.
//
// Every key not listed is below the floor (the local threshold over the
// window, rounded up): a key reaching it over those slots reached it at
// its last event, whose count (the slots after the oldest, up to that
// event) covered exactly the same slots, so observe gave it alert state. This holds while the ring refused no key
// (Stats.RingRefused) and no alert was dropped (Stats.AlertsDropped).
func (p *Partition) candidates(g *group, out *Output) {
	if !p.windowMode || p.curMaxTsBefore == noTime || len(g.rules) == 0 {
		return // warm-up (the crashed run sent these), or nothing counted yet
	}
	c := schemas.Candidates{
		Version: schemas.CandidatesVersion, ID: schemas.CandidatesID(p.src.Topic, p.src.Partition, g.windowMs, g.epochMs),
		Topic: p.src.Topic, Partition: p.src.Partition, Partitions: p.src.Partitions,
		WindowMs: g.windowMs, SlotEndMs: g.epochMs, ClockMs: p.curMaxTsBefore,
	}
	for _, x := range g.rules {
		if !x.alert {
			continue
		}
		c.Rules = append(c.Rules, schemas.CandidateRule{Name: x.name,
			Floor: ceilDiv(x.needEvents, uint64(g.slotMs)), FloorBytes: ceilDiv(x.needBytes, uint64(g.slotMs))})
	}
	if len(c.Rules) == 0 {
		return
	}
	slices.SortFunc(c.Rules, func(a, b schemas.CandidateRule) int { return cmp.Compare(a.Name, b.Name) })
	if g.alerts.len() > 0 {
		nowMs := p.maxTs
		sts := g.alerts.all(p.det.sts[:0])
		for _, st := range sts {
			x := g.rules[st.rule]
			if x == nil || !x.alert {
				continue
			}
			var win hotring.Window
			if !g.ring.WindowHash(st.hr, st.ns, st.key, nowMs, &win) {
				continue // untracked: no gate pass for a window, so below
			}
			ev, by := win.Sum[laneEvents], win.Sum[laneBytes]
			above := (x.needEvents > 0 && mulGE(ev, uint64(g.slotMs), x.needEvents)) ||
				(x.needBytes > 0 && mulGE(by, uint64(g.slotMs), x.needBytes))
			if !above {
				// Not listed, even if still hot here: what a batch lists
				// must not depend on the partition's alert history (a
				// restart rebuilds the counts, not every key's past
				// episodes), and the cluster stage keeps its own.
				continue
			}
			c.Keys = append(c.Keys, schemas.CandidateKey{App: st.app, Key: st.key, Rule: st.rule,
				Events: ev, Bytes: by, Reads: win.Sum[laneReads], Writes: win.Sum[laneWrites], Shortened: st.short})
		}
		clear(sts)
		p.det.sts = sts[:0]
	}
	if n := p.o.Detect.MaxCandidates; len(c.Keys) > n {
		// Keep the heaviest; what is left out raises its rule's floor, so
		// that every unlisted key is still below it.
		slices.SortFunc(c.Keys, func(a, b schemas.CandidateKey) int {
			return cmp.Or(cmp.Compare(b.Events, a.Events), cmp.Compare(b.Bytes, a.Bytes), candOrder(a, b))
		})
		for _, k := range c.Keys[n:] {
			i := slices.IndexFunc(c.Rules, func(r schemas.CandidateRule) bool { return r.Name == k.Rule })
			c.Rules[i].Floor = max(c.Rules[i].Floor, k.Events+1)
			if c.Rules[i].FloorBytes > 0 {
				c.Rules[i].FloorBytes = max(c.Rules[i].FloorBytes, k.Bytes+1)
			}
		}
		p.stats.CandidatesCapped += uint64(len(c.Keys) - n)
		clear(c.Keys[n:])
		c.Keys = c.Keys[:n]
	}
	slices.SortFunc(c.Keys, candOrder)
	out.Candidates = append(out.Candidates, c)
	p.commit.alert(c.ID, p.curOffset, p.curMaxTsBefore)
	p.stats.Candidates++
	p.stats.CandidateKeys += uint64(len(c.Keys))
}

func candOrder(a, b schemas.CandidateKey) int {
	return cmp.Or(cmp.Compare(a.Rule, b.Rule), cmp.Compare(a.App, b.App), cmp.Compare(a.Key, b.Key))
}

func ceilDiv(a, b uint64) uint64 {
	if a == 0 {
		return 0
	}
	return (a-1)/b + 1
}
