package pipeline

import (
	"testing"

	"go.uber.org/goleak"
)

// The package starts no goroutines; this checks the tests' own goroutines
// all finish, and would catch one sneaking into the package.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
