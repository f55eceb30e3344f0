package detect_test

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/keyheat/keyheat/detect"
	"github.com/keyheat/keyheat/schemas"
)

// fakeCore is a small stand-in for the detection core, enough to drive
// the service: tumbling windows closed by a watermark, one alert per key
// and window at a count threshold, and a commit point that holds the
// first offset of any window or alert not yet acknowledged. Its metadata
// carries the first window not acknowledged, so a restart drops events of
// windows already published (as the real core does).
type fakeCore struct {
	src       detect.Source
	start     detect.Start
	windowMs  int64
	lateMs    int64
	hotAt     int // alert when a key reaches this count in a window; 0 never
	rules     *detect.Rules
	nextWin   int64 // first window not yet published: earlier ones are dropped
	maxTs     int64
	started   bool
	open      map[int64]*fakeWindow
	lowOpen   int64 // start of the oldest open window; -1 none
	emitted   []fakeClaim
	alerts    []fakeClaim
	nextOff   int64
	lastStart int64 // last window emitted
	stats     detect.CoreStats
}

type fakeWindow struct {
	first, last int64
	events      uint64
	keys        map[string]uint64
	alerted     map[string]bool
	late        uint64
}

type fakeClaim struct {
	start int64
	id    string
	off   int64
	acked bool
}

const fakeMetaPrefix = "fake1 next="

func newFakeCore(src detect.Source, start detect.Start, hotAt int) (*fakeCore, error) {
	c := &fakeCore{src: src, start: start, windowMs: 1000, lateMs: 0, hotAt: hotAt, nextWin: -1 << 62,
		open: map[int64]*fakeWindow{}, lowOpen: -1, nextOff: start.Offset, lastStart: -1 << 62}
	if start.Metadata != "" {
		v, ok := strings.CutPrefix(start.Metadata, fakeMetaPrefix)
		if !ok {
			return nil, fmt.Errorf("fake metadata %q", start.Metadata)
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return nil, err
		}
		c.nextWin = n
		c.lastStart = n - c.windowMs
	}
	return c, nil
}

func (c *fakeCore) winOf(ts int64) int64 { return ts - ((ts%c.windowMs)+c.windowMs)%c.windowMs }

func (c *fakeCore) Process(e *schemas.AccessEvent, off int64, out *detect.Output) {
	c.stats.Events++
	c.nextOff = off + 1
	if !c.started || e.TimeMs > c.maxTs {
		c.maxTs, c.started = e.TimeMs, true
	}
	w := c.winOf(e.TimeMs)
	switch {
	case w < c.nextWin:
		c.stats.Dropped++
	case w <= c.lastStart:
		c.stats.Late++
	default:
		fw := c.open[w]
		if fw == nil {
			fw = &fakeWindow{first: off, keys: map[string]uint64{}, alerted: map[string]bool{}}
			c.open[w] = fw
		}
		fw.last = off
		fw.events++
		fw.keys[e.Key]++
		if c.hotAt > 0 && fw.keys[e.Key] == uint64(c.hotAt) && !fw.alerted[e.Key] {
			fw.alerted[e.Key] = true
			h := schemas.HotKeyEvent{Version: schemas.HotKeyVersion, Type: schemas.HotKeyHot, App: e.App, Key: e.Key,
				Rule: "fake", Rate: float64(c.hotAt), Threshold: float64(c.hotAt), Count: uint64(c.hotAt), WindowMs: c.windowMs,
				Topic: c.src.Topic, Partition: c.src.Partition, OnsetMs: e.TimeMs}
			h.ID = schemas.HotKeyID(h.Topic, h.Partition, h.Rule, h.Type, h.App, h.Key, h.OnsetMs)
			out.HotKeys = append(out.HotKeys, h)
			c.alerts = append(c.alerts, fakeClaim{id: h.ID, off: off})
			c.stats.Hot++
		}
	}
	c.closeUpTo(c.maxTs-c.lateMs, out, false)
}

// closeUpTo emits every window ending at or before wm, empty ones from
// the first event's window on included.
func (c *fakeCore) closeUpTo(wm int64, out *detect.Output, final bool) {
	var starts []int64
	for s := range c.open {
		starts = append(starts, s)
	}
	slices.Sort(starts)
	if len(starts) == 0 {
		return
	}
	last := starts[len(starts)-1]
	from := starts[0]
	if c.lastStart > -1<<61 {
		from = c.lastStart + c.windowMs
	}
	for s := from; s <= last && (final || s+c.windowMs <= wm); s += c.windowMs {
		fw := c.open[s]
		delete(c.open, s)
		pw := schemas.PartitionWindow{Version: schemas.WindowVersion, ID: schemas.PartitionWindowID(c.src.Topic, c.src.Partition, s),
			Topic: c.src.Topic, Partition: c.src.Partition, Partitions: c.src.Partitions, StartMs: s, EndMs: s + c.windowMs,
			FirstOffset: -1, LastOffset: -1, WatermarkMs: wm, Keyed: c.src.Keyed, Final: final && s == last}
		off := c.nextOff
		if fw != nil {
			pw.FirstOffset, pw.LastOffset, pw.Events = fw.first, fw.last, fw.events
			app := schemas.AppWindow{App: "a", Events: fw.events}
			for k, n := range fw.keys {
				app.Top = append(app.Top, schemas.KeyCount{App: "a", Key: k, Count: n, Partition: c.src.Partition})
			}
			slices.SortFunc(app.Top, func(x, y schemas.KeyCount) int {
				return cmp.Or(cmp.Compare(y.Count, x.Count), cmp.Compare(x.Key, y.Key))
			})
			pw.Apps = []schemas.AppWindow{app}
			off = fw.first
		}
		out.Windows = append(out.Windows, pw)
		c.emitted = append(c.emitted, fakeClaim{start: s, off: off})
		c.lastStart = s
		c.stats.Windows++
	}
}

func (c *fakeCore) Idle(int64, *detect.Output) {}

func (c *fakeCore) End(out *detect.Output) { c.closeUpTo(0, out, true) }

func (c *fakeCore) CommitPoint() detect.CommitPoint {
	off := c.nextOff
	for _, w := range c.emitted {
		if !w.acked {
			off = min(off, w.off)
		}
	}
	for _, fw := range c.open {
		off = min(off, fw.first)
	}
	for _, a := range c.alerts {
		if !a.acked {
			off = min(off, a.off)
		}
	}
	next := c.nextWin
	for _, w := range c.emitted {
		if !w.acked {
			break
		}
		next = w.start + c.windowMs
	}
	return detect.CommitPoint{Offset: off, Metadata: fakeMetaPrefix + strconv.FormatInt(next, 10)}
}

func (c *fakeCore) Acked(start int64) {
	for i := range c.emitted {
		if c.emitted[i].start == start {
			c.emitted[i].acked = true
		}
	}
	n := 0
	for n < len(c.emitted) && c.emitted[n].acked {
		c.nextWin = c.emitted[n].start + c.windowMs
		n++
	}
	c.emitted = c.emitted[n:]
}

func (c *fakeCore) AckedHotKey(id string) {
	for i := range c.alerts {
		if c.alerts[i].id == id {
			c.alerts[i].acked = true
		}
	}
	n := 0
	for n < len(c.alerts) && c.alerts[n].acked {
		n++
	}
	c.alerts = c.alerts[n:]
}

func (c *fakeCore) SetRules(r *detect.Rules) error {
	if r.Name == "refuse" {
		return fmt.Errorf("fake: rules %q refused", r.Name)
	}
	c.rules = r
	return nil
}

func (c *fakeCore) Stats() detect.CoreStats { return c.stats }

// cores records every core built, for tests to look at how partitions
// started.
type cores struct {
	mu    sync.Mutex
	hotAt int
	built []*fakeCore
}

func (cs *cores) newCore(src detect.Source, start detect.Start) (detect.Core, error) {
	c, err := newFakeCore(src, start, cs.hotAt)
	if err != nil {
		return nil, err
	}
	cs.mu.Lock()
	cs.built = append(cs.built, c)
	cs.mu.Unlock()
	return c, nil
}

func (cs *cores) starts() map[int32][]detect.Start {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	out := map[int32][]detect.Start{}
	for _, c := range cs.built {
		out[c.src.Partition] = append(out[c.src.Partition], c.start)
	}
	return out
}
