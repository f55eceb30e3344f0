//go:build !race

package sketch

// raceEnabled shrinks the accuracy workloads under the race detector, which
// slows the hot paths about tenfold.
const raceEnabled = false
