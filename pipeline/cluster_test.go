package pipeline

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/keyheat/keyheat/schemas"
	"github.com/stretchr/testify/require"
)

// clusterOpts: one rule, 1000 events/s over 1 s, 10 slots, short
// cool-down so that streams stay small.
func clusterOpts(bound string) Options {
	o := DefaultOptions()
	o.Rules = []Rule{{Name: "r", Key: "*", Window: time.Second, Rate: 1000, ClusterBound: bound}}
	o.Detect.CoolDown = 2 * time.Second
	o.Detect.Suppress = time.Second
	return o
}

func newCluster(t *testing.T, o Options) *ClusterAlerts {
	t.Helper()
	r, err := NewRules(o)
	require.NoError(t, err)
	return NewClusterAlerts(r, o.Detect, 4000)
}

// spread runs a stream through parts partitions and their candidates
// through a cluster stage. Each key's events go round-robin over the
// partitions (its n-th event to partition n mod parts), so every key is
// spread evenly, as over a long run with no record key.
func spread(t *testing.T, o Options, parts int, events []event) []schemas.HotKeyEvent {
	t.Helper()
	return spreadBy(t, o, parts, events, func(_ string, nth int) int { return nth % parts })
}

// spreadBy is spread with each key's nth event to partition pick(key, nth).
func spreadBy(t *testing.T, o Options, parts int, events []event, pick func(key string, nth int) int) []schemas.HotKeyEvent {
	t.Helper()
	ps := make([]*Partition, parts)
	for i := range ps {
		ps[i] = newPart(t, o, Source{Topic: "t", Partition: int32(i), Partitions: int32(parts)}, Start{})
	}
	c := newCluster(t, o)
	var hot []schemas.HotKeyEvent
	var out Output
	offs := make([]int64, parts)
	nth := map[string]int{}
	for i := range events {
		pi := pick(events[i].e.Key, nth[events[i].e.Key])
		nth[events[i].e.Key]++
		ps[pi].Process(&events[i].e, offs[pi], &out)
		offs[pi]++
		require.Empty(t, out.HotKeys, "an unkeyed partition published an alert itself")
		for j := range out.Candidates {
			c.Add(&out.Candidates[j])
		}
		if debugCluster && len(out.Candidates) > 0 && len(out.Candidates[0].Keys) > 0 {
			t.Logf("%+v", out.Candidates[0])
		}
		out.Reset()
		hot = c.Ready(nil, hot)
	}
	hot = c.Finish(hot)
	t.Logf("cluster %+v; partition 0 %+v", c.Stats(), ps[0].Stats())
	return hot
}

const debugCluster = false // log every batch with keys

func hotOf(evs []schemas.HotKeyEvent, key, typ string) []schemas.HotKeyEvent {
	var r []schemas.HotKeyEvent
	for _, e := range evs {
		if e.Key == key && e.Type == typ {
			r = append(r, e)
		}
	}
	return r
}

// A key at 1.1× the threshold spread evenly over 16 partitions is alerted
// once, cooled once; one at 0.9× never is, whatever the bound.
func TestClusterEvenSpread(t *testing.T) {
	for _, bound := range []string{BoundLower, BoundUpper} {
		t.Run(bound, func(t *testing.T) {
			o := clusterOpts(bound)
			events := generate(streamSpec{seed: 7, durationMs: 12_000, bgPerMs: 2, bgKeys: 5000,
				planted: []*planted{
					{app: "shop", key: "hot", op: "GET", rate: steady(1100, 2000, 7000)},
					{app: "shop", key: "warm", op: "GET", rate: steady(900, 2000, 7000)},
				}})
			evs := spread(t, o, 16, events)
			h := hotOf(evs, "hot", schemas.HotKeyHot)
			require.Len(t, h, 1, "hot events for the key at 1.1x: %+v", evs)
			require.Equal(t, int32(schemas.ClusterPartition), h[0].Partition)
			require.Len(t, h[0].Partitions, 16)
			require.InDelta(t, 1100, h[0].Rate, 60)
			// onset: the true crossing is at 2000 + 1000/1.1 ms; within a slot
			require.InDelta(t, float64(t0Ms+2000+909), float64(h[0].OnsetMs), 100)
			require.Len(t, hotOf(evs, "hot", schemas.HotKeyCooled), 1)
			require.Empty(t, hotOf(evs, "warm", schemas.HotKeyHot), "the key at 0.9x was alerted")
			for _, e := range evs {
				require.Contains(t, []string{"hot"}, e.Key, "unexpected alert %+v", e)
			}
		})
	}
}

func batch(part int32, endMs int64, floor uint64, keys ...schemas.CandidateKey) *schemas.Candidates {
	return &schemas.Candidates{Version: 1, ID: schemas.CandidatesID("t", part, 1000, endMs), Topic: "t", Partition: part,
		Partitions: 4, WindowMs: 1000, SlotEndMs: endMs, ClockMs: endMs - 1,
		Rules: []schemas.CandidateRule{{Name: "r", Floor: floor}}, Keys: keys}
}

func ck(key string, n uint64) schemas.CandidateKey {
	return schemas.CandidateKey{App: "a", Key: key, Rule: "r", Events: n}
}

// Uneven spreads: two of four partitions list the key at 480 each
// (lower 960), the other two have floors of 25: fewer than 25 each, so
// upper 1008. The lower bound does not alert; the upper bound, the
// default, does, saying Error 48.
func TestClusterBounds(t *testing.T) {
	for _, tc := range []struct {
		bound string
		hot   bool
	}{{BoundLower, false}, {BoundUpper, true}, {"", true}} {
		t.Run("bound="+tc.bound, func(t *testing.T) {
			c := newCluster(t, clusterOpts(tc.bound))
			for _, b := range []*schemas.Candidates{batch(0, 1000, 25, ck("k", 480)), batch(1, 1000, 25), batch(2, 1000, 25, ck("k", 480)), batch(3, 1000, 25)} {
				c.Add(b)
			}
			evs := c.Ready(nil, nil)
			if !tc.hot {
				require.Empty(t, evs)
				return
			}
			require.Len(t, evs, 1)
			require.Equal(t, uint64(960), evs[0].Count)
			require.Equal(t, uint64(48), evs[0].Error)
			require.Equal(t, []int32{0, 2}, evs[0].Partitions)
		})
	}
}

// A round waits for every partition; a partition more than the hold
// behind is not waited for; counts of a partition silent for a window
// lapse; Ready is deterministic whatever order partitions come in.
func TestClusterRoundsAndLapse(t *testing.T) {
	c := newCluster(t, clusterOpts(""))
	c.Add(batch(0, 1000, 25, ck("k", 600)))
	c.Add(batch(1, 1000, 25, ck("k", 300)))
	c.Add(batch(2, 1000, 25))
	require.Empty(t, c.Ready(nil, nil), "round evaluated before partition 3 reported")
	c.Add(batch(3, 1000, 25, ck("k", 150)))
	evs := c.Ready(nil, nil)
	require.Len(t, evs, 1, "600+300+150 reaches 1000")
	require.Equal(t, uint64(1050), evs[0].Count)
	require.Equal(t, t0(999), evs[0].OnsetMs)

	// Partition 0 goes on alone: rounds wait for 1-3 until they are
	// 4000 ms (the hold) behind.
	for end := int64(1100); end <= 4900; end += 100 {
		c.Add(batch(0, end, 25))
	}
	require.Empty(t, c.Ready(nil, nil))
	c.Add(batch(0, 5000, 25))
	evs = c.Ready(nil, nil)
	// Rounds 1100..5000 evaluated: at 2000 every count lapsed or dropped,
	// below from round 1100 (partition 0 dropped it), cooled at 1100+2000.
	require.Len(t, evs, 1)
	require.Equal(t, schemas.HotKeyCooled, evs[0].Type)
	require.Equal(t, t0(3100), evs[0].OnsetMs)
}

func t0(ms int64) int64 { return ms }

// The same batches in another partition order give the same events.
func TestClusterDeterministic(t *testing.T) {
	mk := func(order []int32) []schemas.HotKeyEvent {
		c := newCluster(t, clusterOpts(""))
		var evs []schemas.HotKeyEvent
		for end := int64(1000); end <= 8000; end += 100 {
			for _, p := range order {
				n := uint64(0)
				if end >= 2000 && end < 4000 {
					n = 300
				}
				if n > 0 {
					c.Add(batch(p, end, 25, ck("k", n)))
				} else {
					c.Add(batch(p, end, 25))
				}
				evs = c.Ready(nil, evs)
			}
		}
		return c.Finish(evs)
	}
	a, b := mk([]int32{0, 1, 2, 3}), mk([]int32{3, 1, 0, 2})
	require.Len(t, a, 2)
	require.Equal(t, a, b)
}

// Past ClusterKeys entries, new keys are refused and counted.
func TestClusterKeysBound(t *testing.T) {
	o := clusterOpts("")
	o.Detect.ClusterKeys = 2
	c := newCluster(t, o)
	c.Add(batch(0, 1000, 25, ck("a", 30), ck("b", 30), ck("c", 30)))
	c.Finish(nil)
	require.Equal(t, uint64(1), c.Stats().KeysRefused.Load())
}

// TestClusterRecallPrecision measures, on an unkeyed Zipf stream over 8
// partitions (6,000 events/s of Zipf(1.1) background over 100,000 keys,
// whose heaviest key is at about 0.8× the threshold), which planted keys
// at 0.5× to 3× the threshold the cluster stage alerts, and how far each
// onset is from the true crossing (event time). The planted keys go
// round-robin over the partitions (even), or 95% to partition 0 and the
// rest round-robin over the other 7 (skewed: under every other
// partition's floor, so only partition 0 lists them). It asserts what
// each bound promises, the upper (the default) that no key at or above
// the rate is missed, the lower that no key under it is alerted, and
// logs recall, precision and onset error (past figures in docs/benchmarks-history.md).
func TestClusterRecallPrecision(t *testing.T) {
	mult := []float64{0.5, 0.75, 0.9, 0.97, 1.02, 1.1, 1.25, 1.5, 2, 3}
	const parts = 8
	for _, tc := range []struct {
		bound, spread string
	}{{BoundLower, "even"}, {BoundUpper, "even"}, {BoundLower, "skewed"}, {BoundUpper, "skewed"}} {
		bound := tc.bound
		t.Run(bound+"/"+tc.spread, func(t *testing.T) {
			o := clusterOpts(bound)
			var pl []*planted
			for i, m := range mult {
				from := int64(1000 + 500*i)
				pl = append(pl, &planted{app: "shop", key: fmt.Sprintf("x%.2f", m), op: "GET", rate: steady(1000*m, from, from+4000)})
			}
			events := generate(streamSpec{seed: 3, durationMs: 12_000, bgPerMs: 6, bgKeys: 100_000, planted: pl})
			pick := func(_ string, nth int) int { return nth % parts }
			if tc.spread == "skewed" {
				pick = func(key string, nth int) int {
					if !strings.HasPrefix(key, "x") || nth%20 != 0 {
						return 0
					}
					return 1 + nth/20%(parts-1)
				}
			}
			evs := spreadBy(t, o, parts, events, pick)
			var tp, fp, fn int
			for i, m := range mult {
				key := fmt.Sprintf("x%.2f", m)
				h := hotOf(evs, key, schemas.HotKeyHot)
				truth := m >= 1
				switch {
				case truth && len(h) == 1:
					tp++
					from := t0Ms + int64(1000+500*i)
					cross := from + int64(math.Ceil(1000/m)) // count over 1 s reaches 1000
					t.Logf("%s/%s: %.2fx onset %+d ms from the true crossing, rate %.0f, error %d", bound, tc.spread, m, h[0].OnsetMs-cross, h[0].Rate, h[0].Error)
				case truth:
					fn++
				case len(h) > 0:
					fp++
					t.Logf("%s/%s: %.2fx alerted (not hot): rate %.0f, error %d", bound, tc.spread, m, h[0].Rate, h[0].Error)
				}
			}
			for _, e := range evs {
				if e.Type == schemas.HotKeyHot && !strings.HasPrefix(e.Key, "x") {
					fp++
				}
			}
			t.Logf("%s/%s: recall %d/%d, precision %d/%d", bound, tc.spread, tp, tp+fn, tp, tp+fp)
			if bound == BoundUpper || tc.spread == "even" {
				require.Zero(t, fn, "a key above the threshold was missed")
			}
			if bound == BoundLower || tc.spread == "even" {
				require.Zero(t, fp, "a key under the threshold was alerted")
			}
		})
	}
}

// EpisodeStartMs says from which round a key's episode must be replayed
// for a new stage to raise its events with the same IDs: the stream of
// TestClusterDeterministic (the key hot over [2000, 4000)) fed from a
// window before it gives the full run's events; fed from inside the
// episode, a hot with another ID.
func TestClusterEpisodeStart(t *testing.T) {
	feed := func(fromMs int64, watch func(*ClusterAlerts, int64)) []schemas.HotKeyEvent {
		c := newCluster(t, clusterOpts(""))
		var evs []schemas.HotKeyEvent
		for end := int64(1000); end <= 9000; end += 100 {
			if end < fromMs {
				continue
			}
			for p := range int32(4) {
				if end >= 2000 && end < 4000 {
					c.Add(batch(p, end, 25, ck("k", 300)))
				} else {
					c.Add(batch(p, end, 25))
				}
			}
			evs = c.Ready(nil, evs)
			if watch != nil {
				watch(c, end)
			}
		}
		return c.Finish(evs)
	}
	starts := map[int64]int64{} // round → EpisodeStartMs, when ok
	all := feed(0, func(c *ClusterAlerts, end int64) {
		if s, ok := c.EpisodeStartMs(); ok {
			starts[end] = s
		}
	})
	require.Len(t, all, 2)
	require.Equal(t, schemas.HotKeyHot, all[0].Type)
	// Hot at round 2000, below from 4000, cooled at 6000 (cool-down 2 s),
	// suppressed until 7000 (1 s), and two windows more: the episode bears
	// until 9000.
	for end := int64(1000); end <= 9000; end += 100 {
		if end >= 2000 && end < 9000 {
			require.Equal(t, int64(2000), starts[end], "round %d", end)
		} else {
			require.NotContains(t, starts, end, "round %d", end)
		}
	}
	require.Equal(t, all, feed(2000-1000, nil), "fed from a window before the episode: the same events")
	late := feed(3000, nil)
	require.Len(t, late, 2)
	require.NotEqual(t, all[0].ID, late[0].ID, "fed from inside the episode: hot again, later")

	// Where detect's merger may commit after each round: two windows,
	// the cool-down and the suppression before it, and no later than two
	// windows before a bearing episode. A stage fed from there raises no
	// event the full run did not.
	ids := map[string]bool{}
	for _, e := range all {
		ids[e.ID] = true
	}
	for end := int64(1000); end <= 9000; end += 100 {
		from := end - (2000 + 2000 + 1000)
		if s, ok := starts[end]; ok {
			from = min(from, s-2000)
		}
		for _, e := range feed(from, nil) {
			require.True(t, ids[e.ID], "after round %d, fed from %d: %s %d is new", end, from, e.Type, e.OnsetMs)
		}
	}
}

// A commit point on the windows topic is an offset: with partitions
// lagging (three of four, 1.5 s behind the first), the batches after it
// hold every partition's batch of the rounds from the stage's chosen
// start on, but of earlier rounds only the lagging partitions'. A stage fed from every commit point detect's
// merger may choose (ClusterAlerts.DoneMs and EpisodeStartMs, as
// detect/mergerunner.go's clusterHold) with SetStart raises no event the full
// run did not; without SetStart, rounds of partial sums raise the key
// anew.
func TestClusterCommitPointWithLaggingPartition(t *testing.T) {
	o := clusterOpts("")
	items := laggingItems(14000, 1500, func(p int32, end int64) *schemas.Candidates {
		if end >= 2000 && end < 4000 {
			return batch(p, end, 25, ck("k", 400))
		}
		return batch(p, end, 25)
	})
	ref, points := commitPoints(t, o, items)
	feed := func(from []*schemas.Candidates, startMs int64) []schemas.HotKeyEvent {
		return feedCluster(t, o, from, startMs, nil)
	}
	require.Len(t, ref, 2, "one hot, one cooled: %+v", ref)
	ids := map[string]bool{}
	for _, e := range ref {
		ids[e.ID] = true
	}
	var anew int
	for _, pt := range points {
		for _, e := range feed(items[pt.off:], pt.fromMs) {
			require.True(t, ids[e.ID], "from offset %d, start %d: %s %d is new", pt.off, pt.fromMs, e.Type, e.OnsetMs)
		}
		for _, e := range feed(items[pt.off:], noTime) {
			if !ids[e.ID] {
				anew++
			}
		}
	}
	require.Positive(t, anew, "without a start, some commit point raises the key anew")
}

// laggingItems is the windows topic's batches when partition 0 runs lag
// ms ahead of partitions 1 to 3: at(p, end) for every 100 ms slot end
// from 1 s to last (partition 0's), in the order they would arrive.
func laggingItems(last, lag int64, at func(p int32, end int64) *schemas.Candidates) []*schemas.Candidates {
	var items []*schemas.Candidates
	for end := int64(1000); end <= last+lag; end += 100 {
		if end <= last {
			items = append(items, at(0, end))
		}
		if e := end - lag; e >= 1000 {
			for p := int32(1); p < 4; p++ {
				items = append(items, at(p, e))
			}
		}
	}
	return items
}

// feedCluster runs a new cluster stage, started at startMs, over from;
// watch, if not nil, sees the stage after each batch.
func feedCluster(t *testing.T, o Options, from []*schemas.Candidates, startMs int64, watch func(int, *ClusterAlerts)) []schemas.HotKeyEvent {
	c := newCluster(t, o)
	c.SetStart(startMs)
	var evs []schemas.HotKeyEvent
	for i, b := range from {
		c.Add(b)
		evs = c.Ready(nil, evs)
		if watch != nil {
			watch(i, c)
		}
	}
	return c.Finish(evs)
}

// commitPoint is where a new stage may resume: the first batch at or
// after fromMs, and fromMs as its start.
type commitPoint struct {
	off    int
	fromMs int64
}

// commitPoints runs items through a stage from the start and returns its
// events and, after each batch, the commit point detect's merger would
// choose (as detect/mergerunner.go's clusterHold: two rule windows, the
// cool-down and the suppression before the last round decided, and two
// rule windows before an open episode's start; 2000 + 2000 + 1000 for
// these options).
func commitPoints(t *testing.T, o Options, items []*schemas.Candidates) ([]schemas.HotKeyEvent, []commitPoint) {
	var points []commitPoint
	ref := feedCluster(t, o, items, noTime, func(i int, c *ClusterAlerts) {
		done, ok := c.DoneMs()
		if !ok {
			return
		}
		from := done - (2000 + 2000 + 1000)
		if s, ok := c.EpisodeStartMs(); ok {
			from = min(from, s-2000)
		}
		off := i
		for j := 0; j <= i; j++ {
			if items[j].SlotEndMs >= from {
				off = j
				break
			}
		}
		points = append(points, commitPoint{off, from})
	})
	return ref, points
}
