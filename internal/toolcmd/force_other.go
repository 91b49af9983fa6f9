//go:build !unix

package toolcmd

import "os"

// stopNowSignal: none outside Unix; StopNow kills the command.
var stopNowSignal os.Signal
