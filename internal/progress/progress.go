// Package progress shows how far a command's run got, on standard
// error: on a terminal one line redrawn in place, otherwise a report (a
// log record, a plain line) at most every interval. ingest's sources and
// detect replay both use it; what a line says is theirs (Config.Text and
// Config.Report), and Counter gives the form of a run with a known total:
// a bar, the share done, the rate and the time left.
//
// It owns no goroutine of its own beyond Run's, which returns when its
// context ends.
package progress

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Config says how a Line shows progress.
type Config struct {
	// Terminal, when not nil, is a terminal: the progress is a line
	// redrawn on it in place (a carriage return before it, the rest of
	// the old line cleared after it). When nil, Report reports instead.
	Terminal io.Writer
	// Every is the least time between two draws or reports.
	Every time.Duration
	// Text is the line to draw on the terminal at now, without line
	// breaks; final is true for End's last draw.
	Text func(now time.Time, final bool) string
	// Report reports the progress at now off a terminal; it may say
	// nothing (when nothing moved since the last report).
	Report func(now time.Time, final bool)
	// Final makes End draw, or report, a last time, with final true.
	// Otherwise End only ends the terminal's line.
	Final bool
}

// Line shows the progress of one run. Its methods may be called from
// several goroutines.
type Line struct {
	cfg Config

	mu    sync.Mutex
	last  time.Time // of the last draw or report, or the start
	ended bool
}

// New returns the line of a run starting at now; it draws nothing yet.
func New(cfg Config, now time.Time) *Line {
	if cfg.Text == nil {
		cfg.Text = func(time.Time, bool) string { return "" }
	}
	if cfg.Report == nil {
		cfg.Report = func(time.Time, bool) {}
	}
	return &Line{cfg: cfg, last: now}
}

// Poll draws or reports the progress at now when Every has passed since
// the last time it did (or the start).
func (l *Line) Poll(now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ended || now.Sub(l.last) < l.cfg.Every {
		return
	}
	l.last = now
	l.show(now, false)
}

// Run draws or reports every Every until ctx ends, then Ends the line.
func (l *Line) Run(ctx context.Context) {
	t := time.NewTicker(l.cfg.Every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			l.End(time.Now())
			return
		case now := <-t.C:
			// Every tick shows: a tick delivered late must not make the
			// next one, on time, look too soon.
			l.mu.Lock()
			if !l.ended {
				l.last = now
				l.show(now, false)
			}
			l.mu.Unlock()
		}
	}
}

// End shows the progress a last time at now when Config.Final says so,
// and ends the terminal's line, so what is written next starts on a line
// of its own. Later calls, and Polls after it, do nothing.
func (l *Line) End(now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ended {
		return
	}
	l.ended = true
	if l.cfg.Final {
		l.show(now, true)
	}
	if l.cfg.Terminal != nil {
		fmt.Fprintln(l.cfg.Terminal)
	}
}

func (l *Line) show(now time.Time, final bool) {
	if l.cfg.Terminal == nil {
		l.cfg.Report(now, final)
		return
	}
	_, _ = io.WriteString(l.cfg.Terminal, "\r"+l.cfg.Text(now, final)+"\x1b[K")
}

// Terminal returns w when it is a terminal (a character device), and nil
// otherwise: what Config.Terminal wants.
func Terminal(w io.Writer) io.Writer {
	f, ok := w.(*os.File)
	if !ok {
		return nil
	}
	fi, err := f.Stat()
	if err != nil || fi.Mode()&os.ModeCharDevice == 0 {
		return nil
	}
	return w
}

// Counter shows the progress of a run of about a known total of events:
// on a terminal a bar, redrawn every 200 ms while the count moves;
// otherwise a line "name: …" every 5 s while it moves. End writes the
// last state. A nil *Counter shows nothing.
type Counter struct {
	line  *Line
	name  string
	total int64
	start time.Time

	mu sync.Mutex
	n  int64
}

// NewCounter returns the Counter of a run named name, of about total
// events, starting now, written to w; terminal says whether w is one.
func NewCounter(w io.Writer, terminal bool, name string, total int64) *Counter {
	return newCounter(w, terminal, name, total, time.Now())
}

func newCounter(w io.Writer, terminal bool, name string, total int64, now time.Time) *Counter {
	c := &Counter{name: name, total: total, start: now}
	cfg := Config{Every: 5 * time.Second, Final: true, Text: c.text,
		Report: func(now time.Time, final bool) { _, _ = io.WriteString(w, c.name+": "+c.counts(now, final)+"\n") }}
	if terminal {
		cfg.Terminal, cfg.Every = w, 200*time.Millisecond
	}
	c.line = New(cfg, now)
	return c
}

// Set says n events are done.
func (c *Counter) Set(n int64) { c.set(n, time.Now()) }

func (c *Counter) set(n int64, now time.Time) {
	if c == nil {
		return
	}
	c.mu.Lock()
	c.n = n
	c.mu.Unlock()
	c.line.Poll(now)
}

// End writes the last state, once.
func (c *Counter) End() { c.end(time.Now()) }

func (c *Counter) end(now time.Time) {
	if c == nil {
		return
	}
	c.line.End(now)
}

func (c *Counter) text(now time.Time, final bool) string {
	const width = 30
	filled := int(c.frac(final) * width)
	return "[" + strings.Repeat("#", filled) + strings.Repeat(".", width-filled) + "] " + c.counts(now, final)
}

// frac is the share done; total counts what the run expected to read,
// which can exceed what it lets through, so it never passes 1.
func (c *Counter) frac(final bool) float64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.total > 0 && !final {
		return min(1, float64(c.n)/float64(c.total))
	}
	return 1
}

// counts is "25% 500.0k/2.0M events  500.0k events/s  ETA 3s": the share
// done, the events done of the total, the mean rate since the start and
// the time left at that rate.
func (c *Counter) counts(now time.Time, final bool) string {
	frac := c.frac(final)
	c.mu.Lock()
	n, total := c.n, c.total
	c.mu.Unlock()
	rate := 0.0
	if s := now.Sub(c.start).Seconds(); s > 0 {
		rate = float64(n) / s
	}
	eta := "-"
	if rate > 0 && total > n && !final {
		eta = time.Duration(float64(total-n) / rate * float64(time.Second)).Round(time.Second).String()
	}
	if final {
		eta = "0s"
	}
	return fmt.Sprintf("%3.0f%% %s/%s events  %s events/s  ETA %s", 100*frac, human(float64(n)), human(float64(total)), human(rate), eta)
}

// human writes x with a k, M or G suffix.
func human(x float64) string {
	switch {
	case x >= 1e9:
		return strconv.FormatFloat(x/1e9, 'f', 1, 64) + "G"
	case x >= 1e6:
		return strconv.FormatFloat(x/1e6, 'f', 1, 64) + "M"
	case x >= 1e3:
		return strconv.FormatFloat(x/1e3, 'f', 1, 64) + "k"
	}
	return strconv.FormatFloat(x, 'f', 0, 64)
}
