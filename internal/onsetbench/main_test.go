package onsetbench_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks that a campaign stops everything it started: detect,
// the follower, the generator and their clients.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
