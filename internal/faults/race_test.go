//go:build race

package faults

// raceEnabled builds the binaries under test with the race detector too,
// when the suite runs under it.
const raceEnabled = true
