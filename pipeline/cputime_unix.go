//go:build unix

package pipeline

import (
	"syscall"
	"time"
)

// processCPU is the process's CPU time so far, user and system, every
// thread.
func processCPU() (time.Duration, bool) {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
