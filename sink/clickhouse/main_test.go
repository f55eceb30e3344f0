package clickhouse

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if a test leaves goroutines behind: the
// writer's flusher and clickhouse-go's pools must be gone after Close.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
