package reload

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/keyheat/keyheat/internal/testenv"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestWatchFile: a save by rename over the file is seen, a rewrite with
// the same bytes is not.
func TestWatchFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "keyheat.yaml")
	require.NoError(t, os.WriteFile(path, []byte("a: 1\n"), 0o600))
	ctx, cancel := context.WithCancel(context.Background())
	calls := make(chan string, 10)
	done := make(chan error)
	go func() {
		done <- watchFile(ctx, path, 20*time.Millisecond, slog.New(slog.DiscardHandler), func() {
			b, _ := os.ReadFile(path)
			calls <- string(b)
		})
	}()
	defer func() {
		cancel()
		require.NoError(t, <-done)
	}()
	// Give the watcher time to start: events before it would be missed,
	// and a test of a missed first event would fail below, not pass.
	waitFor := func(want string) {
		t.Helper()
		deadline := time.After(testenv.HangGuard)
		for {
			select {
			case got := <-calls:
				if got == want {
					return
				}
			case <-deadline:
				t.Fatalf("no change to %q seen", want)
			}
		}
	}
	save := func(body string) {
		tmp := filepath.Join(dir, ".keyheat.yaml.tmp")
		require.NoError(t, os.WriteFile(tmp, []byte(body), 0o600))
		require.NoError(t, os.Rename(tmp, path))
	}
	// A save before the watcher started is missed, so save again until
	// one is seen; the give-up is only a hang guard.
	giveUp := time.Now().Add(testenv.HangGuard)
	for i := 0; ; i++ {
		save("a: " + strings.Repeat("2", i+1) + "\n")
		select {
		case got := <-calls:
			require.Contains(t, got, "a: 2")
		case <-time.After(200 * time.Millisecond):
			if time.Now().Before(giveUp) {
				continue
			}
			t.Fatalf("the watcher saw no save within %s (hang guard)", testenv.HangGuard)
		}
		break
	}
	save("b: 3\n")
	waitFor("b: 3\n")
	require.NoError(t, os.WriteFile(path, []byte("b: 3\n"), 0o600)) // same bytes
	select {
	case got := <-calls:
		t.Fatalf("called for unchanged content %q", got)
	case <-time.After(300 * time.Millisecond):
	}
}
