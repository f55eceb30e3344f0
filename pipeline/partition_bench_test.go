package pipeline

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/keyheat/keyheat/schemas"
	"github.com/keyheat/keyheat/sketch"
)

// benchKeys returns n keys drawn from Zipf 1.1 over 1M ids, the skew of a
// cache access log, laid back to back in one buffer as a decoded batch's
// keys are, and the ids they were drawn as.
func benchKeys(n int) ([]string, []uint64) {
	r := rand.New(rand.NewPCG(7, 7))
	z := rand.NewZipf(r, 1.1, 1, 1_000_000-1)
	buf := make([]byte, 0, n*20)
	ends := make([]int, n)
	ids := make([]uint64, n)
	for i := range ends {
		ids[i] = z.Uint64()
		buf = strconv.AppendUint(append(buf, "tenant-7:user:"...), ids[i], 10)
		ends[i] = len(buf)
	}
	all := string(buf)
	keys := make([]string, n)
	start := 0
	for i, end := range ends {
		keys[i] = all[start:end]
		start = end
	}
	return keys, ids
}

// floodKeys returns n keys of which 9 in 10 are each seen once (within n
// events, over 2 s at 1M/s for n = 2^21: longer than any window here) and
// the others cycle through 50 hot keys (2000/s each at 1M/s): a unique-key
// flood with a few hot keys in it, laid out as benchKeys lays its keys.
func floodKeys(n int) ([]string, []uint64) {
	buf := make([]byte, 0, n*24)
	ends := make([]int, n)
	ids := make([]uint64, n)
	for i := range ends {
		if i%10 == 9 {
			ids[i] = uint64(i/10) % 50
			buf = strconv.AppendUint(append(buf, "tenant-7:hot:"...), ids[i], 10)
		} else {
			ids[i] = uint64(i)
			buf = strconv.AppendUint(append(buf, "tenant-7:flood:"...), ids[i], 10)
		}
		ends[i] = len(buf)
	}
	all := string(buf)
	keys := make([]string, n)
	start := 0
	for i, end := range ends {
		keys[i] = all[start:end]
		start = end
	}
	return keys, ids
}

// benchLoop feeds one event per iteration to step: the keys of benchKeys
// in order, round and round, one app, 9 reads to 1 write, event time
// advancing 1 ms every perMs events (so perMs × 1000 is the partition's
// rate in events/s). The event is one struct refilled each time, as a
// decoder refills its event; what the loop costs on its own is a few ns
// (BenchmarkBenchLoop). A first pass over every key, and over at least
// five 1 s report windows of event time (so that the open windows' exact
// tables, reused window after window, have grown), before the timer, fills
// every structure: what is timed is the steady state.
func benchLoop(b *testing.B, perMs int, step func(e *schemas.AccessEvent, off int64)) {
	keys, ids := benchKeys(1 << 20)
	streamLoop(b, keys, ids, perMs, step)
}

// streamLoop is benchLoop over the given keys and their ids.
func streamLoop(b *testing.B, keys []string, ids []uint64, perMs int, step func(e *schemas.AccessEvent, off int64)) {
	mask := len(keys) - 1
	e := schemas.AccessEvent{App: "shop", LatencyUs: 80}
	var off int64
	one := func(i int) {
		j := i & mask
		e.Key = keys[j]
		e.Op = "GET"
		if ids[j]%10 == 3 {
			e.Op = "SET"
		}
		e.Bytes = 100 + int64(ids[j]%400)
		e.TimeMs = t0Ms + int64(i/perMs)
		step(&e, off)
		off++
	}
	warm := max(len(keys), 5*1000*perMs)
	for i := range warm {
		one(i)
	}
	b.ReportAllocs()
	i := warm
	cpu := startCPU()
	for b.Loop() {
		one(i)
		i++
	}
	cpu.report(b)
}

// cpuMeter measures a benchmark loop's CPU time, reported per operation
// as cpu-ns/op: on a loaded machine the figure to compare.
type cpuMeter struct {
	t0 time.Duration
	ok bool
}

func startCPU() cpuMeter {
	t, ok := cpuTime()
	return cpuMeter{t, ok}
}

func (m cpuMeter) report(b *testing.B) {
	if t, ok := cpuTime(); ok && m.ok && b.N > 0 {
		b.ReportMetric(float64((t-m.t0).Nanoseconds())/float64(b.N), "cpu-ns/op")
	}
}

// BenchmarkBenchLoop is benchLoop's own cost, to read the others against.
func BenchmarkBenchLoop(b *testing.B) {
	var s int
	benchLoop(b, 1000, func(e *schemas.AccessEvent, _ int64) { s += len(e.Key) })
	_ = s
}

// BenchmarkDetectCore is the detection core on one partition: rules, the
// slot Count-Min sketches, the gated HotRing, and the report window's
// exact table (with the top-K for keys past it), one xxh3 hash per event
// shared by all. At 1M events/s about 150 keys pass the default gate
// (500/s in a slot) and take ~57 % of the events, so the ring is on the
// path of most events; at 100k/s about 15 keys and ~37 %. A 1 s window
// at 1M/s holds more distinct keys than the exact table (65,536): about a
// fifth of its events have keys that arrived after the table filled and
// go to the top-K as well.
func BenchmarkDetectCore(b *testing.B) {
	for _, perMs := range []int{1000, 100} {
		b.Run(fmt.Sprintf("rate=%dk/s", perMs), func(b *testing.B) {
			benchLoop(b, perMs, detectCoreStep(b))
		})
	}
}

// BenchmarkDetectCoreFlood is BenchmarkDetectCore on floodKeys: nearly
// every key new to every structure.
func BenchmarkDetectCoreFlood(b *testing.B) {
	keys, ids := floodKeys(1 << 21)
	for _, perMs := range []int{1000, 100} {
		b.Run(fmt.Sprintf("rate=%dk/s", perMs), func(b *testing.B) {
			streamLoop(b, keys, ids, perMs, detectCoreStep(b))
		})
	}
}

// detectCoreStep is one event of the detection core, its clock and its
// report window's exact table, as appAgg.add counts a key.
func detectCoreStep(b *testing.B) func(e *schemas.AccessEvent, off int64) {
	o := DefaultOptions()
	p, err := NewPartition(o, testSource, Start{})
	if err != nil {
		b.Fatal(err)
	}
	tab := newExactTable(o.Summary.ExactKeys, o.Summary.ExactKeyBytes, 0)
	top, _ := sketch.NewTopK(sketch.TopKConfig{Capacity: o.Summary.TopCapacity, Sketch: sketch.CountMinConfig{Width: o.Summary.TopWidth}, Slack: spillSlack})
	var out Output
	windowEnd := int64(0)
	return func(e *schemas.AccessEvent, off int64) {
		if e.TimeMs > p.maxTs {
			p.maxTs, p.started = e.TimeMs, true
			p.det.tick(&out)
		}
		if e.TimeMs >= windowEnd { // a report window closes
			tab.reset()
			top.Reset()
			windowEnd = (e.TimeMs/1000 + 1) * 1000
		}
		p.curOffset = off
		ad := p.det.app(e.App)
		h := sketch.Hash(e.Key)
		tab.touch(h)
		cls := p.classify(e.Op)
		if x, g := ad.match(e.Key); x != nil {
			p.det.process(ad, x, g, e, e.Key, h, cls, &out)
		}
		var rd, wr uint64
		switch cls {
		case opRead:
			rd = 1
		case opWrite:
			wr = 1
		}
		nb, lat := uint64(e.Bytes), uint64(e.LatencyUs)
		x := tab.lookup(h, 0, e.Key)
		if x == nil && !tab.full {
			x = tab.insert(h, 0, e.Key)
		}
		if x != nil {
			tab.count(x, nb, rd, wr, lat)
		} else {
			top.AddHash(e.Key, h, 1)
		}
		out.Reset()
	}
}

// BenchmarkProcess is everything Partition.Process does per event: the
// detection core plus the window summaries (totals, top and big keys with
// their side sums, distinct keys, Redis slots) and the clock, windows
// emitted and acknowledged as they close.
func BenchmarkProcess(b *testing.B) {
	for _, keyed := range []bool{true, false} {
		for _, perMs := range []int{1000, 100} {
			b.Run(fmt.Sprintf("keyed=%v/rate=%dk/s", keyed, perMs), func(b *testing.B) {
				benchLoop(b, perMs, processStep(b, keyed))
			})
		}
	}
}

// BenchmarkProcessFlood is BenchmarkProcess on floodKeys.
func BenchmarkProcessFlood(b *testing.B) {
	keys, ids := floodKeys(1 << 21)
	for _, perMs := range []int{1000, 100} {
		b.Run(fmt.Sprintf("keyed=true/rate=%dk/s", perMs), func(b *testing.B) {
			streamLoop(b, keys, ids, perMs, processStep(b, true))
		})
	}
}

// processStep is Partition.Process of one event, acknowledging what it
// hands out.
func processStep(b *testing.B, keyed bool) func(e *schemas.AccessEvent, off int64) {
	src := testSource
	src.Keyed = keyed
	p, err := NewPartition(DefaultOptions(), src, Start{})
	if err != nil {
		b.Fatal(err)
	}
	var out Output
	return func(e *schemas.AccessEvent, off int64) {
		p.Process(e, off, &out)
		for _, w := range out.Windows {
			p.Acked(w.StartMs)
		}
		for _, h := range out.HotKeys {
			p.AckedHotKey(h.ID)
		}
		for _, c := range out.Candidates {
			p.AckedCandidates(c.ID)
		}
		out.Reset()
	}
}

// BenchmarkDetectParts takes BenchmarkDetectCore apart on the same stream
// (rate 1M/s): the hash alone, the hash with the slot sketch update, the
// hash with the top-K, the hash with the exact table (a window of 1M
// events, the keys past its bound not counted), and the core without its
// window counting, to read where the time goes against BenchmarkBenchLoop.
func BenchmarkDetectParts(b *testing.B) {
	o := DefaultOptions()
	b.Run("hash", func(b *testing.B) {
		var s uint64
		benchLoop(b, 1000, func(e *schemas.AccessEvent, _ int64) { s += sketch.Hash(e.Key) })
		_ = s
	})
	b.Run("hash+sketch", func(b *testing.B) {
		c, _ := sketch.NewCountMin(sketch.CountMinConfig{Depth: o.Detect.SketchDepth, Width: o.Detect.SketchWidth, Conservative: true})
		benchLoop(b, 1000, func(e *schemas.AccessEvent, _ int64) { c.AddHash(sketch.Hash(e.Key), 1) })
	})
	b.Run("hash+topk", func(b *testing.B) {
		top, _ := sketch.NewTopK(sketch.TopKConfig{Capacity: o.Summary.TopCapacity, Sketch: sketch.CountMinConfig{Width: o.Summary.TopWidth}})
		benchLoop(b, 1000, func(e *schemas.AccessEvent, _ int64) { top.AddHash(e.Key, sketch.Hash(e.Key), 1) })
	})
	b.Run("hash+exact", func(b *testing.B) {
		tab := newExactTable(o.Summary.ExactKeys, o.Summary.ExactKeyBytes, 0)
		windowEnd := int64(0)
		benchLoop(b, 1000, func(e *schemas.AccessEvent, _ int64) {
			if e.TimeMs >= windowEnd {
				tab.reset()
				windowEnd = (e.TimeMs/1000 + 1) * 1000
			}
			h := sketch.Hash(e.Key)
			x := tab.lookup(h, 0, e.Key)
			if x == nil && !tab.full {
				x = tab.insert(h, 0, e.Key)
			}
			if x != nil {
				tab.count(x, uint64(e.Bytes), 1, 0, uint64(e.LatencyUs))
			}
		})
	})
	b.Run("core-without-window", func(b *testing.B) {
		p, _ := NewPartition(o, testSource, Start{})
		var out Output
		benchLoop(b, 1000, func(e *schemas.AccessEvent, _ int64) {
			if e.TimeMs > p.maxTs {
				p.maxTs, p.started = e.TimeMs, true
				p.det.tick(&out)
			}
			h := sketch.Hash(e.Key)
			ad := p.det.app(e.App)
			cls := p.classify(e.Op)
			if x, g := ad.match(e.Key); x != nil {
				p.det.process(ad, x, g, e, e.Key, h, cls, &out)
			}
			out.Reset()
		})
	})
}

// BenchmarkSparseWindows is one partition of a backfill of a quiet topic,
// one report window per iteration: 250 events per 1 s window (1,000
// events/s over four partitions, detect.BenchmarkEndToEnd's rate=1000),
// keys drawn from 100,000, each window summarised when the watermark
// passes it, encoded as detect sends it (schemas.PartitionWindow's
// AppendBinary) and acknowledged. What an iteration costs beyond 250 ×
// the per-event cost is the window's: the slot sketches and exact table
// reset, the summary built, encoded and dropped.
func BenchmarkSparseWindows(b *testing.B) {
	const perWindow = 250
	p, err := NewPartition(DefaultOptions(), testSource, Start{})
	if err != nil {
		b.Fatal(err)
	}
	keys := make([]string, 100_000)
	for i := range keys {
		keys[i] = "key:" + strconv.Itoa(i)
	}
	var out Output
	var buf []byte
	var off int64
	e := schemas.AccessEvent{App: "app", Op: "GET", Bytes: 100}
	window := func() {
		for range perWindow {
			e.Key = keys[(off*off)%int64(len(keys))]
			e.TimeMs = t0Ms + off*1000/perWindow
			p.Process(&e, off, &out)
			off++
		}
		for i := range out.Windows {
			buf = out.Windows[i].AppendBinary(buf[:0])
			p.Acked(out.Windows[i].StartMs)
		}
		for _, h := range out.HotKeys {
			p.AckedHotKey(h.ID)
		}
		out.Reset()
	}
	for range 20 {
		window()
	}
	b.ReportAllocs()
	cpu := startCPU()
	for b.Loop() {
		window()
	}
	cpu.report(b)
	b.ReportMetric(float64(len(buf)), "summary-bytes")
}
