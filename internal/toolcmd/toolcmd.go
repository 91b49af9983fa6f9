// Package toolcmd runs a plugin binary's own commands: "evalrun-plugin-cpu
// generate ...", "evalrun-plugin-rknn ops ...". Users call them as evalrun
// generate, evalrun ops (the host runs the binary with Exec, the arguments
// passed on and the exit code back), so they speak as evalrun (Run):
// messages start "evalrun:", the root is called evalrun in usage lines, and
// the exit codes are exitcode.*.
package toolcmd

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/evalrun/evalrun/internal/atomicfile"
	"github.com/evalrun/evalrun/internal/exitcode"
)

// Error carries one of backend's exit codes out of a command. Err is nil
// when the message was printed already (evalrun passing on a plugin
// command's exit code).
type Error struct {
	Code int
	Err  error
}

func (e *Error) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("exit status %d", e.Code)
	}
	return e.Err.Error()
}
func (e *Error) Unwrap() error { return e.Err }

// UsageErr is bad input: a flag, an argument, a file (exit 2).
func UsageErr(format string, args ...any) error {
	return &Error{exitcode.BadInput, fmt.Errorf(format, args...)}
}

// BackendErr is a failure to compute (exit 3).
func BackendErr(err error) error { return &Error{exitcode.Backend, err} }

// interruptGrace is how long a command has, after SIGINT or SIGTERM, to
// stop by itself (its context is cancelled) before Run ends the process.
var interruptGrace = 2 * time.Second

// echoWindow: one more signal this soon after the first is the same
// interruption reaching the command twice, not a second one: a terminal's
// Ctrl-C (or timeout's, or systemd's SIGTERM) reaches the whole process
// group, and evalrun passes it on.
const echoWindow = 500 * time.Millisecond

// Run runs args when args[0] names one of cmds and returns its exit code
// with ran true; otherwise it runs nothing (the binary serves as a plugin).
// The error, if any, is printed on the command's stderr.
//
// SIGINT or SIGTERM (evalrun stopping the command, or a terminal's Ctrl-C)
// cancels the command's context: a command that stops on it ends with exit
// 3 "NAME: interrupted". One that has not stopped after interruptGrace, or
// a second interruption (a third signal, one after echoWindow, or
// StopNow's), ends the process at once, exit 3, with the temporary files
// of its atomicfile writes removed.
func Run(args []string, cmds ...*cobra.Command) (code int, ran bool) {
	if len(args) == 0 || !slices.ContainsFunc(cmds, func(c *cobra.Command) bool { return c.Name() == args[0] }) {
		return 0, false
	}
	root := &cobra.Command{Use: "evalrun", SilenceUsage: true, SilenceErrors: true}
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return UsageErr("%v (see '%s --help')", err, c.CommandPath())
	})
	root.AddCommand(cmds...)
	root.SetArgs(args)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	defer close(done)
	// Held by whichever ends the command first: its return (Run reports
	// it) or the forced exit (which never gives it back).
	var ending sync.Mutex
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, interruptSignals()...)
	defer signal.Stop(sigs)
	go func() {
		if AwaitInterruption(sigs, interruptGrace, func(os.Signal) { cancel() }, done) && ending.TryLock() {
			atomicfile.RemoveTemporaries()
			fmt.Fprintf(os.Stderr, "evalrun: %s: interrupted\n", args[0])
			os.Exit(exitcode.Backend)
		}
	}()

	c, err := root.ExecuteContextC(ctx)
	stopped := ctx.Err() != nil // before a late signal can change it
	ending.Lock()               // a forced exit under way ends the process here
	if err == nil {
		return exitcode.Pass, true
	}
	// A command that stopped on its context's end is interrupted; one that
	// finished anyway keeps its result (a gate failure, a full disk).
	if stopped && errors.Is(err, context.Canceled) {
		err = BackendErr(fmt.Errorf("%s: interrupted", args[0]))
	}
	fmt.Fprintln(c.ErrOrStderr(), "evalrun:", err)
	var e *Error
	if errors.As(err, &e) {
		return e.Code, true
	}
	return exitcode.BadInput, true // cobra's own: unknown flag, missing argument
}

// interruptSignals are the signals Run catches.
func interruptSignals() []os.Signal {
	if stopNowSignal != nil {
		return []os.Signal{os.Interrupt, syscall.SIGTERM, stopNowSignal}
	}
	return []os.Signal{os.Interrupt, syscall.SIGTERM}
}

// AwaitInterruption is the rule evalrun and its plugin commands share for
// SIGINT and SIGTERM arriving on sigs: it waits for the first (false if done
// closes before), calls first with it (stop what you are doing), and returns
// true when the process must end at once: grace has passed, or a second
// interruption came, or StopNow's signal. One more signal within echoWindow
// of the first is not a second interruption but the same one delivered
// twice (to the process group, then passed on by evalrun).
func AwaitInterruption(sigs <-chan os.Signal, grace time.Duration, first func(os.Signal), done <-chan struct{}) bool {
	select {
	case sig := <-sigs:
		first(sig)
		if sig == stopNowSignal {
			return true
		}
	case <-done:
		return false
	}
	start := time.Now()
	echoed := false
	timer := time.NewTimer(grace)
	defer timer.Stop()
	for {
		select {
		case sig := <-sigs:
			if sig == stopNowSignal || echoed || time.Since(start) >= echoWindow {
				return true
			}
			echoed = true
		case <-timer.C:
			return true
		case <-done:
			return false
		}
	}
}
