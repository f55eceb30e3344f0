package detect_test

import (
	"cmp"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/keyheat/keyheat/internal/testenv"
	"github.com/keyheat/keyheat/schemas"
)

// starveCPU runs the rest of the test on a starved machine, as a noisy
// neighbour or an overloaded host would: the test's goroutines (detect,
// and kfake when it is the broker) share one OS thread (GOMAXPROCS 1)
// with a goroutine that never blocks, and two busy processes per core
// compete with the whole machine, the real broker included. Nothing of
// what the test asserts may depend on how much CPU is left.
func starveCPU(t *testing.T) {
	t.Helper()
	prev := runtime.GOMAXPROCS(1)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for n := 0; ; n++ {
			if n%1024 == 0 {
				select {
				case <-stop:
					return
				default:
				}
			}
		}
	}()
	var procs []*exec.Cmd
	for range 2 * runtime.NumCPU() {
		cmd := exec.Command("sh", "-c", "while :; do :; done")
		require.NoError(t, cmd.Start())
		procs = append(procs, cmd)
	}
	t.Cleanup(func() {
		for _, p := range procs {
			_ = p.Process.Kill()
			_ = p.Wait()
		}
		close(stop)
		wg.Wait()
		runtime.GOMAXPROCS(prev)
	})
}

// clusterWindows reads the cluster reports of topic: the events of every
// window reported with any, and how many reports were partial.
func clusterWindows(t *testing.T, seeds []string, topic string) (events map[int64]uint64, partial int) {
	t.Helper()
	events = map[int64]uint64{}
	for _, r := range readAll(t, seeds, topic) {
		x, err := schemas.DecodeWindowReport(r.Value)
		require.NoError(t, err)
		if x.Scope != schemas.ScopeCluster {
			continue
		}
		if x.Partial {
			partial++
		}
		if os.Getenv("KEYHEAT_TEST_DEBUG") != "" {
			t.Logf("report %d events=%d late=%d loads=%v", x.StartMs, x.Events, x.Late, x.Skew.Partitions)
		}
		if x.Events > 0 {
			events[x.StartMs] += x.Events
		}
	}
	return events, partial
}

// waitWindows polls the reports until want's windows all have a report,
// and returns what was reported then.
func waitWindows(t *testing.T, seeds []string, topic string, want map[int64]uint64) (map[int64]uint64, int) {
	t.Helper()
	// Generous: a starved machine may take long, and the assertion is
	// about what comes out, not when.
	return waitWindowsWithin(t, seeds, topic, want, 8*time.Minute)
}

// waitWindowsWithin is waitWindows with another hang guard. The test
// fails when the guard passes with a window of want still unreported.
func waitWindowsWithin(t *testing.T, seeds []string, topic string, want map[int64]uint64, guard time.Duration) (map[int64]uint64, int) {
	t.Helper()
	var got map[int64]uint64
	var partial int
	testenv.EventuallyExplained(t, "a report of every window wanted", guard, func() (bool, string) {
		got, partial = clusterWindows(t, seeds, topic)
		var missing []int64
		for w := range want {
			if _, ok := got[w]; !ok {
				missing = append(missing, w)
			}
		}
		slices.Sort(missing)
		return len(missing) == 0, fmt.Sprintf("windows %v not reported", missing)
	})
	return got, partial
}

// TestEventTimeGaps: a log with quiet gaps in event time, read live by
// one instance from a six-partition topic, is reported exactly: every
// window with events complete and with every event, whatever the gap. A
// gap costs nothing: the empty windows a partition closes when it jumps
// over it hold nothing back and do not count towards the merger's
// max_pending_windows.
func TestEventTimeGaps(t *testing.T) {
	testenv.EachBroker(t, func(t *testing.T, seeds []string) {
		for _, gap := range []time.Duration{0, 20 * time.Second, 90 * time.Second} {
			t.Run(fmt.Sprintf("gap=%v", gap), func(t *testing.T) {
				const parts = 6
				e := newEnv(t, seeds, parts)
				base := time.Now().Add(-time.Hour).Truncate(time.Second).UnixMilli()
				// 20 s of traffic at 500 events/s, then the same
				// again past the gap.
				evs := streamEvents(7, base, 20_000, 0)
				for i := range int64(10_000) {
					evs = append(evs, schemas.AccessEvent{TimeMs: base + i*2, Key: fmt.Sprintf("k:%d", i%997), App: "a", Op: "GET"})
				}
				slices.SortStableFunc(evs, func(a, b schemas.AccessEvent) int { return cmp.Compare(a.TimeMs, b.TimeMs) })
				shift := 20*time.Second + gap
				n := len(evs)
				for i := range n {
					again := evs[i]
					again.TimeMs += shift.Milliseconds()
					evs = append(evs, again)
				}
				want := map[int64]uint64{}
				for _, ev := range evs {
					want[ev.TimeMs-ev.TimeMs%1000]++
				}
				produceMany(t, e.seeds, records(e.events, parts, evs))
				cfg := e.config(t)
				cfg.Options.MaxPollRecords = 500
				cfg.Pipeline.IdleTimeout = time.Second
				start(t, cfg)
				got, partial := waitWindows(t, e.seeds, e.reports, want)
				require.Zero(t, partial, "no window is reported partial")
				require.Equal(t, want, got, "every window's cluster total is exact")
			})
		}
	})
}

// TestLiveCatchUpTwoInstancesStarved: two instances of a group start
// over a backlog whose partitions differ a hundredfold, on a starved
// machine. Whichever instance holds the dense partition reads far slower
// than the one holding only light ones; the light ones must not run
// further ahead than the merger holds, and the merger must wait for the
// dense one however slowly it moves: every window is reported complete,
// with every event.
func TestLiveCatchUpTwoInstancesStarved(t *testing.T) {
	testenv.EachBroker(t, func(t *testing.T, seeds []string) {
		const parts, windows = 4, 100
		e := newEnv(t, seeds, parts)
		base := time.Now().Add(-10 * time.Minute).Truncate(time.Second).UnixMilli()
		want := map[int64]uint64{}
		var recs []*kgo.Record
		for w := range int64(windows) {
			start := base + w*1000
			for p := int32(1); p < parts; p++ {
				for i := range 3 {
					key := fmt.Sprintf("light:%d:%d", p, i)
					recs = append(recs, event(e.events, p, key, start+int64(100*i+int(p))))
					want[start]++
				}
			}
			for i := range 300 {
				recs = append(recs, event(e.events, 0, fmt.Sprintf("dense:%d", i%50), start+int64(i)))
				want[start]++
			}
		}
		// Only events close windows (no wall clock), so the closers
		// close the last.
		recs = append(recs, closers(e.events, parts, base+windows*1000)...)
		produceMany(t, e.seeds, recs)

		starveCPU(t)
		cfg := e.config(t)
		cfg.Options.MaxPollRecords = 500
		cfg.Pipeline.IdleTimeout = time.Hour
		require.Greater(t, windows, 2*cfg.Merge.MaxPendingWindows, "the backlog spans far more than max_pending_windows windows")
		one := start(t, cfg)
		two := start(t, cfg)
		got, partial := waitWindows(t, e.seeds, e.reports, want)
		require.Zero(t, partial, "no window is reported partial")
		require.Equal(t, want, got, "every window's cluster total is exact")
		require.Positive(t, one.svc.Assigned()+two.svc.Assigned(), "the instances still hold the partitions")
	})
}

// TestRestartAfterQuietGap: a live detect stopped through a quiet spell
// longer than the merger's max_pending_windows, then restarted, reports
// the windows after the gap complete: the partitions' first new events
// close the empty windows of the gap at once, and empty windows are
// complete once every partition passed them.
func TestRestartAfterQuietGap(t *testing.T) {
	testenv.EachBroker(t, func(t *testing.T, seeds []string) {
		const parts = 3
		e := newEnv(t, seeds, parts)
		base := time.Now().Add(-time.Hour).Truncate(time.Second).UnixMilli()
		before := streamEvents(3, base, 5_000, 2)
		want := map[int64]uint64{}
		for _, ev := range before {
			want[ev.TimeMs-ev.TimeMs%1000]++
		}
		produceMany(t, e.seeds, records(e.events, parts, before))
		cfg := e.config(t)
		cfg.Pipeline.IdleTimeout = time.Hour // no wall clock: only events close windows
		r := start(t, cfg)
		// Windows close only as later events come: the first run
		// reports the first four of five.
		first := map[int64]uint64{}
		for w, n := range want {
			if w < base+4000 {
				first[w] = n
			}
		}
		waitWindows(t, e.seeds, e.reports, first)
		require.NoError(t, r.stop(t))

		// 100 s later (more than the 32 windows the merger holds).
		after := streamEvents(4, base+105_000, 5_000, 2)
		for _, ev := range after {
			want[ev.TimeMs-ev.TimeMs%1000]++
		}
		produceMany(t, e.seeds, records(e.events, parts, after))
		start(t, cfg)
		for w := range want {
			if w >= base+109_000 {
				delete(want, w) // stays open: no later event closes it
			}
		}
		got, partial := waitWindows(t, e.seeds, e.reports, want)
		require.Zero(t, partial, "no window is reported partial")
		require.Equal(t, want, got, "every window's cluster total is exact")
	})
}
