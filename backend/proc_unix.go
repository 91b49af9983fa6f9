//go:build unix

package backend

import (
	"os"
	"os/exec"
	"strconv"
	"syscall"
)

// ownProcessGroup puts the plugin in a new process group (its pid is the
// group's id), so signals to the host's group do not reach it and Kill can
// end everything it starts.
func ownProcessGroup(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
	setPdeathsig(cmd.SysProcAttr)
}

func killProcessGroup(pgid int) { _ = syscall.Kill(-pgid, syscall.SIGKILL) }

// watchdogScript waits for the end of its stdin, a pipe whose only writer
// is the host, and then removes the plugin's socket directory and kills the
// plugin's process group, itself included. The pipe ends when the host exits
// in any way, SIGKILL included.
const watchdogScript = `read _; [ -n "$2" ] && rm -rf -- "$2"; kill -s KILL -- -"$1"`

// startWatchdog starts the watchdog in the plugin's process group and returns
// the function that fires it. Without sh there is no watchdog: the plugin
// itself still exits when the host dies (Pdeathsig on Linux, Serve's parent
// check elsewhere), only processes it started could outlive the host.
func startWatchdog(pgid int, socketDir string) (fire func()) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		return func() {}
	}
	r, w, err := os.Pipe()
	if err != nil {
		return func() {}
	}
	defer r.Close()
	cmd := exec.Command(sh, "-c", watchdogScript, "evalrun-watchdog", strconv.Itoa(pgid), socketDir)
	cmd.Stdin = r
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pgid: pgid}
	if err := cmd.Start(); err != nil {
		w.Close()
		return func() {}
	}
	pid := cmd.Process.Pid
	launched.Store(pid, true)
	go func() { cmd.Wait(); launched.Delete(pid) }() // reap it
	return func() { w.Close() }
}
