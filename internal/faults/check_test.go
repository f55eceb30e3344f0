//go:build !race

package faults

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/keyheat/keyheat/internal/testenv"
	"github.com/keyheat/keyheat/schemas"
	chschema "github.com/keyheat/keyheat/schemas/clickhouse"
)

// The checks run after each fault, with the input paused, against what
// the suite wrote. Each waits (on conditions, with hang guards only) for
// the pipeline to catch up, then compares exactly.

// checkTimeout guards each wait for the pipeline to catch up: a hang
// guard, not a limit. It took seconds at a load of 20 on two cores, and
// minutes under -race at a load of 45.
const checkTimeout = 15 * time.Minute

// waitFor waits until cond holds, failing the test with what last
// differed when checkTimeout passes.
func waitFor(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	testenv.EventuallyExplained(t, what, checkTimeout, cond)
}

// eventsReader reads the events topic as a read_committed consumer (what
// ingest tail promises exactly once to), across checks, counting how
// often each line number came.
type eventsReader struct {
	seeds []string
	topic string
	cl    *kgo.Client
	seen  map[int64]int // line number → records
	dups  int64
	next  map[int32]int64 // partition → offset after the last record read
}

func newEventsReader(t *testing.T, seeds []string, topic string) *eventsReader {
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumeTopics(topic), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.KeepControlRecords(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))
	require.NoError(t, err)
	t.Cleanup(cl.Close)
	return &eventsReader{seeds: seeds, topic: topic, cl: cl, seen: map[int64]int{}, next: map[int32]int64{}}
}

// readTo reads until every partition is read up to its last stable offset
// as listed now.
func (r *eventsReader) readTo(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), checkTimeout)
	defer cancel()
	adm := kadm.NewClient(r.cl)
	var lso kadm.ListedOffsets
	for {
		var err error
		lso, err = adm.ListCommittedOffsets(ctx, r.topic)
		if err == nil {
			err = lso.Error()
		}
		if err == nil {
			break
		}
		require.NoError(t, ctx.Err(), "list the last stable offsets of %s: %v", r.topic, err)
		time.Sleep(200 * time.Millisecond)
	}
	behind := func() bool {
		b := false
		lso.Each(func(o kadm.ListedOffset) { b = b || r.next[o.Partition] < o.Offset })
		return b
	}
	for behind() {
		fs := r.cl.PollFetches(ctx)
		require.NoError(t, ctx.Err(), "read %s up to %v; at %v", r.topic, lso, r.next)
		fs.EachRecord(func(rec *kgo.Record) {
			r.next[rec.Partition] = rec.Offset + 1
			if rec.Attrs.IsControl() {
				return
			}
			var e schemas.AccessEvent
			require.NoError(t, schemas.DecodeAny(rec.Value, &e), "record %d/%d", rec.Partition, rec.Offset)
			r.seen[e.Bytes]++
			if r.seen[e.Bytes] > 1 {
				r.dups++
			}
		})
	}
}

// check waits until lines 0..n-1 are all on the topic and then requires
// each once, and no other line.
func (r *eventsReader) check(t *testing.T, n int64) {
	t.Helper()
	waitFor(t, "every line on the events topic", func() (bool, string) {
		r.readTo(t)
		return int64(len(r.seen)) >= n, fmt.Sprintf("%d distinct lines of %d", len(r.seen), n)
	})
	var missing []int64
	for i := range n {
		if r.seen[i] == 0 && len(missing) < 10 {
			missing = append(missing, i)
		}
	}
	require.Empty(t, missing, "lines not on the events topic (first 10)")
	require.Zero(t, r.dups, "records on the events topic whose line was there already")
	require.EqualValues(t, n, len(r.seen), "distinct lines on the events topic: lines the suite did not write")
}

// archiveCounts is what DuckDB finds among the archive's events.
type archiveCounts struct {
	Rows     int64 `json:"rows"`     // rows
	Lines    int64 `json:"lines"`    // distinct line numbers
	Records  int64 `json:"records"`  // distinct (partition, offset, event_index)
	MinLine  int64 `json:"min_line"` // -1 when empty
	MaxLine  int64 `json:"max_line"`
	DupLines int64 `json:"dup_lines"` // line numbers in more than one row
}

const archiveScript = `
import glob, json, sys, duckdb
root = sys.argv[1]
out = {"rows": 0, "lines": 0, "records": 0, "min_line": -1, "max_line": -1, "dup_lines": 0}
if glob.glob(f"{root}/kind=events/**/*.parquet", recursive=True):
    ev = f"read_parquet('{root}/kind=events/**/*.parquet', hive_partitioning = false, union_by_name = true)"
    con = duckdb.connect()
    con.sql("SET enable_progress_bar = false")
    r = con.sql(f'SELECT count(*), count(DISTINCT bytes), count(DISTINCT ("partition", "offset", event_index)), min(bytes), max(bytes) FROM {ev}').fetchall()[0]
    d = con.sql(f'SELECT count(*) FROM (SELECT bytes FROM {ev} GROUP BY bytes HAVING count(*) > 1)').fetchall()[0][0]
    out = {"rows": r[0], "lines": r[1], "records": r[2], "min_line": r[3], "max_line": r[4], "dup_lines": d}
print(json.dumps(out))
`

func readArchive(t *testing.T, py, root string) archiveCounts {
	t.Helper()
	out, err := exec.Command(py, "-c", archiveScript, root).Output()
	if ee, ok := err.(*exec.ExitError); ok {
		t.Fatalf("duckdb on %s: %v\n%s", root, err, ee.Stderr)
	}
	require.NoError(t, err)
	var c archiveCounts
	require.NoError(t, json.Unmarshal(out, &c), "duckdb printed %s", out)
	return c
}

// checkArchive waits until the archive holds n rows and requires them to
// be lines 0..n-1, each once.
func checkArchive(t *testing.T, py, root string, n int64) {
	t.Helper()
	var c archiveCounts
	waitFor(t, "every line in the archive", func() (bool, string) {
		c = readArchive(t, py, root)
		return c.Lines >= n, fmt.Sprintf("%+v, want %d lines", c, n)
	})
	require.Equal(t, archiveCounts{Rows: n, Lines: n, Records: n, MinLine: 0, MaxLine: n - 1}, c,
		"the archive's events: every line once, each record once")
}

// chReader is the suite's own client of the private ClickHouse server. A
// connection per call: every query gets through a server restart.
type chReader struct {
	addr, db string
}

func (c *chReader) with(f func(ctx context.Context, conn driver.Conn) error) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := clickhouse.Open(&clickhouse.Options{Addr: []string{c.addr}, Auth: clickhouse.Auth{Username: "default"},
		DialTimeout: 2 * time.Second, MaxOpenConns: 1})
	if err != nil {
		return err
	}
	defer conn.Close()
	return f(ctx, conn)
}

// clusterWindows returns the cluster reports' events by window start,
// FINAL: the complete report of a window wins over a partial one. A
// window twice, or a partial one, is an error.
func (c *chReader) clusterWindows() (map[int64]uint64, error) {
	out := map[int64]uint64{}
	err := c.with(func(ctx context.Context, conn driver.Conn) error {
		rows, err := conn.Query(ctx, "SELECT start_ms, events, partial FROM "+c.db+".reports FINAL WHERE scope = 'cluster'")
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var start int64
			var events uint64
			var partial uint8
			if err := rows.Scan(&start, &events, &partial); err != nil {
				return err
			}
			if _, dup := out[start]; dup {
				return fmt.Errorf("window %d twice among the cluster reports FINAL", start)
			}
			if partial != 0 {
				return fmt.Errorf("window %d reported partial", start)
			}
			out[start] = events
		}
		return rows.Err()
	})
	return out, err
}

// keyWindows returns, for keys, their events in each window's cluster
// report (the events ranking of the report's own revision), by window
// start.
func (c *chReader) keyWindows(keys []string) (map[string]map[int64]uint64, error) {
	out := map[string]map[int64]uint64{}
	if len(keys) == 0 {
		return out, nil
	}
	err := c.with(func(ctx context.Context, conn driver.Conn) error {
		// The detail rows of the revision the reports table holds, as
		// the documented queries (schemas/clickhouse/queries) pick them.
		q := "SELECT key, start_ms, events, error FROM " + c.db + ".report_keys FINAL " +
			"WHERE scope = 'cluster' AND list = 'events' AND has(@keys, key) " +
			"AND (report_id, rev) IN (SELECT id, rev FROM " + c.db + ".reports FINAL WHERE scope = 'cluster')"
		rows, err := conn.Query(ctx, q, clickhouse.Named("keys", keys))
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var key string
			var start int64
			var events, errBound uint64
			if err := rows.Scan(&key, &start, &events, &errBound); err != nil {
				return err
			}
			if errBound != 0 {
				return fmt.Errorf("%s in window %d: error bound %d on a keyed topic whose tables never overflow", key, start, errBound)
			}
			if out[key] == nil {
				out[key] = map[int64]uint64{}
			}
			if _, dup := out[key][start]; dup {
				return fmt.Errorf("%s twice in the cluster report of window %d", key, start)
			}
			out[key][start] = events
		}
		return rows.Err()
	})
	return out, err
}

// duplicateIDs returns, per table, how many more logical rows (FINAL) it
// has than distinct ids: a row counted twice.
func (c *chReader) duplicateIDs() (map[string]uint64, error) {
	out := map[string]uint64{}
	err := c.with(func(ctx context.Context, conn driver.Conn) error {
		for _, tb := range chschema.Tables() {
			var rows, ids uint64
			if err := conn.QueryRow(ctx, "SELECT count(), uniqExact(id) FROM "+c.db+"."+tb.Name+" FINAL").Scan(&rows, &ids); err != nil {
				return fmt.Errorf("%s: %w", tb.Name, err)
			}
			if rows != ids {
				out[tb.Name] = rows - ids
			}
		}
		return nil
	})
	return out, err
}

// hotIDs returns the ids of the hot-key events of type hot in
// ClickHouse, by key.
func (c *chReader) hotIDs() (map[string][]string, error) {
	out := map[string][]string{}
	err := c.with(func(ctx context.Context, conn driver.Conn) error {
		rows, err := conn.Query(ctx, "SELECT key, id FROM "+c.db+".hotkey_events FINAL WHERE type = 'hot' ORDER BY key, id")
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var key, id string
			if err := rows.Scan(&key, &id); err != nil {
				return err
			}
			out[key] = append(out[key], id)
		}
		return rows.Err()
	})
	return out, err
}

// checkClickHouse waits until the cluster reports cover every closed
// window and then requires each window's events, and each planted key's,
// to be what was written, and no row twice.
func checkClickHouse(t *testing.T, ch *chReader, s snapshot, baseMs int64) {
	t.Helper()
	want := s.closedWindows()
	var got map[int64]uint64
	waitFor(t, "every closed window's cluster report in ClickHouse", func() (bool, string) {
		var err error
		got, err = ch.clusterWindows()
		if err != nil {
			return false, err.Error()
		}
		n := 0
		for start := range want {
			if _, ok := got[start]; ok {
				n++
			}
		}
		return n == len(want), fmt.Sprintf("%d of %d closed windows reported", n, len(want))
	})
	require.Equal(t, want, got, "cluster reports in ClickHouse: window start → events")
	var sum uint64
	for _, n := range got {
		sum += n
	}
	require.EqualValues(t, s.lines-int64(s.windows[s.open]), sum, "events summed over the cluster windows")

	dups, err := ch.duplicateIDs()
	require.NoError(t, err)
	require.Empty(t, dups, "tables with more logical rows than ids")

	var keys []string
	wantKeys := map[string]map[int64]uint64{}
	for _, p := range s.donePlants(baseMs) {
		keys = append(keys, p.key)
		wantKeys[p.key] = s.hot[p.key]
	}
	gotKeys, err := ch.keyWindows(keys)
	require.NoError(t, err)
	require.Equal(t, wantKeys, gotKeys, "planted keys' events in the cluster reports: key → window start → events")
}

// registryHot reads the registry topic and returns the IDs of its hot
// events by key.
func registryHot(t *testing.T, seeds []string, topic string) map[string][]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), checkTimeout)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(200*time.Millisecond))
	require.NoError(t, err)
	defer cl.Close()
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	require.NoError(t, err)
	want := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset > 0 {
			want[o.Partition] = o.Offset
		}
	})
	ids := map[string]map[string]bool{}
	for len(want) > 0 {
		fs := cl.PollFetches(ctx)
		require.NoError(t, ctx.Err(), "read %s", topic)
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset+1 >= want[r.Partition] {
				delete(want, r.Partition)
			}
			if r.Value == nil {
				return // a cooled key's tombstone
			}
			h, err := schemas.DecodeHotKeyEvent(r.Value)
			require.NoError(t, err, "registry record %d/%d", r.Partition, r.Offset)
			if h.Type != schemas.HotKeyHot {
				return
			}
			if ids[h.Key] == nil {
				ids[h.Key] = map[string]bool{}
			}
			ids[h.Key][h.ID] = true
		})
	}
	out := map[string][]string{}
	for k, set := range ids {
		out[k] = slices.Sorted(maps.Keys(set))
	}
	return out
}

// checkAlerts waits until every planted key whose windows closed has its
// hot on the registry and in ClickHouse, then requires one hot ID per
// planted key, the same in both, and none for another key.
func checkAlerts(t *testing.T, seeds []string, registry string, ch *chReader, s snapshot, baseMs int64) {
	t.Helper()
	done := s.donePlants(baseMs)
	planted := map[string]bool{}
	for _, p := range s.plants {
		planted[p.key] = true
	}
	var reg, chIDs map[string][]string
	waitFor(t, "every planted key's hot on the registry and in ClickHouse", func() (bool, string) {
		reg = registryHot(t, seeds, registry)
		var err error
		chIDs, err = ch.hotIDs()
		if err != nil {
			return false, err.Error()
		}
		var missing []string
		for _, p := range done {
			if len(reg[p.key]) == 0 || len(chIDs[p.key]) == 0 {
				missing = append(missing, p.key)
			}
		}
		return len(missing) == 0, fmt.Sprintf("no hot yet for %v", missing)
	})
	for k := range reg {
		require.True(t, planted[k], "%q alerted on the registry, not planted", k)
	}
	for k := range chIDs {
		require.True(t, planted[k], "%q alerted in ClickHouse, not planted", k)
	}
	for _, p := range done {
		require.Len(t, reg[p.key], 1, "%s: hot IDs on the registry (a key alerted twice)", p.key)
		require.Equal(t, reg[p.key], chIDs[p.key], "%s: hot IDs in ClickHouse and on the registry", p.key)
	}
}

// checkAll runs every check on what was written up to s.
func (f *fixture) checkAll(t *testing.T, s snapshot) {
	t.Helper()
	t0 := time.Now()
	f.events.check(t, s.lines)
	checkArchive(t, f.python, f.archive, s.lines)
	checkClickHouse(t, f.ch, s, f.baseMs)
	checkAlerts(t, f.seeds, f.topics.hotkeys, f.ch, s, f.baseMs)
	f.checkExits(t)
	var planted []string
	for _, p := range s.donePlants(f.baseMs) {
		planted = append(planted, p.key)
	}
	sort.Strings(planted)
	list := strings.Join(planted, ",")
	if len(planted) > 10 {
		list = strings.Join(planted[:10], ",") + ",…"
	}
	t.Logf("checked %d lines, %d closed windows, %d planted keys alerted once (%s); %s to catch up and check",
		s.lines, len(s.closedWindows()), len(planted), list, time.Since(t0).Round(time.Millisecond))
}
