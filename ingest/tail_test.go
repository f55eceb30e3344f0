package ingest

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/keyheat/keyheat/logparse"
	"github.com/keyheat/keyheat/schemas"
)

// lineWriter appends numbered JSON lines to a file, the way an
// application's logger would.
type lineWriter struct {
	t    *testing.T
	path string
	f    *os.File
	w    *bufio.Writer
	next int
}

func (lw *lineWriter) open() {
	f, err := os.OpenFile(lw.path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	require.NoError(lw.t, err)
	lw.f, lw.w = f, bufio.NewWriterSize(f, 64<<10)
}

func (lw *lineWriter) write(upTo int) {
	for ; lw.next < upTo; lw.next++ {
		fmt.Fprintf(lw.w, `{"key":"k%d","bytes":%d}`+"\n", lw.next%16, lw.next)
	}
	require.NoError(lw.t, lw.w.Flush())
}

// rotate renames the file to name and starts a new one, like logrotate's
// default create mode.
func (lw *lineWriter) rotate(name string) {
	require.NoError(lw.t, lw.f.Close())
	require.NoError(lw.t, os.Rename(lw.path, filepath.Join(filepath.Dir(lw.path), name)))
	lw.open()
}

type tailRun struct {
	tl     *Tailer
	prod   *Producer
	cancel context.CancelFunc
	done   chan error
}

// startTail runs a Tailer on path; opts adjust its config.
func startTail(t *testing.T, k *kafkaEnv, path, state string, opts ...func(*TailConfig)) *tailRun {
	t.Helper()
	prod := k.producer(t, schemas.Binary)
	parser, err := logparse.NewJSON(logparse.JSONConfig{Key: "key", Bytes: "bytes"}, "test")
	require.NoError(t, err)
	cfg := TailConfig{Paths: []string{path}, FromStart: true,
		TailOptions: TailOptions{StateFile: state, PollInterval: 2 * time.Millisecond, SaveInterval: 10 * time.Millisecond}}
	for _, o := range opts {
		o(&cfg)
	}
	tl, err := NewTailer(cfg, lineSender(t, prod, parser, LineOptions{}))
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	r := &tailRun{tl: tl, prod: prod, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- tl.Run(ctx) }()
	return r
}

// waitFor polls cond; tests wait on state, never on time.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// ackedWhole reports whether the tailer has acknowledged all of the file
// now at path.
func ackedWhole(tl *Tailer, path string) bool {
	fi, err := os.Stat(path)
	if err != nil {
		return false
	}
	abs, _ := filepath.Abs(path)
	pos, ok := tl.positions()[abs]
	return ok && pos.ID == fileIDOf(fi) && pos.Offset == fi.Size()
}

func savedID(t *testing.T, state, path string) (fileID, int64) {
	files, err := loadState(state)
	require.NoError(t, err)
	pos := files[path]
	return pos.ID, pos.Offset
}

// TestTailExactlyOnce follows a file while 100,000 lines are appended, the
// file is rotated twice and truncated once, and ingest crashes and
// restarts in the middle. Every line must arrive exactly once, with one
// keyheat-id; order per key (partition) holds; and a clean stop and
// restart re-sends nothing.
//
// Truncation loses what was written and not yet read, by nature, so the
// writer waits until the tailer acknowledged the whole file before it
// truncates, and until the tailer saw the truncation before it writes on.
// The crash is a producer closed without flushing while records are in
// flight, followed by a state file as of an earlier save: the worst case,
// where everything acknowledged since that save is on Kafka and the
// restart must find it there (readback.go) instead of sending it again.
func TestTailExactlyOnce(t *testing.T) {
	brokers(t, testTailExactlyOnce)
}

func testTailExactlyOnce(t *testing.T, seeds []string) {
	k := newKafkaEnv(t, seeds, 4)
	dir := t.TempDir()
	path := filepath.Join(dir, "access.log")
	state := filepath.Join(dir, "state.json")
	lw := &lineWriter{t: t, path: path}
	lw.open()
	defer lw.f.Close()

	const total = 100_000
	run := startTail(t, k, path, state)
	// A first start reads the file it finds at the path; one rotated away
	// before ingest opened it is not ingest's to know of. So the writer
	// waits for the open (this raced on the real broker, whose slower
	// start-up let 30,000 lines and a rotation in first).
	waitFor(t, "the tailer to open the file", func() bool {
		abs, _ := filepath.Abs(path)
		_, ok := run.tl.positions()[abs]
		return ok
	})
	lw.write(30_000)
	lw.rotate("access.log.1")
	lw.write(45_000)
	// Crash once the state file names the new file with some progress, so
	// a restart finds its position. (Had the crash come before that save,
	// the state would name access.log.1's file; the restart drains it by
	// identity, but the file between it and the one at the path, rotated
	// while ingest was down, would be named by no state and not read.)
	cur, err := os.Stat(path)
	require.NoError(t, err)
	waitFor(t, "a save in the rotated file", func() bool {
		id, off := savedID(t, state, path)
		return id == fileIDOf(cur) && off > 0
	})
	snapshot, err := os.ReadFile(state)
	require.NoError(t, err)
	run.prod.Close() // crash: in-flight records fail, nothing is flushed
	run.cancel()
	<-run.done
	require.NoError(t, os.WriteFile(state, snapshot, 0o644)) // and the last save was the snapshot's

	// While ingest is down the file grows and rotates once more.
	lw.write(60_000)
	lw.rotate("access.log.2")
	lw.write(70_000)

	run = startTail(t, k, path, state)
	lw.write(80_000)
	waitFor(t, "everything before the truncation acknowledged", func() bool { return ackedWhole(run.tl, path) })
	truncs := run.tl.pl.stats.Truncates.Load()
	require.NoError(t, os.Truncate(path, 0))
	waitFor(t, "the truncation seen", func() bool { return run.tl.pl.stats.Truncates.Load() > truncs })
	lw.write(total)
	waitFor(t, "all lines acknowledged", func() bool { return ackedWhole(run.tl, path) })
	run.cancel()
	require.NoError(t, <-run.done)

	recs := readAll(t, k.seeds, k.events)
	idOf := map[int]string{}
	lastPerKey := map[string]int{}
	for _, r := range recs {
		seq, id := seqOf(t, r), header(r, schemas.HeaderRecordID)
		rid, err := schemas.ParseRecordID(id)
		require.NoError(t, err)
		require.Equal(t, schemas.IDTail, rid.Kind, "id %q", id)
		require.Equal(t, path, rid.Path, "id %q", id)
		prev, seen := idOf[seq]
		require.False(t, seen, "line %d sent twice, ids %s and %s", seq, prev, id)
		idOf[seq] = id
		if last, ok := lastPerKey[string(r.Key)]; ok {
			require.Greater(t, seq, last, "key %s out of order", r.Key)
		}
		lastPerKey[string(r.Key)] = seq
	}
	for i := range total {
		_, ok := idOf[i]
		require.True(t, ok, "line %d lost", i)
	}
	require.Len(t, idOf, total)
	require.Len(t, recs, total)
	t.Logf("%d records for %d lines; %d lines found on Kafka at the restart and not sent again", len(recs), total, run.tl.pl.stats.Deduplicated.Load())

	// A clean restart sends only what is new.
	before := len(recs)
	run = startTail(t, k, path, state)
	lw.write(total + 1000)
	waitFor(t, "new lines acknowledged", func() bool { return ackedWhole(run.tl, path) })
	run.cancel()
	require.NoError(t, <-run.done)
	recs = readAll(t, k.seeds, k.events)
	require.Len(t, recs, before+1000, "a clean restart must not re-send")
	fresh := 0
	for _, r := range recs {
		if seqOf(t, r) >= total {
			fresh++
		}
	}
	require.Equal(t, 1000, fresh)
}

// crashTail stops r the way a killed process stops: the producer is closed
// without a flush, and the state file is put back as it was before r's
// last save (state, saved by the caller), since a killed process makes no
// final save.
func crashTail(t *testing.T, r *tailRun, stateFile string, state []byte) {
	t.Helper()
	r.prod.Close()
	r.cancel()
	<-r.done
	require.NoError(t, os.WriteFile(stateFile, state, 0o644))
}

// writeMixed appends lines [from, to) to path: JSON access lines, and
// every tenth a line the parser refuses, for the DLQ.
func writeMixed(t *testing.T, path string, from, to int) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	require.NoError(t, err)
	w := bufio.NewWriter(f)
	for i := from; i < to; i++ {
		if i%10 == 3 {
			fmt.Fprintf(w, "garbage %d\n", i)
		} else {
			fmt.Fprintf(w, `{"key":"k%d","bytes":%d}`+"\n", i%16, i)
		}
	}
	require.NoError(t, w.Flush())
	require.NoError(t, f.Close())
}

// idCounts counts the records of the events and DLQ topics per keyheat-id.
func idCounts(t *testing.T, k *kafkaEnv) map[string]int {
	t.Helper()
	n := map[string]int{}
	for _, topic := range []string{k.events, k.dlq} {
		for _, r := range readAll(t, k.seeds, topic) {
			id := header(r, schemas.HeaderRecordID)
			require.NotEmpty(t, id)
			n[id]++
		}
	}
	return n
}

func hourlySaves(c *TailConfig) { c.SaveInterval = time.Hour }

// sendThenCrashBeforeSave tails a new file of n mixed lines (some bound
// for the DLQ) until Kafka acknowledged them all, then crashes: the state
// file is left as written when the file was opened, at offset 0, because
// saves are hourly.
func sendThenCrashBeforeSave(t *testing.T, k *kafkaEnv, n int) (path, state string) {
	t.Helper()
	dir := t.TempDir()
	path, state = filepath.Join(dir, "access.log"), filepath.Join(dir, "state.json")
	writeMixed(t, path, 0, 0)
	run := startTail(t, k, path, state, hourlySaves)
	waitFor(t, "the save at open", func() bool { _, err := os.Stat(state); return err == nil })
	snapshot, err := os.ReadFile(state)
	require.NoError(t, err)
	writeMixed(t, path, 0, n)
	waitFor(t, "all lines acknowledged", func() bool { return ackedWhole(run.tl, path) })
	crashTail(t, run, state, snapshot)
	return path, state
}

// TestTailCrashBeforeSave sends lines, lets Kafka acknowledge all of them,
// and crashes before any periodic save (the save interval is an hour), so
// the state file is the one written when the file was opened, at offset 0.
// The restart must find every line on Kafka and send none again, on the
// events and the DLQ topic alike.
func TestTailCrashBeforeSave(t *testing.T) {
	brokers(t, func(t *testing.T, seeds []string) {
		const n = 3000
		k := newKafkaEnv(t, seeds, 4)
		path, state := sendThenCrashBeforeSave(t, k, n)
		_, off := savedID(t, state, path)
		require.Zero(t, off, "the state file must be the one from before the lines")

		run := startTail(t, k, path, state, hourlySaves)
		waitFor(t, "all lines passed again", func() bool { return ackedWhole(run.tl, path) })
		run.cancel()
		require.NoError(t, <-run.done)
		require.EqualValues(t, n, run.tl.pl.stats.Deduplicated.Load(), "lines found on Kafka at the restart")

		counts := idCounts(t, k)
		require.Len(t, counts, n, "one id per line: none lost")
		for id, c := range counts {
			require.Equal(t, 1, c, "id %s sent %d times", id, c)
		}
	})
}

// TestTailReadBackCap crashes like TestTailCrashBeforeSave, but the restart
// may read back fewer records than the crash left past the saved position:
// it must say so and fall back to at least once, every line sent again
// with its original id, and none lost.
func TestTailReadBackCap(t *testing.T) {
	brokers(t, func(t *testing.T, seeds []string) {
		const n = 500
		k := newKafkaEnv(t, seeds, 2)
		path, state := sendThenCrashBeforeSave(t, k, n)

		var logs syncBuffer
		run := startTail(t, k, path, state, hourlySaves, func(c *TailConfig) {
			c.ReadBackMaxRecords = n - 1
			c.Logger = slog.New(slog.NewTextHandler(&logs, nil))
		})
		waitFor(t, "all lines acknowledged again", func() bool { return ackedWhole(run.tl, path) })
		run.cancel()
		require.NoError(t, <-run.done)
		require.Contains(t, logs.String(), "too much to read back")
		require.Zero(t, run.tl.pl.stats.Deduplicated.Load())

		counts := idCounts(t, k)
		require.Len(t, counts, n, "one id per line: none lost")
		for id, c := range counts {
			require.Equal(t, 2, c, "id %s: at least once means each line once per run", id)
		}
	})
}

// syncBuffer is a bytes.Buffer safe for a logger and a test to share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestTailPinsFilesBeforeKafka: the file at the path when ingest starts is
// read even if it is rotated away while the start-up talks to Kafka (the
// read-back can take seconds against a slow broker). kfake holds the
// read-back's ListOffsets request while the test rotates the file.
func TestTailPinsFilesBeforeKafka(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	require.NoError(t, err)
	t.Cleanup(c.Close)
	k := newKafkaEnv(t, c.ListenAddrs(), 2)
	dir := t.TempDir()
	path := filepath.Join(dir, "access.log")
	lw := &lineWriter{t: t, path: path}
	lw.open()
	defer lw.f.Close()
	lw.write(100)

	inReadBack, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	c.ControlKey(int16(kmsg.ListOffsets), func(kmsg.Request) (kmsg.Response, error, bool) {
		once.Do(func() { close(inReadBack); <-release })
		return nil, nil, false // then let the cluster answer it
	})
	run := startTail(t, k, path, filepath.Join(dir, "state.json"))
	select {
	case <-inReadBack:
	case <-time.After(30 * time.Second):
		t.Fatal("the tailer never listed offsets")
	}
	lw.rotate("access.log.1")
	lw.write(150)
	close(release)

	waitFor(t, "150 lines acknowledged", func() bool { return run.tl.pl.stats.Events.Load() == 150 })
	run.cancel()
	require.NoError(t, <-run.done)
	recs := readAll(t, k.seeds, k.events)
	seen := map[int]bool{}
	for _, r := range recs {
		seen[seqOf(t, r)] = true
	}
	for i := range 150 {
		require.True(t, seen[i], "line %d lost", i)
	}
	require.Len(t, recs, 150)
}

// TestNewTailerKeepsCallersPaths: NewTailer makes the paths absolute in
// its own copy, never in the slice it was given.
func TestNewTailerKeepsCallersPaths(t *testing.T) {
	paths := []string{"a.log", "logs/b.log"}
	tl, err := NewTailer(TailConfig{Paths: paths}, nil)
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
	brokers(t, func(t *testing.T, seeds []string) {
		const limit = 64
		k := newKafkaEnv(t, seeds, 2)
		path := filepath.Join(t.TempDir(), "access.log")
		pad := func(n int) string { // a JSON line of exactly n bytes
			pre := `{"key":"k","pad":"`
			return pre + strings.Repeat("p", n-len(pre)-2) + `"}`
		}
		lines := []string{pad(limit), pad(limit + 1), pad(200 << 10), pad(limit) + "\r"}
		require.NoError(t, os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644))

		parser, err := logparse.NewJSON(logparse.JSONConfig{Key: "key"}, "test")
		require.NoError(t, err)
		ls := lineSender(t, k.producer(t, schemas.JSON), parser, LineOptions{MaxLineBytes: limit})
		tl, err := NewTailer(TailConfig{Paths: []string{path}, FromStart: true, TailOptions: TailOptions{PollInterval: 2 * time.Millisecond}}, ls)
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- tl.Run(ctx) }()
		waitFor(t, "four lines acknowledged", func() bool { return ackedWhole(tl, path) })
		cancel()
		require.NoError(t, <-done)

		require.EqualValues(t, 2, ls.Stats().Events.Load(), "the lines of exactly %d bytes", limit)
		require.EqualValues(t, 2, ls.Stats().DLQByReason(schemas.ReasonLineTooLong))
		var raws []string
		for _, r := range readAll(t, k.seeds, k.dlq) {
			var d schemas.DeadLetter
			require.NoError(t, schemas.DecodeDeadLetter(r.Value, &d))
			raws = append(raws, string(d.Raw))
		}
		require.ElementsMatch(t, []string{pad(limit + 1)[:limit], pad(200 << 10)[:limit]}, raws, "a too-long line keeps its first %d bytes", limit)
	})
}
