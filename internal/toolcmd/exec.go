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
)

// Exec runs a plugin binary's command for evalrun (args[0] names it) with
// evalrun's stdin and the given stdout and stderr. The end of ctx (evalrun
// interrupted) kills it, and so does evalrun's death on Linux, SIGKILL
// included: a long generate or ops run does not go on alone. A command that
// ran and failed gives an *Error with its exit code and no message: it
// printed its own.
func Exec(ctx context.Context, path string, args []string, stdout, stderr io.Writer) error {
	c := exec.CommandContext(ctx, path, args...)
	c.Stdin, c.Stdout, c.Stderr = os.Stdin, stdout, stderr
	c.SysProcAttr = dieWithParent()
	// The parent-death signal follows the thread that forked the child, and
	// Go ends a thread only when its goroutine exits locked to it: lock this
	// one for the child's life, so the signal means "evalrun died".
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	err := c.Run()
	var ee *exec.ExitError
	switch {
	case ctx.Err() != nil:
		return BackendErr(fmt.Errorf("%s %s: interrupted", filepath.Base(path), args[0]))
	case errors.As(err, &ee) && ee.ExitCode() > 0:
		return &Error{Code: ee.ExitCode()}
	case err != nil:
		return BackendErr(err)
	}
	return nil
}
