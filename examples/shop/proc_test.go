package main

import (
	"testing"

	"github.com/keyheat/keyheat/internal/testenv"
)

// Tests of the binaries as an operator runs them use testenv's process
// harness: each built once per test run (with -race when the tests run
// with it), started as a process with its own stdout and stderr, stopped
// with a signal.

// Packages the tests run, by binary name, relative to this folder.
var binPkgs = map[string]string{"shop": ".", "load": "./load", "detect": "../../cmd/detect"}

// binary returns the path of the named binary, building it on the first
// call.
func binary(t testing.TB, name string) string {
	t.Helper()
	return testenv.Binary(t, binPkgs[name])
}

// start runs the named binary with args.
func start(t testing.TB, name string, args ...string) *testenv.Process {
	t.Helper()
	return testenv.Start(t, binary(t, name), args)
}
