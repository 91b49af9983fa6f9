//go:build unix

package toolcmd

import (
	"os"
	"syscall"
)

// stopNowSignal is what StopNow sends: a signal of its own, so Run cannot
// take it for an echo of the first interruption.
var stopNowSignal os.Signal = syscall.SIGUSR1
