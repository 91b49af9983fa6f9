//go:build unix && !linux

package backend

import "syscall"

// setPdeathsig: no such signal outside Linux; Serve's parent check and the
// watchdog cover a host that dies.
func setPdeathsig(*syscall.SysProcAttr) {}

// peakRSS is not measured outside Linux (no /proc/PID/status).
func peakRSS(int) (int64, bool) { return 0, false }

// ResidentBytes is not measured outside Linux: 0.
func ResidentBytes() int64 { return 0 }
