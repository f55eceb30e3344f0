package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/keyheat/keyheat/internal/testenv"
	"github.com/keyheat/keyheat/schemas"
	"github.com/keyheat/keyheat/sink/archive"
	"github.com/keyheat/keyheat/sink/clickhouse"
)

// execDetect runs detect in this process with args and returns its
// stdout, its stderr (replay and query log there) and its error.
func execDetect(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	root := newRoot(&stdout)
	root.SetArgs(append(args, "--log.level=warn"))
	root.SetErr(&stderr)
	c, cancel := context.WithTimeout(context.Background(), testenv.HangGuard)
	defer cancel()
	err := root.ExecuteContext(c)
	return stdout.String(), stderr.String(), err
}

// replayLines splits replay --json output into reports and hot-key events
// by ID, each as its JSON (hot-key events without DetectedMs).
func replayLines(t *testing.T, out string) (reps, hot map[string]string) {
	t.Helper()
	reps, hot = map[string]string{}, map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if line == "" {
			continue
		}
		if strings.Contains(line, `"scope":`) {
			r, err := schemas.DecodeWindowReport([]byte(line))
			require.NoError(t, err, "a report line: %s", line)
			_, dup := reps[r.ID]
			require.False(t, dup, "report %s printed once", r.ID)
			reps[r.ID] = line
			continue
		}
		h, err := schemas.DecodeHotKeyEvent([]byte(line))
		require.NoError(t, err, "a hot-key line: %s", line)
		hot[h.ID] = hotKeyJSON(t, h)
	}
	return reps, hot
}

func hotKeyJSON(t *testing.T, h *schemas.HotKeyEvent) string {
	c := *h
	c.DetectedMs = 0
	b, err := c.AppendJSON(nil)
	require.NoError(t, err)
	return string(b)
}

func keysOf(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// TestReplayAfterLiveRun runs detect run --exit-at-end with the archive
// and ClickHouse on, then checks, against what the live run published:
// replay --json prints the same reports (by ID and content) and hot-key
// events; replay --out-parquet archives the same reports; replay
// --to-topic produces every archived event; query top and alerts return
// what the reports and hot-key events say.
func TestReplayAfterLiveRun(t *testing.T) {
	conn := testenv.ClickHouseConn(t)
	chAddr := testenv.ClickHouseAddr(t)
	testenv.EachBroker(t, func(t *testing.T, seeds []string) {
		db := testenv.ClickHouseDatabase(t, conn)
		e := newRunEnv(t, seeds, testenv.NewTopic(t, seeds, 4))
		base := time.Now().Add(-time.Hour).Truncate(time.Second).UnixMilli()
		const n = 12_000
		produceEvents(t, seeds, e.events, n, base, 1, 4, 500) // 12 s, "hot" at 250 events/s
		root := t.TempDir()
		rules := `--pipeline.rules=[{name: t, key: "*", window: 1s, rate: 200}]`
		chFlags := []string{"--clickhouse.addr=" + chAddr, "--clickhouse.database=" + db, "--clickhouse.flush_interval=50ms"}
		_, _, err := execDetect(t, append(append([]string{"run", "--exit-at-end", rules, "--archive.root=" + root,
			"--archive.segment_age=200ms", "--clickhouse.enabled"}, chFlags...), e.flags()...)...)
		require.NoError(t, err, "the live run")
		live, _ := reports(t, seeds, e.reports)
		liveHot := map[string]string{}
		for _, h := range registryEvents(t, readTopic(t, seeds, e.hotkeys)) {
			liveHot[h.ID] = hotKeyJSON(t, h)
		}
		require.Len(t, live, 24, "a cluster and an app report per window")
		require.NotEmpty(t, liveHot)

		out, stderr, err := execDetect(t, "replay", "--archive="+root, "--json", rules, "--events.max_skew=0", "--pipeline.lateness=0")
		require.NoError(t, err, "replay: %s", stderr)
		require.Contains(t, stderr, "replay: 100%", "a plain progress line when stderr is not a terminal")
		reps, hot := replayLines(t, out)
		require.Equal(t, keysOf(live), keysOf(reps), "replay reports the live run's windows")
		for id, want := range live {
			require.JSONEq(t, want, reps[id], "report %s as the live run had it", id)
		}
		require.Equal(t, keysOf(liveHot), keysOf(hot), "replay raises the live run's hot-key events")
		for id, want := range liveHot {
			require.JSONEq(t, want, hot[id], "hot-key event %s", id)
		}

		t.Run("out-parquet", func(t *testing.T) {
			outDir := t.TempDir()
			_, stderr, err := execDetect(t, "replay", "--archive="+root, "--out-parquet="+outDir, "--progress=false", rules, "--pipeline.lateness=0")
			require.NoError(t, err, "replay: %s", stderr)
			fsys, err := archive.NewDirFS(outDir)
			require.NoError(t, err)
			rs, _, err := archive.ReadReports(context.Background(), fsys, archive.Query{}, nil)
			require.NoError(t, err)
			got := map[string]string{}
			for _, r := range rs {
				b, err := r.AppendJSON(nil)
				require.NoError(t, err)
				got[r.ID] = string(b)
			}
			require.Equal(t, keysOf(live), keysOf(got), "the replay's reports archived")
			for id, want := range live {
				require.JSONEq(t, want, got[id], "report %s", id)
			}
		})

		t.Run("to-topic", func(t *testing.T) {
			topic := testenv.NewTopic(t, seeds, 2)
			_, stderr, err := execDetect(t, "replay", "--archive="+root, "--to-topic="+topic, "--kafka.brokers="+strings.Join(seeds, ","), "--progress=false")
			require.NoError(t, err, "replay: %s", stderr)
			recs := readTopic(t, seeds, topic)
			require.Len(t, recs, n, "every archived event produced once")
			ids := map[string]bool{}
			for _, r := range recs {
				require.Len(t, r.Headers, 1)
				ids[string(r.Headers[0].Value)] = true
			}
			require.Len(t, ids, n, "each with the keyheat-id of its archived record")
		})

		t.Run("to-topic missing", func(t *testing.T) {
			topic := testenv.UniqueName(t, "replayed")
			t.Cleanup(func() { deleteTopic(t, seeds, topic) })
			_, stderr, err := execDetect(t, "replay", "--archive="+root, "--to-topic="+topic, "--kafka.create_topics=false",
				"--kafka.brokers="+strings.Join(seeds, ","), "--progress=false")
			require.ErrorContains(t, err, "kafka.create_topics", "stderr: %s", stderr)
			require.ErrorContains(t, err, topic)

			_, stderr, err = execDetect(t, "replay", "--archive="+root, "--to-topic="+topic, "--kafka.partitions=3",
				"--kafka.brokers="+strings.Join(seeds, ","), "--progress=false")
			require.NoError(t, err, "replay: %s", stderr)
			require.Len(t, readTopic(t, seeds, topic), n, "the topic made, every archived event produced once")
			cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
			require.NoError(t, err)
			defer cl.Close()
			td, err := kadm.NewClient(cl).ListTopics(ctx(t), topic)
			require.NoError(t, err)
			require.Len(t, td[topic].Partitions, 3, "made with kafka.partitions")
		})

		t.Run("query", func(t *testing.T) {
			from := time.UnixMilli(base).UTC().Add(-time.Minute).Format(time.RFC3339)
			to := time.UnixMilli(base).UTC().Add(time.Hour).Format(time.RFC3339)
			// The cluster reports' top lists, summed per key: what top
			// must answer.
			want := map[string]uint64{}
			for _, v := range live {
				r, err := schemas.DecodeWindowReport([]byte(v))
				require.NoError(t, err)
				if r.Scope != schemas.ScopeCluster {
					continue
				}
				for _, k := range r.Top {
					want[k.Key] += k.Count
				}
			}
			out, stderr, err := execDetect(t, append([]string{"query", "top", "--json", "--limit=10000", "--from=" + from, "--to=" + to}, chFlags...)...)
			require.NoError(t, err, "query: %s", stderr)
			got := map[string]uint64{}
			for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
				var r clickhouse.TopRow
				require.NoError(t, json.Unmarshal([]byte(line), &r))
				got[r.Key] = r.Events
			}
			require.Equal(t, want, got, "query top sums the reports' top lists")

			out, stderr, err = execDetect(t, append([]string{"query", "alerts", "--json", "--limit=10000", "--from=" + from, "--to=" + to}, chFlags...)...)
			require.NoError(t, err, "query: %s", stderr)
			lines := strings.Split(strings.TrimSpace(out), "\n")
			require.Len(t, lines, len(liveHot), "every hot-key event, once")
			for _, line := range lines {
				var r clickhouse.AlertRow
				require.NoError(t, json.Unmarshal([]byte(line), &r))
				require.Equal(t, "hot", r.Key)
			}
		})
	})
}

// TestReplayBadArchive: a truncated or foreign Parquet file in the tree
// stops the replay with an error naming it; --skip-bad-files replays the
// rest and warns about each.
func TestReplayBadArchive(t *testing.T) {
	opts := archive.DefaultOptions()
	opts.Root = t.TempDir()
	a, err := archive.Open(context.Background(), opts, nil, nil)
	require.NoError(t, err)
	w, err := a.Partition(context.Background(), "keyheat.events", 0, 0)
	require.NoError(t, err)
	const n = 3000
	base := int64(1_767_225_600_000)
	for i := range int64(n) {
		e := schemas.AccessEvent{TimeMs: base + i, Key: fmt.Sprintf("k%d", i%50), App: "shop", Op: "GET"}
		require.NoError(t, w.Append(i, e))
	}
	require.NoError(t, a.Close())
	var good string
	require.NoError(t, filepath.WalkDir(filepath.Join(opts.Root, "kind=events"), func(p string, d os.DirEntry, err error) error {
		if err == nil && strings.HasSuffix(p, ".parquet") {
			good = p
		}
		return err
	}))
	data, err := os.ReadFile(good)
	require.NoError(t, err)
	dir := filepath.Dir(good)
	truncated := filepath.Join(dir, "truncated.parquet")
	require.NoError(t, os.WriteFile(truncated, data[:len(data)*2/3], 0o644))
	type other struct {
		Name string `parquet:"name"`
	}
	foreign := filepath.Join(dir, "foreign.parquet")
	require.NoError(t, parquet.WriteFile(foreign, []other{{"x"}}))

	for _, bad := range []string{truncated, foreign} {
		t.Run(filepath.Base(bad), func(t *testing.T) {
			other := foreign
			if bad == foreign {
				other = truncated
			}
			aside := other + ".aside"
			require.NoError(t, os.Rename(other, aside))
			defer func() { require.NoError(t, os.Rename(aside, other)) }()
			rel, err := filepath.Rel(opts.Root, bad)
			require.NoError(t, err)

			_, _, err = execDetect(t, "replay", "--archive="+opts.Root, "--json", "--progress=false")
			require.ErrorContains(t, err, filepath.ToSlash(rel), "the error names the bad file")
			require.ErrorContains(t, err, "read with bad files skipped", "and says what to do")
		})
	}

	out, stderr, err := execDetect(t, "replay", "--archive="+opts.Root, "--json", "--skip-bad-files", "--progress=false")
	require.NoError(t, err)
	require.Contains(t, stderr, "truncated.parquet", "a warning names each skipped file")
	require.Contains(t, stderr, "foreign.parquet", "a warning names each skipped file")
	var events uint64
	reps, _ := replayLines(t, out)
	for _, v := range reps {
		r, err := schemas.DecodeWindowReport([]byte(v))
		require.NoError(t, err)
		if r.Scope == schemas.ScopeCluster {
			events += r.Events
		}
	}
	require.EqualValues(t, n, events, "every good event replayed")
}

// TestReplayFlags: flags that cannot work are refused before anything is
// read.
func TestReplayFlags(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no archive", nil, "no archive: set archive.root or pass --archive"},
		{"from", []string{"--from=yesterday"}, `--from="yesterday": want an RFC 3339 time`},
		{"to before from", []string{"--from=2026-01-02T00:00:00Z", "--to=2026-01-01T00:00:00Z"}, "--to (2026-01-01T00:00:00Z) must be after --from"},
		{"speed", []string{"--to-topic=x", "--speed=fast"}, `--speed="fast": want max or a positive factor`},
		{"speed without topic", []string{"--speed=10x"}, "--speed paces --to-topic"},
		{"topic and json", []string{"--to-topic=x", "--json"}, "--to-topic replays events, not detection"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := execDetect(t, append([]string{"replay"}, tc.args...)...)
			require.ErrorContains(t, err, tc.want)
		})
	}
}

// deleteTopic deletes topic, if it exists, at the end of a test.
func deleteTopic(t *testing.T, seeds []string, topic string) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		return
	}
	defer cl.Close()
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, _ = kadm.NewClient(cl).DeleteTopics(c, topic)
}
