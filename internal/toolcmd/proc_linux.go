package toolcmd

import "syscall"

// dieWithParent has the kernel SIGKILL the child when the thread that
// started it ends (with the process, however it dies).
func dieWithParent() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
