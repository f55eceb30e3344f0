//go:build !race

package testenv

// raceEnabled says whether this test binary runs with the race detector:
// the binaries [Binary] builds then run with it too.
const raceEnabled = false
