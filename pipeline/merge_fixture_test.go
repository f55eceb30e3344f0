package pipeline

import (
	"cmp"
	"hash/crc32"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/keyheat/keyheat/schemas"
	"github.com/keyheat/keyheat/sketch"
)

// This file builds PartitionWindows from events with the real sketch
// package, standing in for the partition core in the merger's tests. It
// keeps per-key figures other than the count exact, which the partition
// core cannot; the merger treats them as lower bounds either way.

// mergeEvent is one access in the merge tests.
type mergeEvent struct {
	app, key  string
	tsMs      int64
	bytes     uint64
	write     bool // a write, else a read
	latencyUs uint64
}

// mergeFixture says how events become summaries.
type mergeFixture struct {
	topic      string
	partitions int32
	windowMs   int64
	// keyed places an event by its key's hash, as a topic keyed by access
	// key does; otherwise events go round robin.
	keyed bool
	// capacity is each app's TopK capacity per partition window; list caps
	// the keys a summary lists (0: all tracked), raising Floor to cover the
	// rest.
	capacity, list int
	// filter sizes the TopK's admission filter; a narrow one makes counts
	// overestimate, so error bounds matter.
	filter sketch.CountMinConfig
	// big is how many keys by bytes a summary lists.
	big int
	// cms sizes the Count-Min sketch sent when not keyed.
	cms sketch.CountMinConfig
	// hll sizes the distinct-key sketches (sparse ones stay small).
	hll sketch.CardinalityConfig
	// final marks each partition's last summary Final.
	final bool
	// idle makes every partition report every window from the first to
	// the last of all events, as partitions without events do once their
	// watermark advances on the wall clock.
	idle bool
}

func (f mergeFixture) partitionOf(e mergeEvent, i int) int32 {
	if f.keyed {
		return int32(crc32.ChecksumIEEE([]byte(e.key)) % uint32(f.partitions))
	}
	return int32(i % int(f.partitions))
}

type mergeAppAcc struct {
	topk     *sketch.TopK
	cms      *sketch.CountMin
	distinct *sketch.Cardinality
	total    schemas.AppWindow
	keys     map[string]*schemas.KeyCount
	slots    map[uint16]uint64
}

// build returns every partition's summaries, each partition from the
// window of its first event to that of its last, empty windows included,
// in partition then window order.
func (f mergeFixture) build(t testing.TB, events []mergeEvent) []*schemas.PartitionWindow {
	t.Helper()
	type pw struct {
		part  int32
		start int64
	}
	accs := map[pw]map[string]*mergeAppAcc{}
	first := map[int32]int64{}
	last := map[int32]int64{}
	offsets := map[pw][2]int64{}
	for i, e := range events {
		p := f.partitionOf(e, i)
		start := e.tsMs - ((e.tsMs%f.windowMs)+f.windowMs)%f.windowMs
		if s, ok := first[p]; !ok || start < s {
			first[p] = start
		}
		last[p] = max(last[p], start)
		k := pw{p, start}
		o, ok := offsets[k]
		if !ok {
			o = [2]int64{int64(i), int64(i)}
		}
		offsets[k] = [2]int64{min(o[0], int64(i)), max(o[1], int64(i))}
		if accs[k] == nil {
			accs[k] = map[string]*mergeAppAcc{}
		}
		a := accs[k][e.app]
		if a == nil {
			var err error
			a = &mergeAppAcc{keys: map[string]*schemas.KeyCount{}, slots: map[uint16]uint64{}}
			a.topk, err = sketch.NewTopK(sketch.TopKConfig{Capacity: f.capacity, Sketch: f.filter})
			require.NoError(t, err)
			a.distinct, err = sketch.NewCardinality(f.hll)
			require.NoError(t, err)
			if !f.keyed {
				a.cms, err = sketch.NewCountMin(f.cms)
				require.NoError(t, err)
			}
			accs[k][e.app] = a
		}
		a.topk.Add(e.key)
		if a.cms != nil {
			a.cms.Add(e.key)
		}
		a.distinct.Add(e.key)
		kc := a.keys[e.key]
		if kc == nil {
			kc = &schemas.KeyCount{App: e.app, Key: e.key, Partition: p}
			a.keys[e.key] = kc
		}
		kc.Count++
		kc.Bytes += e.bytes
		kc.LatencyUs += e.latencyUs
		a.total.Events++
		a.total.Bytes += e.bytes
		a.total.LatencyUs += e.latencyUs
		if e.write {
			kc.Writes++
			a.total.Writes++
		} else {
			kc.Reads++
			a.total.Reads++
		}
		a.slots[Slot(e.key)]++
	}

	if f.idle {
		lo, hi := int64(1<<63-1), int64(-1<<63)
		for p := range first {
			lo, hi = min(lo, first[p]), max(hi, last[p])
		}
		for p := range f.partitions {
			first[p], last[p] = lo, hi
		}
	}
	var out []*schemas.PartitionWindow
	for p := range f.partitions {
		if _, ok := first[p]; !ok {
			continue
		}
		for start := first[p]; start <= last[p]; start += f.windowMs {
			k := pw{p, start}
			w := &schemas.PartitionWindow{
				Version: schemas.WindowVersion, ID: schemas.PartitionWindowID(f.topic, p, start),
				Topic: f.topic, Partition: p, Partitions: f.partitions, StartMs: start, EndMs: start + f.windowMs,
				FirstOffset: -1, LastOffset: -1, WatermarkMs: start + f.windowMs, Keyed: f.keyed,
				Final: f.final && start == last[p], Apps: []schemas.AppWindow{},
			}
			if o, ok := offsets[k]; ok {
				w.FirstOffset, w.LastOffset = o[0], o[1]
			}
			names := make([]string, 0, len(accs[k]))
			for n := range accs[k] {
				names = append(names, n)
			}
			slices.Sort(names)
			for _, n := range names {
				w.Apps = append(w.Apps, f.appWindow(t, n, accs[k][n]))
				w.Events += accs[k][n].total.Events
			}
			out = append(out, w)
		}
	}
	return out
}

func (f mergeFixture) appWindow(t testing.TB, app string, a *mergeAppAcc) schemas.AppWindow {
	aw := a.total
	aw.App = app
	items := a.topk.Top(a.topk.Len())
	aw.Floor = a.topk.Floor()
	if f.list > 0 && len(items) > f.list {
		aw.Floor = max(aw.Floor, items[f.list].Count)
		items = items[:f.list]
	}
	for _, it := range items {
		kc := *a.keys[it.Key]
		kc.Count, kc.Error = it.Count, it.Error
		aw.Top = append(aw.Top, kc)
	}
	if f.big > 0 {
		all := make([]schemas.KeyCount, 0, len(a.keys))
		for _, kc := range a.keys {
			all = append(all, *kc)
		}
		slices.SortFunc(all, func(x, y schemas.KeyCount) int {
			if c := cmp.Compare(y.Bytes, x.Bytes); c != 0 {
				return c
			}
			return cmp.Compare(x.Key, y.Key)
		})
		aw.Big = all[:min(f.big, len(all))]
	}
	for s, n := range a.slots {
		aw.Slots = append(aw.Slots, schemas.SlotCount{Slot: s, Events: n})
	}
	slices.SortFunc(aw.Slots, func(x, y schemas.SlotCount) int { return cmp.Compare(x.Slot, y.Slot) })
	var err error
	aw.Distinct, err = a.distinct.MarshalBinary()
	require.NoError(t, err)
	if a.cms != nil {
		aw.Sketch, err = a.cms.MarshalBinary()
		require.NoError(t, err)
	}
	return aw
}

// mergeZipfEvents draws n events over keys key-0…key-(keys−1) of apps with a
// Zipf(s) popularity, times spread over [startMs, startMs+spanMs), a
// quarter of them writes, from a fixed seed.
func mergeZipfEvents(seed uint64, n, keys int, s float64, apps []string, startMs, spanMs int64) []mergeEvent {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	z := rand.NewZipf(r, s, 1, uint64(keys-1))
	out := make([]mergeEvent, n)
	for i := range out {
		k := z.Uint64()
		out[i] = mergeEvent{
			app: apps[r.IntN(len(apps))], key: "key-" + strconv.Itoa(int(k)),
			tsMs: startMs + r.Int64N(spanMs), bytes: uint64(10 + r.IntN(100)),
			write: r.IntN(4) == 0, latencyUs: uint64(r.IntN(500)),
		}
	}
	// Event time grows along the stream, as in a log.
	slices.SortStableFunc(out, func(a, b mergeEvent) int { return cmp.Compare(a.tsMs, b.tsMs) })
	return out
}

// exact counts events per (app, key) and window: the model the merged
// reports are checked against.
type exactKey struct{ app, key string }

func mergeExactCounts(events []mergeEvent, windowMs int64) map[int64]map[exactKey]uint64 {
	out := map[int64]map[exactKey]uint64{}
	for _, e := range events {
		start := e.tsMs - ((e.tsMs%windowMs)+windowMs)%windowMs
		if out[start] == nil {
			out[start] = map[exactKey]uint64{}
		}
		out[start][exactKey{e.app, e.key}]++
	}
	return out
}
