package main

// Tests of ingest as a process: what depends on a process dying (kill -9),
// on its exit code and on what it prints.

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/keyheat/keyheat/ingest"
	"github.com/keyheat/keyheat/internal/testenv"
	"github.com/keyheat/keyheat/schemas"
)

// startIngest runs the ingest binary (built once per test run, with
// -race when the tests run with it) with args; stdin, when not nil, is its
// standard input. Its stdout and stderr are one stream, p.Stderr, as a
// person reads them in a terminal.
func startIngest(t *testing.T, stdin *os.File, args ...string) *testenv.Process {
	t.Helper()
	opts := []testenv.ProcessOpt{testenv.CombinedOutput()}
	if stdin != nil {
		opts = append(opts, testenv.Stdin(stdin))
	}
	return testenv.Start(t, testenv.Binary(t, "."), args, opts...)
}

// topicsFor are the topics of one test on seeds.
type topicsFor struct {
	seeds                  []string
	events, dlq, positions string
}

func newTopics(t *testing.T, seeds []string) topicsFor {
	t.Helper()
	return topicsFor{seeds: seeds, events: testenv.NewTopic(t, seeds, 4), dlq: testenv.NewTopic(t, seeds, 1),
		positions: testenv.NewTopicWithConfigs(t, seeds, 1, ingest.PositionsTopicConfigs())}
}

// flags point ingest at tp and read JSON lines {"key":…,"bytes":N}.
func (tp topicsFor) flags() []string {
	return []string{"--kafka.brokers=" + strings.Join(tp.seeds, ","), "--kafka.topics.events=" + tp.events, "--kafka.topics.dlq=" + tp.dlq,
		"--ingest.positions_topic=" + tp.positions, "--kafka.create_topics=false", "--ingest.format=json", "--ingest.json.key=key",
		"--ingest.json.bytes=bytes", "--events.codec=binary", "--log.level=info"}
}

// lineNumbers reads the events topic as a read_committed consumer and
// returns how often each line number (the bytes field) is there; it
// fails on any dead letter.
func (tp topicsFor) lineNumbers(t *testing.T) map[int]int {
	t.Helper()
	got := map[int]int{}
	for _, r := range testenv.ReadCommitted(t, tp.seeds, tp.events) {
		var e schemas.AccessEvent
		require.NoError(t, schemas.DecodeAny(r.Value, &e))
		got[int(e.Bytes)]++
	}
	for _, r := range testenv.ReadCommitted(t, tp.seeds, tp.dlq) {
		var d schemas.DeadLetter
		require.NoError(t, schemas.DecodeDeadLetter(r.Value, &d))
		t.Errorf("dead letter %s %s: %q", d.Reason, d.Detail, d.Raw)
	}
	return got
}

// requireExactlyOnce checks that lines [0, n) are each on the events topic
// once, and no other.
func requireExactlyOnce(t *testing.T, got map[int]int, n int) {
	t.Helper()
	lost, dup := 0, 0
	for i := range n {
		switch c := got[i]; {
		case c == 0:
			lost++
		case c > 1:
			dup++
		}
	}
	require.Zero(t, lost+dup, "of %d lines, %d lost, %d more than once", n, lost, dup)
	require.Len(t, got, n, "lines that were never written")
}

func line(i int) string { return fmt.Sprintf(`{"key":"k%d","bytes":%d}`+"\n", i%16, i) }

// rotatingWriter appends numbered lines to a file as an application under
// logrotate's create mode does: every rotateEvery lines it renames the
// file (shifting older rotated names up by one), keeps appending to the
// renamed file for a random delay, then reopens. Some lines are written
// in two parts, so a reader sees half a line at the file's end.
type rotatingWriter struct {
	path        string
	rotateEvery int
	maxDelay    time.Duration
	linesPerMs  int
	// copyTruncate rotates as logrotate's copytruncate does instead:
	// copy, then truncate in place, with no write in between (lines
	// written in between are in neither file: logrotate's own race).
	copyTruncate bool

	mu        sync.Mutex
	next      int
	rotations int
	stopc     chan struct{}
	done      chan error
}

func startRotatingWriter(path string, rotateEvery int, maxDelay time.Duration, linesPerMs int, seed uint64) *rotatingWriter {
	w := &rotatingWriter{path: path, rotateEvery: rotateEvery, maxDelay: maxDelay, linesPerMs: linesPerMs,
		stopc: make(chan struct{}), done: make(chan error, 1)}
	go func() { w.done <- w.run(rand.New(rand.NewPCG(seed, seed))) }()
	return w
}

func (w *rotatingWriter) run(rng *rand.Rand) error {
	f, err := os.OpenFile(w.path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }()
	bw := bufio.NewWriter(f)
	write := func(n int) error {
		w.mu.Lock()
		defer w.mu.Unlock()
		for range n {
			_, _ = bw.WriteString(line(w.next))
			w.next++
		}
		return bw.Flush()
	}
	for {
		select {
		case <-w.stopc:
			return write(1) // the file at the path ends up holding data
		case <-time.After(time.Millisecond):
		}
		if err := write(w.linesPerMs - 1); err != nil {
			return err
		}
		// A torn line: half, a pause, the rest.
		w.mu.Lock()
		l := line(w.next)
		_, _ = bw.WriteString(l[:len(l)/2])
		err := bw.Flush()
		w.mu.Unlock()
		if err != nil {
			return err
		}
		time.Sleep(time.Duration(rng.IntN(200)) * time.Microsecond)
		w.mu.Lock()
		_, _ = bw.WriteString(l[len(l)/2:])
		w.next++
		err = bw.Flush()
		rotate := w.next/w.rotateEvery > w.rotations
		w.mu.Unlock()
		if err != nil {
			return err
		}
		if !rotate {
			continue
		}
		if w.copyTruncate {
			w.mu.Lock()
			w.rotations++
			err := copyTruncate(w.path)
			w.mu.Unlock()
			if err != nil {
				return err
			}
			continue
		}
		w.mu.Lock()
		w.rotations++
		w.mu.Unlock()
		if err := shiftRotated(w.path); err != nil {
			return err
		}
		until := time.Now().Add(time.Duration(rng.Int64N(int64(w.maxDelay) + 1)))
		for time.Now().Before(until) {
			if err := write(w.linesPerMs); err != nil {
				return err
			}
			time.Sleep(time.Millisecond)
		}
		if err := f.Close(); err != nil {
			return err
		}
		if f, err = os.OpenFile(w.path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644); err != nil {
			return err
		}
		bw.Reset(f)
	}
}

// stop stops the writer and returns how many lines it wrote.
func (w *rotatingWriter) stop(t *testing.T) int {
	t.Helper()
	close(w.stopc)
	require.NoError(t, <-w.done)
	return w.next
}

func (w *rotatingWriter) counts() (lines, rotations int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.next, w.rotations
}

// shiftRotated renames path.N to path.N+1 for every N, then path to
// path.1.
func shiftRotated(path string) error {
	n := 1
	for {
		if _, err := os.Stat(fmt.Sprintf("%s.%d", path, n)); err != nil {
			break
		}
		n++
	}
	for ; n > 1; n-- {
		if err := os.Rename(fmt.Sprintf("%s.%d", path, n-1), fmt.Sprintf("%s.%d", path, n)); err != nil {
			return err
		}
	}
	return os.Rename(path, path+".1")
}

// copyTruncate shifts the rotated names of path up by one, copies path to
// path.1 and truncates path, as logrotate's copytruncate does.
func copyTruncate(path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := shiftRotated(path); err != nil {
		return err
	}
	// shiftRotated moved path itself to path.1: put the file back, so
	// the writer's open file stays the one at the path, and copy it.
	if err := os.Rename(path+".1", path); err != nil {
		return err
	}
	if err := os.WriteFile(path+".1", b, 0o644); err != nil {
		return err
	}
	return os.Truncate(path, 0)
}

// TestTailKillCopyTruncate is TestTailKillRotate with copytruncate
// rotations: the file at the path keeps its inode and is truncated in
// place, and the copies pile up under the rotated names. Restarts find
// the copies again and must not take any for a file never read.
func TestTailKillCopyTruncate(t *testing.T) {
	run := func(t *testing.T, seeds []string) {
		tp := newTopics(t, seeds)
		path := filepath.Join(t.TempDir(), "access.log")
		args := append([]string{"tail", path, "--from-start", "--ingest.tail_id=" + testenv.UniqueName(t, "kc"),
			"--ingest.commit_interval=50ms", "--ingest.poll_interval=5ms", "--ingest.rotated_idle=400ms"}, tp.flags()...)
		rng := rand.New(rand.NewPCG(43, 43))
		w := &rotatingWriter{path: path, rotateEvery: 2500, linesPerMs: 10, copyTruncate: true,
			stopc: make(chan struct{}), done: make(chan error, 1)}
		go func() { w.done <- w.run(rand.New(rand.NewPCG(8, 8))) }()
		kills := killAcross(t, w, args, rng, 12, 2, 1)
		n, rotations := deliverAll(t, w, tp, args)
		t.Logf("%d lines, %d copytruncate rotations, %d kills", n, rotations, kills)
	}
	t.Run("kfake", func(t *testing.T) { run(t, testenv.KFake(t)) })
	t.Run("real_kafka", func(t *testing.T) { run(t, testenv.KafkaSeeds(t)) })
}

// TestTailKillRotate is the tail's promise under the worst a user does to
// it: a writer that rotates its file more than twenty times and keeps
// appending to the renamed file for up to 300ms each time, tearing lines
// across writes, while ingest is killed with SIGKILL at random moments,
// sometimes staying down across rotations, at least five times. Every
// line reaches the events topic exactly once, as a read_committed reader
// sees it, nothing goes to the DLQ, and the last run stops with exit 0.
func TestTailKillRotate(t *testing.T) {
	run := func(t *testing.T, seeds []string) {
		tp := newTopics(t, seeds)
		path := filepath.Join(t.TempDir(), "access.log")
		args := append([]string{"tail", path, "--from-start", "--ingest.tail_id=" + testenv.UniqueName(t, "kr"),
			"--ingest.commit_interval=50ms", "--ingest.poll_interval=5ms", "--ingest.rotated_idle=400ms"}, tp.flags()...)
		rng := rand.New(rand.NewPCG(42, 42))
		w := startRotatingWriter(path, 2500, 300*time.Millisecond, 10, 7)
		kills := killAcross(t, w, args, rng, 22, 3, 2)
		n, rotations := deliverAll(t, w, tp, args)
		t.Logf("%d lines, %d rotations, %d kills", n, rotations, kills)
	}
	t.Run("kfake", func(t *testing.T) { run(t, testenv.KFake(t)) })
	t.Run("real_kafka", func(t *testing.T) { run(t, testenv.KafkaSeeds(t)) })
}

// killAcross starts ingest with args and kills it with SIGKILL after a
// random 0.3 to 1.2 s, again and again, until w rotated its file at least
// rotations times and ingest was killed at least five times; after every
// downEvery-th kill it stays down until w rotated downRotations more
// times (or 30 s passed). It returns the kills.
func killAcross(t *testing.T, w *rotatingWriter, args []string, rng *rand.Rand, rotations, downEvery, downRotations int) int {
	kills := 0
	for {
		if _, r := w.counts(); r >= rotations && kills >= 5 {
			return kills
		}
		p := startIngest(t, nil, args...)
		time.Sleep(time.Duration(300+rng.IntN(900)) * time.Millisecond)
		p.Kill()
		kills++
		if kills%downEvery == 0 {
			_, r0 := w.counts()
			deadline := time.Now().Add(30 * time.Second)
			for _, r := w.counts(); r < r0+downRotations && time.Now().Before(deadline); _, r = w.counts() {
				time.Sleep(10 * time.Millisecond)
			}
		}
	}
}

// deliverAll stops w, starts ingest once more with args, waits until the
// topic holds as many lines as w wrote, and stops it: it exits 0, saying
// every line was delivered, and each line came exactly once. It returns
// the lines and w's rotations.
func deliverAll(t *testing.T, w *rotatingWriter, tp topicsFor, args []string) (lines, rotations int) {
	n := w.stop(t)
	_, rotations = w.counts()
	p := startIngest(t, nil, args...)
	testenv.Eventually(t, "every line written on the events topic", func() bool { return len(tp.lineNumbers(t)) >= n })
	require.Equal(t, 0, p.Stop(), "a stop with every line delivered exits 0")
	require.Contains(t, p.Stderr.String(), "every line read was delivered")
	requireExactlyOnce(t, tp.lineNumbers(t), n)
	return n, rotations
}

// TestOutages runs ingest against a broker of the test's own that goes
// away and comes back: each way a source meets an outage, with what it
// prints and how it exits.
func TestOutages(t *testing.T) {
	run := func(t *testing.T, b *testenv.Broker) {
		t.Run("stdin stopped while kafka is away spills", func(t *testing.T) { testStdinOutage(t, b) })
		t.Run("tail stopped while kafka is away exits non-zero", func(t *testing.T) { testTailOutage(t, b) })
		t.Run("a start with kafka away waits for it", func(t *testing.T) { testStartWhileDown(t, b) })
	}
	t.Run("kfake", func(t *testing.T) { run(t, testenv.RestartableKFake(t)) })
	t.Run("real_kafka", func(t *testing.T) { run(t, testenv.PrivateKafka(t)) })
}

// testStdinOutage: 4,000 lines through a pipe, the broker stopped after
// the first 1,000 were delivered. At the end of input ingest waits; told
// to stop (SIGTERM) it writes the 3,000 lines Kafka did not take to the
// spill file it names, says so in its summary and exits 1. Sent again
// once the broker is back, the spill file completes the topic: every line
// once.
func testStdinOutage(t *testing.T, b *testenv.Broker) {
	b.Start(t)
	tp := newTopics(t, b.Seeds())
	spill := filepath.Join(t.TempDir(), "stdin.spill")
	r, w, err := os.Pipe()
	require.NoError(t, err)
	defer r.Close()
	p := startIngest(t, r, append([]string{"stdin", "--ingest.spill_file=" + spill, "--ingest.stop_timeout=500ms", "--ingest.linger=0s"},
		tp.flags()...)...)
	var first strings.Builder
	for i := range 1000 {
		first.WriteString(line(i))
	}
	_, err = w.WriteString(first.String())
	require.NoError(t, err)
	waitLines(t, tp, 1000)
	b.Stop(t)
	var rest strings.Builder
	for i := 1000; i < 4000; i++ {
		rest.WriteString(line(i))
	}
	_, err = w.WriteString(rest.String())
	require.NoError(t, err)
	require.NoError(t, w.Close())
	p.WaitStderr(regexp.QuoteMeta("input read; waiting for kafka to take the last"))
	p.WaitStderr(regexp.QuoteMeta("kafka unreachable, waiting for it"))
	require.Equal(t, 1, p.Stop(), "lines not delivered: exit 1")
	out := p.Stderr.String()
	require.Contains(t, out, fmt.Sprintf("wrote the 3000 lines kafka did not take to %s; send them later with the same format and settings: ingest stdin [flags] < %s", spill, spill))
	require.Contains(t, out, "undelivered=3000")
	require.Contains(t, out, "ingest: 3000 lines read were not delivered to Kafka")
	require.NotContains(t, out, "failed=0 ", "the summary never says 0 failed while lines were not delivered")
	got, err := os.ReadFile(spill)
	require.NoError(t, err)
	require.Equal(t, rest.String(), string(got))

	b.Start(t)
	f, err := os.Open(spill)
	require.NoError(t, err)
	defer f.Close()
	p = startIngest(t, f, append([]string{"stdin"}, tp.flags()...)...)
	require.Equal(t, 0, p.WaitExit())
	require.Contains(t, p.Stderr.String(), "every line read was delivered")
	requireExactlyOnce(t, tp.lineNumbers(t), 4000)
}

// waitLines waits until n lines are on the events topic.
func waitLines(t *testing.T, tp topicsFor, n int) {
	t.Helper()
	testenv.Eventually(t, fmt.Sprintf("%d lines on the topic", n), func() bool { return len(tp.lineNumbers(t)) >= n })
}

// testTailOutage: a tail told to stop while the broker is away exits 1,
// counting the lines read and not delivered and saying where the next
// start resumes; the next start, with the broker back, delivers them.
func testTailOutage(t *testing.T, b *testenv.Broker) {
	b.Start(t)
	tp := newTopics(t, b.Seeds())
	path := filepath.Join(t.TempDir(), "access.log")
	var content strings.Builder
	for i := range 500 {
		content.WriteString(line(i))
	}
	require.NoError(t, os.WriteFile(path, []byte(content.String()), 0o644))
	args := append([]string{"tail", path, "--from-start", "--ingest.tail_id=" + testenv.UniqueName(t, "out"),
		"--ingest.commit_interval=50ms", "--ingest.poll_interval=5ms", "--ingest.stop_timeout=500ms"}, tp.flags()...)
	p := startIngest(t, nil, args...)
	waitLines(t, tp, 500)
	b.Stop(t)
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0o644)
	require.NoError(t, err)
	for i := 500; i < 1500; i++ {
		_, _ = f.WriteString(line(i))
	}
	require.NoError(t, f.Close())
	p.WaitStderr(regexp.QuoteMeta("kafka unreachable, waiting for it"))
	require.Equal(t, 1, p.Stop())
	// Reading pauses while a commit waits for Kafka, so how many of the
	// 1,000 new lines were read by the stop varies; all of them resume.
	out := p.Stderr.String()
	m := regexp.MustCompile(`ingest: (\d+) lines read were not delivered to Kafka; the next start resumes at (\S+) byte (\d+)`).FindStringSubmatch(out)
	require.NotNil(t, m, "the error says how many lines and where the next start resumes")
	require.Equal(t, []string{path, strconv.Itoa(len(content.String()))}, m[2:])
	n, err := strconv.Atoi(m[1])
	require.NoError(t, err)
	require.True(t, n > 0 && n <= 1000, "%d lines undelivered", n)
	require.Contains(t, out, fmt.Sprintf("undelivered=%d", n))

	b.Start(t)
	p = startIngest(t, nil, args...)
	p.WaitStderr(regexp.QuoteMeta(fmt.Sprintf("reading it from byte %d, its saved position", len(content.String()))))
	waitLines(t, tp, 1500)
	require.Equal(t, 0, p.Stop())
	requireExactlyOnce(t, tp.lineNumbers(t), 1500)
}

// testStartWhileDown: started while the broker is away, ingest says so
// once and waits, with /readyz answering 503, until the broker is back;
// with kafka.connect_timeout it gives up after that long instead.
func testStartWhileDown(t *testing.T, b *testenv.Broker) {
	b.Start(t)
	tp := newTopics(t, b.Seeds())
	b.Stop(t)
	p := startIngest(t, nil, append([]string{"gen", "--count=1000", "--kafka.connect_timeout=1s"}, tp.flags()...)...)
	require.Equal(t, 1, p.WaitExit())
	require.Contains(t, p.Stderr.String(), "within kafka.connect_timeout 1s (is the address right")

	addr := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	p = startIngest(t, nil, append([]string{"gen", "--count=1000", "--metrics.addr=" + addr}, tp.flags()...)...)
	p.WaitStderr(regexp.QuoteMeta("kafka unreachable, waiting for it"))
	require.Equal(t, 503, readyStatus(t, addr))
	b.Start(t)
	require.Equal(t, 0, p.WaitExit())
	require.Contains(t, p.Stderr.String(), "kafka reachable again after")
	require.Contains(t, p.Stderr.String(), "total events=1000")
	require.Equal(t, 1, strings.Count(p.Stderr.String(), "kafka unreachable, waiting for it"), "said once")
}

// readyStatus returns the status of GET /readyz at addr.
func readyStatus(t *testing.T, addr string) int {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/readyz")
	require.NoError(t, err)
	defer resp.Body.Close()
	return resp.StatusCode
}
