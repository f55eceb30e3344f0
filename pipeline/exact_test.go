package pipeline

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/keyheat/keyheat/schemas"
	"github.com/keyheat/keyheat/sketch"
)

// This file checks whole reports (partitions and the merger) of a topic
// keyed by access key against a map of every event: at default settings the
// top keys and the first keys of each secondary ranking are the exact
// answer; with the exact bound set low the reports say they are
// approximate and every count is within its bounds.

// exactFigures is one key's true figures in a window.
type exactFigures struct{ count, bytes, reads, writes, latencyUs uint64 }

func (f exactFigures) of(fig keyFigure) uint64 {
	switch fig {
	case byBytes:
		return f.bytes
	case byReads:
		return f.reads
	case byWrites:
		return f.writes
	default:
		return f.latencyUs
	}
}

// exactWindows is the test-side model: per window start, every key's
// figures.
type exactWindows map[int64]map[exactKey]*exactFigures

func newExactWindows(events []schemas.AccessEvent, windowMs int64) exactWindows {
	ops := newOpClassifier(DefaultReadOps, DefaultWriteOps)
	m := exactWindows{}
	for i := range events {
		e := &events[i]
		s := floorDiv(e.TimeMs, windowMs) * windowMs
		if m[s] == nil {
			m[s] = map[exactKey]*exactFigures{}
		}
		k := exactKey{e.App, e.Key}
		f := m[s][k]
		if f == nil {
			f = &exactFigures{}
			m[s][k] = f
		}
		f.count++
		f.bytes += uint64(e.Bytes)
		f.latencyUs += uint64(e.LatencyUs)
		switch ops.classify(e.Op) {
		case opRead:
			f.reads++
		case opWrite:
			f.writes++
		}
	}
	return m
}

// keyedRun feeds events (in time order) to parts partitions of a topic
// keyed by access key, each key on the partition its hash picks, ends
// them, and merges their summaries window by window.
func keyedRun(t testing.TB, o Options, parts int32, events []schemas.AccessEvent) []MergedWindow {
	t.Helper()
	ps := make([]*Partition, parts)
	offs := make([]int64, parts)
	outs := make([]Output, parts)
	for i := range ps {
		ps[i] = newPart(t, o, Source{Topic: "keyheat.events", Partition: int32(i), Partitions: parts, Keyed: true}, Start{})
	}
	for i := range events {
		p := int32(sketch.Hash(events[i].Key) % uint64(parts))
		ps[p].Process(&events[i], offs[p], &outs[p])
		offs[p]++
	}
	var ws []*schemas.PartitionWindow
	for i, p := range ps {
		p.End(&outs[i])
		for j := range outs[i].Windows {
			ws = append(ws, &outs[i].Windows[j])
		}
	}
	mo := DefaultMergerOptions()
	mo.MaxPendingWindows = 1000
	return mergeInOrder(t, MergerConfig{MergerOptions: mo, Window: o.Window, Lateness: o.Lateness}, byWindow(ws))
}

// scoped is a key of a report's scope with its true figures.
type scoped struct {
	exactKey
	f *exactFigures
}

// exactScope returns the keys of a report's scope, heaviest first (ties in
// any order), with their figures.
func exactScope(r schemas.WindowReport, counts map[exactKey]*exactFigures) []scoped {
	var keys []scoped
	for k, f := range counts {
		if r.Scope == schemas.ScopeCluster || k.app == r.App {
			keys = append(keys, scoped{k, f})
		}
	}
	slices.SortFunc(keys, func(a, b scoped) int { return cmp.Compare(b.f.count, a.f.count) })
	return keys
}

// requireExactReport checks that r's Top is the exact answer (every key
// whose true count beats the last listed one is listed; ties at the cut in
// any order) with true counts and figures, that the first ten keys of each
// secondary ranking are the exact top ten by that figure with true values,
// and that r says it is exact.
func requireExactReport(t *testing.T, r schemas.WindowReport, counts map[exactKey]*exactFigures, keys []scoped, topN int) {
	t.Helper()
	require.Len(t, r.Top, min(topN, len(keys)), "%s: top length", r.ID)
	if len(r.Top) == 0 {
		return
	}
	cut := keys[len(r.Top)-1].f.count
	above := 0
	for _, k := range keys {
		if k.f.count > cut {
			above++
		}
	}
	listedAbove := 0
	for i, kc := range r.Top {
		f := counts[exactKey{kc.App, kc.Key}]
		require.NotNil(t, f, "%s: %s/%s listed, never seen", r.ID, kc.App, kc.Key)
		require.Equal(t, exactFigures{f.count, f.bytes, f.reads, f.writes, f.latencyUs},
			exactFigures{kc.Count, kc.Bytes, kc.Reads, kc.Writes, kc.LatencyUs}, "%s rank %d %s/%s: true figures", r.ID, i+1, kc.App, kc.Key)
		require.Zero(t, kc.Error, "%s %s/%s", r.ID, kc.App, kc.Key)
		require.GreaterOrEqual(t, f.count, cut, "%s %s/%s", r.ID, kc.App, kc.Key)
		if f.count > cut {
			listedAbove++
		}
		if i > 0 {
			require.GreaterOrEqual(t, r.Top[i-1].Count, kc.Count, "%s: ranked by count", r.ID)
		}
	}
	require.Equal(t, above, listedAbove, "%s: every key above the cut (%d events) is listed", r.ID, cut)
	if len(keys) > len(r.Top) {
		require.Equal(t, keys[len(r.Top)].f.count, r.Floor, "%s: the floor is the first true count left out", r.ID)
	}
	require.False(t, r.Approximate, "%s: an exact report says so", r.ID)
	require.Equal(t, len(r.Top), r.Guaranteed, "%s: every key of an exact top is guaranteed", r.ID)
	for _, l := range []struct {
		fig  keyFigure
		name string
		list []schemas.KeyCount
	}{{byBytes, "bytes", r.TopBytes}, {byReads, "reads", r.TopReads}, {byWrites, "writes", r.TopWrites}, {byLatency, "latency", r.TopLatency}} {
		var want []uint64
		for _, k := range keys {
			if v := k.f.of(l.fig); v > 0 {
				want = append(want, v)
			}
		}
		slices.SortFunc(want, func(a, b uint64) int { return cmp.Compare(b, a) })
		n := min(10, len(want))
		require.GreaterOrEqual(t, len(l.list), n, "%s: top %s length", r.ID, l.name)
		for i, kc := range l.list[:n] {
			f := counts[exactKey{kc.App, kc.Key}]
			require.NotNil(t, f, "%s: %s/%s listed by %s, never seen", r.ID, kc.App, kc.Key, l.name)
			require.Equal(t, want[i], l.fig.of(&kc), "%s: top %s rank %d (%s/%s)", r.ID, l.name, i+1, kc.App, kc.Key)
			require.Equal(t, f.of(l.fig), l.fig.of(&kc), "%s: %s/%s true %s", r.ID, kc.App, kc.Key, l.name)
			require.Equal(t, f.count, kc.Count, "%s: %s/%s true count in top %s", r.ID, kc.App, kc.Key, l.name)
		}
	}
}

// requireBoundedReport checks what holds of every report: each listed
// key's true count lies in [Count − Error, Count], its other figures are
// at most the truth (exact when Error is 0), every key heavier than Floor
// is listed, and the first Guaranteed keys each have at least as many
// events as any key after them or left out.
func requireBoundedReport(t *testing.T, r schemas.WindowReport, counts map[exactKey]*exactFigures, keys []scoped) {
	t.Helper()
	listed := map[exactKey]bool{}
	require.LessOrEqual(t, r.Guaranteed, len(r.Top), r.ID)
	for _, kc := range r.Top {
		listed[exactKey{kc.App, kc.Key}] = true
	}
	for _, l := range [][]schemas.KeyCount{r.Top, r.TopBytes, r.TopReads, r.TopWrites, r.TopLatency} {
		for _, kc := range l {
			f := counts[exactKey{kc.App, kc.Key}]
			require.NotNil(t, f, "%s: %s/%s listed, never seen", r.ID, kc.App, kc.Key)
			require.LessOrEqual(t, kc.Count-kc.Error, f.count, "%s %s/%s: lower bound", r.ID, kc.App, kc.Key)
			require.GreaterOrEqual(t, kc.Count, f.count, "%s %s/%s: upper bound", r.ID, kc.App, kc.Key)
			got := exactFigures{kc.Count, kc.Bytes, kc.Reads, kc.Writes, kc.LatencyUs}
			if kc.Error == 0 {
				require.Equal(t, *f, got, "%s %s/%s: Error 0, so every figure is exact", r.ID, kc.App, kc.Key)
				continue
			}
			require.LessOrEqual(t, kc.Bytes, f.bytes, "%s %s/%s bytes", r.ID, kc.App, kc.Key)
			require.LessOrEqual(t, kc.Reads, f.reads, "%s %s/%s reads", r.ID, kc.App, kc.Key)
			require.LessOrEqual(t, kc.Writes, f.writes, "%s %s/%s writes", r.ID, kc.App, kc.Key)
			require.LessOrEqual(t, kc.LatencyUs, f.latencyUs, "%s %s/%s latency", r.ID, kc.App, kc.Key)
		}
	}
	for _, k := range keys {
		if k.f.count > r.Floor && !listed[k.exactKey] {
			t.Fatalf("%s: %s/%s has %d events, above the floor %d, and is not listed", r.ID, k.app, k.key, k.f.count, r.Floor)
		}
	}
	// Guaranteed: no key outside the first Guaranteed has more events than
	// any key inside.
	if r.Guaranteed == 0 {
		return
	}
	var least uint64 = 1<<64 - 1
	inside := map[exactKey]bool{}
	for _, kc := range r.Top[:r.Guaranteed] {
		k := exactKey{kc.App, kc.Key}
		inside[k] = true
		least = min(least, counts[k].count)
	}
	for _, k := range keys {
		if !inside[k.exactKey] && k.f.count > least {
			t.Fatalf("%s: %s/%s (%d events) would rank among the %d guaranteed keys (the least has %d)", r.ID, k.app, k.key, k.f.count, r.Guaranteed, least)
		}
	}
}

// exactEvent builds one event of the streams below: ops 70 % GET (read),
// 25 % SET (write), 5 % PING (neither), bytes and latency drawn.
func exactEvent(r *rand.Rand, tsMs int64, app, key string) schemas.AccessEvent {
	op := "GET"
	switch x := r.IntN(20); {
	case x == 0:
		op = "PING"
	case x < 6:
		op = "SET"
	}
	return schemas.AccessEvent{TimeMs: tsMs, App: app, Key: key, Op: op,
		Bytes: int64(10 + r.IntN(2000)), LatencyUs: int64(20 + r.IntN(900))}
}

// timed spreads n events drawn by pick over window w (of windowMs from
// t0Ms), in time order.
func timed(r *rand.Rand, w int, n int, pick func(i int) (app, key string)) []schemas.AccessEvent {
	ts := make([]int64, n)
	for i := range ts {
		ts[i] = t0Ms + int64(w)*1000 + r.Int64N(1000)
	}
	slices.Sort(ts)
	out := make([]schemas.AccessEvent, n)
	for i := range out {
		app, key := pick(i)
		out[i] = exactEvent(r, ts[i], app, key)
	}
	return out
}

// flatEvents: 16,000 keys of one app, each with 7 to 12 events per window
// in random order, three windows: about 2,000 keys a partition, more than
// a top-K of 1,024 tracks, and counts that differ by one or two.
func flatEvents(scale int) []schemas.AccessEvent {
	r := rand.New(rand.NewPCG(21, 1))
	keys := 16_000 / scale
	var out []schemas.AccessEvent
	for w := range 3 {
		var names []string
		for k := range keys {
			for range 7 + r.IntN(6) {
				names = append(names, "flat:"+strconv.Itoa(k))
			}
		}
		r.Shuffle(len(names), func(i, j int) { names[i], names[j] = names[j], names[i] })
		out = append(out, timed(r, w, len(names), func(i int) (string, string) { return "shop", names[i] })...)
	}
	return out
}

// floodEvents: nine events in ten on keys never seen again, the tenth on
// one of 30 hot keys of unequal weight (10 to 39), three windows.
func floodEvents(scale int) []schemas.AccessEvent {
	r := rand.New(rand.NewPCG(22, 1))
	once := 0
	var out []schemas.AccessEvent
	for w := range 3 {
		out = append(out, timed(r, w, 100_000/scale, func(int) (string, string) {
			if r.IntN(10) > 0 {
				once++
				return "shop", "once:" + strconv.Itoa(once)
			}
			// Hot key j with weight j+10: 30 distinct heavy counts, the
			// lightest still tens of events a window at a quarter scale.
			x := r.IntN(30*10 + 30*29/2)
			j := 0
			for x >= j+10 {
				x -= j + 10
				j++
			}
			return "shop", "hot:" + strconv.Itoa(j)
		})...)
	}
	return out
}

// zipfEvents: Zipf 1.01 (a long, heavy tail) over a million keys of two apps (even keys in one,
// odd in the other), three windows.
func zipfEvents(scale int) []schemas.AccessEvent {
	r := rand.New(rand.NewPCG(23, 1))
	z := rand.NewZipf(r, 1.01, 1, 1_000_000-1)
	var out []schemas.AccessEvent
	for w := range 3 {
		out = append(out, timed(r, w, 200_000/scale, func(int) (string, string) {
			k := z.Uint64()
			app := "shop"
			if k%2 == 1 {
				app = "cart"
			}
			return app, "user:" + strconv.FormatUint(k, 10)
		})...)
	}
	return out
}

var exactWorkloads = []struct {
	name   string
	events func(scale int) []schemas.AccessEvent
}{
	{"flat", flatEvents},
	{"flood", floodEvents},
	{"zipf", zipfEvents},
}

// workload is a generated stream and its exact model, built once per test
// binary: both tests below read the same streams.
type workload struct {
	events []schemas.AccessEvent
	exact  exactWindows
}

var workloads sync.Map // name → func() workload

func loadWorkload(name string, gen func(scale int) []schemas.AccessEvent) workload {
	f, _ := workloads.LoadOrStore(name, sync.OnceValue(func() workload {
		scale := 1
		if raceEnabled {
			scale = 4 // the same shapes with a quarter of the events: -race is ten times slower
		}
		events := gen(scale)
		return workload{events, newExactWindows(events, DefaultOptions().Window.Milliseconds())}
	}))
	return f.(func() workload)()
}

// TestReportsExactWithinBound: on a keyed topic at default settings, the
// flat, flood and Zipf streams give reports whose top 100 is the exact
// answer with true counts, whose top ten by bytes, reads, writes and
// latency are exact, and which say they are exact.
func TestReportsExactWithinBound(t *testing.T) {
	for _, wl := range exactWorkloads {
		t.Run(wl.name, func(t *testing.T) {
			w := loadWorkload(wl.name, wl.events)
			got := keyedRun(t, DefaultOptions(), 8, w.events)
			require.Len(t, got, 3)
			for _, mw := range got {
				for _, r := range mw.Reports {
					keys := exactScope(r, w.exact[mw.StartMs])
					requireExactReport(t, r, w.exact[mw.StartMs], keys, DefaultMergerOptions().TopN)
					requireBoundedReport(t, r, w.exact[mw.StartMs], keys)
				}
			}
		})
	}
}

// TestReportsHonestBeyondBound: with the exact table far smaller than the
// keys of a window (by keys, or, for the flat stream, by key bytes), the
// same streams give reports that say they are approximate, whose every
// count lies within its bounds, and whose guaranteed keys are truly the
// heaviest.
func TestReportsHonestBeyondBound(t *testing.T) {
	for _, wl := range exactWorkloads {
		bounds := []struct {
			name        string
			keys, bytes int
		}{{"keys", 128, 1 << 20}}
		if wl.name == "flat" {
			bounds = append(bounds, struct {
				name        string
				keys, bytes int
			}{"key bytes", 1 << 16, 2 << 10})
		}
		for _, bound := range bounds {
			t.Run(fmt.Sprintf("%s/%s", wl.name, bound.name), func(t *testing.T) {
				o := DefaultOptions()
				o.Summary.ExactKeys, o.Summary.ExactKeyBytes = bound.keys, bound.bytes
				w := loadWorkload(wl.name, wl.events)
				got := keyedRun(t, o, 8, w.events)
				require.Len(t, got, 3)
				for _, mw := range got {
					for _, r := range mw.Reports {
						require.True(t, r.Approximate, "%s: the exact table overflowed", r.ID)
						requireBoundedReport(t, r, w.exact[mw.StartMs], exactScope(r, w.exact[mw.StartMs]))
					}
					if wl.name == "flood" {
						// The thirty hot keys stand far above any one-off
						// key's bound: all guaranteed, first.
						r := mw.Reports[0]
						require.GreaterOrEqual(t, r.Guaranteed, 30, "%s", r.ID)
						for _, kc := range r.Top[:30] {
							require.Regexp(t, `^hot:`, kc.Key, r.ID)
						}
					}
				}
			})
		}
	}
}
