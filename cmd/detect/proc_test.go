package main

import (
	"context"
	"regexp"
	"testing"

	"github.com/keyheat/keyheat/internal/testenv"
)

// Tests of the detect binary as an operator runs it use testenv's process
// harness: the binary built once per test run, started as a process with
// its own stdout and stderr, stopped with SIGTERM or killed with SIGKILL.

// binary builds cmd/detect once (with -race when the tests run with it)
// and returns its path.
func binary(t testing.TB) string {
	t.Helper()
	return testenv.Binary(t, ".")
}

// start runs the detect binary with args and extra environment.
func start(t testing.TB, env []string, args ...string) *testenv.Process {
	t.Helper()
	return testenv.Start(t, binary(t), args, testenv.Env(env...))
}

// ctx is a context for the test's own Kafka calls, bounded only by the
// hang guard.
func ctx(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), testenv.HangGuard)
	t.Cleanup(cancel)
	return c
}

func regexpOf(expr string) *regexp.Regexp { return regexp.MustCompile(expr) }
