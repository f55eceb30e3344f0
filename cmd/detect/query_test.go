package main

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/keyheat/keyheat/internal/testenv"
	"github.com/keyheat/keyheat/schemas"
	"github.com/keyheat/keyheat/sink/archive"
	"github.com/keyheat/keyheat/sink/clickhouse"
)

// jsonRows decodes query --json output.
func jsonRows[T any](t *testing.T, out string) []T {
	t.Helper()
	var rows []T
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if line == "" {
			continue
		}
		var r T
		require.NoError(t, json.Unmarshal([]byte(line), &r), "a JSON row: %s", line)
		rows = append(rows, r)
	}
	return rows
}

// TestQueryAgainstInsertedRows: replay --clickhouse inserts the reports
// and hot-key events of a small archive; every query then answers what
// those reports say (the replay's --json output of the same archive).
func TestQueryAgainstInsertedRows(t *testing.T) {
	conn := testenv.ClickHouseConn(t)
	db := testenv.ClickHouseDatabase(t, conn)
	chFlags := []string{"--clickhouse.addr=" + testenv.ClickHouseAddr(t), "--clickhouse.database=" + db, "--clickhouse.flush_interval=50ms"}

	opts := archive.DefaultOptions()
	opts.Root = t.TempDir()
	a, err := archive.Open(context.Background(), opts, nil, nil)
	require.NoError(t, err)
	base := time.Date(2026, 1, 2, 14, 0, 0, 0, time.UTC).UnixMilli()
	for p := range int32(2) {
		w, err := a.Partition(context.Background(), "keyheat.events", p, 0)
		require.NoError(t, err)
		for i := range int64(4000) { // 4 s
			key, app := fmt.Sprintf("user:%d", (i*31+int64(p))%97), []string{"shop", "search"}[i%2]
			if p == 0 && i%4 == 0 {
				key, app = "product:42", "shop"
			}
			e := schemas.AccessEvent{TimeMs: base + i, Key: key, App: app, Op: []string{"GET", "SET"}[i%2], Bytes: 10 + i%90}
			require.NoError(t, w.Append(i, e))
		}
	}
	require.NoError(t, a.Close())
	rules := `--pipeline.rules=[{name: t, key: "*", window: 1s, rate: 200}]`
	args := []string{"replay", "--archive=" + opts.Root, rules, "--progress=false"}
	out, stderr, err := execDetect(t, append(args, "--json")...)
	require.NoError(t, err, stderr)
	reps, hot := replayLines(t, out)
	require.NotEmpty(t, hot, "product:42 turns hot")
	_, stderr, err = execDetect(t, append(append(args, "--clickhouse"), chFlags...)...)
	require.NoError(t, err, stderr)

	var cluster, shop []*schemas.WindowReport
	for _, v := range reps {
		r, err := schemas.DecodeWindowReport([]byte(v))
		require.NoError(t, err)
		switch {
		case r.Scope == schemas.ScopeCluster:
			cluster = append(cluster, r)
		case r.App == "shop":
			shop = append(shop, r)
		}
	}
	rng := []string{"--from=2026-01-02T13:00:00Z", "--to=2026-01-02T15:00:00Z", "--limit=1000", "--json"}
	query := func(t *testing.T, q ...string) string {
		t.Helper()
		out, stderr, err := execDetect(t, append(append(append([]string{"query"}, q...), rng...), chFlags...)...)
		require.NoError(t, err, stderr)
		return out
	}

	t.Run("top", func(t *testing.T) {
		want := map[string]uint64{}
		for _, r := range cluster {
			for _, k := range r.Top {
				want[k.App+"/"+k.Key] += k.Count
			}
		}
		got := map[string]uint64{}
		rows := jsonRows[clickhouse.TopRow](t, query(t, "top"))
		for _, r := range rows {
			got[r.App+"/"+r.Key] = r.Events
		}
		require.Equal(t, want, got, "the cluster reports' top lists, summed")
		require.Equal(t, "product:42", rows[0].Key, "the heaviest key first")
	})
	t.Run("top bytes of an app", func(t *testing.T) {
		want := map[string]uint64{}
		for _, r := range shop {
			for _, k := range r.TopBytes {
				want[k.Key] += k.Bytes
			}
		}
		got := map[string]uint64{}
		for _, r := range jsonRows[clickhouse.TopRow](t, query(t, "top", "--app=shop", "--list=bytes")) {
			require.Equal(t, "shop", r.App)
			got[r.Key] = r.Bytes
		}
		require.Equal(t, want, got, "shop's bytes lists, summed")
	})
	t.Run("skew", func(t *testing.T) {
		want := map[int64]float64{}
		for _, r := range cluster {
			want[r.StartMs] = r.Skew.MaxMean
		}
		got := map[int64]float64{}
		rows := jsonRows[clickhouse.SkewRow](t, query(t, "skew"))
		for _, r := range rows {
			got[r.StartMs] = r.MaxMean
		}
		require.Equal(t, want, got, "every cluster window's partition skew")
		require.True(t, slices.IsSortedFunc(rows, func(a, b clickhouse.SkewRow) int {
			return -cmpFloat(a.MaxMean, b.MaxMean)
		}), "the most skewed first")
	})
	t.Run("key", func(t *testing.T) {
		var want []uint64
		for _, r := range shop {
			for _, k := range r.Top {
				if k.Key == "product:42" {
					want = append(want, k.Count)
				}
			}
		}
		var got []uint64
		rows := jsonRows[clickhouse.KeyRow](t, query(t, "key", "product:42"))
		for _, r := range rows {
			got = append(got, r.Events)
		}
		slices.Sort(want)
		slices.Sort(got)
		require.Equal(t, want, got, "one row per window the key made its app's list")
	})
	t.Run("key recent first, saying what is left out", func(t *testing.T) {
		counts := map[int64]uint64{}
		var windows []int64
		for _, r := range shop {
			for _, k := range r.Top {
				if k.Key == "product:42" {
					windows = append(windows, r.StartMs)
					counts[r.StartMs] = k.Count
				}
			}
		}
		n := len(windows)
		require.Greater(t, n, 2, "the test needs windows to leave out")
		slices.Sort(windows)
		slices.Reverse(windows)
		base := append([]string{"query", "key", "product:42", "--from=2026-01-02T13:00:00Z", "--to=2026-01-02T15:00:00Z", "--limit=2"}, chFlags...)
		note := fmt.Sprintf("2 of the key's %d windows in the range, the most recent first; %d older ones left out: --limit=%d shows them all, --order=busiest the busiest first",
			n, n-2, n)

		out, stderr, err := execDetect(t, append(base, "--json")...)
		require.NoError(t, err, stderr)
		var starts []int64
		for _, r := range jsonRows[clickhouse.KeyRow](t, out) {
			starts = append(starts, r.StartMs)
		}
		require.Equal(t, windows[:2], starts, "the newest windows, newest first")
		require.Contains(t, stderr, note, "--json says what it left out on standard error")

		out, stderr, err = execDetect(t, base...)
		require.NoError(t, err, stderr)
		lines := strings.Split(strings.TrimSpace(out), "\n")
		require.Len(t, lines, 4, "a header, two windows and the note:\n%s", out)
		require.Contains(t, lines[1], msTime(windows[0]))
		require.Contains(t, lines[3], note)

		out, stderr, err = execDetect(t, append(base, "--json", "--order=busiest")...)
		require.NoError(t, err, stderr)
		var got []uint64
		for _, r := range jsonRows[clickhouse.KeyRow](t, out) {
			got = append(got, r.Events)
		}
		want := slices.Collect(maps.Values(counts))
		slices.Sort(want)
		slices.Reverse(want)
		require.Equal(t, want[:2], got, "the busiest windows first")
		require.Contains(t, stderr, fmt.Sprintf("2 of the key's %d windows in the range, the busiest first; %d quieter ones left out", n, n-2))

		out, stderr, err = execDetect(t, append(base, "--json", fmt.Sprintf("--limit=%d", n))...)
		require.NoError(t, err, stderr)
		require.Len(t, jsonRows[clickhouse.KeyRow](t, out), n)
		require.NotContains(t, stderr, "left out", "nothing left out, nothing said")
	})
	t.Run("alerts", func(t *testing.T) {
		rows := jsonRows[clickhouse.AlertRow](t, query(t, "alerts", "--app=shop"))
		require.Len(t, rows, len(hot), "every hot-key event")
		var types []string
		for _, r := range rows {
			require.Equal(t, "product:42", r.Key)
			types = append(types, r.Type)
		}
		// 250/s under a 200/s rule: hot at its crossing, then its 250/s,
		// 25 % more, a window later.
		require.Equal(t, schemas.HotKeyHot, types[0])
		require.Contains(t, types, schemas.HotKeyUpdate)
		up := rows[slices.Index(types, schemas.HotKeyUpdate)]
		require.Equal(t, rows[0].OnsetMs, up.OnsetMs, "an update carries its episode's onset")
		require.Equal(t, 250.0, up.Rate)
		require.Equal(t, 250.0, up.PeakRate)
		out, stderr, err := execDetect(t, append([]string{"query", "alerts", "--app=shop", "--from=2026-01-02T13:00:00Z", "--to=2026-01-02T15:00:00Z"}, chFlags...)...)
		require.NoError(t, err, stderr)
		require.Regexp(t, `(?m)^ONSET\s+TYPE\s+APP\s+KEY\s+RULE\s+RATE/S\s+PEAK/S\s+THRESHOLD/S`, out)
		require.Regexp(t, `(?m)^\S+ \S+\s+update\s+shop\s+product:42\s+t\s+250\.0\s+250\.0\s+200\.0\s`, out)
	})
	t.Run("text", func(t *testing.T) {
		out, stderr, err := execDetect(t, append([]string{"query", "top", "--from=2026-01-02T13:00:00Z", "--to=2026-01-02T15:00:00Z", "--limit=3"}, chFlags...)...)
		require.NoError(t, err, stderr)
		lines := strings.Split(strings.TrimSpace(out), "\n")
		require.Len(t, lines, 4, "a header and three rows:\n%s", out)
		require.Regexp(t, `^APP\s+KEY\s+EVENTS`, lines[0])
		require.Regexp(t, `^shop\s+product:42\s+\d+`, lines[1])
	})
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// TestQueryRange: --since and --from/--to make the range, and bad
// combinations say what to do.
func TestQueryRange(t *testing.T) {
	now := time.Date(2026, 1, 2, 15, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name     string
		args     []string
		from, to time.Time
		err      string
	}{
		{"default hour", nil, now.Add(-time.Hour), now, ""},
		{"since", []string{"--since=30m"}, now.Add(-30 * time.Minute), now, ""},
		{"from", []string{"--from=2026-01-02T14:00:00Z"}, now.Add(-time.Hour), now, ""},
		{"from to", []string{"--from=2026-01-01T00:00:00Z", "--to=2026-01-01T06:00:00Z"}, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 1, 1, 6, 0, 0, 0, time.UTC), ""},
		{"since and to", []string{"--since=1h", "--to=2026-01-01T06:00:00Z"}, time.Time{}, time.Time{}, "--since counts back from now"},
		{"negative since", []string{"--since=-1h"}, time.Time{}, time.Time{}, "want a positive duration"},
		{"to before from", []string{"--from=2026-01-02T16:00:00Z"}, time.Time{}, time.Time{}, "must be after --from"},
		{"bad time", []string{"--from=today"}, time.Time{}, time.Time{}, "want an RFC 3339 time"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := newQueryCmd(nil)
			require.NoError(t, cmd.ParseFlags(tc.args))
			r, err := queryRange(cmd, now)
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			require.True(t, tc.from.Equal(r.From), "from %s, want %s", r.From, tc.from)
			require.True(t, tc.to.Equal(r.To), "to %s, want %s", r.To, tc.to)
		})
	}
}

// TestQueryArgs: the query and its argument are checked before ClickHouse
// is asked.
func TestQueryArgs(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "name a query: top, skew, key KEY or alerts"},
		{[]string{"hottest"}, `unknown query "hottest"`},
		{[]string{"key"}, "query key takes the key"},
		{[]string{"top", "x"}, "query top takes no argument"},
		{[]string{"key", "k", "--order=oldest"}, `--order="oldest": want recent or busiest`},
		{[]string{"top", "--order=busiest"}, "--order orders query key's windows"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			_, _, err := execDetect(t, append([]string{"query"}, tc.args...)...)
			require.ErrorContains(t, err, tc.want)
		})
	}
}

// TestQueryMissingDatabase: a clickhouse.database that does not exist is
// named as such, with ClickHouse's own message, not as a server that may
// not be running.
func TestQueryMissingDatabase(t *testing.T) {
	db := testenv.UniqueName(t, "nosuchdb")
	_, _, err := execDetect(t, "query", "top", "--clickhouse.addr="+testenv.ClickHouseAddr(t), "--clickhouse.database="+db)
	require.ErrorContains(t, err, "clickhouse database "+db+" does not exist")
	require.ErrorContains(t, err, "clickhouse.database")
	require.NotContains(t, err.Error(), "is it running")
}
