package testenv

import (
	"testing"
	"time"
)

// HangGuard is how long a test waits for a condition before it gives up:
// only a guard against a test that would otherwise hang, never a measure
// of how fast something is. It is long so that a starved machine (CI
// with the race detector on two cores) passes every test a fast one
// passes; a test that waits this long has found a bug, not a slow host.
// It stays below go test's own default -timeout of 10 minutes, so that a
// hang fails with the test's message instead of a dump of every
// goroutine.
const HangGuard = 5 * time.Minute

// Eventually calls cond until it returns true and fails the test, naming
// what it waited for, when it did not within [HangGuard].
//
// cond runs on the test's goroutine, so it may call t.Fatal and require's
// functions. It is called at once, then again after pauses that grow from
// a millisecond to 100 ms, and never shorter than cond's own last call
// took: a cheap condition is seen soon after it holds, and an expensive one
// (a query, an HTTP request) takes at most about half the time.
//
// testify's require.Eventually does not fit: it calls the condition on a
// goroutine of its own (a require inside it cannot stop the test, and a
// slow call overlaps the next tick's), at a fixed tick, and fails without
// saying what it waited for.
func Eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	EventuallyExplained(t, what, HangGuard, func() (bool, string) { return cond(), "" })
}

// EventuallyExplained is [Eventually] for a condition that says why it
// does not hold yet, with the hang guard given: when guard passes, the
// test fails with cond's last reason. A guard of 0 means [HangGuard]. It
// is for waits that are long by design, such as a check after a broker
// outage, whose guard is longer than HangGuard.
func EventuallyExplained(t testing.TB, what string, guard time.Duration, cond func() (ok bool, why string)) {
	t.Helper()
	if guard <= 0 {
		guard = HangGuard
	}
	deadline := time.Now().Add(guard)
	pause := time.Millisecond
	for {
		began := time.Now()
		ok, why := cond()
		if ok {
			return
		}
		took := time.Since(began)
		if time.Now().After(deadline) {
			if why != "" {
				t.Fatalf("gave up after %s (hang guard) waiting for %s: %s", guard, what, why)
			}
			t.Fatalf("gave up after %s (hang guard) waiting for %s", guard, what)
		}
		time.Sleep(max(pause, took))
		pause = min(2*pause, 100*time.Millisecond)
	}
}
