package smoke

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if a test leaves goroutines behind. franz-go
// clients, kfake clusters and clickhouse-go pools are all closed through
// t.Cleanup, and their goroutines exit within goleak's default retry window,
// so no goroutine needs to be ignored.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
