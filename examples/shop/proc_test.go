package main

import (
	"bufio"
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

// The harness for tests of the binaries as an operator runs them: built
// once per test run (with -race when the tests run with it), each started
// as a process with its own stdout and stderr, stopped with a signal.

var (
	buildOnce sync.Once
	binDir    string
	buildErr  error
)

// Packages the tests run, by binary name, relative to this folder.
var binPkgs = map[string]string{"shop": ".", "load": "./load", "detect": "../../cmd/detect"}

// binary returns the path of the named binary, building them all on the
// first call.
func binary(t testing.TB, name string) string {
	t.Helper()
	buildOnce.Do(func() {
		binDir, buildErr = os.MkdirTemp("", "keyheat-shop-bin-")
		if buildErr != nil {
			return
		}
		for bin, pkg := range binPkgs {
			args := []string{"build", "-o", filepath.Join(binDir, bin)}
			if raceEnabled {
				args = append(args, "-race")
			}
			if out, err := exec.Command("go", append(args, pkg)...).CombinedOutput(); err != nil {
				buildErr = &buildError{pkg: pkg, err: err, out: string(out)}
				return
			}
		}
	})
	require.NoError(t, buildErr)
	return filepath.Join(binDir, name)
}

type buildError struct {
	pkg string
	err error
	out string
}

func (e *buildError) Error() string { return "go build " + e.pkg + ": " + e.err.Error() + "\n" + e.out }

// proc is a running process.
type proc struct {
	t      testing.TB
	name   string
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

// index returns the number of the first line matching re, or -1.
func (l *lines) index(re *regexp.Regexp) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, s := range l.all {
		if re.MatchString(s) {
			return i
		}
	}
	return -1
}

// start runs the named binary with args. The process is killed when the
// test ends if it still runs, and its output logged if the test failed.
func start(t testing.TB, name string, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(binary(t, name), args...)
	so, err := cmd.StdoutPipe()
	require.NoError(t, err)
	se, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	p := &proc{t: t, name: name, cmd: cmd, done: make(chan struct{})}
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
			t.Logf("%s %s\nstdout:\n%s\nstderr:\n%s", name, strings.Join(args, " "), p.stdout, p.stderr)
		}
	})
	return p
}

// waitOut waits until stdout has a line matching re and returns its
// submatches.
func (p *proc) waitOut(re string, timeout time.Duration) []string {
	return p.wait(p.stdout, re, timeout)
}

// waitErr waits until stderr (the log) has a line matching re and returns
// its submatches.
func (p *proc) waitErr(re string, timeout time.Duration) []string {
	return p.wait(p.stderr, re, timeout)
}

func (p *proc) wait(l *lines, expr string, timeout time.Duration) []string {
	p.t.Helper()
	re := regexp.MustCompile(expr)
	deadline := time.After(timeout) // a hang guard, not a timing assertion
	for {
		if m := l.match(re); len(m) > 0 {
			return re.FindStringSubmatch(m[0])
		}
		select {
		case <-l.added:
		case <-p.done:
			if m := l.match(re); len(m) > 0 {
				return re.FindStringSubmatch(m[0])
			}
			p.t.Fatalf("%s exited (%v) before a line matching %q", p.name, p.err, expr)
		case <-deadline:
			p.t.Fatalf("%s: no line matching %q within %s", p.name, expr, timeout)
		}
	}
}

// signal sends sig, as an operator or an orchestrator stops a process.
func (p *proc) signal(sig syscall.Signal) {
	p.t.Helper()
	require.NoError(p.t, p.cmd.Process.Signal(sig))
}

// waitExit waits for the process to exit and returns its exit code.
func (p *proc) waitExit(timeout time.Duration) int {
	p.t.Helper()
	select {
	case <-p.done:
	case <-time.After(timeout):
		p.t.Fatalf("%s did not exit within %s", p.name, timeout)
	}
	if p.err == nil {
		return 0
	}
	if ee, ok := p.err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	p.t.Fatalf("wait for %s: %v", p.name, p.err)
	return -1
}
