package testenv

import (
	"os/exec"
	"syscall"
)

// dieWithTest makes the kernel kill cmd's process when the test binary
// goes, however it ends (a go test -timeout panic, a SIGKILL): a
// process left running would go on writing to the shared services.
func dieWithTest(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
