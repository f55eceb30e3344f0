package pipeline

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/keyheat/keyheat/schemas"
	"github.com/stretchr/testify/require"
)

// refreshAtMs is the event time an update's ID carries (its last field):
// the slot boundary at which it was decided.
func refreshAtMs(t *testing.T, h schemas.HotKeyEvent) int64 {
	t.Helper()
	i := strings.LastIndexByte(h.ID, '/')
	require.Positive(t, i, "ID %q", h.ID)
	ms, err := strconv.ParseInt(h.ID[i+1:], 10, 64)
	require.NoError(t, err, "ID %q", h.ID)
	require.Equal(t, schemas.HotKeyID(h.Topic, h.Partition, h.Rule, h.Type, h.App, h.Key, ms), h.ID, "the ID is HotKeyID's")
	return ms
}

// countIn counts the events of app/key whose time lies in [fromMs, toMs),
// and of them the writes (SET, INCR).
func countIn(events []event, app, key string, fromMs, toMs int64) (all, writes uint64) {
	for i := range events {
		e := &events[i].e
		if e.App == app && e.Key == key && e.TimeMs >= fromMs && e.TimeMs < toMs {
			all++
			if e.Op == "SET" || e.Op == "INCR" {
				writes++
			}
		}
	}
	return all, writes
}

// alertsOf is hotKeysOf without the updates: a key's hot and cooled
// events, for tests of when a key turns hot and cools.
func alertsOf(out Output, app, key string) []schemas.HotKeyEvent {
	var r []schemas.HotKeyEvent
	for _, h := range hotKeysOf(out, app, key) {
		if h.Type != schemas.HotKeyUpdate {
			r = append(r, h)
		}
	}
	return r
}

// checkUpdates checks a key's records (hot, updates, cooled, in order)
// against the events: each update lies inside an episode and carries its
// onset, a window or more after the record before it, with a rate moved
// by change of that record's or more; its Count is the key's counted
// events (count) in the rule window ending at its slot boundary, exactly
// when exact (the key's window was counted exactly: no credit in it) and
// never below; the peak is the highest rate published in the episode and
// the cooled carries it. It returns how many updates it checked.
func checkUpdates(t *testing.T, events []event, hs []schemas.HotKeyEvent, windowMs int64, change float64, exact bool, count func(*schemas.AccessEvent) bool) int {
	t.Helper()
	var cur *schemas.HotKeyEvent // the episode's hot
	var prevMs int64
	var prevRate, peak float64
	n := 0
	for i := range hs {
		h := hs[i]
		switch h.Type {
		case schemas.HotKeyHot:
			require.Nil(t, cur, "record %d: hot inside an episode", i)
			cur, prevMs, prevRate, peak = &hs[i], h.OnsetMs, h.Rate, h.Rate
			require.Equal(t, h.Rate, h.PeakRate, "record %d: a hot's peak is its rate", i)
		case schemas.HotKeyUpdate:
			require.NotNil(t, cur, "record %d: update outside an episode", i)
			n++
			atMs := refreshAtMs(t, h)
			require.Equal(t, cur.OnsetMs, h.OnsetMs, "record %d: the episode's onset", i)
			require.GreaterOrEqual(t, atMs-prevMs, windowMs, "record %d: a window after the record before", i)
			require.GreaterOrEqual(t, abs(h.Rate-prevRate), change*prevRate, "record %d: rate %v after %v", i, h.Rate, prevRate)
			var want uint64
			for j := range events {
				e := &events[j].e
				if e.App == h.App && e.Key == h.Key && e.TimeMs >= atMs-windowMs && e.TimeMs < atMs && count(e) {
					want++
				}
			}
			if exact {
				require.Equal(t, want, h.Count, "record %d: the key's events in [at − W, at)", i)
			} else {
				require.GreaterOrEqual(t, h.Count, want, "record %d: the key's events in [at − W, at)", i)
			}
			require.Equal(t, float64(h.Count)*1000/float64(windowMs), h.Rate, "record %d", i)
			peak = max(peak, h.Rate)
			require.Equal(t, peak, h.PeakRate, "record %d", i)
			require.NotNil(t, h.Mitigation, "record %d", i)
			prevMs, prevRate = atMs, h.Rate
		case schemas.HotKeyCooled:
			require.NotNil(t, cur, "record %d: cooled outside an episode", i)
			require.Equal(t, peak, h.PeakRate, "record %d: cooled with the episode's peak", i)
			cur = nil
		}
	}
	return n
}

func typesOf(hs []schemas.HotKeyEvent) []string {
	var out []string
	for _, h := range hs {
		out = append(out, h.Type)
	}
	return out
}

// A key at 1,500 events/s for 20 s under a 1,000/s rule: hot at its
// crossing, at about the rule's rate; one window later an update with its
// rate over the rule window ending at the update's slot boundary, counted
// here from the events, exactly; nothing more while its rate stays within
// ±25 % of that; cooled with the episode's peak. While it lasts the
// registry says 1,500/s, not 1,000.
func TestRefreshFollowsRate(t *testing.T) {
	o := DefaultOptions() // 1,000 events/s over 1 s, 10 slots; refresh at ±25 %
	spec := streamSpec{seed: 31, durationMs: 40_000, bgPerMs: 2, bgKeys: 500, planted: []*planted{
		{app: "shop", key: "url:/checkout", op: "GET", rate: steady(1500, 5000, 25_000)},
		// Within ±25 % of its first published rate all along: no update.
		{app: "shop", key: "url:/calm", op: "GET", rate: func(ms int64) float64 {
			switch {
			case ms < 5000 || ms >= 25_000:
				return 0
			case (ms/2000)%2 == 0:
				return 1100
			}
			return 1240
		}},
	}}
	events := generate(spec)
	p := newPart(t, o, testSource, Start{})
	out := run(p, events, true)

	hs := hotKeysOf(out, "shop", "url:/checkout")
	checkUpdates(t, events, hs, 1000, 0.25, true, allEvents)
	require.Equal(t, schemas.HotKeyHot, hs[0].Type)
	hot, up, cooled := hs[0], hs[1], hs[len(hs)-1]
	require.Equal(t, schemas.HotKeyUpdate, up.Type)
	require.Equal(t, schemas.HotKeyCooled, cooled.Type)
	// The burst ends at 25 s: its window falls through 1,125/s (−25 %)
	// while still over the rule, which is an update too; before that,
	// at a steady 1,500/s, nothing but the one.
	for _, h := range hs[2 : len(hs)-1] {
		require.Greater(t, refreshAtMs(t, h), t0Ms+25_000, "an update while steady: %+v", h)
		require.Less(t, h.Rate, 1125.0)
	}
	require.LessOrEqual(t, len(hs), 4)
	require.InDelta(t, 1000, hot.Rate, 2, "hot at its crossing")
	require.Equal(t, hot.Rate, hot.PeakRate, "a hot's peak is its rate")

	atMs := refreshAtMs(t, up)
	require.Zero(t, atMs%100, "decided at a slot boundary")
	require.GreaterOrEqual(t, atMs-hot.OnsetMs, int64(1000), "at most one record per rule window")
	require.Less(t, atMs-hot.OnsetMs, int64(1000+100+1), "at the first slot boundary a window after the hot")
	n, _ := countIn(events, "shop", "url:/checkout", atMs-1000, atMs)
	require.Equal(t, n, up.Count, "the key's events in [at − 1 s, at)")
	require.Equal(t, float64(n), up.Rate, "events over a 1 s window")
	require.InDelta(t, 1500, up.Rate, 2)
	require.Zero(t, up.Error, "the window's slots end at the boundary: nothing left out")
	require.Equal(t, up.Rate, up.PeakRate)
	require.Equal(t, hot.OnsetMs, up.OnsetMs, "the episode's onset")
	require.Equal(t, schemas.HotKeyID(testSource.Topic, testSource.Partition, "default", "update", "shop", "url:/checkout", atMs), up.ID)
	require.Equal(t, &schemas.Mitigation{Kind: schemas.MitigationLocalCache}, up.Mitigation)
	require.Equal(t, n, up.Reads)

	require.Equal(t, up.PeakRate, cooled.PeakRate, "cooled carries the episode's peak")
	require.Nil(t, cooled.Mitigation)

	calm := hotKeysOf(out, "shop", "url:/calm")
	require.Equal(t, []string{"hot", "cooled"}, typesOf(calm), "1,100 to 1,240/s stays within ±25 %% of its first rate: %+v", calm)
	require.Equal(t, calm[0].Rate, calm[1].PeakRate, "no update: the peak is the hot's rate")
	require.Equal(t, uint64(len(hs)-2), p.Stats().Updates)
	require.Equal(t, uint64(2), p.Stats().Hot)
}

// A write-heavy key whose writes double mid-episode, then fall: every
// update's counts are the key's events over the rule window ending at its
// slot boundary, counted here from the events; its split factor is the
// one those writes call for; it moved ±25 % or more from the record
// before it, a window or more after it; the peak is the highest rate
// published. At the end of each plateau the last record is the
// plateau's rate and split: a step is published as the window takes it
// in, and again once the window holds the new rate whole.
func TestRefreshRecomputesSplit(t *testing.T) {
	o := DefaultOptions()
	o.Detect.SplitCapacity = 1000
	o.Detect.CoolDown = 2 * time.Second
	spec := streamSpec{seed: 32, durationMs: 30_000, bgPerMs: 1, bgKeys: 200, planted: []*planted{
		{app: "shop", key: "counter", op: "INCR", rate: func(ms int64) float64 {
			switch {
			case ms < 2000 || ms >= 20_000:
				return 0
			case ms < 8000:
				return 1500 // split 2
			case ms < 14_000:
				return 3000 // split 4
			}
			return 1800 // split 2 again
		}},
		{app: "shop", key: "counter", op: "GET", rate: steady(200, 2000, 20_000)},
	}}
	events := generate(spec)
	out := run(newPart(t, o, testSource, Start{}), events, true)
	hs := hotKeysOf(out, "shop", "counter")
	require.GreaterOrEqual(t, len(hs), 4, "%+v", hs)
	require.Equal(t, schemas.HotKeyHot, hs[0].Type)
	require.Equal(t, schemas.HotKeyCooled, hs[len(hs)-1].Type)
	peak, prevMs, prevRate := 0.0, hs[0].OnsetMs, hs[0].Rate
	last := map[int64]schemas.HotKeyEvent{} // plateau end → the last record before it
	for i, h := range hs[:len(hs)-1] {
		peak = max(peak, h.Rate)
		require.Equal(t, peak, h.PeakRate, "record %d", i)
		require.Equal(t, hs[0].OnsetMs, h.OnsetMs, "record %d: the episode's onset", i)
		atMs := h.OnsetMs
		if i > 0 {
			require.Equal(t, schemas.HotKeyUpdate, h.Type, "record %d", i)
			atMs = refreshAtMs(t, h)
			all, writes := countIn(events, "shop", "counter", atMs-1000, atMs)
			require.Equal(t, all, h.Count, "update %d: every event of [at − 1 s, at)", i)
			require.Equal(t, writes, h.Writes, "update %d", i)
			require.Equal(t, all-writes, h.Reads, "update %d", i)
			require.Equal(t, float64(all), h.Rate, "update %d", i)
			require.Equal(t, &schemas.Mitigation{Kind: schemas.MitigationSplit, Split: splitFor(float64(writes), 1000)}, h.Mitigation, "update %d", i)
			require.GreaterOrEqual(t, atMs-prevMs, int64(1000), "update %d: a window after the record before", i)
			require.GreaterOrEqual(t, abs(h.Rate-prevRate), 0.25*prevRate, "update %d: %v after %v", i, h.Rate, prevRate)
		}
		prevMs, prevRate = atMs, h.Rate
		for _, end := range []int64{8000, 14_000, 20_000} {
			if atMs <= t0Ms+end {
				last[end] = h
			}
		}
	}
	// Each plateau's rate and split, as its last second's events give
	// them: the registry holds a rate within ±25 % of it, and for the
	// rising plateaus, which a second update reached whole, exactly it.
	for _, end := range []int64{8000, 14_000, 20_000} {
		h := last[end]
		all, writes := countIn(events, "shop", "counter", t0Ms+end-1000, t0Ms+end)
		require.Less(t, abs(float64(all)-h.Rate), 0.25*h.Rate, "the last record before %d ms: %+v", end, h)
		if end < 20_000 {
			require.Equal(t, float64(all), h.Rate, "the last record before %d ms: %+v", end, h)
			require.Equal(t, splitFor(float64(writes), 1000), h.Mitigation.Split, "the last record before %d ms", end)
		}
	}
	require.Equal(t, 4, last[14_000].Mitigation.Split, "the doubled writes split into 4")
	require.Equal(t, 3200.0, hs[len(hs)-1].PeakRate, "cooled with the episode's peak")
}

func abs(x float64) float64 { return max(x, -x) }

// Updates are off with refresh_change 0; hot and cooled are the same
// events with it on or off: updates only add records.
func TestRefreshOffChangesNothingElse(t *testing.T) {
	spec := streamSpec{seed: 33, durationMs: 30_000, bgPerMs: 4, bgKeys: 2000, jitterMs: 300, jitterEvery: 40, planted: []*planted{
		{app: "shop", key: "ramp", op: "GET", rate: func(ms int64) float64 { return float64(ms) / 10 }},
		{app: "shop", key: "burst", op: "SET", rate: steady(4000, 3000, 9000)},
		{app: "shop", key: "flap", op: "GET", rate: func(ms int64) float64 {
			if (ms/1700)%2 == 0 {
				return 1600
			}
			return 300
		}},
	}}
	events := generate(spec)
	on := run(newPart(t, hotOptions(), testSource, Start{}), events, true)
	o := hotOptions()
	o.Detect.RefreshChange = 0
	off := run(newPart(t, o, testSource, Start{}), events, true)
	var withoutUpdates []schemas.HotKeyEvent
	updates := 0
	for _, h := range on.HotKeys {
		if h.Type == schemas.HotKeyUpdate {
			updates++
			continue
		}
		h.PeakRate = 0
		withoutUpdates = append(withoutUpdates, h)
	}
	for i := range off.HotKeys {
		require.NotEqual(t, schemas.HotKeyUpdate, off.HotKeys[i].Type)
		off.HotKeys[i].PeakRate = 0
	}
	require.Greater(t, updates, 10, "the ramp and the bursts moved")
	require.Equal(t, off.HotKeys, withoutUpdates)
	require.Equal(t, off.Windows, on.Windows)
}

// Options: refresh_change is a share, not negative, finite.
func TestRefreshChangeValidated(t *testing.T) {
	for _, v := range []float64{-0.1, math.Inf(1), math.NaN()} {
		o := DefaultOptions()
		o.Detect.RefreshChange = v
		require.ErrorContains(t, o.Validate(), "detect.refresh_change", fmt.Sprint(v))
	}
	o := DefaultOptions()
	o.Detect.RefreshChange = 0
	require.NoError(t, o.Validate())
}

// A key at 1,500 events/s spread over 8 partitions of a topic not keyed
// by access key: the cluster stage publishes one stream for it, hot,
// an update with the whole topic's rate over the window ending at its
// round (the key's events there, counted here, never more than its
// listed counts say), cooled; the partitions publish nothing (spread
// checks). A key within ±25 % of its first rate gets no update.
func TestClusterRefresh(t *testing.T) {
	o := clusterOpts("")
	events := generate(streamSpec{seed: 34, durationMs: 16_000, bgPerMs: 2, bgKeys: 5000,
		planted: []*planted{
			{app: "shop", key: "url:/search", op: "GET", rate: steady(1500, 2000, 10_000)},
			{app: "shop", key: "url:/calm", op: "GET", rate: steady(1200, 2000, 10_000)},
		}})
	evs := spread(t, o, 8, events)
	var hs, calm []schemas.HotKeyEvent
	for _, e := range evs {
		require.Equal(t, int32(schemas.ClusterPartition), e.Partition, "%+v", e)
		switch e.Key {
		case "url:/search":
			hs = append(hs, e)
		case "url:/calm":
			calm = append(calm, e)
		}
	}
	// The ramp down at 10 s passes 1,125/s over the rule: an update too.
	require.GreaterOrEqual(t, len(hs), 3, "%+v", hs)
	require.Equal(t, schemas.HotKeyHot, hs[0].Type)
	require.Equal(t, schemas.HotKeyCooled, hs[len(hs)-1].Type)
	up := hs[1]
	require.Equal(t, schemas.HotKeyUpdate, up.Type)
	atMs := refreshAtMs(t, up)
	require.GreaterOrEqual(t, atMs-hs[0].OnsetMs, int64(1000))
	n, _ := countIn(events, "shop", "url:/search", atMs-1000, atMs)
	require.Equal(t, n, up.Count, "every partition listed the key: the sum is its count over [at − 1 s, at)")
	require.Equal(t, float64(n), up.Rate)
	require.InDelta(t, 1500, up.Rate, 2)
	require.Equal(t, hs[0].OnsetMs, up.OnsetMs)
	require.Len(t, up.Partitions, 8)
	require.Equal(t, schemas.HotKeyID("t", schemas.ClusterPartition, "r", "update", "shop", "url:/search", atMs), up.ID)
	for _, h := range hs[2 : len(hs)-1] {
		require.Greater(t, refreshAtMs(t, h), t0Ms+10_000, "an update while steady: %+v", h)
	}
	require.Equal(t, up.Rate, hs[len(hs)-1].PeakRate)
	require.Equal(t, []string{"hot", "cooled"}, typesOf(calm), "%+v", calm)
}

// A new cluster stage fed from any commit point detect's merger may
// choose raises the updates of a key whose rate steps up and down
// within its episode with the full run's IDs and contents: the merger
// holds its commit before the episode, so the stage sees it whole.
func TestClusterRefreshFromCommitPoints(t *testing.T) {
	o := clusterOpts("")
	items := laggingItems(16000, 700, func(p int32, end int64) *schemas.Candidates {
		switch {
		case end >= 2000 && end < 3500:
			return batch(p, end, 25, ck("k", 300))
		case end >= 3500 && end < 6000:
			return batch(p, end, 25, ck("k", 700))
		case end >= 6000 && end < 8000:
			return batch(p, end, 25, ck("k", 450))
		}
		return batch(p, end, 25)
	})
	ref, points := commitPoints(t, o, items)
	feed := func(from []*schemas.Candidates, startMs int64) []schemas.HotKeyEvent {
		return feedCluster(t, o, from, startMs, nil)
	}
	require.Equal(t, []string{"hot", "update", "update", "cooled"}, typesOf(ref), "%+v", ref)
	require.Equal(t, []float64{1200, 2800, 1800, 0}, []float64{ref[0].Rate, ref[1].Rate, ref[2].Rate, ref[3].Rate})
	require.Equal(t, []float64{1200, 2800, 2800, 2800}, []float64{ref[0].PeakRate, ref[1].PeakRate, ref[2].PeakRate, ref[3].PeakRate})
	byID := map[string]schemas.HotKeyEvent{}
	for _, e := range ref {
		byID[e.ID] = e
	}
	updates := 0
	for _, pt := range points {
		for _, e := range feed(items[pt.off:], pt.fromMs) {
			want, ok := byID[e.ID]
			require.True(t, ok, "from offset %d, start %d: %s %d is new", pt.off, pt.fromMs, e.Type, e.OnsetMs)
			require.Equal(t, want, e, "from offset %d, start %d", pt.off, pt.fromMs)
			if e.Type == schemas.HotKeyUpdate {
				updates++
			}
		}
	}
	require.Positive(t, updates, "some commit points re-raise updates")
}
