package ingest

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

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
	cfg := TailConfig{Paths: []string{path}, StateFile: state, FromStart: true,
		PollInterval: 2 * time.Millisecond, SaveInterval: 10 * time.Millisecond}
	for _, o := range opts {
		o(&cfg)
	}
	tl, err := NewTailer(cfg, pipeline(t, prod, parser))
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
	pos, ok := tl.Positions()[abs]
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
	lw.write(30_000)
	lw.rotate("access.log.1")
	lw.write(45_000)
	// Crash once the state file names the new file with some progress, so
	// a restart finds its position (see the report: a restart after two
	// rotations while down finds only the file the state names).
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
		seq, id := seqOf(t, r), header(r, HeaderID)
		require.NotEmpty(t, id)
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
