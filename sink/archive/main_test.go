package archive_test

import (
	"testing"

	"go.uber.org/goleak"
)

// The archive owns a roll goroutine; every test must stop it (Close, or
// Crash for a simulated death).
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
