//go:build race

package main

// raceEnabled builds the binaries the tests run with the race detector
// too, when the tests run under it.
const raceEnabled = true
