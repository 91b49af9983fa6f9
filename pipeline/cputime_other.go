//go:build !unix

package pipeline

import "time"

// processCPU: not measured here.
func processCPU() (time.Duration, bool) { return 0, false }
