package ingest

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/keyheat/keyheat/internal/testenv"
	"github.com/keyheat/keyheat/logparse"
	"github.com/keyheat/keyheat/schemas"
)

// lineWriter appends numbered JSON lines to a file, the way an
// application's logger would: line i is {"key":"k<i%16>","bytes":i}.
type lineWriter struct {
	t    testing.TB
	path string
	f    *os.File
	w    *bufio.Writer
	next int
}

func newLineWriter(t testing.TB, path string) *lineWriter {
	lw := &lineWriter{t: t, path: path}
	lw.open()
	t.Cleanup(func() { _ = lw.f.Close() })
	return lw
}

func (lw *lineWriter) open() {
	f, err := os.OpenFile(lw.path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	require.NoError(lw.t, err)
	lw.f, lw.w = f, bufio.NewWriterSize(f, 64<<10)
}

func line(i int) string { return fmt.Sprintf(`{"key":"k%d","bytes":%d}`+"\n", i%16, i) }

func (lw *lineWriter) write(upTo int) {
	for ; lw.next < upTo; lw.next++ {
		_, _ = lw.w.WriteString(line(lw.next))
	}
	require.NoError(lw.t, lw.w.Flush())
}

// rotate shifts the rotated names up by one (name.1 to name.2, …) and
// renames the file to name.1, as logrotate's default create mode does;
// the writer keeps writing to the renamed file until reopen.
func (lw *lineWriter) rotate() {
	require.NoError(lw.t, lw.w.Flush())
	shiftRotated(lw.t, lw.path)
}

func (lw *lineWriter) reopen() {
	require.NoError(lw.t, lw.w.Flush())
	require.NoError(lw.t, lw.f.Close())
	lw.open()
}

// shiftRotated renames path.N to path.N+1 for every N, then path to
// path.1.
func shiftRotated(t testing.TB, path string) {
	n := 1
	for {
		if _, err := os.Stat(fmt.Sprintf("%s.%d", path, n)); err != nil {
			break
		}
		n++
	}
	for ; n > 1; n-- {
		require.NoError(t, os.Rename(fmt.Sprintf("%s.%d", path, n-1), fmt.Sprintf("%s.%d", path, n)))
	}
	require.NoError(t, os.Rename(path, path+".1"))
}

type tailRun struct {
	tl     *Tailer
	prod   *Producer
	pl     *LineSender
	cancel context.CancelFunc
	done   chan struct{} // closed once Run returned err
	err    error
	logs   *testenv.SyncBuffer
}

// fastTail are tail options for tests: a tail id of the test's own, and
// short intervals.
func fastTail(t testing.TB, k *kafkaEnv) TailOptions {
	return TailOptions{TailID: testenv.UniqueName(t, "tail"), PositionsTopic: k.positions,
		PollInterval: 2 * time.Millisecond, CommitInterval: 20 * time.Millisecond, RotatedIdle: 100 * time.Millisecond}
}

// startTail runs a Tailer with opts on paths; mods adjust its config.
func startTail(t *testing.T, k *kafkaEnv, opts TailOptions, paths []string, mods ...func(*TailConfig)) *tailRun {
	t.Helper()
	prod := k.tailProducer(t, opts, schemas.Binary)
	parser, err := logparse.NewJSON(logparse.JSONConfig{Key: "key", Bytes: "bytes"}, "test")
	require.NoError(t, err)
	logs := &testenv.SyncBuffer{}
	cfg := TailConfig{TailOptions: opts, Paths: paths, FromStart: true, StopTimeout: 10 * time.Second,
		Logger: slog.New(slog.NewTextHandler(logs, nil))}
	for _, m := range mods {
		m(&cfg)
	}
	pl := lineSender(t, prod, parser, LineOptions{})
	tl, err := NewTailer(cfg, pl)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	r := &tailRun{tl: tl, prod: prod, pl: pl, cancel: cancel, done: make(chan struct{}), logs: logs}
	runs.Store(tl, r)
	go func() {
		defer close(r.done)
		r.err = tl.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		prod.Close()
		<-r.done
		if t.Failed() {
			t.Logf("the tailer's log:\n%s", logs.String())
		}
	})
	return r
}

// crash stops r the way a killed process stops: its client goes away
// with the transaction open, nothing more is committed.
func (r *tailRun) crash() {
	r.prod.Close()
	r.cancel()
	<-r.done
}

// stop stops r cleanly and returns what Run returned.
func (r *tailRun) stop() error {
	r.cancel()
	<-r.done
	return r.err
}

// runs are the runs startTail started, by tailer: waitCaughtUp stops
// waiting when one returned.
var runs sync.Map

// waitCaughtUp waits until tl delivered everything written to path. It
// gives up only after testenv.HangGuard, with what the tailer has, the
// end of its log (what it says it waits for) and every goroutine.
func waitCaughtUp(t testing.TB, tl *Tailer, path string) {
	t.Helper()
	deadline := time.Now().Add(testenv.HangGuard)
	r, _ := runs.Load(tl)
	run, _ := r.(*tailRun)
	for !caughtUp(tl, path) {
		if run != nil {
			select {
			case <-run.done:
				t.Fatalf("the tailer returned before every line of %s was committed: %v", path, run.err)
			default:
			}
		}
		if time.Now().After(deadline) {
			var stacks strings.Builder
			_ = pprof.Lookup("goroutine").WriteTo(&stacks, 1)
			var logs string
			if run != nil {
				logs = lastLines(run.logs.String(), 20)
			}
			t.Fatalf("gave up after %s (hang guard) waiting for every line of %s committed; the tailer has:\n%s\nthe end of its log:\n%s\ngoroutines:\n%s",
				testenv.HangGuard, path, describe(tl), logs, stacks.String())
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// lastLines returns the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// describe says what tl has open for each path, for a failure message.
func describe(tl *Tailer) string {
	tl.gate.Lock()
	defer tl.gate.Unlock()
	var b strings.Builder
	for _, w := range tl.watches {
		fmt.Fprintf(&b, "%s:", w.path)
		for _, tf := range w.files {
			size := int64(-1)
			if tf.f != nil {
				if fi, err := tf.f.Stat(); err == nil {
					size = fi.Size()
				}
			}
			fmt.Fprintf(&b, " [%s key=%v live=%v rotated=%v done=%v read=%d sent=%d committed=%d size=%d idle=%s]", tf.name, tf.key, tf == w.live,
				tf.rotated, tf.done, tf.readPos, tf.sent(), tf.committed.Offset, size, time.Since(tf.lastGrowth).Round(time.Millisecond))
		}
		b.WriteString("\n")
	}
	return b.String()
}

// caughtUp reports whether the tailer follows the file now at path and
// has committed every file of it it has open up to its end: every line
// written is delivered.
func caughtUp(tl *Tailer, path string) bool {
	fi, err := os.Stat(path)
	if err != nil {
		return false
	}
	abs, _ := filepath.Abs(path)
	// The write lock, as the committer takes it: the watches change
	// their files while holding the read lock.
	tl.gate.Lock()
	defer tl.gate.Unlock()
	for _, w := range tl.watches {
		if w.path != abs {
			continue
		}
		if w.live == nil || !sameFile(fi, w.live.f) {
			return false
		}
		for _, tf := range w.files {
			if tf.tombstone {
				return false
			}
			cur, err := tf.f.Stat()
			if err != nil || tf.committed.Path == "" || tf.committed.Offset != cur.Size() || tf.readPos != cur.Size() {
				return false
			}
			// The same size is not the same content: a truncated file may
			// have grown back to exactly the size read.
			if rw, err := tf.rewritten(); rw || err != nil {
				return false
			}
		}
		return true
	}
	return false
}

// requireEachLineOnce reads the events topic as a read_committed consumer
// would and checks that lines [0, n) are each there exactly once, with a
// tail id for path, in order per key, and that the DLQ is empty.
func requireEachLineOnce(t *testing.T, k *kafkaEnv, path string, n int) {
	t.Helper()
	abs, _ := filepath.Abs(path)
	seen := make([]int, n)
	lastPerKey := map[string]int{}
	for _, r := range readAll(t, k.seeds, k.events) {
		seq := seqOf(t, r)
		require.Less(t, seq, n, "a line that was never written")
		rid, err := schemas.ParseRecordID(header(r, schemas.HeaderRecordID))
		require.NoError(t, err)
		require.Equal(t, schemas.IDTail, rid.Kind)
		require.Equal(t, abs, rid.Path)
		seen[seq]++
		if last, ok := lastPerKey[string(r.Key)]; ok && seq <= last {
			t.Errorf("key %s out of order: line %d (%s, partition %d offset %d) after line %d", r.Key, seq,
				header(r, schemas.HeaderRecordID), r.Partition, r.Offset, last)
		}
		lastPerKey[string(r.Key)] = seq
	}
	lost, dup := 0, 0
	for i, c := range seen {
		switch {
		case c == 0:
			lost++
			if lost <= 5 {
				t.Errorf("line %d lost", i)
			}
		case c > 1:
			dup++
			if dup <= 5 {
				t.Errorf("line %d delivered %d times", i, c)
			}
		}
	}
	require.Zero(t, lost+dup, "%d lines lost, %d delivered more than once, of %d", lost, dup, n)
	for _, r := range readAll(t, k.seeds, k.dlq) {
		var d schemas.DeadLetter
		require.NoError(t, schemas.DecodeDeadLetter(r.Value, &d))
		t.Errorf("dead letter: %s %s %q", d.Reason, d.Detail, d.Raw)
	}
}

// TestTailExactlyOnce follows a file while lines are appended, the file
// is rotated, ingest crashes with a transaction open, the file is rotated
// twice more while ingest is down, and truncated after the restart: every
// line is delivered exactly once, in order per key, and a clean restart
// sends nothing again.
//
// Truncation loses what was written and not yet read, by nature (when no
// rotated copy holds it), so the writer waits until the tailer committed
// the whole file before it truncates, and until the tailer saw the
// truncation before it writes on.
func TestTailExactlyOnce(t *testing.T) {
	testenv.EachBroker(t, func(t *testing.T, seeds []string) {
		k := newKafkaEnv(t, seeds, 4)
		dir := t.TempDir()
		path := filepath.Join(dir, "access.log")
		lw := newLineWriter(t, path)
		opts := fastTail(t, k)

		const total = 60_000
		run := startTail(t, k, opts, []string{path})
		waitCaughtUp(t, run.tl, path)
		lw.write(20_000)
		lw.rotate()
		lw.reopen()
		lw.write(30_000)
		testenv.Eventually(t, "lines of the new file read", func() bool { return run.tl.pl.stats.Lines.Load() > 20_000 })
		run.crash()

		// While ingest is down the file rotates twice: the file between
		// the one it followed and the new one is found by the rotated
		// pattern and read in order.
		lw.write(35_000)
		lw.rotate()
		lw.reopen()
		lw.write(40_000)
		lw.rotate()
		lw.reopen()
		lw.write(45_000)

		run = startTail(t, k, opts, []string{path})
		waitCaughtUp(t, run.tl, path)
		truncs := run.tl.pl.stats.Truncates.Load()
		require.NoError(t, os.Truncate(path, 0))
		testenv.Eventually(t, "the truncation seen", func() bool { return run.tl.pl.stats.Truncates.Load() > truncs })
		lw.write(total)
		waitCaughtUp(t, run.tl, path)
		require.NoError(t, run.stop())
		requireEachLineOnce(t, k, path, total)

		// A clean restart sends only what is new.
		run = startTail(t, k, opts, []string{path})
		lw.write(total + 1000)
		waitCaughtUp(t, run.tl, path)
		require.NoError(t, run.stop())
		requireEachLineOnce(t, k, path, total+1000)
	})
}

// delayedWriter writes lines as fast as it can and rotates the file every
// rotateEvery lines the way nginx under logrotate does: rename, then keep
// appending to the renamed file for a random delay before reopening. Some
// lines are written in two parts with a pause between them, so a reader
// sees half a line at the end of the file. Stop it with stop; it returns
// the number of lines written.
type delayedWriter struct {
	lw          *lineWriter
	rotateEvery int
	maxDelay    time.Duration
	rng         *rand.Rand
	rotations   int
	// rotateTimes: the writer stops by itself after that many rotations
	// and a last burst (0: only when stopped).
	rotateTimes int

	stopc chan struct{}
	done  chan int
	// gate, when not nil, holds the writer after its first burst until
	// closed.
	gate chan struct{}
}

func startDelayedWriter(t testing.TB, path string, rotateEvery, rotateTimes int, maxDelay time.Duration, seed uint64) *delayedWriter {
	dw := &delayedWriter{lw: newLineWriter(t, path), rotateEvery: rotateEvery, rotateTimes: rotateTimes, maxDelay: maxDelay,
		rng: rand.New(rand.NewPCG(seed, seed)), stopc: make(chan struct{}), done: make(chan int, 1)}
	if rotateTimes > 0 {
		dw.gate = make(chan struct{})
	}
	go dw.run()
	return dw
}

// start lets a gated writer go on past its first burst.
func (dw *delayedWriter) start() { close(dw.gate) }

func (dw *delayedWriter) run() {
	lw := dw.lw
	defer func() { dw.done <- lw.next }()
	for {
		select {
		case <-dw.stopc:
			lw.write(lw.next)
			return
		default:
		}
		if dw.rotateTimes > 0 && dw.rotations >= dw.rotateTimes {
			lw.write(lw.next + 50)
			return
		}
		if dw.gate != nil && lw.next > 0 {
			select {
			case <-dw.gate:
				dw.gate = nil
			case <-dw.stopc:
				continue
			}
		}
		// A burst of lines, the last written in two parts; some 50,000
		// lines a second, so a slow run (race detector, busy machine)
		// still catches up.
		time.Sleep(time.Millisecond)
		lw.write(lw.next + 50)
		half := line(lw.next)
		_, _ = lw.w.WriteString(half[:len(half)/2])
		_ = lw.w.Flush()
		time.Sleep(time.Duration(dw.rng.IntN(300)) * time.Microsecond)
		_, _ = lw.w.WriteString(half[len(half)/2:])
		lw.next++
		_ = lw.w.Flush()
		if lw.next/dw.rotateEvery > dw.rotations {
			dw.rotations++
			lw.rotate()
			// Keep appending to the renamed file until the "reopen".
			until := time.Now().Add(time.Duration(dw.rng.Int64N(int64(dw.maxDelay) + 1)))
			for time.Now().Before(until) {
				lw.write(lw.next + 5)
				time.Sleep(time.Millisecond)
			}
			lw.reopen()
		}
	}
}

func (dw *delayedWriter) stop() int {
	close(dw.stopc)
	return <-dw.done
}

// wait waits for a writer with rotateTimes to finish, and returns the
// lines it wrote.
func (dw *delayedWriter) wait() int { return <-dw.done }

// TestTailRotationDelayedReopen: a writer that keeps appending to the
// renamed file for up to 200ms after each of many rotations, tearing
// lines across writes, loses nothing and tears nothing: every line
// exactly once, no dead letter.
func TestTailRotationDelayedReopen(t *testing.T) {
	testenv.EachBroker(t, func(t *testing.T, seeds []string) {
		k := newKafkaEnv(t, seeds, 4)
		path := filepath.Join(t.TempDir(), "access.log")
		opts := fastTail(t, k)
		// Ten rotations by the writer, however many of them the tailer
		// sees as one: on a starved machine several can pass between two
		// of its looks at the path.
		// The writer goes on once the tailer read its first lines: a
		// tailer that starts after rotations cannot know the files
		// rotated away before it.
		dw := startDelayedWriter(t, path, 3000, 10, 200*time.Millisecond, 1)
		run := startTail(t, k, opts, []string{path})
		testenv.Eventually(t, "the first lines read", func() bool { return run.tl.pl.stats.Lines.Load() > 0 })
		dw.start()
		n := dw.wait()
		waitCaughtUp(t, run.tl, path)
		require.NoError(t, run.stop())
		require.Positive(t, run.tl.pl.stats.Rotations.Load(), "the tailer noticed the rotations")
		t.Logf("%d lines written, %d rotations; the tailer counted %d lines, %d events", n, dw.rotations,
			run.tl.pl.stats.Lines.Load(), run.tl.pl.stats.Events.Load())
		requireEachLineOnce(t, k, path, n)
	})
}

// TestTailRotatedWhileDown: rotations while ingest is down are drained in
// order before the live file, by identity, and a rotated file that was
// deleted before ingest read it is reported with the bytes never read.
func TestTailRotatedWhileDown(t *testing.T) {
	testenv.EachBroker(t, func(t *testing.T, seeds []string) {
		k := newKafkaEnv(t, seeds, 2)
		path := filepath.Join(t.TempDir(), "access.log")
		lw := newLineWriter(t, path)
		opts := fastTail(t, k)
		run := startTail(t, k, opts, []string{path})
		lw.write(1000)
		waitCaughtUp(t, run.tl, path)
		require.NoError(t, run.stop())

		// Three rotations while down: access.log.3 is the file ingest
		// followed, .2 and .1 are new to it.
		for i := 1; i <= 3; i++ {
			lw.write(1000 + i*1000)
			lw.rotate()
			lw.reopen()
		}
		lw.write(5000)
		run = startTail(t, k, opts, []string{path})
		waitCaughtUp(t, run.tl, path)
		require.Contains(t, run.logs.String(), "first draining access.log.3 from byte")
		require.Contains(t, run.logs.String(), "first draining access.log.2 from its start: rotated while ingest was down")
		require.NoError(t, run.stop())
		requireEachLineOnce(t, k, path, 5000)

		// Down again: the file ingest was reading is rotated away and
		// deleted before ingest comes back; that is said, with how much
		// of it ingest knows was never read (here: an unfinished line).
		lw.write(5500)
		_, _ = lw.w.WriteString(`{"key":"unfinished`)
		require.NoError(t, lw.w.Flush())
		run = startTail(t, k, opts, []string{path})
		testenv.Eventually(t, "5500 lines committed", func() bool { return run.tl.pl.stats.Lines.Load() == 500 })
		require.NoError(t, run.stop())
		lw.rotate()
		lw.reopen()
		require.NoError(t, os.Remove(path+".1"))
		lw.next = 6000
		lw.write(6100)
		run = startTail(t, k, opts, []string{path})
		waitCaughtUp(t, run.tl, path)
		require.NoError(t, run.stop())
		require.Contains(t, run.logs.String(), fmt.Sprintf("access.log is gone; at least %d bytes of it", len(`{"key":"unfinished`)))
		require.EqualValues(t, len(`{"key":"unfinished`), run.tl.pl.stats.UnreadBytes.Load())
		require.EqualValues(t, 100, run.tl.pl.stats.Lines.Load())

		// Read to its end, then written to while ingest is down, rotated
		// and deleted: how much was lost is unknown, and said so (not "at
		// least 0 bytes").
		size, err := os.Stat(path)
		require.NoError(t, err)
		lw.write(6300)
		lw.rotate()
		lw.reopen()
		require.NoError(t, os.Remove(path+".1"))
		lw.next = 6400
		lw.write(6500)
		run = startTail(t, k, opts, []string{path})
		waitCaughtUp(t, run.tl, path)
		require.NoError(t, run.stop())
		require.NotContains(t, run.logs.String(), "at least 0 bytes")
		require.EqualValues(t, 1, run.tl.pl.stats.GoneFiles.Load())
		require.Contains(t, run.logs.String(), fmt.Sprintf("access.log is gone; it was read to byte %d, and whatever was written to it after that was never read", size.Size()))
	})
}

// TestTailCopyTruncate: logrotate's copytruncate copies the file, then
// truncates it. Lines written after ingest's last read and before the
// truncation are read from the copy, found by its content among the
// rotated names; nothing is lost or repeated.
func TestTailCopyTruncate(t *testing.T) {
	testenv.EachBroker(t, func(t *testing.T, seeds []string) {
		k := newKafkaEnv(t, seeds, 2)
		path := filepath.Join(t.TempDir(), "access.log")
		lw := newLineWriter(t, path)
		opts := fastTail(t, k)
		opts.PollInterval = time.Hour // the test says when the tailer looks
		lw.write(2000)
		run := startTail(t, k, opts, []string{path})
		waitCaughtUp(t, run.tl, path)
		require.NoError(t, run.stop())

		// Lines written, copied, truncated while the tailer does not look.
		lw.write(3000)
		copyTruncate(t, path)
		lw.write(3500)
		run = startTail(t, k, opts, []string{path})
		waitCaughtUp(t, run.tl, path)
		require.NoError(t, run.stop())
		requireEachLineOnce(t, k, path, 3500)
	})
}

// TestTailCopyTruncateRestarts: copytruncate rotations seen only at a
// start, and starts that find the copies again. The file at the path
// keeps its device and inode across truncations, so each of its contents
// needs a position of its own: a start must not give the truncated file
// the identity whose saved position its copy still answers to, or the
// next start takes the copy for a file it never read.
func TestTailCopyTruncateRestarts(t *testing.T) {
	testenv.EachBroker(t, func(t *testing.T, seeds []string) {
		k := newKafkaEnv(t, seeds, 2)
		path := filepath.Join(t.TempDir(), "access.log")
		lw := newLineWriter(t, path)
		opts := fastTail(t, k)
		lw.write(1000)
		run := startTail(t, k, opts, []string{path})
		waitCaughtUp(t, run.tl, path)
		require.NoError(t, run.stop())
		for round := 1; round <= 3; round++ {
			// Written, copied and truncated while ingest is down.
			lw.write(round*1000 + 500)
			copyTruncate(t, path)
			lw.write((round + 1) * 1000)
			run = startTail(t, k, opts, []string{path})
			waitCaughtUp(t, run.tl, path)
			require.NoError(t, run.stop())
			// A start with nothing new sends nothing.
			run = startTail(t, k, opts, []string{path})
			waitCaughtUp(t, run.tl, path)
			require.NoError(t, run.stop())
			require.Zero(t, run.tl.pl.stats.Lines.Load(), "round %d: a start with nothing new read lines again:\n%s", round, run.logs.String())
		}
		requireEachLineOnce(t, k, path, 4000)
	})
}

// copyTruncate rotates path the way logrotate's copytruncate does: the
// rotated names shift up by one, path is copied to path.1 and truncated.
func copyTruncate(t *testing.T, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	n := 1
	for {
		if _, err := os.Stat(fmt.Sprintf("%s.%d", path, n)); err != nil {
			break
		}
		n++
	}
	for ; n > 1; n-- {
		require.NoError(t, os.Rename(fmt.Sprintf("%s.%d", path, n-1), fmt.Sprintf("%s.%d", path, n)))
	}
	require.NoError(t, os.WriteFile(path+".1", b, 0o644))
	require.NoError(t, os.Truncate(path, 0))
}

// TestTailCopyTruncateLive is TestTailCopyTruncate with the tailer
// running: the truncation is seen while it follows the file.
func TestTailCopyTruncateLive(t *testing.T) {
	testenv.EachBroker(t, func(t *testing.T, seeds []string) {
		k := newKafkaEnv(t, seeds, 2)
		path := filepath.Join(t.TempDir(), "access.log")
		lw := newLineWriter(t, path)
		opts := fastTail(t, k)
		lw.write(1)
		run := startTail(t, k, opts, []string{path})
		waitCaughtUp(t, run.tl, path)
		// Each round the tailer has read the file before logrotate
		// copies it; lines come after its last read and before the
		// truncation, and after the truncation more than the file held
		// before, so only its start tells that it was truncated.
		for round := 1; round <= 3; round++ {
			lw.write(round*2000 - 1000)
			waitCaughtUp(t, run.tl, path)
			lw.write(round * 2000)
			copyTruncate(t, path)
			lw.write(round*2000 + 1500)
		}
		waitCaughtUp(t, run.tl, path)
		require.NoError(t, run.stop())
		requireEachLineOnce(t, k, path, 7500)
		require.EqualValues(t, 3, run.tl.pl.stats.Truncates.Load())
	})
}

// TestTailUnterminatedLastLine: a rotated file whose writer left its last
// line without a newline is closed for good once idle while the new file
// has data; the rest is sent then: as an event when it parses, as a dead
// letter saying it was left unfinished when it does not.
func TestTailUnterminatedLastLine(t *testing.T) {
	testenv.EachBroker(t, func(t *testing.T, seeds []string) {
		k := newKafkaEnv(t, seeds, 2)
		path := filepath.Join(t.TempDir(), "access.log")
		opts := fastTail(t, k)
		run := startTail(t, k, opts, []string{path})
		testenv.Eventually(t, "waiting for the file", func() bool { return strings.Contains(run.logs.String(), "waiting for it to appear") })
		require.NoError(t, os.WriteFile(path, []byte(line(0)+strings.TrimSuffix(line(1), "\n")), 0o644))
		testenv.Eventually(t, "line 0 committed", func() bool { return run.tl.pl.stats.Events.Load() == 1 })
		require.NoError(t, os.Rename(path, path+".1"))
		require.NoError(t, os.WriteFile(path, []byte(line(2)+`{"key":"torn`), 0o644))
		testenv.Eventually(t, "line 1 sent at close", func() bool { return run.tl.pl.stats.Events.Load() == 3 })
		require.NoError(t, os.Rename(path, path+".2"))
		require.NoError(t, os.WriteFile(path, []byte(line(3)), 0o644))
		waitCaughtUp(t, run.tl, path)
		require.NoError(t, run.stop())
		require.EqualValues(t, 4, run.tl.pl.stats.Events.Load())
		dlq := readAll(t, k.seeds, k.dlq)
		require.Len(t, dlq, 1)
		var d schemas.DeadLetter
		require.NoError(t, schemas.DecodeDeadLetter(dlq[0].Value, &d))
		require.Equal(t, `{"key":"torn`, string(d.Raw))
		require.Contains(t, d.Detail, "unterminated last line of a file closed for good")
	})
}

// TestTailStartLines: at start each file gets one line saying where it is
// read from and why; a --from-start that saved positions override says
// so; a missing file is waited for, with one line.
func TestTailStartLines(t *testing.T) {
	seeds := testenv.KFake(t)
	k := newKafkaEnv(t, seeds, 1)
	dir := t.TempDir()
	path := filepath.Join(dir, "access.log")
	lw := newLineWriter(t, path)
	lw.write(10)
	opts := fastTail(t, k)
	size := func() int64 { fi, err := os.Stat(path); require.NoError(t, err); return fi.Size() }

	run := startTail(t, k, opts, []string{path}, func(c *TailConfig) { c.FromStart = false })
	waitCaughtUp(t, run.tl, path)
	require.NoError(t, run.stop())
	require.Contains(t, run.logs.String(), fmt.Sprintf("reading it from its end, byte %d: new lines only (no saved position; --from-start sends what it holds already)", size()))
	require.Zero(t, run.tl.pl.stats.Lines.Load())

	lw.write(20)
	run = startTail(t, k, opts, []string{path})
	waitCaughtUp(t, run.tl, path)
	require.NoError(t, run.stop())
	require.Contains(t, run.logs.String(), "--from-start does not apply: positions are saved for it under tail_id "+opts.TailID)
	require.Contains(t, run.logs.String(), "reading it from byte")
	require.EqualValues(t, 10, run.tl.pl.stats.Lines.Load(), "the lines written while down, not the ones before the first start")

	other := filepath.Join(dir, "later.log")
	run = startTail(t, k, opts, []string{path, other})
	testenv.Eventually(t, "waiting for later.log", func() bool {
		return strings.Contains(run.logs.String(), "later.log: waiting for it to appear (it will be read from its start)")
	})
	require.NoError(t, os.WriteFile(other, []byte(line(100)), 0o644))
	waitCaughtUp(t, run.tl, other)
	require.NoError(t, run.stop())
	require.EqualValues(t, 1, run.tl.pl.stats.Events.Load())
}

// TestTailPinsFilesBeforeKafka: the file at the path when ingest starts is
// read even if it is rotated away while the start waits for Kafka. kfake
// holds the start's first transactional request while the test writes
// and rotates the file. With --from-start everything is read; without,
// what was written after ingest started: the rest of the pinned file from
// its end then, and the new file whole.
func TestTailPinsFilesBeforeKafka(t *testing.T) {
	for _, fromStart := range []bool{true, false} {
		t.Run(fmt.Sprintf("from_start=%v", fromStart), func(t *testing.T) {
			c, err := kfake.NewCluster(kfake.NumBrokers(1))
			require.NoError(t, err)
			t.Cleanup(c.Close)
			k := newKafkaEnv(t, c.ListenAddrs(), 2)
			path := filepath.Join(t.TempDir(), "access.log")
			lw := newLineWriter(t, path)
			lw.write(100)

			inStart, release := make(chan struct{}), make(chan struct{})
			var once sync.Once
			c.ControlKey(int16(kmsg.InitProducerID), func(kmsg.Request) (kmsg.Response, error, bool) {
				once.Do(func() { close(inStart); <-release })
				return nil, nil, false // then let the cluster answer it
			})
			run := startTail(t, k, fastTail(t, k), []string{path}, func(c *TailConfig) { c.FromStart = fromStart })
			select {
			case <-inStart:
			case <-time.After(testenv.HangGuard):
				t.Fatal("the tailer never started a transaction")
			}
			lw.write(120)
			lw.rotate()
			lw.reopen()
			lw.write(150)
			close(release)

			waitCaughtUp(t, run.tl, path)
			require.NoError(t, run.stop())
			first := 0
			if !fromStart {
				first = 100
			}
			got := map[int]int{}
			for _, r := range readAll(t, k.seeds, k.events) {
				got[seqOf(t, r)]++
			}
			for i := range 150 {
				want := 0
				if i >= first {
					want = 1
				}
				require.Equal(t, want, got[i], "line %d", i)
			}
		})
	}
}

// tailOnKFake starts a one-broker kfake cluster, writes lines lines to a
// file and tails it until they are committed, for a test that then
// controls the broker's answers.
func tailOnKFake(t *testing.T, lines int) (*kfake.Cluster, *kafkaEnv, string, *lineWriter, TailOptions, *tailRun) {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	require.NoError(t, err)
	t.Cleanup(c.Close)
	k := newKafkaEnv(t, c.ListenAddrs(), 2)
	path := filepath.Join(t.TempDir(), "access.log")
	lw := newLineWriter(t, path)
	lw.write(lines)
	opts := fastTail(t, k)
	run := startTail(t, k, opts, []string{path})
	waitCaughtUp(t, run.tl, path)
	return c, k, path, lw, opts, run
}

// TestTailAbortedTransaction: when Kafka refuses a commit, the tailer
// aborts the transaction, reads its positions back and reads the lines
// again: still each exactly once.
func TestTailAbortedTransaction(t *testing.T) {
	c, k, path, lw, _, run := tailOnKFake(t, 1000)

	// The next three commits fail as a coordinator that lost the
	// transaction would answer.
	failed := 0
	var mu sync.Mutex
	c.ControlKey(int16(kmsg.EndTxn), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		mu.Lock()
		defer mu.Unlock()
		r := req.(*kmsg.EndTxnRequest)
		if !r.Commit || failed >= 3 {
			return nil, nil, false
		}
		failed++
		resp := r.ResponseKind().(*kmsg.EndTxnResponse)
		resp.ErrorCode = kerr.TransactionAbortable.Code
		return resp, nil, true
	})
	lw.write(5000)
	waitCaughtUp(t, run.tl, path)
	require.NoError(t, run.stop())
	mu.Lock()
	require.Equal(t, 3, failed)
	mu.Unlock()
	require.Contains(t, run.logs.String(), "aborting it and reading again from the last committed positions")
	requireEachLineOnce(t, k, path, 5000)
}

// TestTailStartSaysWhatItWaitsFor: a transaction another tail left open
// on the shared positions topic holds a start's read of its positions
// back (read_committed stops in front of it). The start says so, with
// what it waits for, reads nothing meanwhile, and goes on when the
// transaction ends: every line once.
func TestTailStartSaysWhatItWaitsFor(t *testing.T) {
	testenv.EachBroker(t, func(t *testing.T, seeds []string) {
		k := newKafkaEnv(t, seeds, 2)
		other, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.TransactionalID(testenv.UniqueName(t, "other-tail")),
			kgo.TransactionTimeout(5*time.Minute), kgo.DefaultProduceTopic(k.positions))
		require.NoError(t, err)
		t.Cleanup(other.Close)
		require.NoError(t, other.BeginTransaction())
		require.NoError(t, other.ProduceSync(context.Background(), &kgo.Record{Key: []byte("other/1:2:0"), Value: []byte("{}")}).FirstErr())

		said := loadSayEvery
		loadSayEvery = 10 * time.Millisecond
		t.Cleanup(func() { loadSayEvery = said })
		path := filepath.Join(t.TempDir(), "access.log")
		lw := newLineWriter(t, path)
		lw.write(500)
		run := startTail(t, k, fastTail(t, k), []string{path})
		testenv.Eventually(t, "the start saying it waits for the open transaction", func() bool {
			return strings.Contains(run.logs.String(), "in front of the marker: a transaction left open on it holds read_committed readers back")
		})
		require.Regexp(t, `msg="tail: loading positions: waiting for the positions in `+k.positions+`/0 up to the start marker at offset 1: read to offset 0; the partition's last stable offset is 0, in front of the marker`, run.logs.String())
		require.Zero(t, run.tl.pl.stats.Lines.Load(), "lines read before the positions were loaded")

		require.NoError(t, other.EndTransaction(context.Background(), kgo.TryCommit))
		waitCaughtUp(t, run.tl, path)
		require.NoError(t, run.stop())
		requireEachLineOnce(t, k, path, 500)
	})
}

// TestTailStartMarkerAbortedIsWrittenAgain: a start whose marker
// transaction ended aborted although EndTransaction(TryCommit) returned
// nil (franz-go turns a commit it takes for empty into an abort and says
// so only in its log; seen on kfake under load) can never read that
// marker. The start sees the marker's abort on the partition, says so,
// writes a new marker and resumes where the last run stopped: nothing is
// sent twice. Here kfake aborts the marker's commit and answers it as a
// success.
func TestTailStartMarkerAbortedIsWrittenAgain(t *testing.T) {
	c, k, path, lw, opts, run := tailOnKFake(t, 500)
	require.NoError(t, run.stop())

	var aborted atomic.Bool
	c.ControlKey(int16(kmsg.EndTxn), func(req kmsg.Request) (kmsg.Response, error, bool) {
		if r := req.(*kmsg.EndTxnRequest); r.Commit && aborted.CompareAndSwap(false, true) {
			r.Commit = false // the next start's marker: aborted, answered as a success
			return nil, nil, false
		}
		c.KeepControl()
		return nil, nil, false
	})
	lw.write(1000)
	run = startTail(t, k, opts, []string{path})
	waitCaughtUp(t, run.tl, path)
	require.NoError(t, run.stop())
	require.True(t, aborted.Load())
	require.Regexp(t, `msg="tail: loading positions: the start marker at offset [0-9]+ of `+k.positions+`/0 was aborted, not committed; writing a new one"`, run.logs.String())
	requireEachLineOnce(t, k, path, 1000)
}

// TestNewTailerKeepsCallersPaths: NewTailer makes the paths absolute in
// its own copy, never in the slice it was given.
func TestNewTailerKeepsCallersPaths(t *testing.T) {
	k := &kafkaEnv{seeds: []string{"127.0.0.1:1"}, events: "ev", dlq: "dlq", positions: "pos"}
	opts := TailOptions{PositionsTopic: "pos"}
	parser, err := logparse.NewJSON(logparse.JSONConfig{Key: "key"}, "test")
	require.NoError(t, err)
	paths := []string{"a.log", "logs/b.log"}
	tl, err := NewTailer(TailConfig{TailOptions: opts, Paths: paths}, lineSender(t, k.tailProducer(t, opts, schemas.JSON), parser, LineOptions{}))
	require.NoError(t, err)
	require.Equal(t, []string{"a.log", "logs/b.log"}, paths)
	abs, err := filepath.Abs("a.log")
	require.NoError(t, err)
	require.Equal(t, abs, tl.cfg.Paths[0])
}

// TestTailLineLimit: a line longer than MaxLineBytes is dead-lettered with
// its start, whether it fits the read buffer or not; a line of exactly
// MaxLineBytes is an event.
func TestTailLineLimit(t *testing.T) {
	testenv.EachBroker(t, func(t *testing.T, seeds []string) {
		const limit = 64
		k := newKafkaEnv(t, seeds, 2)
		path := filepath.Join(t.TempDir(), "access.log")
		pad := func(n int) string { // a JSON line of exactly n bytes
			pre := `{"key":"k","pad":"`
			return pre + strings.Repeat("p", n-len(pre)-2) + `"}`
		}
		lines := []string{pad(limit), pad(limit + 1), pad(200 << 10), pad(limit) + "\r"}
		require.NoError(t, os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644))

		opts := fastTail(t, k)
		parser, err := logparse.NewJSON(logparse.JSONConfig{Key: "key"}, "test")
		require.NoError(t, err)
		ls := lineSender(t, k.tailProducer(t, opts, schemas.JSON), parser, LineOptions{MaxLineBytes: limit})
		tl, err := NewTailer(TailConfig{Paths: []string{path}, FromStart: true, TailOptions: opts}, ls)
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- tl.Run(ctx) }()
		waitCaughtUp(t, tl, path)
		cancel()
		require.NoError(t, <-done)

		require.EqualValues(t, 2, ls.Stats().Events.Load(), "the lines of exactly %d bytes", limit)
		require.EqualValues(t, 2, ls.Stats().DLQByReason(schemas.ReasonLineTooLong))
		var raws []string
		var lens []int
		for _, r := range readAll(t, k.seeds, k.dlq) {
			var d schemas.DeadLetter
			require.NoError(t, schemas.DecodeDeadLetter(r.Value, &d))
			raws = append(raws, string(d.Raw))
			lens = append(lens, d.OrigLen)
		}
		require.ElementsMatch(t, []string{pad(limit + 1)[:limit], pad(200 << 10)[:limit]}, raws, "a too-long line keeps its first %d bytes", limit)
		require.ElementsMatch(t, []int{limit + 1, 200 << 10}, lens, "orig_len is the whole line's length")
	})
}

// TestTailStopWhileKafkaDown: told to stop while Kafka is away, the tail
// waits StopTimeout, then gives up on the open transaction: Run returns an
// *UndeliveredError counting the lines read and not delivered, and saying
// where the next start resumes. The next start, with Kafka back, delivers
// them: each line once.
func TestTailStopWhileKafkaDown(t *testing.T) {
	outageBrokers(t, func(t *testing.T, b *testenv.Broker) {
		k := newKafkaEnv(t, b.Seeds(), 2)
		path := filepath.Join(t.TempDir(), "access.log")
		lw := newLineWriter(t, path)
		opts := fastTail(t, k)
		lw.write(1000)
		run := startTail(t, k, opts, []string{path}, func(c *TailConfig) { c.StopTimeout = 300 * time.Millisecond })
		waitCaughtUp(t, run.tl, path)
		b.Stop(t)
		lw.write(3000)
		// Reading pauses while a commit waits for Kafka: how many of the
		// new lines are read by the stop varies.
		testenv.Eventually(t, "new lines read", func() bool { return run.tl.Waiting() > 0 })
		err := run.stop()
		var ue *UndeliveredError
		require.ErrorAs(t, err, &ue)
		require.True(t, ue.Lines > 0 && ue.Lines <= 2000, "%d lines undelivered", ue.Lines)
		abs, _ := filepath.Abs(path)
		sizeAt1000 := int64(0)
		for i := range 1000 {
			sizeAt1000 += int64(len(line(i)))
		}
		require.Contains(t, ue.Error(), fmt.Sprintf("the next start resumes at %s byte %d", abs, sizeAt1000))
		require.Equal(t, ue.Lines, run.tl.pl.stats.Undelivered.Load())
		require.EqualValues(t, 1000, run.tl.pl.stats.Delivered.Load())
		// The summary's lines are every line read: delivered or not.
		require.Equal(t, 1000+ue.Lines, run.tl.pl.stats.Lines.Load(), "lines read = delivered + undelivered")

		b.Start(t)
		run = startTail(t, k, opts, []string{path})
		waitCaughtUp(t, run.tl, path)
		require.NoError(t, run.stop())
		requireEachLineOnce(t, k, path, 3000)
	})
}

// gzipFile compresses name to name.gz and removes name, as logrotate's
// compress does.
func gzipFile(t *testing.T, name string) {
	t.Helper()
	b, err := os.ReadFile(name)
	require.NoError(t, err)
	var z bytes.Buffer
	zw := gzip.NewWriter(&z)
	_, err = zw.Write(b)
	require.NoError(t, err)
	require.NoError(t, zw.Close())
	require.NoError(t, os.WriteFile(name+".gz", z.Bytes(), 0o644))
	require.NoError(t, os.Remove(name))
}

// TestTailCompressedRotated: rotated files compressed by logrotate are
// never read as text. A compressed copy of a file the tailer read is left
// alone quietly; one holding lines it never read (compressed while ingest
// was down) is reported, with how to send it.
func TestTailCompressedRotated(t *testing.T) {
	k := newKafkaEnv(t, testenv.KFake(t), 2)
	path := filepath.Join(t.TempDir(), "access.log")
	lw := newLineWriter(t, path)
	opts := fastTail(t, k)
	lw.write(1000)
	run := startTail(t, k, opts, []string{path})
	waitCaughtUp(t, run.tl, path)
	lw.rotate()
	lw.reopen()
	lw.write(2000)
	gzipFile(t, path+".1") // read already, through the open file
	waitCaughtUp(t, run.tl, path)
	require.NoError(t, run.stop())
	require.NotContains(t, run.logs.String(), "-compressed and not read")
	requireEachLineOnce(t, k, path, 2000)

	// Down: rotated twice and compressed at once; the middle file's lines
	// exist only compressed.
	lw.write(2500)
	lw.rotate() // .1 (read up to 2000) -> .1, .1.gz stays
	lw.reopen()
	lw.write(3000)
	lw.rotate()
	lw.reopen()
	gzipFile(t, path+".1") // lines 2500..2999, never read
	lw.write(3100)
	run = startTail(t, k, opts, []string{path})
	waitCaughtUp(t, run.tl, path)
	require.NoError(t, run.stop())
	require.Contains(t, run.logs.String(), "access.log.1.gz is gzip-compressed and not read; if it holds lines never read")
	require.Equal(t, 1, strings.Count(run.logs.String(), "gzip-compressed"), "said once")
	require.Empty(t, readAll(t, k.seeds, k.dlq), "compressed bytes are never sent as lines")
}

// TestTailCompressedWhileTakenIn: a rotated file taken in while a
// compressor had only created it (empty, so its head said nothing yet) is
// never read as lines once the compressed bytes arrive.
func TestTailCompressedWhileTakenIn(t *testing.T) {
	k := newKafkaEnv(t, testenv.KFake(t), 2)
	path := filepath.Join(t.TempDir(), "access.log")
	lw := newLineWriter(t, path)
	opts := fastTail(t, k)
	lw.write(1000)
	run := startTail(t, k, opts, []string{path})
	waitCaughtUp(t, run.tl, path)
	gz := path + ".2.gz"
	require.NoError(t, os.WriteFile(gz, nil, 0o644)) // created by the compressor, nothing written yet
	lw.rotate()
	lw.reopen()
	testenv.Eventually(t, "the rotation seen and the empty file taken in", func() bool {
		return strings.Contains(run.logs.String(), "access.log.2.gz rotated away before it was seen")
	})
	var z bytes.Buffer
	zw := gzip.NewWriter(&z)
	for i := range 500 {
		_, err := fmt.Fprintf(zw, `{"key":"gone%d","bytes":%d}`+"\n", i, i)
		require.NoError(t, err)
	}
	require.NoError(t, zw.Close())
	require.NoError(t, os.WriteFile(gz, z.Bytes(), 0o644)) // the same file, now written
	lw.write(2000)
	waitCaughtUp(t, run.tl, path)
	require.NoError(t, run.stop())
	require.Empty(t, readAll(t, k.seeds, k.dlq), "compressed bytes are never sent as lines")
	require.Contains(t, run.logs.String(), "access.log.2.gz is gzip-compressed and not read")
	requireEachLineOnce(t, k, path, 2000)
}

// TestTailFencedBySameID: a second tail with the same tail id fences the
// first, which stops with an error saying so instead of fighting over the
// positions; the second delivers every line once.
func TestTailFencedBySameID(t *testing.T) {
	testenv.EachBroker(t, func(t *testing.T, seeds []string) {
		k := newKafkaEnv(t, seeds, 2)
		path := filepath.Join(t.TempDir(), "access.log")
		lw := newLineWriter(t, path)
		opts := fastTail(t, k)
		lw.write(500)
		first := startTail(t, k, opts, []string{path})
		waitCaughtUp(t, first.tl, path)
		second := startTail(t, k, opts, []string{path})
		waitCaughtUp(t, second.tl, path)
		lw.write(1000)
		select {
		case <-first.done:
		case <-time.After(testenv.HangGuard):
			t.Fatal("the fenced tail kept running")
		}
		require.ErrorContains(t, first.err, "another ingest tail with tail_id "+opts.TailID)
		waitCaughtUp(t, second.tl, path)
		require.NoError(t, second.stop())
		requireEachLineOnce(t, k, path, 1000)
	})
}

// TestTailShortFingerprintHidesNothing: a live file caught in the middle
// of its first write has a fingerprint of a few bytes, which every log
// line starts with; rotated files that went by between two looks are
// still taken in, not mistaken for copies of it.
func TestTailShortFingerprintHidesNothing(t *testing.T) {
	k := newKafkaEnv(t, testenv.KFake(t), 2)
	path := filepath.Join(t.TempDir(), "access.log")
	first := line(0)
	require.NoError(t, os.WriteFile(path, []byte(first[:5]), 0o644))
	run := startTail(t, k, fastTail(t, k), []string{path})
	testenv.Eventually(t, "the partial line read", func() bool {
		run.tl.gate.Lock()
		defer run.tl.gate.Unlock()
		return len(run.tl.watches) == 1 && len(run.tl.watches[0].files) == 1 && run.tl.watches[0].files[0].readPos == 5
	})
	// Two files that went by: written after the start, under rotated
	// names, never at the path while the tailer looked.
	var older, newer strings.Builder
	for i := 1; i <= 20; i++ {
		older.WriteString(line(i))
	}
	for i := 21; i <= 40; i++ {
		newer.WriteString(line(i))
	}
	require.NoError(t, os.WriteFile(path+".2", []byte(older.String()), 0o644))
	require.NoError(t, os.WriteFile(path+".1", []byte(newer.String()), 0o644))
	// Their times are set, not left to the file system's clock, which
	// ticks coarsely (a jiffy): written in the tick the tail started in,
	// a file would read as older than the tail, and not its to read. Both
	// are after the start, the older one first.
	written := time.Now().Add(100 * time.Millisecond)
	require.NoError(t, os.Chtimes(path+".2", written, written))
	require.NoError(t, os.Chtimes(path+".1", written.Add(50*time.Millisecond), written.Add(50*time.Millisecond)))
	// Both are taken in, in one scan or two; the first may already be
	// read to its end and let go when the second is found, so the test
	// asks the log rather than counting open files.
	testenv.Eventually(t, "the rotated files taken in", func() bool {
		logs := run.logs.String()
		return strings.Contains(logs, "access.log.2") && strings.Contains(logs, "access.log.1")
	})
	require.Contains(t, run.logs.String(), "rotated away before they were seen")
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0o644)
	require.NoError(t, err)
	_, err = f.WriteString(first[5:])
	require.NoError(t, err)
	require.NoError(t, f.Close())
	waitCaughtUp(t, run.tl, path)
	require.NoError(t, run.stop())
	got := map[int]int{}
	for _, r := range readAll(t, k.seeds, k.events) {
		got[seqOf(t, r)]++
	}
	for i := 0; i <= 40; i++ {
		require.Equal(t, 1, got[i], "line %d", i)
	}
}
