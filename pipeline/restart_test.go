package pipeline

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/keyheat/keyheat/schemas"
	"github.com/stretchr/testify/require"
)

// emission is one output of a run, with the index of the event whose
// Process produced it (len(events) for End).
type emission struct {
	at     int
	window *schemas.PartitionWindow
	hot    *schemas.HotKeyEvent
	cand   *schemas.Candidates // an unkeyed partition's, held and acknowledged as hot keys are
}

func (e emission) json(t *testing.T) string {
	var b []byte
	var err error
	if e.window != nil {
		b, err = e.window.AppendJSON(nil)
	} else if e.cand != nil {
		b, err = e.cand.AppendJSON(nil)
	} else {
		b, err = e.hot.AppendJSON(nil)
	}
	require.NoError(t, err)
	return string(b)
}

// consumer plays detect's part around a Partition: it hands outputs to a
// pretend Kafka that acknowledges each a random number of events later
// (so out of order), and commits every commitEvery events.
type consumer struct {
	p           *Partition
	rng         *rand.Rand
	pending     []pendingAck
	committed   CommitPoint
	commitEvery int
	emitted     []emission
}

type pendingAck struct {
	due   int
	start int64
	id    string
	cand  bool
}

func (c *consumer) collect(at int, out *Output) {
	for i := range out.Windows {
		w := out.Windows[i]
		c.emitted = append(c.emitted, emission{at: at, window: &w})
		c.pending = append(c.pending, pendingAck{due: at + c.rng.IntN(3000), start: w.StartMs})
	}
	for i := range out.HotKeys {
		h := out.HotKeys[i]
		c.emitted = append(c.emitted, emission{at: at, hot: &h})
		c.pending = append(c.pending, pendingAck{due: at + c.rng.IntN(3000), id: h.ID})
	}
	for i := range out.Candidates {
		b := out.Candidates[i]
		c.emitted = append(c.emitted, emission{at: at, cand: &b})
		c.pending = append(c.pending, pendingAck{due: at + c.rng.IntN(3000), id: b.ID, cand: true})
	}
	out.Reset()
}

func (c *consumer) ack(at int) {
	kept := c.pending[:0]
	for _, a := range c.pending {
		switch {
		case a.due > at:
			kept = append(kept, a)
		case a.cand:
			c.p.AckedCandidates(a.id)
		case a.id != "":
			c.p.AckedHotKey(a.id)
		default:
			c.p.Acked(a.start)
		}
	}
	c.pending = kept
}

// feed processes events[from:to] (by index), acknowledging and committing
// as it goes; with end it also ends the input.
func (c *consumer) feed(events []event, from, to int, end bool) {
	var out Output
	for i := from; i < to; i++ {
		c.p.Process(&events[i].e, events[i].off, &out)
		c.collect(i, &out)
		c.ack(i)
		if i%c.commitEvery == 0 {
			cp := c.p.CommitPoint()
			c.committed = cp
		}
	}
	if end {
		c.p.End(&out)
		c.collect(len(events), &out)
	}
}

// indexOf returns the index of the first event at or after offset.
func indexOf(events []event, offset int64) int {
	for i := range events {
		if events[i].off >= offset {
			return i
		}
	}
	return len(events)
}

func restartSpec(seed uint64) streamSpec {
	d := int64(40_000)
	if testing.Short() || raceEnabled {
		d = 25_000
	}
	return streamSpec{seed: seed, durationMs: d, bgPerMs: 4, bgKeys: 20_000, bgApps: []string{"shop", "cart"},
		jitterMs: 2500, jitterEvery: 25, startOffset: 1000, gaps: true,
		planted: []*planted{
			{app: "shop", key: "burst", op: "GET", rate: steady(2500, 3000, 9000)},
			{app: "cart", key: "burst", op: "SET", rate: steady(1800, 12_000, 16_000)},
			{app: "shop", key: "again", op: "GET", rate: func(ms int64) float64 {
				if (ms/7000)%2 == 1 {
					return 1400
				}
				return 200
			}},
			{app: "shop", key: "long:1", op: "INCR", rate: steady(900, 0, 40_000)},
			// A step within one episode: updates as the window takes
			// it in.
			{app: "cart", key: "step", op: "SET", rate: func(ms int64) float64 {
				switch {
				case ms >= 18_000 && ms < 20_500:
					return 1300
				case ms >= 20_500 && ms < 23_000:
					return 2800
				}
				return 0
			}},
		}}
}

func restartOptions() Options {
	o := DefaultOptions()
	o.Rules = []Rule{
		{Name: "long", Key: "long:*", Window: 2 * time.Second, Rate: 800},
		{Name: "default", Key: "*", Window: time.Second, Rate: 1000},
	}
	o.Detect.CoolDown = 3 * time.Second
	o.Detect.Suppress = 2 * time.Second
	return o
}

// TestRestartReproducesOutput crashes a run at many random points, restarts
// it from its last commit point and metadata (sometimes from a lower
// offset, as when a sink holds the commit back, and sometimes twice in a
// row), and requires the restarted run to emit, byte for byte, every
// window the crashed run had not had acknowledged at the commit and every
// hot-key event (hot, update, cooled) it had emitted from the resume
// offset on, and nothing else. Its episodes with updates are shorter than
// the restart's re-read (see doc.go for longer ones).
func TestRestartReproducesOutput(t *testing.T) {
	crashes := 16
	if testing.Short() || raceEnabled {
		crashes = 5
	}
	for _, seed := range []uint64{21, 22, 24, 27, 29, 33} {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			o := restartOptions()
			events := generate(restartSpec(seed))
			src := testSource
			src.Keyed = seed%2 == 0
			startOff := events[0].off

			ref := &consumer{p: newPart(t, o, src, Start{Offset: startOff}), rng: rand.New(rand.NewPCG(seed, 1)), commitEvery: 400}
			ref.feed(events, 0, len(events), true)
			var hots, updates int
			for _, e := range ref.emitted {
				if e.hot != nil || e.cand != nil && len(e.cand.Keys) > 0 {
					hots++
				}
				if e.hot != nil && e.hot.Type == schemas.HotKeyUpdate {
					updates++
				}
			}
			require.Greater(t, hots, 4, "the stream has hot keys to reproduce")
			if src.Keyed {
				require.Greater(t, updates, 4, "the stream has updates to reproduce")
			}

			rng := rand.New(rand.NewPCG(seed, 2))
			for c := range crashes {
				chain := 1 + rng.IntN(2)
				prev := &consumer{p: newPart(t, o, src, Start{Offset: startOff}), rng: rand.New(rand.NewPCG(seed, uint64(10+c))), commitEvery: 400}
				from := 0
				var cur *consumer
				for link := 0; ; link++ {
					crashAt := from + 1 + rng.IntN(len(events)-from)
					last := link == chain
					if last {
						crashAt = len(events)
					}
					prev.feed(events, from, crashAt, last)
					if last {
						cur = prev
						break
					}
					cp := prev.committed
					if cp.Metadata == "" {
						cp = prev.p.commit.start // crashed before its first commit
					}
					meta, err := schemas.ParseCommitMeta(cp.Metadata)
					require.NoError(t, err)
					require.LessOrEqual(t, cp.Offset, meta.ResumeOffset)
					off := cp.Offset
					if rng.IntN(3) == 0 {
						off = max(startOff, off-int64(rng.IntN(500))) // a sink held the commit back
					}
					next := &consumer{p: newPart(t, o, src, Start{Offset: off, Metadata: cp.Metadata}),
						rng: rand.New(rand.NewPCG(seed, uint64(100*c+link))), commitEvery: 400}
					from = indexOf(events, off)
					prev = next
					if link == chain-1 {
						checkRestart(t, ref, next, events, from, cp)
						break
					}
				}
				_ = cur
			}
		})
	}
}

// checkRestart runs the restarted consumer to the end and compares.
func checkRestart(t *testing.T, ref, re *consumer, events []event, from int, cp CommitPoint) {
	t.Helper()
	meta, err := schemas.ParseCommitMeta(cp.Metadata)
	require.NoError(t, err)
	re.feed(events, from, len(events), true)
	resume := indexOf(events, meta.ResumeOffset)
	var want, got []string
	for _, e := range ref.emitted {
		if e.window != nil && (meta.NextWindowMs == schemas.NoTimeMs || e.window.StartMs >= meta.NextWindowMs) {
			want = append(want, e.json(t))
		}
		if (e.hot != nil || e.cand != nil) && e.at >= resume {
			want = append(want, e.json(t))
		}
	}
	for _, e := range re.emitted {
		got = append(got, e.json(t))
	}
	t.Logf("restart at %d, resume %d (%d events of warm-up): %d records to reproduce", cp.Offset, meta.ResumeOffset, resume-from, len(want))
	require.Equal(t, len(want), len(got), "restart from %s at offset %d emitted %d records, want %d", cp.Metadata, cp.Offset, len(got), len(want))
	for i := range want {
		require.Equal(t, want[i], got[i], "record %d after restart from %s at offset %d", i, cp.Metadata, cp.Offset)
	}
}

func TestNewPartitionStart(t *testing.T) {
	o := DefaultOptions()
	for name, tc := range map[string]struct {
		start Start
		want  string
	}{
		"negative offset": {Start{Offset: -1}, "negative"},
		"garbage":         {Start{Offset: 5, Metadata: "hello"}, "commit metadata"},
		"other window":    {Start{Offset: 5, Metadata: "kh1 r=5 t=- w=- l=500"}, "written with 500 ms windows"},
		"another version": {Start{Offset: 5, Metadata: "kh2 r=5 t=- w=- l=1000"}, "version"},
	} {
		_, err := NewPartition(o, testSource, tc.start)
		require.ErrorContains(t, err, tc.want, name)
	}
	bad := o
	bad.Window = 0
	_, err := NewPartition(bad, testSource, Start{})
	require.ErrorIs(t, err, ErrInvalidOptions)

	// A fresh partition's commit point is its start until it has counted
	// something, with metadata that restarts it fresh.
	p := newPart(t, o, testSource, Start{Offset: 42})
	require.Equal(t, CommitPoint{Offset: 42, Metadata: "kh1 r=42 t=- w=- l=1000"}, p.CommitPoint())
	var out Output
	p.Process(ev(10, "a"), 42, &out)
	p.Process(ev(20, "b"), 50, &out)
	require.Equal(t, CommitPoint{Offset: 42, Metadata: "kh1 r=42 t=- w=- l=1000"}, p.CommitPoint(), "window 0 is open since offset 42")
	p.Process(ev(3500, "c"), 51, &out) // closes window 0 (and emits it)
	require.Len(t, out.Windows, 1)
	require.Equal(t, int64(42), p.CommitPoint().Offset, "window 0 is not acknowledged yet")
	p.Acked(out.Windows[0].StartMs)
	cp := p.CommitPoint()
	require.Equal(t, int64(42), cp.Offset, "the warm-up reaches back to the start")
	m, err := schemas.ParseCommitMeta(cp.Metadata)
	require.NoError(t, err)
	require.Equal(t, schemas.CommitMeta{ResumeOffset: 51, MaxTsMs: schemas.NoTimeMs, NextWindowMs: t0Ms + 1000, WindowMs: 1000}, m,
		"resume at the first event of the open window 3; window 1 is next to emit")

	// A restart that is given a lower offset than the metadata's resume
	// offset warms up from there; a higher one skips nothing it needs.
	q := newPart(t, o, testSource, Start{Offset: 51, Metadata: "kh1 r=49 t=1767225600020 w=1767225601000 l=1000"})
	require.Equal(t, int64(51), q.resume, "resume never before the first offset read")

	// The options must match the rules given to SetRules.
	r2 := o
	r2.Detect.Slots = 20
	rules, err := NewRules(r2)
	require.NoError(t, err)
	require.ErrorIs(t, p.SetRules(rules), ErrRulesMismatch)
}

// TestStartClock: a partition started with a clock (an idle partition
// that followed the wall clock before its first event) counts an older
// first event late, in the oldest open window, not in its own window.
func TestStartClock(t *testing.T) {
	o := DefaultOptions()
	o.Lateness = time.Second
	src := Source{Topic: "t", Partitions: 1, Keyed: true}
	p, err := NewPartition(o, src, Start{Offset: 0, ClockMs: 100_000})
	require.NoError(t, err)
	var out Output
	p.Process(&schemas.AccessEvent{TimeMs: 50_000, Key: "k", App: "a", Op: "GET"}, 0, &out)
	p.Process(&schemas.AccessEvent{TimeMs: 100_500, Key: "k", App: "a", Op: "GET"}, 1, &out)
	p.End(&out)
	var events, late uint64
	for _, w := range out.Windows {
		events += w.Events
		late += w.Late
		require.GreaterOrEqual(t, w.StartMs, int64(99_000), "no window before the clock's watermark is opened")
	}
	require.Equal(t, uint64(1), events)
	require.Equal(t, uint64(1), late, "the event older than the clock is late")
	require.Equal(t, uint64(1), p.Stats().Late)
}
