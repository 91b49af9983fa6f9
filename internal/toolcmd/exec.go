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
	"slices"
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
// A command that exits by itself gives its own result, stopped or not: nil,
// or an *Error with its exit code and no message (it printed its own). One
// that a signal ended is named: "interrupted" when evalrun or the terminal
// stopped it, silently exit 141 for SIGPIPE (its reader went away: evalrun
// inspect | head), else the signal.
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
	ps := c.ProcessState
	switch {
	case ps == nil && ctx.Err() == nil: // it did not start
		return BackendErr(fmt.Errorf("%s: %w", name, err))
	case ps != nil && ps.Exited(): // by itself, even after a stop request: its own result
		if ps.ExitCode() == 0 {
			return nil
		}
		return &Error{Code: ps.ExitCode()}
	case ctx.Err() != nil || killedBy(ps, syscall.SIGINT, syscall.SIGTERM, stopNowSignal):
		// ctx: evalrun stopped it, or interrupted its start. A terminal's
		// Ctrl-C reaches the command too, and its end may come before
		// evalrun's own handler cancels ctx.
		return BackendErr(fmt.Errorf("%s: interrupted", name))
	case killedBy(ps, syscall.SIGPIPE):
		return &Error{Code: sigpipeExit}
	}
	return BackendErr(fmt.Errorf("%s: %w", name, err))
}

// killedBy reports whether the process ended on one of sigs.
func killedBy(ps *os.ProcessState, sigs ...os.Signal) bool {
	ws, ok := ps.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && slices.Contains(sigs, os.Signal(ws.Signal()))
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
// write: it tells the command to end at once (a signal of its own, SIGUSR1,
// which Run answers by removing its temporary files and exiting 3; outside
// Unix it kills it) and waits up to limit for it to end.
func StopNow(limit time.Duration) {
	running.Lock()
	p, done := running.proc, running.done
	running.Unlock()
	if p == nil {
		return
	}
	var err error
	if stopNowSignal != nil {
		err = p.Signal(stopNowSignal)
	} else {
		err = p.Kill()
	}
	if err != nil {
		return
	}
	select {
	case <-done:
	case <-time.After(limit):
	}
}
