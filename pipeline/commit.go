package pipeline

import (
	"math"

	"github.com/keyheat/keyheat/schemas"
)

// CommitPoint is what a partition may commit: the offset, and the
// metadata to store with it (schemas.CommitMeta's text form).
type CommitPoint struct {
	Offset   int64
	Metadata string
}

// commitState tracks what the commit point must not pass: windows not yet
// acknowledged, hot-key events not yet acknowledged, and the history of
// the partition's clock that tells how far back a restart must warm up.
type commitState struct {
	p          *Partition
	start      CommitPoint // where the partition started, with its metadata
	nextWindow int64       // start of the first window not acknowledged; noTime if none
	windows    []claim     // emitted windows not yet acknowledged, in order
	alerts     []claim     // published hot-key events not yet acknowledged, in order
	history    []checkpoint
	bucketMs   int64 // history granularity
	// nextBucketMs is the first clock value that starts a new checkpoint.
	nextBucketMs int64
}

// claim is an output's hold on the commit point: the lowest offset a
// restart must re-read to rebuild it, with the partition's clock before
// that offset.
type claim struct {
	startMs int64  // windows: the window's start
	id      string // alerts: the event's ID
	off, ts int64
	acked   bool
}

// checkpoint: the partition's newest event time before offset off was ts.
type checkpoint struct{ off, ts int64 }

// maxHistory bounds the checkpoints kept; past it every other one is
// dropped, which only makes restarts warm up from a little earlier.
const maxHistory = 4096

func newCommitState(p *Partition, start CommitPoint, nextWindow, maxTs int64) *commitState {
	c := &commitState{p: p, start: start, nextWindow: nextWindow}
	c.bucketMs = max(1, c.warmUpMs()/256)
	c.history = append(c.history, checkpoint{off: start.Offset, ts: maxTs})
	c.nextBucketMs = math.MinInt64 + 1 // the first event's clock starts a checkpoint
	if maxTs != noTime {
		c.nextBucketMs = (floorDiv(maxTs, c.bucketMs) + 1) * c.bucketMs
	}
	return c
}

// warmUpMs is how much event time before the resume offset a restart
// re-reads to rebuild detection state exactly (see doc.go): three of the
// longest rule windows, the cool-down and the suppression.
func (c *commitState) warmUpMs() int64 {
	d := c.p.o.Detect
	return 3*c.p.rules.maxWindow().Milliseconds() + d.CoolDown.Milliseconds() + d.Suppress.Milliseconds()
}

// observe records the clock before offset off, once per bucket of event
// time.
func (c *commitState) observe(off, tsBefore int64) {
	if tsBefore == noTime || tsBefore < c.nextBucketMs {
		return
	}
	c.nextBucketMs = (floorDiv(tsBefore, c.bucketMs) + 1) * c.bucketMs
	c.history = append(c.history, checkpoint{off: off, ts: tsBefore})
	if len(c.history) > maxHistory {
		// Keep the first and every other one after it.
		n := 1
		for i := 2; i < len(c.history); i += 2 {
			c.history[n] = c.history[i]
			n++
		}
		c.history = c.history[:n]
	}
}

func (c *commitState) emitted(startMs, off, ts int64) {
	c.windows = append(c.windows, claim{startMs: startMs, off: off, ts: ts})
}

func (c *commitState) alert(id string, off, ts int64) {
	c.alerts = append(c.alerts, claim{id: id, off: off, ts: ts})
}

// ackWindow marks the window starting at startMs acknowledged; the
// acknowledged prefix moves nextWindow forward.
func (c *commitState) ackWindow(startMs int64) {
	for i := range c.windows {
		if c.windows[i].startMs == startMs {
			c.windows[i].acked = true
			break
		}
	}
	n := 0
	for n < len(c.windows) && c.windows[n].acked {
		c.nextWindow = c.windows[n].startMs + c.p.win.lengthMs
		n++
	}
	c.windows = c.windows[:copy(c.windows, c.windows[n:])]
}

func (c *commitState) ackAlert(id string) {
	for i := range c.alerts {
		if c.alerts[i].id == id {
			c.alerts[i].acked = true
			break
		}
	}
	n := 0
	for n < len(c.alerts) && c.alerts[n].acked {
		n++
	}
	c.alerts = c.alerts[:copy(c.alerts, c.alerts[n:])]
}

// point computes the commit point: the resume offset C is the lowest
// claim of any window not acknowledged (emitted or open) and of any
// hot-key event not acknowledged, or the next offset; the committed offset
// is the latest checkpoint at least warmUpMs of event time before C.
func (c *commitState) point() CommitPoint {
	p := c.p
	if !p.windowMode {
		return c.start // still re-reading what the last commit covered
	}
	off, ts := p.nextOffset, p.maxTs
	if !p.started {
		ts = noTime
	}
	take := func(o, t int64) {
		if o < off {
			off, ts = o, t
		}
	}
	for _, w := range c.windows {
		if !w.acked {
			take(w.off, w.ts)
		}
	}
	if o, t, ok := p.win.openClaim(); ok {
		take(o, t)
	}
	for _, a := range c.alerts {
		if !a.acked {
			take(a.off, a.ts)
		}
	}
	cp := c.history[0]
	if ts != noTime {
		target := ts - c.warmUpMs()
		for _, h := range c.history {
			if h.off > off || (h.ts != noTime && h.ts > target) {
				break
			}
			cp = h
		}
	}
	// The resume offset only moves forward, so checkpoints before the one
	// chosen are never needed again.
	for i := range c.history {
		if c.history[i] == cp {
			c.history = c.history[:copy(c.history, c.history[i:])]
			break
		}
	}
	meta := schemas.CommitMeta{ResumeOffset: off, MaxTsMs: cp.ts, NextWindowMs: c.nextWindow, WindowMs: p.win.lengthMs}
	return CommitPoint{Offset: cp.off, Metadata: meta.String()}
}
