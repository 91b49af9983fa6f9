package toolcmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"syscall"
	"time"
)

// stopWait is how long Exec waits, after asking the command to stop
// (SIGTERM: Run's grace), before it kills it.
const stopWait = 10 * time.Second

// sigpipeExit is the exit code a shell reports for a process that SIGPIPE
// killed (128 + 13).
const sigpipeExit = 141

// Exec runs a plugin binary's command for evalrun (args[0] names it) with
// evalrun's stdin and the given stdout and stderr. The end of ctx (evalrun
// interrupted) asks it to stop (SIGTERM, which Run turns into a clean stop)
// and kills it if it has not after stopWait; evalrun's death kills it on
// Linux, SIGKILL included: a long generate or ops run does not go on alone.
// A command that ran and failed gives an *Error with its exit code and no
// message: it printed its own. One that a signal ended is named: with
// "interrupted" when evalrun stopped it, silently with 141 for SIGPIPE (its
// reader went away: evalrun inspect | head).
func Exec(ctx context.Context, path string, args []string, stdout, stderr io.Writer) error {
	c := exec.CommandContext(ctx, path, args...)
	c.Stdin, c.Stdout, c.Stderr = os.Stdin, stdout, stderr
	c.SysProcAttr = dieWithParent()
	c.Cancel = func() error {
		err := c.Process.Signal(syscall.SIGTERM)
		if err == nil || errors.Is(err, os.ErrProcessDone) {
			return err // ErrProcessDone: it had ended, not interrupted
		}
		return c.Process.Kill() // no SIGTERM on this system
	}
	c.WaitDelay = stopWait
	// The parent-death signal follows the thread that forked the child, and
	// Go ends a thread only when its goroutine exits locked to it: lock this
	// one for the child's life, so the signal means "evalrun died".
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	err := c.Start()
	if err == nil {
		done := running.set(c.Process)
		err = c.Wait()
		running.clear(done)
	}
	name := filepath.Base(path) + " " + args[0]
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee) && ee.ExitCode() > 0:
		return &Error{Code: ee.ExitCode()}
	case ctx.Err() != nil && err != nil, ee != nil && (killedBy(ee, syscall.SIGINT) || killedBy(ee, syscall.SIGTERM)):
		// The second: a terminal's Ctrl-C reaches the command too, and its
		// end may come before evalrun's own handler cancels ctx.
		return BackendErr(fmt.Errorf("%s: interrupted", name))
	case ee != nil && killedBy(ee, syscall.SIGPIPE):
		return &Error{Code: sigpipeExit}
	case err != nil:
		return BackendErr(fmt.Errorf("%s: %w", name, err))
	}
	return nil
}

// killedBy reports whether the process ended on signal sig.
func killedBy(ee *exec.ExitError, sig syscall.Signal) bool {
	ws, ok := ee.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == sig
}

// running is the command Exec runs, for StopNow.
var running runningCmd

type runningCmd struct {
	sync.Mutex
	proc *os.Process
	done chan struct{} // closed when it has ended
}

func (r *runningCmd) set(p *os.Process) chan struct{} {
	r.Lock()
	defer r.Unlock()
	r.proc, r.done = p, make(chan struct{})
	return r.done
}

func (r *runningCmd) clear(done chan struct{}) {
	r.Lock()
	defer r.Unlock()
	close(done)
	r.proc = nil
}

// StopNow is for evalrun quitting at once (a second Ctrl-C), which would
// kill the command it runs (the parent-death signal) in the middle of a
// write: it asks the command to stop at once (SIGTERM again, which Run
// takes as a second interruption: temporary files removed, exit 3) and
// waits up to limit for it to end.
func StopNow(limit time.Duration) {
	running.Lock()
	p, done := running.proc, running.done
	running.Unlock()
	if p == nil {
		return
	}
	if p.Signal(syscall.SIGTERM) != nil {
		return
	}
	select {
	case <-done:
	case <-time.After(limit):
	}
}
