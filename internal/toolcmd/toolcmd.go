// Package toolcmd runs a plugin binary's own commands: "evalrun-plugin-cpu
// generate ...", "evalrun-plugin-rknn ops ...". Users call them as evalrun
// generate, evalrun ops (the host runs the binary with Exec, the arguments
// passed on and the exit code back), so they speak as evalrun (Run):
// messages start "evalrun:", the root is called evalrun in usage lines, and
// the exit codes are backend.Exit*.
package toolcmd

import (
	"errors"
	"fmt"
	"slices"

	"github.com/spf13/cobra"

	"github.com/evalrun/evalrun/backend"
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
	return &Error{backend.ExitBadInput, fmt.Errorf(format, args...)}
}

// BackendErr is a failure to compute (exit 3).
func BackendErr(err error) error { return &Error{backend.ExitBackend, err} }

// Run runs args when args[0] names one of cmds and returns its exit code
// with ran true; otherwise it runs nothing (the binary serves as a plugin).
// The error, if any, is printed on the command's stderr.
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
	c, err := root.ExecuteC()
	if err == nil {
		return backend.ExitPass, true
	}
	fmt.Fprintln(c.ErrOrStderr(), "evalrun:", err)
	var e *Error
	if errors.As(err, &e) {
		return e.Code, true
	}
	return backend.ExitBadInput, true // cobra's own: unknown flag, missing argument
}
