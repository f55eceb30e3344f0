package ingest

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/keyheat/keyheat/internal/testenv"
	"github.com/keyheat/keyheat/logparse"
	"github.com/keyheat/keyheat/schemas"
)

// TestRotatedNames: the default pattern takes the names logrotate gives
// a rotated access.log and no neighbour that merely starts like it; a
// glob the user sets keeps glob semantics.
func TestRotatedNames(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "access.log")
	def := rotatedPatterns(path, DefaultTailOptions().Rotated)
	for _, tc := range []struct {
		name string
		want bool
	}{
		{"access.log.1", true},
		{"access.log.2", true},
		{"access.log.12", true},
		{"access.log.2.gz", true},
		{"access.log.3.bz2", true},
		{"access.log.3.xz", true},
		{"access.log.3.zst", true},
		{"access.log-20261127", true},            // dateext
		{"access.log-20261127.gz", true},         // dateext, compress
		{"access.log-2026112713", true},          // hourly: -%Y%m%d%H
		{"access.log-20261127-1764201600", true}, // dateformat -%Y%m%d-%s
		{"access.log.2026-11-27", true},
		{"access.log-2026-11-27", true},
		{"access.log.2026-11-27.gz", true},
		{"access.log.2026-11-27-13", true},
		{"access.log_20261127", true},
		{"access.log", false},
		{"access.log.truth.json", false},
		{"access.log.bak", false},
		{"access.log.old", false},
		{"access.log.1.json", false},
		{"access.log.gz", false},
		{"access.log.12345", false},
		{"access.log-2026", false},
		{"access.log.2026-11", true}, // monthly: dateformat .%Y-%m
		{"access.log.2026-1", false},
		{"access.log.v2.json", false},
		{"access.logger.1", false},
		{"error.log.1", false},
		{"xaccess.log.1", false},
	} {
		got := false
		for _, p := range def {
			got = got || p.match(filepath.Join(dir, tc.name))
		}
		require.Equal(t, tc.want, got, "%s", tc.name)
	}
	glob := rotatedPatterns(path, []string{"{name}.*", "old/{name}{rotated}"})
	require.True(t, glob[0].match(filepath.Join(dir, "access.log.bak")), "a glob the user sets is a glob")
	require.True(t, glob[1].match(filepath.Join(dir, "old", "access.log.1")), "a relative pattern lives in the file's folder")
	require.False(t, glob[1].match(filepath.Join(dir, "access.log.1")))

	for _, bad := range []string{"{rotated}{name}", "{name}{rotated}.gz", "{name}.[0-9{rotated}"} {
		require.Error(t, checkRotatedPattern(bad), bad)
	}
	require.NoError(t, checkRotatedPattern("{name}{rotated}"))
	require.NoError(t, checkRotatedPattern("/var/log/old/{name}.*"))
}

// TestTailRotatedLeavesNeighboursAlone: tail --from-start of access.log
// in a folder that also holds its rotated files and two neighbours reads
// the log and its rotated files (the compressed one recognised, not read),
// and never the neighbours: nothing is dead-lettered.
func TestTailRotatedLeavesNeighboursAlone(t *testing.T) {
	k := newKafkaEnv(t, testenv.KFake(t), 2)
	dir := t.TempDir()
	path := filepath.Join(dir, "access.log")
	lw := newLineWriter(t, path)
	// Oldest first, as logrotate leaves them: -20261127 (dateext, from
	// before the switch to numbers), .2.gz, .1, then the live file.
	lw.write(100)
	require.NoError(t, os.Rename(path, path+"-20261127"))
	lw.reopen()
	lw.write(200)
	require.NoError(t, os.Rename(path, path+".2"))
	gzipFile(t, path+".2")
	lw.reopen()
	lw.write(300)
	require.NoError(t, os.Rename(path, path+".1"))
	lw.reopen()
	lw.write(400)
	// The neighbours: a JSON document that is not an access log, and a
	// copy of the log (read again, its lines would be sent twice).
	require.NoError(t, os.WriteFile(path+".truth.json", []byte(strings.Repeat(`{"expected":{"hot":["k1"]}}`+"\n", 50)), 0o644))
	b, err := os.ReadFile(path + ".1")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path+".bak", b, 0o644))

	run := startTail(t, k, fastTail(t, k), []string{path})
	waitCaughtUp(t, run.tl, path)
	require.NoError(t, run.stop())
	logs := run.logs.String()
	require.Contains(t, logs, "first draining access.log-20261127 from its start (--from-start)")
	require.Contains(t, logs, "first draining access.log.1 from its start (--from-start)")
	require.Contains(t, logs, "access.log.2.gz is gzip-compressed and not read")
	require.NotContains(t, logs, "truth.json")
	require.NotContains(t, logs, "access.log.bak")
	require.Empty(t, readAll(t, k.seeds, k.dlq), "no neighbour's line was dead-lettered")
	seqs := map[int]int{}
	for _, r := range readAll(t, k.seeds, k.events) {
		seqs[seqOf(t, r)]++
	}
	for i := range 400 {
		want := 1
		if i >= 100 && i < 200 {
			want = 0 // only in access.log.2.gz
		}
		require.Equal(t, want, seqs[i], "line %d", i)
	}
}

// TestTailSaysWhenARotatedFileIsNotALog: a file taken in only because its
// name matches ingest.rotated, most of whose lines cannot be used, is said
// once, by name, not to look like a log of the path.
func TestTailSaysWhenARotatedFileIsNotALog(t *testing.T) {
	k := newKafkaEnv(t, testenv.KFake(t), 2)
	dir := t.TempDir()
	path := filepath.Join(dir, "access.log")
	lw := newLineWriter(t, path)
	lw.write(100)
	require.NoError(t, os.WriteFile(path+".truth.json", []byte(strings.Repeat(`{"expected":{"hot":["k1"]}}`+"\n", 50)), 0o644))
	require.NoError(t, os.WriteFile(path+".1", []byte(strings.Repeat(line(7), 30)), 0o644)) // a log: said nothing of

	opts := fastTail(t, k)
	opts.Rotated = []string{"{name}.*"} // as the default was: it takes the neighbour in
	run := startTail(t, k, opts, []string{path})
	waitCaughtUp(t, run.tl, path)
	require.NoError(t, run.stop())
	logs := run.logs.String()
	require.Equal(t, 1, strings.Count(logs, "does not look like a log"), "said once:\n%s", logs)
	require.Contains(t, logs, "tail "+path+": access.log.truth.json does not look like a log of it: 20 of its first 20 lines could not be used")
	require.Contains(t, logs, "file="+path+".truth.json")
	require.NotContains(t, logs, "access.log.1 does not look like a log")
}

// TestDefaultRotatedKeepsRealRotatedNames: every name that a real rotator
// gives a rotated access.log, and that the old default ({name}.*,
// {name}-*) took, is still a rotated name by default. One it leaves out
// is never read when it went by while ingest was down (or between two
// looks), and never found as a copytruncate copy: its lines are lost.
func TestDefaultRotatedKeepsRealRotatedNames(t *testing.T) {
	dir := t.TempDir()
	def := rotatedPatterns(filepath.Join(dir, "access.log"), DefaultTailOptions().Rotated)
	old := rotatedPatterns(filepath.Join(dir, "access.log"), []string{"{name}.*", "{name}-*"})
	for _, tc := range []struct{ name, who string }{
		{"access.log.20261127-130405", "kubelet (container logs: 0.log.20261127-130405)"},
		{"access.log.20261127-130405.gz", "kubelet, compressed"},
		{"access.log-20261127130405", "logrotate dateformat -%Y%m%d%H%M%S"},
		{"access.log-202611271304", "logrotate dateformat -%Y%m%d%H%M"},
		{"access.log-202611271764201600", "logrotate dateformat -%Y%m%d%s"},
		{"access.log-20261127-13", "logrotate dateformat -%Y%m%d-%H"},
		{"access.log-202611", "logrotate monthly, dateformat -%Y%m"},
		{"access.log-2026-11", "logrotate monthly, dateformat -%Y-%m"},
		{"access.log.2026-11-27-13_04_05", "rotatelogs access.log.%Y-%m-%d-%H_%M_%S"},
		{"access.log.2026.11.27", "rotatelogs access.log.%Y.%m.%d (Apache's own example)"},
		{"access.log.1764201600", "rotatelogs' default, logrotate .%s"},
	} {
		name := filepath.Join(dir, tc.name)
		was := false
		for _, p := range old {
			was = was || p.match(name)
		}
		require.True(t, was, "%s: the old default took it", tc.name)
		is := false
		for _, p := range def {
			is = is || p.match(name)
		}
		require.True(t, is, "%s (%s) is a rotated name by default", tc.name, tc.who)
	}
}

// TestTailReadsKubeletRotationsWhileDown: a container log rotated twice
// by the kubelet while ingest was down (0.log to 0.log.<date>-<time>) is
// read in full at the next start; with the old default it was.
func TestTailReadsKubeletRotationsWhileDown(t *testing.T) {
	k := newKafkaEnv(t, testenv.KFake(t), 2)
	path := filepath.Join(t.TempDir(), "0.log")
	lw := newLineWriter(t, path)
	opts := fastTail(t, k)
	run := startTail(t, k, opts, []string{path})
	lw.write(1000)
	waitCaughtUp(t, run.tl, path)
	require.NoError(t, run.stop())

	// Two rotations while down, named as the kubelet names them: the
	// first file was followed (found again by its identity), the second
	// never was and is found by its name only.
	for i, stamp := range []string{"20261127-130405", "20261127-140405"} {
		lw.write(2000 + i*1000)
		require.NoError(t, os.Rename(path, path+"."+stamp))
		lw.reopen()
	}
	lw.write(4000)
	run = startTail(t, k, opts, []string{path})
	waitCaughtUp(t, run.tl, path)
	require.NoError(t, run.stop())
	requireEachLineOnce(t, k, path, 4000)
}

// TestTailOldRotatedLogIsALog: a rotated file of the log whose lines are
// dead-lettered only because their times are further than events.max_skew
// from now (a backlog older than the limit, read with --from-start) is a
// log of the path: the tail does not say it is not, nor tell the user to
// narrow ingest.rotated. The DLQ summary names the setting instead.
func TestTailOldRotatedLogIsALog(t *testing.T) {
	k := newKafkaEnv(t, testenv.KFake(t), 2)
	dir := t.TempDir()
	path := filepath.Join(dir, "access.log")
	old := time.Now().Add(-30 * 24 * time.Hour).UnixMilli()
	var b strings.Builder
	for i := range 30 {
		fmt.Fprintf(&b, `{"key":"k%d","bytes":%d,"time":%d}`+"\n", i%16, i, old+int64(i))
	}
	require.NoError(t, os.WriteFile(path+"-20261027", []byte(b.String()), 0o644))
	require.NoError(t, os.WriteFile(path, []byte(fmt.Sprintf(`{"key":"k1","bytes":1,"time":%d}`+"\n", time.Now().UnixMilli())), 0o644))

	opts := fastTail(t, k)
	prod := k.tailProducer(t, opts, schemas.Binary)
	parser, err := logparse.NewJSON(logparse.JSONConfig{Key: "key", Bytes: "bytes", Time: "time"}, "test")
	require.NoError(t, err)
	pl, err := NewLineSender(LineSenderConfig{Parser: parser, Producer: prod, Limits: schemas.Limits{MaxSkew: 168 * time.Hour}})
	require.NoError(t, err)
	logs := &testenv.SyncBuffer{}
	tl, err := NewTailer(TailConfig{TailOptions: opts, Paths: []string{path}, FromStart: true, StopTimeout: 10 * time.Second,
		Logger: slog.New(slog.NewTextHandler(logs, nil))}, pl)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- tl.Run(ctx) }()
	waitCaughtUp(t, tl, path)
	cancel()
	require.NoError(t, <-done)
	require.Len(t, readAll(t, k.seeds, k.dlq), 30, "the old lines are dead-lettered (time_skew)")
	require.Contains(t, logs.String(), "first draining access.log-20261027 from its start (--from-start)")
	require.NotContains(t, logs.String(), "does not look like a log", "a log of the path, only old")
}
