package backend

import (
	"os/exec"
	"syscall"
)

// killWithParent makes the kernel SIGKILL the plugin when the OS thread that
// started it exits (Launch keeps that thread alive for the plugin's life).
func killWithParent(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
}
