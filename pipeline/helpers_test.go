package pipeline

import (
	"math"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/keyheat/keyheat/schemas"
	"github.com/stretchr/testify/require"
)

// t0Ms is an arbitrary, window-aligned origin for event times.
var t0Ms = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()

var testSource = Source{Topic: "keyheat.events", Partition: 3, Partitions: 8, Keyed: true}

func newPart(t testing.TB, o Options, src Source, start Start) *Partition {
	t.Helper()
	p, err := NewPartition(o, src, start)
	require.NoError(t, err)
	return p
}

// event is one generated access: the event and its offset.
type event struct {
	e   schemas.AccessEvent
	off int64
}

// planted is a key whose rate follows a schedule, in events per second at
// millisecond ms of the stream. Events are spread evenly: the key gets an
// event whenever its accumulated rate crosses a whole event.
type planted struct {
	app, key string
	op       string
	bytes    int64
	rate     func(ms int64) float64
	acc      float64
}

// streamSpec describes a generated stream.
type streamSpec struct {
	seed       uint64
	durationMs int64
	// bgPerMs events per millisecond over a Zipf(1.1) background of
	// bgKeys keys, in apps bgApps (cycled), ops GET/SET 9:1.
	bgPerMs, bgKeys int
	bgApps          []string
	planted         []*planted
	// jitterMs shuffles event times backwards by up to this much (late
	// and out-of-order events), for one event in jitterEvery.
	jitterMs, jitterEvery int64
	// startOffset is the first offset; offsets step by 1, or by 2 when
	// gaps is set (every other offset missing, as with transaction
	// markers).
	startOffset int64
	gaps        bool
}

// generate builds the stream: events in offset order, event times
// non-decreasing except for jitter.
func generate(s streamSpec) []event {
	rng := rand.New(rand.NewPCG(s.seed, 99))
	var z *rand.Zipf
	if s.bgKeys > 1 {
		z = rand.NewZipf(rng, 1.1, 1, uint64(s.bgKeys-1))
	}
	names := make([]string, s.bgKeys)
	for i := range names {
		names[i] = "user:" + strconv.Itoa(i)
	}
	apps := s.bgApps
	if len(apps) == 0 {
		apps = []string{"shop"}
	}
	var out []event
	off := s.startOffset
	emit := func(e schemas.AccessEvent) {
		if s.jitterEvery > 0 && rng.Int64N(s.jitterEvery) == 0 {
			e.TimeMs -= rng.Int64N(s.jitterMs + 1)
		}
		out = append(out, event{e: e, off: off})
		off++
		if s.gaps {
			off++
		}
	}
	for _, pk := range s.planted {
		pk.acc = 0
	}
	for ms := int64(0); ms < s.durationMs; ms++ {
		ts := t0Ms + ms
		for i := 0; i < s.bgPerMs; i++ {
			id := 0
			if z != nil {
				id = int(z.Uint64())
			}
			op := "GET"
			if rng.IntN(10) == 0 {
				op = "SET"
			}
			emit(schemas.AccessEvent{TimeMs: ts, Key: names[id], App: apps[id%len(apps)], Op: op,
				Bytes: int64(20 + id%300), LatencyUs: int64(50 + id%40)})
		}
		for _, pk := range s.planted {
			pk.acc += pk.rate(ms) / 1000
			for pk.acc >= 1 {
				pk.acc--
				emit(schemas.AccessEvent{TimeMs: ts, Key: pk.key, App: pk.app, Op: pk.op, Bytes: pk.bytes, LatencyUs: 100})
			}
		}
	}
	return out
}

// run feeds events to p, acknowledging nothing, and returns everything it
// produced, End included when end is set.
func run(p *Partition, events []event, end bool) Output {
	var out Output
	for i := range events {
		p.Process(&events[i].e, events[i].off, &out)
	}
	if end {
		p.End(&out)
	}
	return out
}

// steady returns a rate schedule: r events/s in [fromMs, toMs), else 0.
func steady(r float64, fromMs, toMs int64) func(int64) float64 {
	return func(ms int64) float64 {
		if ms >= fromMs && ms < toMs {
			return r
		}
		return 0
	}
}

// sliding is the exact oracle: a key's counted events in the sliding
// window (t − W, t], as of each of its events.
type sliding struct {
	windowMs int64
	times    []int64
}

// add records an event at tsMs and returns the count over (tsMs − W, tsMs]
// of the events recorded so far (events arrive in time order here).
func (s *sliding) add(tsMs int64) int {
	s.times = append(s.times, tsMs)
	i := 0
	for i < len(s.times) && s.times[i] <= tsMs-s.windowMs {
		i++
	}
	s.times = s.times[i:]
	return len(s.times)
}

// onset is one true crossing of a key: the event at which its exact
// sliding count first reached the threshold, after being below it.
type onset struct {
	atMs     int64
	count    int
	endMs    int64 // when the count fell below again (-1: never)
	maxCount int
}

// trueOnsets computes a key's crossings of need events over windowMs from
// the stream, counting the events count selects. A key counts as below
// again once its count, as of a millisecond boundary, is below need.
func trueOnsets(events []event, app, key string, windowMs int64, need float64, count func(*schemas.AccessEvent) bool) []onset {
	sl := &sliding{windowMs: windowMs}
	var out []onset
	above := false
	for i := range events {
		e := &events[i].e
		if e.App != app || e.Key != key || !count(e) {
			continue
		}
		// Expiry between events: did it fall below before this event?
		if above {
			for len(sl.times) > 0 && float64(len(sl.times)) >= need {
				// The count drops when the oldest event leaves, at oldest+W.
				leave := sl.times[0] + windowMs
				if leave > e.TimeMs {
					break
				}
				sl.times = sl.times[1:]
				if float64(len(sl.times)) < need {
					above = false
					out[len(out)-1].endMs = leave
				}
			}
		}
		c := sl.add(e.TimeMs)
		if !above && float64(c) >= need {
			above = true
			out = append(out, onset{atMs: e.TimeMs, count: c, endMs: -1})
		}
		if above && c > out[len(out)-1].maxCount {
			out[len(out)-1].maxCount = c
		}
	}
	if above && len(sl.times) > 0 {
		// Falls below after the last event, once the oldest
		// len − ⌈need⌉ + 1 events have left.
		if k := len(sl.times) - int(math.Ceil(need)); k >= 0 {
			out[len(out)-1].endMs = sl.times[k] + windowMs
		}
	}
	return out
}

func allEvents(*schemas.AccessEvent) bool { return true }

// hotKeys returns the hot-key events of app/key, in order.
func hotKeysOf(out Output, app, key string) []schemas.HotKeyEvent {
	var r []schemas.HotKeyEvent
	for _, h := range out.HotKeys {
		if h.App == app && h.Key == key {
			r = append(r, h)
		}
	}
	return r
}
