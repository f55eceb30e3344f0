package detect_test

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/keyheat/keyheat/internal/testenv"
)

// TestRestartOverIdleTopic: a live run stopped while windows are still
// open, restarted over a topic that gets no new record, closes those
// windows by the wall clock (idle timeout) as the first run would have:
// the report of the last window with events comes without a new line.
// The restart logs no data-loss warning about windows without events.
func TestRestartOverIdleTopic(t *testing.T) {
	testenv.EachBroker(t, func(t *testing.T, seeds []string) {
		e := newEnv(t, seeds, 4)
		cfg := e.config(t)
		cfg.Pipeline.IdleTimeout = time.Second
		r := start(t, cfg)
		testenv.Eventually(t, "every partition assigned", func() bool { return r.svc.Assigned() == 4 })

		base := time.Now().Add(-20 * time.Second).Truncate(time.Second).UnixMilli()
		// Partitions 0 and 1 take events of windows base and base+1s;
		// 2 and 3 none.
		produce(t, e.seeds, event(e.events, 0, "a", base+100), event(e.events, 1, "b", base+200),
			event(e.events, 0, "a", base+1100), event(e.events, 1, "b", base+1200))
		waitWindows(t, e.seeds, e.reports, map[int64]uint64{base: 2})
		require.NoError(t, r.stop(t))

		logs := &testenv.SyncBuffer{}
		cfg.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
		r = start(t, cfg)
		t0 := time.Now()
		got, _ := waitWindows(t, e.seeds, e.reports, map[int64]uint64{base: 2, base + 1000: 2})
		t.Logf("reported after %v", time.Since(t0))
		require.Contains(t, got, base+1000, "the last window with events is reported on an idle topic after a restart")
		require.NoError(t, r.stop(t))
		for _, l := range strings.Split(logs.String(), "\n") {
			if strings.Contains(l, "level=WARN") {
				t.Logf("%s", l)
			}
			require.False(t, strings.Contains(l, "level=WARN") && strings.Contains(l, "events=0 "), "a warning about a window without events: %s", l)
		}
	})
}
