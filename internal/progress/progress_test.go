package progress

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestCounterLine: what a Counter writes, on a terminal and off one, in
// the middle of a run and at its end.
func TestCounterLine(t *testing.T) {
	for _, tc := range []struct {
		name          string
		n, total      int64
		elapsed       time.Duration
		tty, final    bool
		want, wantNot string
	}{
		{"plain", 500_000, 2_000_000, time.Second, false, false, "replay:  25% 500.0k/2.0M events  500.0k events/s  ETA 3s\n", ""},
		{"bar", 1_000_000, 2_000_000, time.Second, true, false, "\r[###############...............]  50% 1.0M/2.0M events  1.0M events/s  ETA 1s\x1b[K", ""},
		{"final", 1_500_000, 2_000_000, time.Second, false, true, "replay: 100% 1.5M/2.0M events  1.5M events/s  ETA 0s\n", ""},
		{"filters read fewer rows than the footers hold", 3_000, 2_000, time.Second, false, false, "100%", "ETA 0"},
		{"billions", 3_000_000_000, 6_000_000_000, 10 * time.Second, false, false, " 50% 3.0G/6.0G events  300.0M events/s  ETA 10s\n", ""},
		{"no total", 42, 0, 0, false, false, "replay: 100% 42/0 events  0 events/s  ETA -\n", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			start := time.Unix(1000, 0)
			c := newCounter(&out, tc.tty, "replay", tc.total, start)
			c.n = tc.n
			c.line.show(start.Add(tc.elapsed), tc.final)
			got := out.String()
			require.Contains(t, got, tc.want)
			if tc.wantNot != "" {
				require.NotContains(t, got, tc.wantNot)
			}
		})
	}
}

// TestCounterDraws: a plain Counter writes a line once 5 s passed since
// the last, never more often, and a last line at the end, once; a nil
// Counter writes nothing.
func TestCounterDraws(t *testing.T) {
	var out bytes.Buffer
	start := time.Unix(1000, 0)
	c := newCounter(&out, false, "replay", 100, start)
	for i := int64(1); i <= 30; i++ {
		c.set(i, start.Add(time.Duration(i)*time.Second))
	}
	c.end(start.Add(31 * time.Second))
	c.end(start.Add(32 * time.Second))
	c.set(99, start.Add(60*time.Second))
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	require.Len(t, lines, 7, "at 5, 10, …, 30 s and the end:\n%s", out.String())
	require.Equal(t, "replay:   5% 5/100 events  1 events/s  ETA 1m35s", lines[0])
	require.Equal(t, "replay: 100% 30/100 events  1 events/s  ETA 0s", lines[6], "the end is 100%, once")

	var nc *Counter
	nc.set(1, start)
	nc.end(start)
}

// TestLineTerminal: on a terminal the line is redrawn in place, Report is
// never called, and End ends the line (without a last draw unless Final).
func TestLineTerminal(t *testing.T) {
	for _, final := range []bool{false, true} {
		t.Run(fmt.Sprint("final=", final), func(t *testing.T) {
			var out bytes.Buffer
			start := time.Unix(1000, 0)
			reports := 0
			l := New(Config{Terminal: &out, Every: time.Second, Final: final,
				Text:   func(now time.Time, final bool) string { return fmt.Sprintf("at %d final=%v", now.Unix(), final) },
				Report: func(time.Time, bool) { reports++ }}, start)
			l.Poll(start.Add(500 * time.Millisecond)) // too soon
			l.Poll(start.Add(time.Second))
			l.Poll(start.Add(1500 * time.Millisecond)) // too soon after the last
			l.Poll(start.Add(3 * time.Second))
			l.End(start.Add(4 * time.Second))
			l.End(start.Add(5 * time.Second))
			want := "\rat 1001 final=false\x1b[K\rat 1003 final=false\x1b[K"
			if final {
				want += "\rat 1004 final=true\x1b[K"
			}
			require.Equal(t, want+"\n", out.String())
			require.Zero(t, reports)
		})
	}
}

// TestLineRun: Run polls until its context ends, then ends the line.
func TestLineRun(t *testing.T) {
	polled := make(chan struct{}, 1)
	var ended bool
	l := New(Config{Every: time.Millisecond, Final: true, Report: func(_ time.Time, final bool) {
		if final {
			ended = true
			return
		}
		select {
		case polled <- struct{}{}:
		default:
		}
	}}, time.Now())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		l.Run(ctx)
	}()
	<-polled
	cancel()
	<-done
	require.True(t, ended, "Run ends the line when its context ends")
}

func TestTerminal(t *testing.T) {
	require.Nil(t, Terminal(&bytes.Buffer{}), "a buffer is no terminal")
	f, err := os.CreateTemp(t.TempDir(), "out")
	require.NoError(t, err)
	defer f.Close()
	require.Nil(t, Terminal(f), "a file is no terminal")
}
