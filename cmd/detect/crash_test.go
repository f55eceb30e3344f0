package main

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/keyheat/keyheat/internal/testenv"
	"github.com/keyheat/keyheat/schemas"
)

// TestCrashRestartSameReports: a run killed with SIGKILL mid-stream and
// restarted publishes exactly the reports, and the hot-key events, of a
// run that was never interrupted: what it had published before the crash
// comes again with the same IDs and content, nothing is missing, nothing
// is counted twice.
func TestCrashRestartSameReports(t *testing.T) {
	testenv.EachBroker(t, func(t *testing.T, seeds []string) {
		events := testenv.NewTopic(t, seeds, 4)
		base := time.Now().Add(-time.Hour).Truncate(time.Second).UnixMilli()
		const n = 100_000
		produceEvents(t, seeds, events, n, base, 1, 10, 5000) // 100 windows of 1000 events
		args := []string{"run", "--exit-at-end", "--print=json", "--merge.max_pending_windows=1000",
			`--pipeline.rules=[{name: t, key: "*", window: 1s, rate: 50}]`}

		ref := newRunEnv(t, seeds, events)
		p := start(t, nil, append(args, ref.flags()...)...)
		require.Equal(t, 0, p.WaitExit())
		want, _ := reports(t, seeds, ref.reports)
		require.Len(t, want, 200, "a cluster and an app report per window")

		crash := newRunEnv(t, seeds, events)
		p = start(t, nil, append(args, crash.flags()...)...)
		for len(p.Stdout.Match(regexpOf(`"scope":"cluster"`))) < 20 {
			p.WaitStdout(`"scope":"cluster"`)
			time.Sleep(10 * time.Millisecond)
		}
		select {
		case <-p.Done():
			t.Fatal("the run ended before the kill; the test needs more input to crash mid-stream")
		default:
		}
		p.Kill()
		p = start(t, nil, append(args, crash.flags()...)...)
		require.Equal(t, 0, p.WaitExit())
		got, records := reports(t, seeds, crash.reports)
		require.Equal(t, want, got, "the same reports, byte for byte")
		t.Logf("%d report records for %d reports: %d published again after the crash", records, len(got), records-len(got))

		require.Equal(t, hotKeyIDs(t, seeds, ref.hotkeys), hotKeyIDs(t, seeds, crash.hotkeys), "the same hot-key events")
		require.Equal(t, committedOffsets(t, seeds, ref.group, events), committedOffsets(t, seeds, crash.group, events),
			"both runs end committed at the same points")
	})
}

func hotKeyIDs(t *testing.T, seeds []string, topic string) []string {
	t.Helper()
	var ids []string
	for _, h := range registryEvents(t, readTopic(t, seeds, topic)) {
		ids = append(ids, h.ID)
	}
	slices.Sort(ids)
	return slices.Compact(ids)
}

// TestSecondInstanceJoins: a second instance joining a live group takes
// over some partitions in a rebalance (revoked and committed by the first,
// resumed by the second), and together they publish exactly the reports
// of one uninterrupted batch run.
func TestSecondInstanceJoins(t *testing.T) {
	testenv.EachBroker(t, func(t *testing.T, seeds []string) {
		events := testenv.NewTopic(t, seeds, 4)
		base := time.Now().Add(-time.Hour).Truncate(time.Second).UnixMilli()
		produceEvents(t, seeds, events, 100_000, base, 1, 10, 5000)
		rules := `--pipeline.rules=[{name: t, key: "*", window: 1s, rate: 50}]`
		// Live: no window closes by the wall clock and no report goes
		// out partial for a partition paused by the rebalance, so the
		// output depends on the input only.
		live := []string{"run", rules, "--pipeline.idle_timeout=1h", "--merge.max_pending_windows=1000"}

		two := newRunEnv(t, seeds, events)
		a := start(t, nil, append(live, two.flags()...)...)
		a.WaitStderr(`msg="partitions assigned"`)
		b2 := start(t, nil, append(live, two.flags()...)...)
		b2.WaitStderr(`msg="partitions assigned" partitions="map\[\S+:\[\d`)
		// More input once both share the partitions.
		produceEvents(t, seeds, events, 50_000, base+100_000, 1, 10, 5000)
		// Windows 0..148 close (149 waits for a later event): 298 reports.
		testenv.Eventually(t, "every closed window reported", func() bool {
			got, _ := reports(t, seeds, two.reports)
			return len(got) == 298
		})
		require.Equal(t, 0, b2.Stop())
		require.Equal(t, 0, a.Stop())
		require.NotEmpty(t, a.Stderr.Match(regexpOf(`msg="partitions released" partitions="map\[\S+:\[\d( \d)?\]\]" lost=false`)),
			"the first instance gave partitions up in the rebalance")
		got, _ := reports(t, seeds, two.reports)

		ref := newRunEnv(t, seeds, events)
		p := start(t, nil, append([]string{"run", "--exit-at-end", rules, "--merge.max_pending_windows=1000"}, ref.flags()...)...)
		require.Equal(t, 0, p.WaitExit())
		want, _ := reports(t, seeds, ref.reports)
		require.Len(t, want, 300)
		last := base + 149_000
		delete(want, schemas.WindowReportID(schemas.ScopeCluster, "", last))
		delete(want, schemas.WindowReportID(schemas.ScopeApp, "app", last))
		require.Equal(t, want, got, "the same reports, byte for byte")
	})
}
