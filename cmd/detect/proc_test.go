package main

import (
	"bufio"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The harness for tests of the detect binary as an operator runs it:
// built once per test run, started as a process with its own stdout and
// stderr, stopped with SIGTERM or killed with SIGKILL.

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
	binDir    string
)

// binary builds cmd/detect once (with -race when the tests run with it)
// and returns its path.
func binary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		binDir, buildErr = os.MkdirTemp("", "keyheat-detect-bin-")
		if buildErr != nil {
			return
		}
		binPath = filepath.Join(binDir, "detect")
		args := []string{"build", "-o", binPath}
		if raceEnabled {
			args = append(args, "-race")
		}
		out, err := exec.Command("go", append(args, ".")...).CombinedOutput()
		if err != nil {
			buildErr = &buildError{err: err, out: string(out)}
		}
	})
	require.NoError(t, buildErr)
	return binPath
}

type buildError struct {
	err error
	out string
}

func (e *buildError) Error() string { return "go build: " + e.err.Error() + "\n" + e.out }

// proc is a running detect process.
type proc struct {
	t      testing.TB
	cmd    *exec.Cmd
	stdout *lines
	stderr *lines
	done   chan struct{}
	err    error
}

// lines collects a stream's lines for tests to wait on.
type lines struct {
	mu    sync.Mutex
	all   []string
	added chan struct{}
}

func newLines(r io.Reader) (*lines, chan struct{}) {
	l := &lines{added: make(chan struct{}, 1)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			l.mu.Lock()
			l.all = append(l.all, sc.Text())
			l.mu.Unlock()
			select {
			case l.added <- struct{}{}:
			default:
			}
		}
	}()
	return l, done
}

func (l *lines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.all, "\n")
}

// match returns the lines matching re so far.
func (l *lines) match(re *regexp.Regexp) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, s := range l.all {
		if re.MatchString(s) {
			out = append(out, s)
		}
	}
	return out
}

// start runs the detect binary with args and extra environment.
func start(t testing.TB, env []string, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(binary(t), args...)
	cmd.Env = append(os.Environ(), env...)
	so, err := cmd.StdoutPipe()
	require.NoError(t, err)
	se, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	p := &proc{t: t, cmd: cmd, done: make(chan struct{})}
	var oDone, eDone chan struct{}
	p.stdout, oDone = newLines(so)
	p.stderr, eDone = newLines(se)
	go func() {
		<-oDone
		<-eDone
		p.err = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = cmd.Process.Kill()
			<-p.done
		}
		if t.Failed() {
			t.Logf("detect %s\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), p.stdout, p.stderr)
		}
	})
	return p
}

// waitOut waits until stdout has a line matching re and returns it.
func (p *proc) waitOut(re string, timeout time.Duration) string { return p.wait(p.stdout, re, timeout) }

// waitErr waits until stderr (the log) has a line matching re.
func (p *proc) waitErr(re string, timeout time.Duration) string { return p.wait(p.stderr, re, timeout) }

func (p *proc) wait(l *lines, expr string, timeout time.Duration) string {
	p.t.Helper()
	re := regexp.MustCompile(expr)
	deadline := time.After(timeout)
	for {
		if m := l.match(re); len(m) > 0 {
			return m[0]
		}
		select {
		case <-l.added:
		case <-p.done:
			if m := l.match(re); len(m) > 0 {
				return m[0]
			}
			p.t.Fatalf("detect exited (%v) before a line matching %q", p.err, expr)
		case <-deadline:
			p.t.Fatalf("no line matching %q within %s", expr, timeout)
		}
	}
}

// stop sends SIGTERM and waits for the exit: what a stop by an operator
// or an orchestrator does. It returns the exit code.
func (p *proc) stop(timeout time.Duration) int {
	p.t.Helper()
	require.NoError(p.t, p.cmd.Process.Signal(syscall.SIGTERM))
	return p.waitExit(timeout)
}

// kill sends SIGKILL: a crash, nothing flushed or committed.
func (p *proc) kill() {
	p.t.Helper()
	require.NoError(p.t, p.cmd.Process.Kill())
	<-p.done
}

func (p *proc) waitExit(timeout time.Duration) int {
	p.t.Helper()
	select {
	case <-p.done:
	case <-time.After(timeout):
		p.t.Fatalf("detect did not exit within %s", timeout)
	}
	if p.err == nil {
		return 0
	}
	if ee, ok := p.err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	p.t.Fatalf("wait: %v", p.err)
	return -1
}

// ctx is a context for the test's own Kafka calls.
func ctx(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return c
}

func regexpOf(expr string) *regexp.Regexp { return regexp.MustCompile(expr) }
