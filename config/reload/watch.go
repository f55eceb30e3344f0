package reload

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/fsnotify/fsnotify"
)

// watchFile calls changed each time the content of the file at path
// changes, until ctx ends. It watches the file's folder rather than the
// file: editors save by writing a new file and renaming it over the old
// one, and Kubernetes swaps a ConfigMap's files by replacing a symlink,
// neither of which a watch on the file itself survives. Events are
// debounced by settle (a save is several events) and changed runs only
// when the bytes differ from those of the last call (or of the start), so
// touching the file does nothing. changed runs on watchFile's goroutine,
// one call at a time.
//
// watchFile returns once ctx ends, or at once with an error when the
// folder cannot be watched.
func watchFile(ctx context.Context, path string, settle time.Duration, log *slog.Logger, changed func()) error {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("watch %s: %w", path, err)
	}
	defer w.Close()
	if err := w.Add(filepath.Dir(path)); err != nil {
		return fmt.Errorf("watch %s: %w", path, err)
	}
	last, _ := os.ReadFile(path)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case _, ok := <-w.Events:
			if !ok {
				return nil
			}
			timer.Reset(settle)
		case err, ok := <-w.Errors:
			if !ok {
				return nil
			}
			log.Warn("watching config file", "path", path, "err", err)
		case <-timer.C:
			now, err := os.ReadFile(path)
			if err != nil {
				// Between a delete and the rename that replaces it; the
				// rename's event comes next.
				log.Debug("config file unreadable for now", "path", path, "err", err)
				continue
			}
			if bytes.Equal(now, last) {
				continue
			}
			last = now
			changed()
		}
	}
}
