package cli

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// lines is a log sink that hands each record to the test.
type lines chan string

func (l lines) Write(p []byte) (int, error) {
	l <- string(p)
	return len(p), nil
}

// TestSayWhileWaiting: a wait that lasts says so, with its deadline and
// the time left; stop leaves no goroutine behind (TestMain's goleak).
func TestSayWhileWaiting(t *testing.T) {
	out := make(lines, 16)
	log := slog.New(slog.NewTextHandler(out, nil))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	deadline, _ := ctx.Deadline()

	stop := SayWhileWaiting(ctx, log, "stopping: waiting for the sink")
	got := <-out
	stop()
	require.Contains(t, got, `level=INFO msg="stopping: waiting for the sink" deadline=`+deadline.Format(time.RFC3339)+" left=")
}
