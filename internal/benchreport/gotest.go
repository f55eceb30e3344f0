package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// run is one go test command of a figure.
type run struct {
	// pkg is the package, as go test takes it ("./pipeline/").
	pkg string
	// bench is the -bench pattern.
	bench string
	// benchtime is -benchtime: a count ("3x") where an iteration is
	// long, so that a figure's time does not depend on the machine's
	// speed.
	benchtime string
	// count is -count; 0 leaves it out (one run).
	count int
	// benchmem adds -benchmem.
	benchmem bool
	// timeout is go test's -timeout, a hang guard only; "" is 20m.
	timeout string
}

// args are go test's arguments for r.
func (r run) args() []string {
	a := []string{"test", "-run", "^$", "-bench", r.bench, "-benchtime", r.benchtime}
	if r.count > 0 {
		a = append(a, "-count", strconv.Itoa(r.count))
	}
	if r.benchmem {
		a = append(a, "-benchmem")
	}
	t := r.timeout
	if t == "" {
		t = "20m"
	}
	return append(a, "-timeout", t, r.pkg)
}

// String is the command as a user types it in a POSIX shell.
func (r run) String() string {
	a := r.args()
	q := make([]string, len(a))
	for i, s := range a {
		q[i] = shellQuote(s)
	}
	return "go " + strings.Join(q, " ")
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./=:,+") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// outcome is what one run gave.
type outcome struct {
	run     run
	results []result
	took    time.Duration
	load    float64 // one-minute load average when it started
	// err is set when go test failed; failure holds the lines that say
	// why.
	err     error
	failure string
}

// runGoTest runs r with goCmd from the current directory, copying go
// test's output to raw as it comes, and parses its benchmark lines.
func runGoTest(ctx context.Context, goCmd string, r run, procs int, raw io.Writer) outcome {
	o := outcome{run: r, load: loadAverage()}
	var buf bytes.Buffer
	cmd := exec.CommandContext(ctx, goCmd, r.args()...)
	cmd.Stdout = io.MultiWriter(&buf, raw)
	cmd.Stderr = cmd.Stdout
	// go test stops its benchmark binary on a signal of its own; the
	// grace period covers a benchmark's cleanups (topics deleted).
	cmd.WaitDelay = 30 * time.Second
	start := time.Now()
	fmt.Fprintf(raw, "# %s\n", r)
	o.err = cmd.Run()
	o.took = time.Since(start)
	o.results, _ = parse(bytes.NewReader(buf.Bytes()), procs)
	if o.err != nil {
		o.failure = failureLines(buf.String())
	}
	return o
}

// failLine starts what go test prints about a failure.
var failLine = regexp.MustCompile(`^\s*(--- FAIL|FAIL|panic:|\S+_test\.go:\d+:|\s+Error:|build failed|# )`)

// failureLines picks the lines of out that say what failed, at most 30.
func failureLines(out string) string {
	var keep []string
	for _, line := range strings.Split(out, "\n") {
		if failLine.MatchString(line) {
			keep = append(keep, strings.TrimRight(line, " \t"))
		}
	}
	if len(keep) > 30 {
		keep = keep[:30]
	}
	return strings.Join(keep, "\n")
}
