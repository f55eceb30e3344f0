//go:build !race

package faults

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/keyheat/keyheat/ingest"
	"github.com/keyheat/keyheat/internal/testenv"
)

var (
	long  = flag.Bool("faults.long", false, "run the long form of the fault suite (also KEYHEAT_FAULTS=long)")
	kills = flag.Int("faults.kills", 0, "detect kills; 0 means the form's own (5 short, 100 long)")
	seed  = flag.Uint64("faults.seed", 0, "seed of the kill points; 0 picks one (logged)")
)

// Durations of the faults. They are what the suite does, not limits on
// what keyheat may take: no check depends on them.
const (
	brokerDown     = 10 * time.Second
	clickhouseDown = 20 * time.Second
	diskFull       = 10 * time.Second
	starved        = 15 * time.Second
	busyLoopsN     = 6
	tmpfsMiB       = 256
)

// Metrics that say a process is processing: records detect consumed,
// lines ingest's transactions committed.
const (
	detectProgress = "keyheat_detect_records_total"
	ingestProgress = "keyheat_ingest_lines_total"
)

type topicNames struct {
	events, dlq, positions                         string
	hotkeys, windows, reports, progress, detectDLQ string
}

// fixture is the suite's pipeline: private services, the input file,
// ingest tail and one detect, and what the checks read with.
type fixture struct {
	seeds   []string
	broker  *testenv.Broker
	chSrv   *testenv.ClickHouseServer
	ch      *chReader
	topics  topicNames
	archive string
	tmpfs   error // why the archive is not on a tmpfs of its own, or nil
	python  string
	baseMs  int64
	in      *input
	events  *eventsReader
	ingest  *service
	detect  *service
	logs    string
	rng     *rand.Rand

	reported   map[string]int // unexpected exits already logged, by service
	recoveries []recovery
}

// recovery is how long a process took from a fault to processing again.
type recovery struct {
	fault   string
	service string
	took    time.Duration
}

func longForm() bool { return *long || os.Getenv("KEYHEAT_FAULTS") == "long" }

// TestFaults runs the pipeline through every fault in turn, checking
// after each that nothing was lost and nothing counted twice (see the
// package documentation).
func TestFaults(t *testing.T) {
	nKills := 5
	if longForm() {
		nKills = 100
	}
	if *kills > 0 {
		nKills = *kills
	}
	s := *seed
	if s == 0 {
		s = uint64(time.Now().UnixNano())
	}
	t.Logf("form: %d detect kills, kill points from seed %d (-faults.seed=%d repeats them)", nKills, s, s)
	f := setup(t, rand.New(rand.NewPCG(s, 0)))

	phases := []struct {
		name string
		run  func(f *fixture, t *testing.T)
	}{
		{"detect_sigkill", func(f *fixture, t *testing.T) { f.killDetect(t, nKills) }},
		{"ingest_sigkill", (*fixture).killIngest},
		{"broker_stop", (*fixture).stopBroker},
		{"clickhouse_stop", (*fixture).stopClickHouse},
		{"disk_full", (*fixture).fillArchiveDisk},
		{"cpu_starved", (*fixture).starveCPU},
	}
	for _, ph := range phases {
		ok := t.Run(ph.name, func(t *testing.T) {
			t0 := time.Now()
			f.in.plantKey("hot:"+ph.name, plantWindows)
			ph.run(f, t)
			snap := f.in.pause()
			defer f.in.resume()
			f.checkAll(t, snap)
			t.Logf("%s: %s", ph.name, time.Since(t0).Round(time.Millisecond))
		})
		if !ok {
			break
		}
	}

	// A stop at the end is clean: both exit 0, having delivered and
	// committed everything.
	snap := f.in.pause()
	if code := f.ingest.stop(testenv.HangGuard); code != 0 {
		t.Errorf("ingest exited %d on SIGTERM, want 0", code)
	}
	if code := f.detect.stop(testenv.HangGuard); code != 0 {
		t.Errorf("detect exited %d on SIGTERM, want 0", code)
	}
	f.checkExits(t)
	if err := f.in.stop(); err != nil {
		t.Errorf("input writer: %v", err)
	}
	f.report(t, snap)
}

func setup(t *testing.T, rng *rand.Rand) *fixture {
	t0 := time.Now()
	f := &fixture{rng: rng, reported: map[string]int{}, logs: logDir(t)}
	f.python = testenv.Python(t, "duckdb")
	type built struct {
		ingest, detect string
		err            error
	}
	buildc := make(chan built, 1)
	go func() {
		var b built
		b.ingest, b.detect, b.err = buildBinaries()
		buildc <- b
	}()
	// The services the faults stop are the suite's own; the shared ones
	// are never touched. A broker's start on two starved cores has taken
	// over the script's default three minutes; ten are a hang guard.
	if os.Getenv("KEYHEAT_SERVICES_START_TIMEOUT") == "" {
		t.Setenv("KEYHEAT_SERVICES_START_TIMEOUT", "600")
	}
	f.broker = testenv.PrivateKafka(t)
	f.seeds = f.broker.Seeds()
	f.chSrv = testenv.PrivateClickHouse(t)
	f.ch = &chReader{addr: f.chSrv.Addr(), db: "keyheat"}

	f.topics = topicNames{
		events: testenv.NewTopic(t, f.seeds, 4), dlq: testenv.NewTopic(t, f.seeds, 1),
		positions: testenv.NewTopicWithConfigs(t, f.seeds, 1, ingest.PositionsTopicConfigs()),
		hotkeys:   "faults.hotkeys", windows: "faults.windows", reports: "faults.reports", progress: "faults.progress",
		detectDLQ: "faults.detect.dlq",
	}
	f.archive = filepath.Join(t.TempDir(), "archive")
	if err := os.MkdirAll(f.archive, 0o755); err != nil {
		t.Fatal(err)
	}
	f.tmpfs = mountTmpfs(t, f.archive, tmpfsMiB)
	if f.tmpfs != nil {
		if testenv.InCI() {
			t.Fatalf("%v (CI=true: the suite runs every fault or fails)", f.tmpfs)
		}
		t.Logf("the disk-full fault will be skipped: %v", f.tmpfs)
	}

	b := <-buildc
	if b.err != nil {
		t.Fatal(b.err)
	}
	// Old event times (6 h back, so that the input, whose event time
	// runs four times faster than the clock, stays in the past even in
	// the long form): windows close by events only, never by the clock,
	// so what each report holds depends on the input alone.
	f.baseMs = time.Now().Add(-6 * time.Hour).Truncate(time.Second).UnixMilli()
	var err error
	f.in, err = newInput(filepath.Join(t.TempDir(), "access.log"), f.baseMs)
	if err != nil {
		t.Fatal(err)
	}
	f.events = newEventsReader(t, f.seeds, f.topics.events)
	f.ingest = startService(t, "ingest", b.ingest, f.logs, f.ingestArgs)
	f.detect = startService(t, "detect", b.detect, f.logs, f.detectArgs)
	f.in.start()
	t.Cleanup(func() { _ = f.in.stop() })
	f.detect.waitProgress(t, detectProgress, progress{run: 1, value: 0}, "its start")
	t.Logf("setup: private Kafka %v, private ClickHouse %s, archive %s, logs %s; ready in %s",
		f.seeds, f.chSrv.Addr(), f.archive, f.logs, time.Since(t0).Round(time.Millisecond))
	return f
}

func (f *fixture) ingestArgs(metrics string) []string {
	return []string{"tail", f.in.path, "--from-start", "--ingest.tail_id=faults",
		"--kafka.brokers=" + strings.Join(f.seeds, ","), "--kafka.topics.events=" + f.topics.events,
		"--kafka.topics.dlq=" + f.topics.dlq, "--ingest.positions_topic=" + f.topics.positions, "--kafka.create_topics=false",
		"--ingest.format=json", "--ingest.json.time_format=unix_ms", "--metrics.addr=" + metrics}
}

func (f *fixture) detectArgs(metrics string) []string {
	return []string{"run",
		"--kafka.brokers=" + strings.Join(f.seeds, ","), "--kafka.partitions=4",
		"--kafka.topics.events=" + f.topics.events, "--kafka.topics.dlq=" + f.topics.detectDLQ,
		"--kafka.topics.hotkeys=" + f.topics.hotkeys, "--kafka.topics.windows=" + f.topics.windows,
		"--kafka.topics.reports=" + f.topics.reports, "--kafka.topics.progress=" + f.topics.progress,
		"--detect.group=faults", "--detect.merge_group=faults-merge",
		// The broker's least session timeout: a killed member's
		// partitions move on after 6 s, not the default 45.
		"--detect.session_timeout=6s",
		// Old input: no skew check, no lateness (a window closes at the
		// first later event), no window closed by the clock.
		"--events.max_skew=0", "--pipeline.lateness=0", "--pipeline.idle_timeout=1h",
		// The merger holds windows for as long as faults keep a
		// partition behind, instead of reporting them partial.
		"--merge.max_pending_windows=1000",
		fmt.Sprintf(`--pipeline.rules=[{name: t, key: "*", window: 1s, rate: %d}]`, hotRate),
		"--archive.root=" + f.archive, "--archive.segment_age=1s",
		"--clickhouse.enabled", "--clickhouse.addr=" + f.chSrv.Addr(), "--clickhouse.database=keyheat",
		"--clickhouse.flush_interval=200ms", "--clickhouse.retry_max=1s", "--clickhouse.insert_timeout=5s",
		"--clickhouse.dial_timeout=2s",
		"--metrics.addr=" + metrics,
	}
}

// killDetect kills detect n times at random points: about a quarter of
// the kills during its start (before it processes anything again), the
// others a random moment after it processes again. Every kill comes with
// a key planted for a dozen windows (three seconds): kills land before,
// during and after hot episodes, whose alerts a restart must send again
// under the same ID, never as a second alert.
func (f *fixture) killDetect(t *testing.T, n int) {
	var took []time.Duration
	early := false // the first kill: while processing
	for i := range n {
		f.in.plantKey(fmt.Sprintf("hot:detect_sigkill:%d", i+1), 12)
		r, _ := f.detect.current()
		if early {
			time.Sleep(time.Duration(f.rng.Int64N(int64(3 * time.Second))))
		} else {
			f.detect.waitProgress(t, detectProgress, progress{run: r.n, value: 0}, "its start")
			time.Sleep(time.Duration(f.rng.Int64N(int64(2 * time.Second))))
		}
		from := f.detect.counter(detectProgress)
		at := f.detect.kill()
		if n <= 10 || i%10 == 9 {
			t.Logf("kill %d/%d of detect (start %d, %s, %.0f records read)", i+1, n, from.run,
				map[bool]string{true: "during its start", false: "while processing"}[early], from.value)
		}
		// Kill → the next start processing again; not measured when the
		// next kill comes during that start.
		early = i < n-1 && f.rng.IntN(4) == 0
		if !early {
			back := f.detect.waitProgress(t, detectProgress, from, fmt.Sprintf("kill %d", i+1))
			took = append(took, back.Sub(at))
			f.recoveries = append(f.recoveries, recovery{fault: "detect SIGKILL", service: "detect", took: back.Sub(at)})
		}
	}
	slices.Sort(took)
	if len(took) > 0 {
		t.Logf("detect kill → processing again, %d measured: median %s, longest %s", len(took),
			took[len(took)/2].Round(time.Millisecond), took[len(took)-1].Round(time.Millisecond))
	}
}

// killIngest kills ingest tail twice, once right after a restart.
func (f *fixture) killIngest(t *testing.T) {
	for i := range 2 {
		from := f.ingest.counter(ingestProgress)
		if i == 0 {
			f.ingest.waitProgress(t, ingestProgress, progress{run: from.run, value: 0}, "its start")
			time.Sleep(time.Duration(f.rng.Int64N(int64(2 * time.Second))))
			from = f.ingest.counter(ingestProgress)
		}
		at := f.ingest.kill()
		back := f.ingest.waitProgress(t, ingestProgress, from, "the kill")
		f.recoveries = append(f.recoveries, recovery{fault: "ingest SIGKILL", service: "ingest", took: back.Sub(at)})
		t.Logf("ingest kill %d → committing lines again: %s", i+1, back.Sub(at).Round(time.Millisecond))
	}
}

// stopBroker stops the broker for brokerDown and starts it again.
func (f *fixture) stopBroker(t *testing.T) {
	f.outage(t, "broker stop", func() {
		t0 := time.Now()
		f.broker.Stop(t)
		t.Logf("broker stopped in %s", time.Since(t0).Round(time.Millisecond))
		time.Sleep(brokerDown)
		t0 = time.Now()
		f.broker.Start(t)
		t.Logf("broker answering again %s after its start", time.Since(t0).Round(time.Millisecond))
	})
}

// stopClickHouse stops ClickHouse for clickhouseDown and starts it again.
func (f *fixture) stopClickHouse(t *testing.T) {
	f.outage(t, "clickhouse stop", func() {
		f.chSrv.Stop(t)
		time.Sleep(clickhouseDown)
		f.chSrv.Start(t)
	})
}

// fillArchiveDisk fills the file system under the archive for diskFull,
// then frees it.
func (f *fixture) fillArchiveDisk(t *testing.T) {
	requireOrSkip(t, f.tmpfs)
	fill := filepath.Join(f.archive, "fill")
	f.outage(t, "disk full", func() {
		n, err := fillDisk(fill)
		if err != nil {
			t.Errorf("fill the archive's file system: %v", err)
		}
		t.Logf("archive's file system full (%d MiB written)", n>>20)
		time.Sleep(diskFull)
		if err := os.Remove(fill); err != nil {
			t.Errorf("free the archive's file system: %v", err)
		}
	})
}

// starveCPU runs busy loops beside the processes for starved, and kills
// detect once while they run.
func (f *fixture) starveCPU(t *testing.T) {
	f.outage(t, "cpu starved", func() {
		stop := busyLoops(t, busyLoopsN)
		defer stop()
		time.Sleep(starved / 2)
		from := f.detect.counter(detectProgress)
		at := f.detect.kill()
		back := f.detect.waitProgress(t, detectProgress, from, "the kill while starved")
		f.recoveries = append(f.recoveries, recovery{fault: "detect SIGKILL, CPU starved", service: "detect", took: back.Sub(at)})
		t.Logf("detect kill while starved → processing again: %s", back.Sub(at).Round(time.Millisecond))
		time.Sleep(starved / 2)
	})
}

// outage runs fault (which returns when the fault is over) and measures
// how long after it each process processes again.
func (f *fixture) outage(t *testing.T, name string, fault func()) {
	fault()
	end := time.Now()
	d := f.detect.counter(detectProgress)
	i := f.ingest.counter(ingestProgress)
	back := f.ingest.waitProgress(t, ingestProgress, i, name)
	f.recoveries = append(f.recoveries, recovery{fault: name, service: "ingest", took: back.Sub(end)})
	back = f.detect.waitProgress(t, detectProgress, d, name)
	f.recoveries = append(f.recoveries, recovery{fault: name, service: "detect", took: back.Sub(end)})
	t.Logf("%s over: ingest committing lines again after %s, detect reading again after %s", name,
		f.recoveries[len(f.recoveries)-2].took.Round(time.Millisecond), f.recoveries[len(f.recoveries)-1].took.Round(time.Millisecond))
}

// checkExits requires every exit the suite did not cause to be a failure
// exit with an error in the process's log (what an operator sees), and
// logs the new ones.
func (f *fixture) checkExits(t *testing.T) {
	t.Helper()
	for _, s := range []*service{f.ingest, f.detect} {
		exits := s.unexpectedExits()
		for _, e := range exits[f.reported[s.name]:] {
			t.Logf("%s exited by itself (start %d, code %d): %s", s.name, e.run, e.code, e.errLine)
			if e.code == 0 || e.errLine == "" {
				t.Errorf("%s start %d exited with code %d and no error in its log (%s); last line: %s",
					s.name, e.run, e.code, e.logPath, e.lastLine)
			}
		}
		f.reported[s.name] = len(exits)
	}
}

// report logs the run's figures: recoveries by fault and process, exits.
func (f *fixture) report(t *testing.T, s snapshot) {
	type key struct{ fault, service string }
	var order []key
	by := map[key][]time.Duration{}
	for _, r := range f.recoveries {
		k := key{r.fault, r.service}
		if by[k] == nil {
			order = append(order, k)
		}
		by[k] = append(by[k], r.took)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d lines written, %d planted keys; recovery (fault → processing again):", s.lines, len(s.plants))
	for _, k := range order {
		d := by[k]
		slices.Sort(d)
		fmt.Fprintf(&b, "\n  %-28s %-7s n=%-3d median %-9s longest %s", k.fault, k.service, len(d),
			d[len(d)/2].Round(time.Millisecond), d[len(d)-1].Round(time.Millisecond))
	}
	fmt.Fprintf(&b, "\n  starts: ingest %d, detect %d; exits by themselves: ingest %d, detect %d",
		f.ingest.runs, f.detect.runs, len(f.ingest.unexpectedExits()), len(f.detect.unexpectedExits()))
	t.Log(b.String())
}
