package pipeline

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/keyheat/keyheat/schemas"
	"github.com/keyheat/keyheat/sketch"
)

// The merger works out exact bounds only for the keys a report may show
// (mergeApp's candidates). These tests hold it to a model that works
// them out for every key: the bounds of each key kept are the model's,
// and every key the model ranks among the first TopN+1 by count or the
// first TopN by a figure is kept.

// modelKeys is every key of one app's windows with its merged bounds,
// computed key by key over every window, as the merger did before it
// selected candidates.
func modelKeys(name string, wins []appWin, keyed map[string]bool) []schemas.KeyCount {
	type acc struct {
		kc     schemas.KeyCount
		lower  uint64
		listed map[int]bool
		topics map[string]bool
	}
	keys := map[string]*acc{}
	var order []string
	for wi, aw := range wins {
		a := aw.window()
		per := map[string]*windowKey{}
		for _, l := range [...][]schemas.KeyCount{a.Top, a.Big, a.TopReads, a.TopWrites, a.TopLatency} {
			for i := range l {
				e := &l[i]
				if k := per[e.Key]; k != nil {
					k.and(windowKeyOf(e))
				} else {
					k := windowKeyOf(e)
					per[e.Key] = &k
				}
			}
		}
		for key, c := range per {
			k := keys[key]
			if k == nil {
				k = &acc{kc: schemas.KeyCount{App: name, Key: key}, listed: map[int]bool{}, topics: map[string]bool{}}
				keys[key] = k
				order = append(order, key)
			}
			k.kc.Count = saturatingAdd(k.kc.Count, c.upper)
			k.lower = saturatingAdd(k.lower, min(c.lower, c.upper))
			k.kc.Bytes = saturatingAdd(k.kc.Bytes, c.bytes)
			k.kc.Reads = saturatingAdd(k.kc.Reads, c.reads)
			k.kc.Writes = saturatingAdd(k.kc.Writes, c.writes)
			k.kc.LatencyUs = saturatingAdd(k.kc.LatencyUs, c.latencyUs)
			k.kc.Shortened = k.kc.Shortened || c.shortened
			k.listed[wi] = true
			k.topics[aw.s.w.Topic] = true
		}
	}
	tf := map[string]uint64{}
	for _, aw := range wins {
		tf[aw.s.w.Topic] = max(tf[aw.s.w.Topic], aw.window().Floor)
	}
	var out []schemas.KeyCount
	for _, key := range order {
		k := keys[key]
		spread := false
		for topic, f := range tf {
			if keyed[topic] && !k.topics[topic] && f > 0 {
				k.kc.Count = saturatingAdd(k.kc.Count, f)
				spread = true
			}
		}
		for wi, aw := range wins {
			if keyed[aw.s.w.Topic] || k.listed[wi] {
				continue
			}
			bound := aw.window().Floor
			if cms := aw.s.apps[aw.app].cms; cms != nil && bound > 0 {
				bound = min(bound, cms.Estimate(key))
			}
			if bound > 0 {
				k.kc.Count = saturatingAdd(k.kc.Count, bound)
				spread = true
			}
		}
		kc := k.kc
		kc.Error = kc.Count - k.lower
		kc.Partition = -1
		if len(k.listed) == 1 && !spread {
			for wi := range k.listed {
				kc.Partition = wins[wi].s.w.Partition
			}
		}
		out = append(out, kc)
	}
	return out
}

// appWindows returns a pending window's app windows by app, as merge
// groups them, whether each topic is keyed, and the number of loads.
func appWindows(m *Merger, p *pendingWindow) (map[string][]appWin, map[string]bool) {
	sums := make([]*heldSummary, 0, len(p.parts))
	for _, s := range p.parts {
		sums = append(sums, s)
	}
	slices.SortFunc(sums, comparePart)
	keyed := map[string]bool{}
	for _, s := range sums {
		if _, seen := keyed[s.w.Topic]; !seen {
			keyed[s.w.Topic] = true
		}
		keyed[s.w.Topic] = keyed[s.w.Topic] && s.w.Keyed
	}
	wins := map[string][]appWin{}
	for _, s := range sums {
		for i := range s.w.Apps {
			wins[s.w.Apps[i].App] = append(wins[s.w.Apps[i].App], appWin{s: s, app: i})
		}
	}
	return wins, keyed
}

func TestMergeCandidatesMatchModel(t *testing.T) {
	for _, tc := range []struct {
		name       string
		topN       int
		capacity   int
		list       int
		cms        sketch.CountMinConfig
		keyedFirst bool // the first topic keyed, the second not
		zipf       float64
	}{
		{"keyed and unkeyed, cut lists", 3, 64, 16, sketch.CountMinConfig{Width: 64, Depth: 2}, true, 1.05},
		{"unkeyed, narrow sketch", 5, 32, 0, sketch.CountMinConfig{Width: 16, Depth: 1}, false, 1.2},
		{"top 1, many ties", 1, 16, 8, sketch.CountMinConfig{Width: 32, Depth: 2}, true, 1.01},
		{"top above the keys", 500, 32, 0, sketch.CountMinConfig{}, true, 1.1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			events := mergeZipfEvents(7, 20_000, 2000, tc.zipf, []string{"a", "b", "c"}, 0, 2000)
			half := len(events) / 2
			f1 := mergeFixture{topic: "t1", partitions: 5, windowMs: 1000, keyed: tc.keyedFirst, capacity: tc.capacity, list: tc.list, cms: tc.cms, big: 6}
			f2 := mergeFixture{topic: "t2", partitions: 7, windowMs: 1000, keyed: false, capacity: tc.capacity, list: tc.list, cms: tc.cms, big: 6}
			ws := append(f1.build(t, events[:half]), f2.build(t, events[half:])...)
			pruned := requireCandidates(t, tc.topN, ws)
			t.Logf("keys left out as unable to show: %d", pruned)
			if tc.topN < 100 {
				require.Positive(t, pruned, "the case should leave keys out")
			}
		})
	}
}

// requireCandidates adds ws to a merger of top n and holds every app's
// kept keys of every window to the model; it returns how many keys were
// left out.
func requireCandidates(t *testing.T, topN int, ws []*schemas.PartitionWindow) int {
	t.Helper()
	return requireCandidatesWith(t, topN, ws, defaultPruneMin)
}

// requireCandidatesWith is requireCandidates with keys ruled out before
// the fold for apps of pruneMin listed entries or more.
func requireCandidatesWith(t *testing.T, topN int, ws []*schemas.PartitionWindow, pruneMin int) int {
	t.Helper()
	m, err := NewMerger(testMergerConfig(topN))
	require.NoError(t, err)
	m.pruneMin = pruneMin
	for i, w := range ws {
		require.NoError(t, m.Add(w, int64(i), 0))
	}
	require.NotEmpty(t, m.pending)
	pruned := 0
	for start, p := range m.pending {
		wins, keyed := appWindows(m, p)
		for app, aw := range wins {
			model := modelKeys(app, aw, keyed)
			got := m.mergeApp(app, aw, keyed, len(ws)).keys
			byKey := map[string]schemas.KeyCount{}
			for _, kc := range model {
				byKey[kc.Key] = kc
			}
			kept := map[string]bool{}
			for _, kc := range got {
				require.Equal(t, byKey[kc.Key], kc, "window %d app %s key %s", start, app, kc.Key)
				kept[kc.Key] = true
			}
			pruned += len(model) - len(got)
			requireKept := func(what string, n int, compare func(a, b *schemas.KeyCount) int, skipZero func(*schemas.KeyCount) bool) {
				for _, kc := range selectTop(model, n, compare) {
					if skipZero != nil && skipZero(&kc) {
						continue
					}
					require.True(t, kept[kc.Key], "window %d app %s: %s ranks key %s among its first %d but it was not kept", start, app, what, kc.Key, n)
				}
			}
			requireKept("count", topN+1, func(a, b *schemas.KeyCount) int {
				if c := cmp.Compare(b.Count, a.Count); c != 0 {
					return c
				}
				if c := cmp.Compare(b.Count-b.Error, a.Count-a.Error); c != 0 {
					return c
				}
				return compareAppKey(a, b)
			}, nil)
			for _, f := range []keyFigure{byBytes, byReads, byWrites, byLatency} {
				requireKept(fmt.Sprintf("figure %d", f), topN, func(a, b *schemas.KeyCount) int {
					if c := cmp.Compare(f.of(b), f.of(a)); c != 0 {
						return c
					}
					if c := cmp.Compare(b.Count, a.Count); c != 0 {
						return c
					}
					return compareAppKey(a, b)
				}, func(k *schemas.KeyCount) bool { return f.of(k) == 0 })
			}
		}
	}
	return pruned
}

// TestMergeCandidatesRandom holds the kept keys to the model on summaries
// whose figures are drawn independently of the counts from small ranges
// (so rankings tie at their cut and keys heavy by a figure are light by
// count), with Floors large against the counts on a topic not keyed.
func TestMergeCandidatesRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for round := range 40 {
		topN := 1 + r.IntN(6)
		parts := int32(2 + r.IntN(12))
		keyed := r.IntN(3) == 0
		var ws []*schemas.PartitionWindow
		for p := range parts {
			cms, err := sketch.NewCountMin(sketch.CountMinConfig{Width: 16, Depth: 2})
			require.NoError(t, err)
			a := schemas.AppWindow{App: "a", Floor: uint64(r.IntN(6))}
			seen := map[string]bool{}
			for range 1 + r.IntN(30) {
				key := "k" + strconv.Itoa(r.IntN(60))
				if seen[key] {
					continue
				}
				seen[key] = true
				count := uint64(1 + r.IntN(8))
				cms.AddN(key, count)
				kc := schemas.KeyCount{App: "a", Key: key, Count: count, Error: uint64(r.IntN(int(count) + 1)),
					Bytes: uint64(r.IntN(4)), Reads: uint64(r.IntN(3)), Writes: uint64(r.IntN(3)), LatencyUs: uint64(r.IntN(4)), Partition: p}
				a.Events += kc.Count
				switch r.IntN(4) {
				case 0:
					a.Big = append(a.Big, kc)
				case 1:
					a.TopLatency = append(a.TopLatency, kc)
				default:
					a.Top = append(a.Top, kc)
				}
			}
			if !keyed {
				a.Sketch, err = cms.MarshalBinary()
				require.NoError(t, err)
			}
			ws = append(ws, &schemas.PartitionWindow{
				Version: schemas.WindowVersion, ID: schemas.PartitionWindowID("t", p, 0), Topic: "t", Partition: p, Partitions: parts,
				StartMs: 0, EndMs: 1000, Keyed: keyed, Events: a.Events, Apps: []schemas.AppWindow{a},
			})
		}
		t.Run(strconv.Itoa(round), func(t *testing.T) { requireCandidates(t, topN, ws) })
	}
}

// TestMergeCandidatesSpreadFloors holds the kept keys to the model where
// the candidates' cut is tightest: a topic not keyed over many
// partitions, each listing a few keys of a small pool (so a key is listed
// by some partitions and not others), a few of them with the same Floor,
// as large as the counts. A key's most possible count then rests on the
// Floors of the partitions not listing it, less those of the ones that
// do: a key listed by half of the floored partitions, and heavy, is left
// out if those are taken off twice.
func TestMergeCandidatesSpreadFloors(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	for round := range 200 {
		topN := 1 + r.IntN(3)
		parts := int32(16 + r.IntN(48))
		pool := 10 + r.IntN(40)
		floored, floor := int32(2+r.IntN(3)), uint64(5+r.IntN(20))
		var ws []*schemas.PartitionWindow
		for p := range parts {
			a := schemas.AppWindow{App: "a"}
			var cms *sketch.CountMin
			if p < floored {
				a.Floor = floor
			} else if r.IntN(2) == 0 {
				var err error
				cms, err = sketch.NewCountMin(sketch.CountMinConfig{Width: 8, Depth: 2})
				require.NoError(t, err)
			}
			seen := map[string]bool{}
			for range 1 + r.IntN(8) {
				key := "k" + strconv.Itoa(r.IntN(pool))
				if seen[key] {
					continue
				}
				seen[key] = true
				count := uint64(1 + r.IntN(10))
				if cms != nil {
					cms.AddN(key, count)
				}
				kc := schemas.KeyCount{App: "a", Key: key, Count: count, Error: uint64(r.IntN(2)), Partition: p}
				a.Events += kc.Count
				a.Top = append(a.Top, kc)
			}
			if cms != nil {
				var err error
				a.Sketch, err = cms.MarshalBinary()
				require.NoError(t, err)
			}
			ws = append(ws, &schemas.PartitionWindow{
				Version: schemas.WindowVersion, ID: schemas.PartitionWindowID("t", p, 0), Topic: "t", Partition: p, Partitions: parts,
				StartMs: 0, EndMs: 1000, Events: a.Events, Apps: []schemas.AppWindow{a},
			})
		}
		t.Run(strconv.Itoa(round), func(t *testing.T) { requireCandidates(t, topN, ws) })
	}
}
