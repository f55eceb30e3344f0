package archive

import (
	"context"
	"testing"
	"time"
)

// OpenFSForTest opens an archive on fsys with the clock now.
func OpenFSForTest(t testing.TB, opts Options, fsys FS, now func() time.Time) *Archive {
	t.Helper()
	a, err := openFS(context.Background(), opts, fsys, nil, nil, now)
	if err != nil {
		t.Fatalf("open archive: %v", err)
	}
	return a
}

// Crash stops the archive's goroutine and abandons everything buffered,
// as a killed process would: nothing is flushed, staging keeps its files.
func (a *Archive) Crash() {
	a.closeOnce.Do(func() {
		close(a.stop)
		<-a.done
		a.mu.Lock()
		a.closed = true
		a.mu.Unlock()
	})
}

// RollAged runs one pass of the roll goroutine now.
func (a *Archive) RollAged() { a.rollAged() }

// Escape is escape, for tests of the layout.
var Escape = escape
