//go:build !race

package faults

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/keyheat/keyheat/internal/testenv"
)

// What the suite does to the machine: a small file system under the
// archive that it fills, and busy loops beside the processes.

// mountTmpfs mounts a tmpfs of sizeMiB at dir and unmounts it when the
// test ends. It returns an error saying what to do when the machine does
// not allow it (mount needs root, or CAP_SYS_ADMIN).
func mountTmpfs(t *testing.T, dir string, sizeMiB int) error {
	out, err := exec.Command("mount", "-t", "tmpfs", "-o", fmt.Sprintf("size=%dm", sizeMiB), "tmpfs", dir).CombinedOutput()
	if err != nil {
		return fmt.Errorf("mount -t tmpfs -o size=%dm tmpfs %s: %w: %s (the disk-full fault needs a file system of its own "+
			"under the archive: run the suite as root, or with CAP_SYS_ADMIN)", sizeMiB, dir, err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
	return nil
}

// requireOrSkip fails the test with msg under CI=true, where every fault
// must run, and skips it elsewhere.
func requireOrSkip(t *testing.T, err error) {
	t.Helper()
	if err == nil {
		return
	}
	if testenv.InCI() {
		t.Fatalf("%v (CI=true: the suite runs every fault or fails)", err)
	}
	t.Skip(err.Error())
}

// fillDisk writes a file at path until its file system has no space
// left, and returns how many bytes it took.
func fillDisk(path string) (int64, error) {
	f, err := os.Create(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	var n int64
	for _, size := range []int{1 << 20, 64 << 10, 4 << 10, 512} {
		buf := make([]byte, size)
		for {
			k, err := f.Write(buf)
			n += int64(k)
			if errors.Is(err, syscall.ENOSPC) {
				break
			}
			if err != nil {
				return n, err
			}
		}
	}
	// What the writes took is in the page cache; make the file system
	// account for it before the suite says the disk is full.
	if err := f.Sync(); err != nil && !errors.Is(err, syscall.ENOSPC) {
		return n, err
	}
	return n, nil
}

// busyLoops starts n shell busy loops beside the processes under test and
// returns a function that kills them (by pid: only these).
func busyLoops(t *testing.T, n int) (stop func()) {
	var cmds []*exec.Cmd
	for range n {
		c := exec.Command("sh", "-c", "while :; do :; done")
		if err := c.Start(); err != nil {
			t.Fatalf("start a busy loop: %v", err)
		}
		cmds = append(cmds, c)
	}
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		for _, c := range cmds {
			_ = c.Process.Kill()
			_ = c.Wait()
		}
	}
	t.Cleanup(stop)
	return stop
}

// logDir is where the processes' logs go: under KEYHEAT_TEST_OUT when
// set (make test sets it), so they outlive the test, else in the test's
// temporary folder.
func logDir(t *testing.T) string {
	if out := os.Getenv("KEYHEAT_TEST_OUT"); out != "" {
		dir := filepath.Join(out, "faults", testenv.UniqueName(t, "run"))
		if err := os.MkdirAll(dir, 0o755); err == nil {
			return dir
		}
	}
	return t.TempDir()
}
