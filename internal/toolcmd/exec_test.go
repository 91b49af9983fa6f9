//go:build unix

package toolcmd

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/evalrun/evalrun/internal/atomicfile"
)

func TestMain(m *testing.M) {
	if mode := os.Getenv("TOOLCMD_TEST_CHILD"); mode != "" {
		code, _ := Run(os.Args[1:], childCmd(mode))
		os.Exit(code)
	}
	os.Exit(m.Run())
}

// childCmd is the command of the test binary run as a plugin ("write"): it
// starts writing $TOOLCMD_TEST_OUT atomically, then, by mode, stops when its
// context ends ("stops"), ignores it ("ignores"), writes to stdout until that
// fails ("pipe"), or dies of SIGKILL ("killed").
func childCmd(mode string) *cobra.Command {
	return &cobra.Command{Use: "write", RunE: func(cmd *cobra.Command, _ []string) error {
		f, err := atomicfile.Create(os.Getenv("TOOLCMD_TEST_OUT"))
		if err != nil {
			return err
		}
		f.WriteString("part of a file")
		switch mode {
		case "stops":
			<-cmd.Context().Done()
			f.Abort()
			return cmd.Context().Err()
		case "ignores":
			time.Sleep(time.Minute)
		case "pipe":
			for {
				fmt.Println("a line for head")
			}
		case "killed":
			syscall.Kill(os.Getpid(), syscall.SIGKILL)
		}
		return f.Commit()
	}}
}

// execChild runs the test binary's write command through Exec, cancelling
// ctx once the command's temporary file exists when cancel is set.
func execChild(t *testing.T, mode string, stdout io.Writer, cancel bool) (err error, stderr string, dir string) {
	dir = t.TempDir()
	t.Setenv("TOOLCMD_TEST_CHILD", mode)
	t.Setenv("TOOLCMD_TEST_OUT", filepath.Join(dir, "out.gguf"))
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	if cancel {
		go func() {
			for ctx.Err() == nil {
				if e, _ := os.ReadDir(dir); len(e) > 0 {
					stop()
				}
				time.Sleep(5 * time.Millisecond)
			}
		}()
	}
	var errBuf bytes.Buffer
	exe, _ := os.Executable()
	err = Exec(ctx, exe, []string{"write"}, stdout, &errBuf)
	return err, errBuf.String(), dir
}

// TestExecStopsTheCommand: evalrun interrupted asks the command to stop; one
// that watches its context stops at once, one that does not is ended after
// the grace; either way it says so, exits 3 and leaves no partial file.
func TestExecStopsTheCommand(t *testing.T) {
	for _, mode := range []string{"stops", "ignores"} {
		t.Run(mode, func(t *testing.T) {
			start := time.Now()
			err, stderr, dir := execChild(t, mode, io.Discard, true)
			var e *Error
			if !errors.As(err, &e) || e.Code != 3 || e.Err != nil || stderr != "evalrun: write: interrupted\n" {
				t.Errorf("Exec: %v, stderr %q; want exit 3 passed on and the command's own message", err, stderr)
			}
			if left, _ := os.ReadDir(dir); len(left) > 0 {
				t.Errorf("left behind: %v", left)
			}
			if took := time.Since(start); took > stopWait {
				t.Errorf("took %v: killed, not stopped", took)
			}
		})
	}
}

// TestExecCommandsASignalEnded: a reader that goes away ends the command
// quietly with the shell's SIGPIPE code; any other death by signal names
// the binary and the command.
func TestExecCommandsASignalEnded(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	go func() { r.Read(make([]byte, 100)); r.Close() }() // head -c 100
	err, stderr, _ := execChild(t, "pipe", w, false)
	w.Close()
	var e *Error
	if !errors.As(err, &e) || e.Code != 141 || e.Err != nil || stderr != "" {
		t.Errorf("reader gone: %v, stderr %q; want exit 141 and no message", err, stderr)
	}

	err, _, _ = execChild(t, "killed", io.Discard, false)
	if !errors.As(err, &e) || e.Code != 3 || !strings.HasSuffix(err.Error(), filepath.Base(os.Args[0])+" write: signal: killed") {
		t.Errorf("killed: %v, want exit 3 naming the binary and command", err)
	}
}
