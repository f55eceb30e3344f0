package testenv

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Process is a command a test runs as an operator would: a process of
// its own, with its own stdout and stderr, stopped by a signal. Start
// starts one.
type Process struct {
	// Stdout and Stderr are what the process wrote to each; with
	// [CombinedOutput] they are one and the same, in the order written.
	Stdout, Stderr *Lines

	t    testing.TB
	name string
	cmd  *exec.Cmd
	done chan struct{}
	err  error // cmd.Wait's; set before done is closed
}

// ProcessOpt is an option of [Start].
type ProcessOpt interface{ apply(*processConfig) }

type processConfig struct {
	env      []string
	stdin    io.Reader
	combined bool
}

type processOpt func(*processConfig)

func (o processOpt) apply(c *processConfig) { o(c) }

// Env adds variables ("NAME=value") to the environment the process
// inherits from the test.
func Env(kv ...string) ProcessOpt {
	return processOpt(func(c *processConfig) { c.env = append(c.env, kv...) })
}

// Stdin is the process's standard input; without it, it reads none
// (/dev/null).
func Stdin(r io.Reader) ProcessOpt {
	return processOpt(func(c *processConfig) { c.stdin = r })
}

// CombinedOutput collects stdout and stderr as one stream, in the order
// the process wrote them: for a command whose messages a person reads
// in a terminal, both streams together.
func CombinedOutput() ProcessOpt {
	return processOpt(func(c *processConfig) { c.combined = true })
}

// Start runs the binary at path (from [Binary]) with args. The process
// is killed when the test ends if it still runs, and what it wrote is
// logged if the test failed. On Linux it is also killed when the test
// binary dies.
func Start(t testing.TB, path string, args []string, opts ...ProcessOpt) *Process {
	t.Helper()
	var cfg processConfig
	for _, o := range opts {
		o.apply(&cfg)
	}
	p := &Process{t: t, name: filepath.Base(path), cmd: exec.Command(path, args...), done: make(chan struct{}),
		Stdout: newLines()}
	p.Stderr = p.Stdout
	if !cfg.combined {
		p.Stderr = newLines()
	}
	p.cmd.Env = append(os.Environ(), cfg.env...)
	p.cmd.Stdin = cfg.stdin
	// One writer for both streams when combined: exec.Cmd then copies
	// them through one pipe, so the order is the order written.
	p.cmd.Stdout, p.cmd.Stderr = p.Stdout, p.Stderr
	dieWithTest(p.cmd)
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", p.name, err)
	}
	go func() {
		// Wait returns once the process exited and exec.Cmd copied all
		// of its output.
		p.err = p.cmd.Wait()
		p.Stdout.close()
		p.Stderr.close()
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = p.cmd.Process.Kill()
			<-p.done
		}
		if t.Failed() {
			if cfg.combined {
				t.Logf("%s %s\noutput:\n%s", p.name, strings.Join(args, " "), p.Stdout)
			} else {
				t.Logf("%s %s\nstdout:\n%s\nstderr:\n%s", p.name, strings.Join(args, " "), p.Stdout, p.Stderr)
			}
		}
	})
	return p
}

// WaitStdout waits until stdout has a line matching the regular
// expression expr and returns the first such line. It fails the test
// when the process exits without one, or after [HangGuard].
func (p *Process) WaitStdout(expr string) string {
	p.t.Helper()
	return p.waitLine(p.Stdout, "stdout", expr)
}

// WaitStderr is [Process.WaitStdout] for stderr (a command's log).
func (p *Process) WaitStderr(expr string) string {
	p.t.Helper()
	return p.waitLine(p.Stderr, "stderr", expr)
}

func (p *Process) waitLine(l *Lines, stream, expr string) string {
	p.t.Helper()
	re := regexp.MustCompile(expr)
	guard := time.NewTimer(HangGuard)
	defer guard.Stop()
	for {
		if m := l.Match(re); len(m) > 0 {
			return m[0]
		}
		select {
		case <-l.added:
		case <-p.done:
			if m := l.Match(re); len(m) > 0 {
				return m[0]
			}
			p.t.Fatalf("%s exited (%v) before a line matching %q on its %s", p.name, p.err, expr, stream)
		case <-guard.C:
			p.t.Fatalf("%s: no line matching %q on its %s after %s (hang guard)", p.name, expr, stream, HangGuard)
		}
	}
}

// Signal sends sig to the process.
func (p *Process) Signal(sig os.Signal) {
	p.t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		p.t.Fatalf("signal %s to %s: %v", sig, p.name, err)
	}
}

// Stop sends SIGTERM, as an operator or an orchestrator stops a process,
// and returns the exit code ([Process.WaitExit]).
func (p *Process) Stop() int {
	p.t.Helper()
	p.Signal(syscall.SIGTERM)
	return p.WaitExit()
}

// Kill sends SIGKILL (a crash: nothing flushed, nothing committed) and
// returns once the process is gone.
func (p *Process) Kill() {
	p.t.Helper()
	p.Signal(syscall.SIGKILL)
	<-p.done
}

// WaitExit waits for the process to exit and returns its exit code: -1
// when a signal ended it. It fails the test after [HangGuard].
func (p *Process) WaitExit() int {
	p.t.Helper()
	guard := time.NewTimer(HangGuard)
	defer guard.Stop()
	select {
	case <-p.done:
	case <-guard.C:
		p.t.Fatalf("%s did not exit within %s (hang guard)", p.name, HangGuard)
	}
	if p.err == nil {
		return 0
	}
	if ee, ok := errors.AsType[*exec.ExitError](p.err); ok {
		return ee.ExitCode()
	}
	p.t.Fatalf("wait for %s: %v", p.name, p.err)
	return -1
}

// Done is closed when the process has exited and all it wrote is in
// Stdout and Stderr.
func (p *Process) Done() <-chan struct{} { return p.done }

// Err is how the process ended, as exec.Cmd.Wait says: nil for exit code
// 0. It is valid once Done is closed.
func (p *Process) Err() error {
	select {
	case <-p.done:
		return p.err
	default:
		return fmt.Errorf("%s still runs", p.name)
	}
}

// Pid is the process's id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }
