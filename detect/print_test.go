package detect

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/keyheat/keyheat/schemas"
)

// TestPrintTextSaysWhatIsNew: --print=text prints a window once when no
// event names an app (not a cluster report and an app="" copy of it), and
// once traffic stops, one line for the quiet windows instead of one
// report a window; JSON keeps every report.
func TestPrintTextSaysWhatIsNew(t *testing.T) {
	base := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC).UnixMilli()
	window := func(sec int64, events uint64, apps ...string) []*schemas.WindowReport {
		start := base + sec*1000
		rs := []*schemas.WindowReport{{Scope: schemas.ScopeCluster, StartMs: start, EndMs: start + 1000, Events: events,
			Top: []schemas.KeyCount{{Key: "k", Count: events, Partition: 0}}}}
		for _, app := range apps {
			rs = append(rs, &schemas.WindowReport{Scope: schemas.ScopeApp, App: app, StartMs: start, EndMs: start + 1000, Events: events})
		}
		if events == 0 {
			rs[0].Top = nil
		}
		return rs
	}
	hot := &schemas.HotKeyEvent{Type: schemas.HotKeyHot, Key: "k", Rule: "r", Rate: 10, Threshold: 5, Topic: "t", OnsetMs: base + 40_500}

	var out bytes.Buffer
	p := newPrinter(&out, PrintText)
	for _, r := range window(0, 100, "") { // no event names an app
		p.report(r)
	}
	for sec := int64(1); sec <= 30; sec++ { // traffic stopped
		for _, r := range window(sec, 0) {
			p.report(r)
		}
	}
	require.Equal(t, "10:00:00 REPORT cluster events=100 distinct=0 late=0 max/mean=0.00 gini=0.00 top1=0.0%\n  1. \"k\" 100 0.0% p0\n",
		out.String(), "one report for the window with events, none for the 30 quiet ones yet")
	p.hotKey(hot)
	for _, r := range window(41, 7, "") {
		p.report(r)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	require.Len(t, lines, 6, "%s", out.String())
	require.Equal(t, "10:00:01 QUIET 30 windows without events, until 10:00:31", lines[2])
	require.True(t, strings.HasPrefix(lines[3], "10:00:40.500 HOT"), lines[3])
	require.True(t, strings.HasPrefix(lines[4], "10:00:41 REPORT cluster events=7"), lines[4])
	require.NotContains(t, out.String(), "app=", "the app \"\" report repeats the cluster's")

	// Events of several apps, some naming none: the app "" report is not a
	// copy and is printed, named.
	out.Reset()
	rs := window(42, 10)
	rs = append(rs, &schemas.WindowReport{Scope: schemas.ScopeApp, App: "shop", StartMs: rs[0].StartMs, Events: 6},
		&schemas.WindowReport{Scope: schemas.ScopeApp, App: "", StartMs: rs[0].StartMs, Events: 4})
	for _, r := range rs {
		p.report(r)
	}
	require.Contains(t, out.String(), "REPORT app=shop events=6")
	require.Contains(t, out.String(), `REPORT app="" events=4`)

	// JSON is for programs: every report, as published.
	out.Reset()
	pj := newPrinter(&out, PrintJSON)
	for sec := int64(0); sec < 3; sec++ {
		for _, r := range window(sec, 0, "") {
			pj.report(r)
		}
	}
	require.Equal(t, 6, strings.Count(out.String(), "\n"))
}
