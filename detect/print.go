package detect

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/keyheat/keyheat/schemas"
)

// Print formats of --print.
const (
	PrintText = "text"
	PrintJSON = "json"
)

// printer writes hot-key events and window reports to a writer (stdout)
// as they are produced: JSON lines (the messages' own encoding, every
// report), or for people the lines of a TextPrinter. Partitions and the
// merger print from their goroutines, so writes are serialised.
type printer struct {
	mu   sync.Mutex
	w    io.Writer
	json bool
	text TextPrinter
	buf  []byte
}

func newPrinter(w io.Writer, format string) *printer {
	if w == nil {
		return nil
	}
	return &printer{w: w, json: format == PrintJSON, text: TextPrinter{Top: 5}}
}

func (p *printer) hotKey(h *schemas.HotKeyEvent) {
	p.print(h.AppendJSON, func(b []byte) []byte { return p.text.AppendHotKey(b, h) })
}

func (p *printer) report(r *schemas.WindowReport) {
	p.print(r.AppendJSON, func(b []byte) []byte { return p.text.AppendReport(b, r) })
}

// print writes one message: a JSON line, or its text (which may be none).
func (p *printer) print(appendJSON func([]byte) ([]byte, error), appendText func([]byte) []byte) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	b := p.buf[:0]
	if p.json {
		b, _ = appendJSON(b)
		b = append(b, '\n')
	} else {
		b = appendText(b)
	}
	p.buf = b
	if len(b) > 0 {
		_, _ = p.w.Write(b)
	}
}

// TextPrinter writes hot-key events and window reports as text for
// people, leaving out what says nothing new:
//
//   - the report of app "" (events that name no app) when it has the
//     cluster report's events, which it then repeats: when no event
//     names an app, every window had two identical reports;
//   - windows without events (none, none late, not partial): once
//     traffic stops, the merger still closes one window per
//     pipeline.window. They are counted, and one line says how many
//     passed before the next line printed.
//
// The line for quiet windows:
//
//	15:04:05 QUIET 30 windows without events, until 15:04:35
//
// Reports of a window must come cluster report first, as the merger
// emits them. A TextPrinter is not safe for concurrent use.
type TextPrinter struct {
	// Top is how many keys a report lists.
	Top int

	clusterStartMs int64
	clusterEvents  uint64
	hasCluster     bool
	quiet          int   // windows without events not yet said
	quietFromMs    int64 // start of the first of them
	quietToMs      int64 // end of the last
}

// AppendHotKey appends h's line (AppendHotKeyText), after the line for
// the quiet windows before it, if any.
func (t *TextPrinter) AppendHotKey(b []byte, h *schemas.HotKeyEvent) []byte {
	b = t.appendQuiet(b)
	b = AppendHotKeyText(b, h)
	return append(b, '\n')
}

// AppendReport appends r as AppendReportText does, or nothing for a
// report that says nothing new (see TextPrinter).
func (t *TextPrinter) AppendReport(b []byte, r *schemas.WindowReport) []byte {
	if r.Scope == schemas.ScopeCluster {
		t.clusterStartMs, t.clusterEvents, t.hasCluster = r.StartMs, r.Events, true
		if r.Events == 0 && r.Late == 0 && !r.Partial {
			if t.quiet == 0 {
				t.quietFromMs = r.StartMs
			}
			t.quiet++
			t.quietToMs = r.EndMs
			return b
		}
	}
	if r.Scope == schemas.ScopeApp && r.App == "" && t.hasCluster && r.StartMs == t.clusterStartMs && r.Events == t.clusterEvents {
		return b
	}
	b = t.appendQuiet(b)
	return AppendReportText(b, r, t.Top)
}

func (t *TextPrinter) appendQuiet(b []byte) []byte {
	if t.quiet == 0 {
		return b
	}
	b = time.UnixMilli(t.quietFromMs).UTC().AppendFormat(b, "15:04:05")
	b = fmt.Appendf(b, " QUIET %d window", t.quiet)
	if t.quiet > 1 {
		b = append(b, 's')
	}
	b = append(b, " without events, until "...)
	b = time.UnixMilli(t.quietToMs).UTC().AppendFormat(b, "15:04:05")
	t.quiet = 0
	return append(b, '\n')
}

// AppendHotKeyText appends one line saying what h says. It starts with
// the event time the record is about: a hot's crossing, an update's slot
// boundary (its ID's time), a cooled's end of cool-down. An update and a
// cooled say the episode's peak rate, an update its onset too:
//
//	15:04:05.123 HOT    shop "product:42" rate=1000.0/s threshold=1000/s rule=hot-api partition=keyheat.events/3 delay=8ms advice=local_cache
//	15:04:06.200 UPDATE shop "product:42" rate=5120.0/s peak=5120.0/s threshold=1000/s rule=hot-api partition=keyheat.events/3 onset=15:04:05.123 advice=local_cache
//	15:04:40.000 COOLED shop "product:42" rate=0.0/s peak=5120.0/s threshold=1000/s rule=hot-api partition=keyheat.events/3
func AppendHotKeyText(b []byte, h *schemas.HotKeyEvent) []byte {
	atMs := h.OnsetMs
	if h.Type == schemas.HotKeyUpdate {
		if ms, ok := updateAtMs(h); ok {
			atMs = ms
		}
	}
	b = time.UnixMilli(atMs).UTC().AppendFormat(b, "15:04:05.000")
	b = append(b, ' ')
	b = append(b, strings.ToUpper(h.Type)...)
	for i := len(h.Type); i < 7; i++ {
		b = append(b, ' ')
	}
	if h.App != "" {
		b = append(b, h.App...)
		b = append(b, ' ')
	}
	b = strconv.AppendQuote(b, h.Key)
	b = append(b, " rate="...)
	b = strconv.AppendFloat(b, h.Rate, 'f', 1, 64)
	if h.Type != schemas.HotKeyHot && h.PeakRate > 0 {
		b = append(b, "/s peak="...)
		b = strconv.AppendFloat(b, h.PeakRate, 'f', 1, 64)
	}
	b = append(b, "/s threshold="...)
	b = strconv.AppendFloat(b, h.Threshold, 'f', -1, 64)
	b = append(b, "/s rule="...)
	b = append(b, h.Rule...)
	b = append(b, " partition="...)
	b = append(b, h.Topic...)
	b = append(b, '/')
	b = strconv.AppendInt(b, int64(h.Partition), 10)
	switch {
	case h.Type == schemas.HotKeyUpdate:
		b = append(b, " onset="...)
		b = time.UnixMilli(h.OnsetMs).UTC().AppendFormat(b, "15:04:05.000")
	case h.DetectedMs >= h.OnsetMs && h.DetectedMs > 0:
		b = append(b, " delay="...)
		b = append(b, (time.Duration(h.DetectedMs-h.OnsetMs) * time.Millisecond).String()...)
	}
	if h.Mitigation != nil {
		b = append(b, " advice="...)
		b = append(b, h.Mitigation.Kind...)
		if h.Mitigation.Split > 0 {
			b = append(b, " split="...)
			b = strconv.AppendInt(b, int64(h.Mitigation.Split), 10)
		}
	}
	return b
}

// AppendReportText appends a report as a header line and its top keys
// (at most top), one per line, indented:
//
//	15:04:05 REPORT cluster events=20000 distinct=9876 late=0 max/mean=1.31 gini=0.07 top1=15.0%
//	  1. shop "product:42" 3000 15.0% p3
func AppendReportText(b []byte, r *schemas.WindowReport, top int) []byte {
	b = time.UnixMilli(r.StartMs).UTC().AppendFormat(b, "15:04:05")
	b = append(b, " REPORT "...)
	if r.Scope == schemas.ScopeApp {
		b = append(b, "app="...)
		if r.App == "" {
			b = append(b, `""`...) // events that name no app
		}
		b = append(b, r.App...)
	} else {
		b = append(b, r.Scope...)
	}
	b = fmt.Appendf(b, " events=%d distinct=%d late=%d max/mean=%.2f gini=%.2f top1=%.1f%%",
		r.Events, r.Distinct, r.Late, r.Skew.MaxMean, r.Skew.Gini, 100*r.Skew.Top1Share)
	if r.Partial {
		b = append(b, " partial missing="...)
		b = append(b, strings.Join(r.Missing, ",")...)
	}
	b = append(b, '\n')
	for i, k := range r.Top {
		if i == top {
			break
		}
		b = fmt.Appendf(b, "  %d. ", i+1)
		if k.App != "" {
			b = append(b, k.App...)
			b = append(b, ' ')
		}
		b = strconv.AppendQuote(b, k.Key)
		b = fmt.Appendf(b, " %d %.1f%%", k.Count, 100*k.Share)
		if k.Partition >= 0 {
			b = fmt.Appendf(b, " p%d", k.Partition)
		}
		b = append(b, '\n')
	}
	return b
}
