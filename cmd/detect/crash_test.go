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
	for _, b := range brokers {
		t.Run(b.name, func(t *testing.T) {
			seeds := b.seeds(t)
			events := testenv.NewTopic(t, seeds, 4)
			base := time.Now().Add(-time.Hour).Truncate(time.Second).UnixMilli()
			const n = 100_000
			produceEvents(t, seeds, events, n, base, 1, 10, 5000) // 100 windows of 1000 events
			args := []string{"run", "--exit-at-end", "--print=json", "--merge.max_pending_windows=1000",
				`--pipeline.rules=[{name: t, key: "*", window: 1s, rate: 50}]`}

			ref := newRunEnv(t, seeds, events)
			p := start(t, nil, append(args, ref.flags()...)...)
			require.Equal(t, 0, p.waitExit(5*time.Minute))
			want, _ := reports(t, seeds, ref.reports)
			require.Len(t, want, 200, "a cluster and an app report per window")

			crash := newRunEnv(t, seeds, events)
			p = start(t, nil, append(args, crash.flags()...)...)
			for len(p.stdout.match(regexpOf(`"scope":"cluster"`))) < 20 {
				p.waitOut(`"scope":"cluster"`, time.Minute)
				time.Sleep(10 * time.Millisecond)
			}
			select {
			case <-p.done:
				t.Fatal("the run ended before the kill; the test needs more input to crash mid-stream")
			default:
			}
			p.kill()
			p = start(t, nil, append(args, crash.flags()...)...)
			require.Equal(t, 0, p.waitExit(5*time.Minute))
			got, records := reports(t, seeds, crash.reports)
			require.Equal(t, want, got, "the same reports, byte for byte")
			t.Logf("%d report records for %d reports: %d published again after the crash", records, len(got), records-len(got))

			require.Equal(t, hotKeyIDs(t, seeds, ref.hotkeys), hotKeyIDs(t, seeds, crash.hotkeys), "the same hot-key events")
			require.Equal(t, committedOffsets(t, seeds, ref.group, events), committedOffsets(t, seeds, crash.group, events),
				"both runs end committed at the same points")
		})
	}
}

func hotKeyIDs(t *testing.T, seeds []string, topic string) []string {
	t.Helper()
	var ids []string
	for _, r := range readTopic(t, seeds, topic) {
		h, err := schemas.DecodeHotKeyEvent(r.Value)
		require.NoError(t, err)
		ids = append(ids, h.ID)
	}
	slices.Sort(ids)
	return slices.Compact(ids)
}
