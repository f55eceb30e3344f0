package testenv

import (
	"os/exec"
	"syscall"
)

// dieWithTest makes the kernel kill cmd's process when the test binary
// goes, however it ends (a go test -timeout panic, a SIGKILL): a
// process left running would go on writing to the shared services.
// Strictly the signal comes when the OS thread that started the process
// exits; the Go runtime ends a thread only with the binary, or when a
// goroutine that locked it to itself (runtime.LockOSThread) returns
// without unlocking, which the harness never does.
func dieWithTest(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
