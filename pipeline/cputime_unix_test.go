//go:build unix

package pipeline

import (
	"syscall"
	"time"
)

// cpuTime is the CPU time the process used so far (user and system, all
// threads). On a machine whose cores other work shares, a benchmark's
// CPU time per operation does not depend on how much of them it got.
func cpuTime() (time.Duration, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
