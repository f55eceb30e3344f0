package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/keyheat/keyheat/internal/testenv"
	chschema "github.com/keyheat/keyheat/schemas/clickhouse"
)

// Process tests of detect with its sinks on: the built binary against the
// real Kafka broker and a real ClickHouse server, stopped, killed and
// restarted the way production does it to them. What they check is
// computed on the test's side from the input, and read back with clients
// keyheat did not write (clickhouse-go queries, DuckDB for the archive).

// sinkRules is the rule every test here runs with; "hot" crosses it.
const sinkRules = `--pipeline.rules=[{name: t, key: "*", window: 1s, rate: 200}]`

// chFlags point detect at database db of the ClickHouse server at addr,
// with small batches and a short retry, so that an outage shows within a
// second and ends soon after the server is back.
func chFlags(addr, db string, extra ...string) []string {
	return append([]string{"--clickhouse.enabled", "--clickhouse.addr=" + addr, "--clickhouse.database=" + db,
		"--clickhouse.flush_interval=100ms", "--clickhouse.retry_max=1s",
		"--clickhouse.insert_timeout=2s", "--clickhouse.dial_timeout=1s"}, extra...)
}

// chClient is the test's own client of a ClickHouse server, reading
// database db.
type chClient struct {
	t    testing.TB
	addr string
	db   string
}

// openCH returns a client of the server at addr, reading database db.
func openCH(t testing.TB, addr, db string) *chClient {
	return &chClient{t: t, addr: addr, db: db}
}

// with runs f on a connection of its own, so every query gets through a
// server restart. Not a pool with a short ConnMaxLifetime: clickhouse-go's
// pool can deadlock in Close when its lifetime ticker fires at that moment
// (ClickHouse/clickhouse-go#1990).
func (c *chClient) with(f func(conn driver.Conn) error) error {
	conn, err := clickhouse.Open(&clickhouse.Options{Addr: []string{c.addr}, Auth: clickhouse.Auth{Username: "default"},
		DialTimeout: 2 * time.Second, MaxOpenConns: 1})
	if err != nil {
		return err
	}
	defer conn.Close()
	return f(conn)
}

// tableCounts are a table's rows: logical (FINAL), distinct ids, and
// physical (every inserted copy not yet merged away).
type tableCounts struct{ final, ids, raw uint64 }

func (c *chClient) counts(table string) (tableCounts, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var n tableCounts
	err := c.with(func(conn driver.Conn) error {
		err := conn.QueryRow(ctx, "SELECT count(), uniqExact(id) FROM "+c.db+"."+table+" FINAL").Scan(&n.final, &n.ids)
		if err == nil {
			err = conn.QueryRow(ctx, "SELECT count() FROM "+c.db+"."+table).Scan(&n.raw)
		}
		return err
	})
	return n, err
}

func (c *chClient) mustCounts(table string) tableCounts {
	c.t.Helper()
	n, err := c.counts(table)
	require.NoError(c.t, err, "count %s.%s", c.db, table)
	return n
}

// windowRow is what the reports table says of one window of one scope.
type windowRow struct {
	events  uint64
	partial uint8
}

// reportRows returns the reports table's logical rows by scope and
// window start.
func (c *chClient) reportRows() map[string]map[int64]windowRow {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard)
	defer cancel()
	out := map[string]map[int64]windowRow{}
	require.NoError(c.t, c.with(func(conn driver.Conn) error {
		rows, err := conn.Query(ctx, "SELECT toString(scope), start_ms, events, partial FROM "+c.db+".reports FINAL")
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var scope string
			var startMs int64
			var r windowRow
			if err := rows.Scan(&scope, &startMs, &r.events, &r.partial); err != nil {
				return err
			}
			if out[scope] == nil {
				out[scope] = map[int64]windowRow{}
			}
			_, dup := out[scope][startMs]
			require.False(c.t, dup, "window %d of scope %s twice in reports FINAL", startMs, scope)
			out[scope][startMs] = r
		}
		return rows.Err()
	}))
	return out
}

// requireWindows checks that the reports table holds exactly the windows
// want (start → events), once each, for the cluster and the one app, all
// complete; and that no table has two logical rows with one id.
func (c *chClient) requireWindows(want map[int64]uint64) {
	c.t.Helper()
	got := c.reportRows()
	for _, scope := range []string{"cluster", "app"} {
		rows := map[int64]uint64{}
		for start, r := range got[scope] {
			require.Zero(c.t, r.partial, "%s report of window %d is partial", scope, start)
			rows[start] = r.events
		}
		require.Equal(c.t, want, rows, "%s reports in ClickHouse: window start → events", scope)
	}
	require.Len(c.t, got, 2, "reports of scopes cluster and app only")
	for _, tb := range chschema.Tables() {
		n := c.mustCounts(tb.Name)
		require.Equal(c.t, n.final, n.ids, "%s: logical rows and distinct ids", tb.Name)
	}
	n := c.mustCounts("reports")
	require.EqualValues(c.t, 2*len(want), n.final, "reports: one logical row per window and scope")
}

// windowEvents is what produceEvents(n, startMs, stepMs) puts in each
// 1 s window, by window start: the reports a run must write.
func windowEvents(n int, startMs, stepMs int64) map[int64]uint64 {
	out := map[int64]uint64{}
	for i := range int64(n) {
		ts := startMs + i*stepMs
		out[ts-ts%1000]++
	}
	return out
}

// rssBytes returns the resident set size of process pid.
func rssBytes(pid int) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("no VmRSS in /proc/%d/status", pid)
}

// watcher samples a detect process's /readyz, resident memory and
// buffered ClickHouse rows every 50 ms, in phases the test names, until
// stopped.
type watcher struct {
	mu       sync.Mutex
	phase    string
	codes    []string // phase:code, each change of code
	peak     map[string]int64
	buffered map[string]int64 // peak keyheat_clickhouse_buffered_rows
	stop     chan struct{}
	done     chan struct{}
	client   http.Client
}

func watch(t testing.TB, p *testenv.Process, metricsAddr string) *watcher {
	w := &watcher{phase: "start", peak: map[string]int64{}, buffered: map[string]int64{}, stop: make(chan struct{}), done: make(chan struct{}),
		client: http.Client{Timeout: time.Second}}
	go func() {
		defer close(w.done)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		last := -1
		for {
			select {
			case <-w.stop:
				return
			case <-tick.C:
			}
			code := 0
			if resp, err := w.client.Get("http://" + metricsAddr + "/readyz"); err == nil { //nolint:noctx // local, with a timeout
				code = resp.StatusCode
				_, _ = io.Copy(io.Discard, resp.Body)
				_ = resp.Body.Close()
			}
			rss, err := rssBytes(p.Pid())
			rows := scrapeGauge(&w.client, metricsAddr, "keyheat_clickhouse_buffered_rows")
			w.mu.Lock()
			w.buffered[w.phase] = max(w.buffered[w.phase], rows)
			if code != last {
				w.codes = append(w.codes, w.phase+":"+strconv.Itoa(code))
				last = code
			}
			if err == nil && rss > w.peak[w.phase] {
				w.peak[w.phase] = rss
			}
			w.mu.Unlock()
		}
	}()
	t.Cleanup(w.close)
	return w
}

// scrapeGauge returns the value of the unlabelled gauge name on the
// process's /metrics, or -1 when it cannot be read.
func scrapeGauge(c *http.Client, metricsAddr, name string) int64 {
	resp, err := c.Get("http://" + metricsAddr + "/metrics") //nolint:noctx // local, with a timeout
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return -1
			}
			return int64(f)
		}
	}
	return -1
}

func (w *watcher) setPhase(phase string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.phase = phase
}

func (w *watcher) close() {
	select {
	case <-w.stop:
	default:
		close(w.stop)
	}
	<-w.done
}

// seen reports whether /readyz answered code in phase.
func (w *watcher) seen(phase string, code int) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Contains(w.codes, phase+":"+strconv.Itoa(code))
}

// mergeBacklog returns how many summaries on the windows topic the merge
// group has not committed past.
func mergeBacklog(t testing.TB, e *runEnv) int64 {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(e.seeds...))
	require.NoError(t, err)
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ends, err := adm.ListEndOffsets(ctx(t), e.windows)
	require.NoError(t, err)
	committed, err := adm.FetchOffsets(ctx(t), e.mergeGroup)
	require.NoError(t, err)
	var backlog int64
	ends.Each(func(o kadm.ListedOffset) {
		at := int64(0)
		if c, ok := committed.Lookup(e.windows, o.Partition); ok {
			at = c.At
		}
		backlog += o.Offset - at
	})
	return backlog
}

// outageDowntime is how long TestClickHouseOutageProcess keeps ClickHouse
// stopped.
const outageDowntime = 20 * time.Second

// TestClickHouseOutageProcess stops the ClickHouse server under a running
// detect for outageDowntime while input keeps coming, then starts it
// again. Meanwhile /readyz says 503, the rows detect holds for ClickHouse
// reach their bound and stay within it, and the merge commit holds back;
// afterwards /readyz is 200 again and every window the input makes is in
// ClickHouse exactly once with the right event count. The process's peak
// memory during the outage stays within half again of its peak over the
// same amount of input before it (a gross check: the precise bound is
// the buffered rows').
func TestClickHouseOutageProcess(t *testing.T) {
	t.Parallel() // mostly waits for the outage to end
	seeds := testenv.KafkaSeeds(t)
	srv := testenv.PrivateClickHouse(t)
	e := newRunEnv(t, seeds, testenv.NewTopic(t, seeds, 4))
	db := testenv.UniqueName(t, "keyheat")
	metrics := testenv.FreeAddr(t)
	const maxRows = 3000
	// Live, with no window closed by the wall clock nor reported partial:
	// what is written depends on the input only.
	args := append([]string{"run", sinkRules, "--metrics.addr=" + metrics, "--pipeline.idle_timeout=1h",
		"--merge.max_pending_windows=1000"},
		chFlags(srv.Addr(), db, "--clickhouse.batch_rows=1000", "--clickhouse.max_buffered_rows="+strconv.Itoa(maxRows))...)
	t0 := time.Now()
	p := start(t, nil, append(args, e.flags()...)...)
	w := watch(t, p, metrics)
	ch := openCH(t, srv.Addr(), db)

	// The same input before and during the outage: 20 windows of 1000
	// events each.
	base := time.Now().Add(-time.Hour).Truncate(time.Second).UnixMilli()
	const phase = 20_000
	produceEvents(t, seeds, e.events, phase, base, 1, 4, 1000) // windows 0..19; 0..18 close
	testenv.Eventually(t, "the first windows in ClickHouse", func() bool {
		n, err := ch.counts("reports")
		return err == nil && n.final == 2*19
	})
	require.True(t, w.seen("start", 200), "ready before the outage: %v", w.codes)
	tControl := time.Since(t0)

	w.setPhase("outage")
	stopping := time.Now()
	srv.Stop(t) // TERM: 18.16 can take seconds to finish what it runs
	stopped := time.Now()
	tStop := stopped.Sub(stopping)
	produceEvents(t, seeds, e.events, phase, base+phase, 1, 4, 1000) // windows 20..39
	testenv.Eventually(t, "/readyz degraded", func() bool { return w.seen("outage", http.StatusServiceUnavailable) })
	tDegraded := time.Since(stopped)
	time.Sleep(outageDowntime - time.Since(stopped))
	backlog := mergeBacklog(t, e)
	w.setPhase("after")
	srv.Start(t)

	want := windowEvents(2*phase, base, 1)
	delete(want, base+39_000) // no later event closes it
	restarted := time.Now()
	testenv.Eventually(t, "every window in ClickHouse", func() bool {
		n, err := ch.counts("reports")
		return err == nil && n.final == uint64(2*len(want))
	})
	testenv.Eventually(t, "/readyz ready again", func() bool { return w.seen("after", 200) })
	tCatchUp := time.Since(restarted)
	require.Equal(t, 0, p.Stop())
	w.close()

	require.Positive(t, backlog, "the merge group committed no summary whose reports ClickHouse lacked")
	require.Zero(t, mergeBacklog(t, e), "the merge commit caught up after the outage")
	ch.requireWindows(want)
	t.Logf("readyz: %v; peak RSS MiB: before %d, outage %d, after %d; peak buffered rows: before %d, outage %d (bound %d); "+
		"merge backlog at the outage's end %d summaries; control phase %s, stop %s, degraded %s after it, caught up %s after the start",
		w.codes, w.peak["start"]>>20, w.peak["outage"]>>20, w.peak["after"]>>20, w.buffered["start"], w.buffered["outage"], maxRows,
		backlog, tControl.Round(time.Millisecond), tStop.Round(time.Millisecond), tDegraded.Round(time.Millisecond), tCatchUp.Round(time.Millisecond))
	for phase, rows := range w.buffered {
		require.LessOrEqual(t, rows, int64(maxRows), "rows held for ClickHouse in phase %s", phase)
	}
	require.Greater(t, w.buffered["outage"], int64(maxRows/2), "the outage filled the buffer")
	require.LessOrEqual(t, w.peak["outage"], w.peak["start"]+w.peak["start"]/2, "peak RSS during the outage against before it")
}

// archiveCheck is what DuckDB finds in the events of an archive.
type archiveCheck struct {
	Rows     int64              `json:"rows"`
	Distinct int64              `json:"distinct"`
	Offsets  map[string][]int64 `json:"offsets"` // partition → min, max, count
}

// readArchive reads the archive's events at root with DuckDB: rows,
// distinct (topic, partition, offset) and each partition's offset range.
func readArchive(t testing.TB, root string) archiveCheck {
	t.Helper()
	py := testenv.Python(t, "duckdb")
	const script = `
import json, sys, duckdb
ev = f"read_parquet('{sys.argv[1]}/kind=events/**/*.parquet', hive_partitioning = false)"
con = duckdb.connect()
con.sql("SET enable_progress_bar = false")  # a slow query prints one to stdout, before the JSON
rows, distinct = con.sql(f'SELECT count(*), count(DISTINCT (topic, "partition", "offset")) FROM {ev}').fetchall()[0]
offsets = {str(p): [lo, hi, n] for p, lo, hi, n in con.sql(
    f'SELECT "partition", min("offset"), max("offset"), count(*) FROM {ev} GROUP BY ALL').fetchall()}
print(json.dumps({"rows": rows, "distinct": distinct, "offsets": offsets}))
`
	out, err := exec.Command(py, "-c", script, root).Output()
	if ee, ok := err.(*exec.ExitError); ok {
		t.Fatalf("duckdb on %s: %v\n%s", root, err, ee.Stderr)
	}
	require.NoError(t, err)
	var c archiveCheck
	require.NoError(t, json.Unmarshal(out, &c), "duckdb printed %s", out)
	return c
}

// endOffsets returns topic's end offset by partition, as strings.
func endOffsets(t testing.TB, seeds []string, topic string) map[string]int64 {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	require.NoError(t, err)
	defer cl.Close()
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx(t), topic)
	require.NoError(t, err)
	out := map[string]int64{}
	ends.Each(func(o kadm.ListedOffset) { out[strconv.Itoa(int(o.Partition))] = o.Offset })
	return out
}

// requireArchive checks that the archive at root holds every record of
// topic once: as many rows as records, no offset twice, every offset.
func requireArchive(t testing.TB, seeds []string, topic, root string, n int) {
	t.Helper()
	got := readArchive(t, root)
	require.EqualValues(t, n, got.Rows, "events in the archive")
	require.EqualValues(t, n, got.Distinct, "distinct offsets in the archive")
	for part, end := range endOffsets(t, seeds, topic) {
		require.Equal(t, []int64{0, end - 1, end}, got.Offsets[part], "partition %s: min, max offset and rows", part)
	}
}

// committedSum returns the sum of group's committed offsets on topic.
func committedSum(t testing.TB, seeds []string, group, topic string) int64 {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	require.NoError(t, err)
	defer cl.Close()
	adm := kadm.NewClient(cl)
	os, err := adm.FetchOffsets(ctx(t), group)
	// A broker just started answers COORDINATOR_NOT_AVAILABLE (and the
	// like) until its offsets topic is ready.
	for kerr.IsRetriable(err) { // ends with ctx's error at the latest
		time.Sleep(100 * time.Millisecond)
		os, err = adm.FetchOffsets(ctx(t), group)
	}
	require.NoError(t, err)
	var sum int64
	os.Each(func(o kadm.OffsetResponse) {
		if o.Topic == topic && o.At > 0 {
			sum += o.At
		}
	})
	return sum
}

// TestKillRestartSinks kills detect with SIGKILL at a random point of a
// run, five times, restarting it each time, and lets a sixth, batch run
// finish. The input is produced while the killed runs go on (a window of
// 1,000 events every 200 ms), so every kill lands mid-stream however fast
// the machine is. The archive then holds every event produced exactly once
// (read with DuckDB), and ClickHouse every window once, complete.
func TestKillRestartSinks(t *testing.T) {
	t.Parallel() // mostly waits for sessions to expire
	seeds := testenv.KafkaSeeds(t)
	conn := testenv.ClickHouseConn(t)
	db := testenv.ClickHouseDatabase(t, conn)
	e := newRunEnv(t, seeds, testenv.NewTopic(t, seeds, 4))
	root := t.TempDir()
	base := time.Now().Add(-time.Hour).Truncate(time.Second).UnixMilli()
	// Input is produced in 1,000-event chunks, one window each ("hot" at
	// 250/s), for as long as runs are being killed and at least 150
	// chunks: every restart then has new input to commit past the last
	// run's commit. (A fixed amount could all be read and committed
	// before a late run started, leaving it nothing to commit.)
	const minN, maxN, chunk = 150_000, 1_000_000, 1000
	// The live runs never see a partition idle long enough to move its
	// clock to the wall clock (which would make this old input late).
	live := append([]string{"run", sinkRules, "--merge.max_pending_windows=1000", "--pipeline.idle_timeout=1h",
		"--archive.root=" + root, "--archive.segment_age=200ms", "--archive.segment_bytes=262144"},
		chFlags(testenv.ClickHouseAddr(t), db)...)
	live = append(live, e.flags()...)

	killing := make(chan struct{})
	produced := make(chan int, 1)
	go func() {
		i := 0
		defer func() { produced <- i }() // also when produceEvents fails the test
		for ; i < maxN; i += chunk {
			select {
			case <-killing:
				if i >= minN {
					return
				}
			default:
			}
			produceEvents(t, seeds, e.events, chunk, base+int64(i), 1, 4, 5000)
			time.Sleep(200 * time.Millisecond)
		}
	}()
	// produceEvents numbers keys from 0 in every chunk; with 1,000-event
	// chunks and 5,000 keys each chunk is keys 0–999, "hot" every 4th.

	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 0))
	binary(t)      // built before the first run's clock starts
	var prev int64 // the group's committed offsets, summed
	for i := range 5 {
		t0 := time.Now()
		p := start(t, nil, live...)
		// Each run is killed at a random point after it committed past
		// the previous run's commit, so that every restart resumes from a
		// newer commit, over archive segments and ClickHouse rows written
		// past it. A restart first waits for the killed member's session
		// to expire (6 s, the broker's minimum) before it is assigned
		// anything.
		testenv.Eventually(t, fmt.Sprintf("run %d to commit past %d", i, prev), func() bool {
			select {
			case <-p.Done():
				t.Fatalf("live run %d ended on its own", i)
			default:
			}
			return committedSum(t, seeds, e.group, e.events) > prev
		})
		tWait := time.Since(t0)
		time.Sleep(time.Duration(rng.Int64N(int64(3 * time.Second))))
		select {
		case <-p.Done():
			t.Fatalf("live run %d ended on its own", i)
		default:
		}
		p.Kill()
		prev = committedSum(t, seeds, e.group, e.events)
		t.Logf("run %d: killed %s after its first new commit (%s after its start); committed %d", i,
			(time.Since(t0) - tWait).Round(time.Millisecond), tWait.Round(time.Millisecond), prev)
	}
	close(killing)
	n := <-produced
	args := append([]string{"--exit-at-end"}, live...)
	args[0], args[1] = args[1], args[0] // "run --exit-at-end …"
	p := start(t, nil, args...)
	require.Equal(t, 0, p.WaitExit())

	requireArchive(t, seeds, e.events, root, n)
	ch := openCH(t, testenv.ClickHouseAddr(t), db)
	ch.requireWindows(windowEvents(n, base, 1))
	hot := ch.mustCounts("hotkey_events")
	require.EqualValues(t, len(hotKeyIDs(t, seeds, e.hotkeys)), hot.final, "hot-key events in ClickHouse and on Kafka")
	t.Logf("reports rows: %+v, hot-key rows: %+v", ch.mustCounts("reports"), hot)
}

// TestSinksRunTwice: two detect processes start at once on an empty
// database, migrate it (one logical record per migration, each table
// once) and together write every window of the input; a second run of
// the same input under a new group re-sends every row (more physical
// rows) but adds no logical one, applies no migration, and leaves the
// archive with every event once.
func TestSinksRunTwice(t *testing.T) {
	t.Parallel()
	seeds := testenv.KafkaSeeds(t)
	conn := testenv.ClickHouseConn(t)
	db := testenv.UniqueName(t, "keyheat") // made by detect
	t.Cleanup(func() {
		c, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = conn.Exec(c, "DROP DATABASE IF EXISTS "+db)
	})
	events := testenv.NewTopic(t, seeds, 4)
	root := t.TempDir()
	base := time.Now().Add(-time.Hour).Truncate(time.Second).UnixMilli()
	const n = 20_000
	produceEvents(t, seeds, events, n, base, 1, 4, 1000) // 20 windows, "hot" hot
	args := append([]string{"run", "--exit-at-end", sinkRules, "--merge.max_pending_windows=1000",
		"--archive.root=" + root, "--archive.segment_age=200ms"}, chFlags(testenv.ClickHouseAddr(t), db)...)
	applied := regexpOf(`msg="applied clickhouse migration"`)

	first := newRunEnv(t, seeds, events)
	binary(t)
	a := start(t, nil, append(args, first.flags()...)...)
	b := start(t, nil, append(args, first.flags()...)...)
	require.Equal(t, 0, a.WaitExit())
	require.Equal(t, 0, b.WaitExit())
	migrations, err := chschema.Migrations()
	require.NoError(t, err)
	nApplied := len(a.Stderr.Match(applied)) + len(b.Stderr.Match(applied))
	require.GreaterOrEqual(t, nApplied, len(migrations), "the migrations were applied")
	ch := openCH(t, testenv.ClickHouseAddr(t), db)
	var records uint64
	require.NoError(t, conn.QueryRow(ctx(t), "SELECT count() FROM "+db+"."+chschema.MigrationsTable+" FINAL").Scan(&records))
	require.EqualValues(t, len(migrations), records, "one logical record per migration")
	for _, tb := range chschema.Tables() {
		var k uint64
		require.NoError(t, conn.QueryRow(ctx(t), "SELECT count() FROM system.tables WHERE database = @db AND name = @t",
			clickhouse.Named("db", db), clickhouse.Named("t", tb.Name)).Scan(&k))
		require.EqualValues(t, 1, k, "table %s", tb.Name)
	}
	want := windowEvents(n, base, 1)
	ch.requireWindows(want)
	requireArchive(t, seeds, events, root, n)
	counts := map[string]tableCounts{}
	for _, tb := range chschema.Tables() {
		counts[tb.Name] = ch.mustCounts(tb.Name)
	}
	require.Positive(t, counts["hotkey_events"].final, "the planted key turned hot")

	second := newRunEnv(t, seeds, events)
	p := start(t, nil, append(args, second.flags()...)...)
	require.Equal(t, 0, p.WaitExit())
	require.Empty(t, p.Stderr.Match(applied), "a second start applies no migration")
	ch.requireWindows(want)
	requireArchive(t, seeds, events, root, n)
	resent := map[string]tableCounts{}
	for _, tb := range chschema.Tables() {
		again := ch.mustCounts(tb.Name)
		resent[tb.Name] = again
		require.Equal(t, counts[tb.Name].final, again.final, "%s: logical rows after the second run", tb.Name)
		if counts[tb.Name].final > 0 {
			// Unless a background merge already folded them.
			require.GreaterOrEqual(t, again.raw, counts[tb.Name].raw, "%s: rows sent again", tb.Name)
		}
	}
	t.Logf("first run: %d migration applications by two processes; rows %v; after the second run %v", nApplied, counts, resent)
}
