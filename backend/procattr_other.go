//go:build !linux

package backend

import "os/exec"

// killWithParent has no equivalent outside Linux; the plugin's parent
// watchdog (see Serve) covers the case there.
func killWithParent(*exec.Cmd) {}
