//go:build race

package pipeline

// raceEnabled shrinks the long streams under the race detector, which
// slows the per-event path about tenfold.
const raceEnabled = true
