//go:build !unix

package backend

import (
	"os"
	"os/exec"
)

// Outside Unix there are no process groups: Kill ends the plugin process
// only, and Serve's parent check ends a plugin whose host died.
func ownProcessGroup(*exec.Cmd) {}

func killProcessGroup(pid int) {
	if p, err := os.FindProcess(pid); err == nil {
		_ = p.Kill()
	}
}

func startWatchdog(int, string) func() { return func() {} }

func peakRSS(int) (int64, bool) { return 0, false }

// ResidentBytes is not measured outside Linux: 0.
func ResidentBytes() int64 { return 0 }
