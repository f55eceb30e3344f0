package detect_test

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/keyheat/keyheat/detect"
	"github.com/keyheat/keyheat/internal/testenv"
	"github.com/keyheat/keyheat/pipeline"
	"github.com/keyheat/keyheat/schemas"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// goldenConfig is e's config with the default rule and summaries small
// enough to review in a diff.
func goldenConfig(t *testing.T, e *env) detect.Config {
	cfg := e.config(t)
	p := pipeline.DefaultOptions()
	p.Lateness = 0
	p.IdleTimeout = time.Hour
	p.Summary.TopKeys, p.Summary.BigKeys = 5, 3
	cfg.Pipeline = p
	m := pipeline.DefaultMergerOptions()
	m.TopN, m.HotSlots = 5, 3
	cfg.Merge = &pipeline.MergerConfig{MergerOptions: m, Window: time.Second}
	return cfg
}

// TestReportsGolden: the fixed-seed stream through the whole service
// (four partitions, decode, detection, summaries on Kafka, the merger)
// gives byte-identical reports run after run, on kfake and on a real
// broker alike, and the reports reviewed in testdata/. Regenerate with
// go test ./detect -run TestReportsGolden -update.
func TestReportsGolden(t *testing.T) {
	const path = "testdata/reports.jsonl"
	base := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC).UnixMilli()
	testenv.EachBroker(t, func(t *testing.T, seeds []string) {
		e := newEnv(t, seeds, 4)
		evs := streamEvents(10, base, 4000, 2)
		produceMany(t, e.seeds, records(e.events, 4, evs))
		run := func(e *env) []byte {
			cfg := goldenConfig(t, e)
			cfg.Limits.MaxSkew = 0 // the stream's times are fixed, far from now
			runToEnd(t, cfg)
			return ordered(t, readReports(t, e.seeds, e.reports).once(t), e.events)
		}
		got := run(e)
		// Counted here: events per window and scope.
		want := map[string]uint64{}
		for _, ev := range evs {
			w := ev.TimeMs - ev.TimeMs%1000
			want[fmt.Sprintf("%d cluster", w)]++
			want[fmt.Sprintf("%d %s", w, ev.App)]++
		}
		counted := map[string]uint64{}
		for line := range strings.Lines(string(got)) {
			r, err := schemas.DecodeWindowReport([]byte(line))
			require.NoError(t, err)
			require.False(t, r.Partial, "window %d %s: no partition missing", r.StartMs, r.Scope)
			scope := r.Scope
			if r.Scope == schemas.ScopeApp {
				scope = r.App
			}
			counted[fmt.Sprintf("%d %s", r.StartMs, scope)] = r.Events
		}
		require.Equal(t, want, counted, "events per window and scope")
		require.Equal(t, string(got), string(run(e.over(t))), "two runs over the same input differ")
		if *update && strings.HasSuffix(t.Name(), "/kfake") { // one broker's run writes the file
			require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
			require.NoError(t, os.WriteFile(path, got, 0o644))
		}
		golden, err := os.ReadFile(path)
		require.NoError(t, err, "run with -update to create it")
		require.Equal(t, string(golden), string(got), "reports differ from %s; if the change is intended, run with -update and review the diff", path)
	})
}
