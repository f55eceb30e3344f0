//go:build unix

package detect

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// lockSlot takes an exclusive, non-blocking flock on path (created if
// missing), held until release or the process's death. flock locks
// belong to the open file, so two opens in one process exclude each
// other too.
func lockSlot(path string) (release func(), err error) {
	f, err := os.OpenFile(path, os.O_RDONLY|os.O_CREATE, 0o666)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, errSlotTaken
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return func() { _ = f.Close() }, nil
}
