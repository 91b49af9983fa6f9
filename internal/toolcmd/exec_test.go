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
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/evalrun/evalrun/internal/atomicfile"
)

func TestMain(m *testing.M) {
	if mode := os.Getenv("TOOLCMD_TEST_CHILD"); mode != "" {
		if g, err := time.ParseDuration(os.Getenv("TOOLCMD_TEST_GRACE")); err == nil {
			interruptGrace = g
		}
		code, _ := Run(os.Args[1:], childCmd(mode))
		os.Exit(code)
	}
	os.Exit(m.Run())
}

// childCmd is the command of the test binary run as a plugin ("write"): it
// writes its pid to $TOOLCMD_TEST_AUX/pid, starts writing $TOOLCMD_TEST_OUT
// atomically (and marks the end of its context with $TOOLCMD_TEST_AUX/
// cancelled), then, by mode: stops when its context ends ("stops", 300 ms
// later, leaving $TOOLCMD_TEST_AUX/stopped; "stops-usage" returns that as
// a usage error, "stops-gate" a gate failure), ignores it ("ignores"),
// finishes its file 300 ms after it ("finishes"), writes to stdout until
// that fails ("pipe"), or dies of SIGKILL ("killed").
func childCmd(mode string) *cobra.Command {
	return &cobra.Command{Use: "write", RunE: func(cmd *cobra.Command, _ []string) error {
		aux := os.Getenv("TOOLCMD_TEST_AUX")
		os.WriteFile(filepath.Join(aux, "pid"), []byte(strconv.Itoa(os.Getpid())), 0o644)
		f, err := atomicfile.Create(os.Getenv("TOOLCMD_TEST_OUT"))
		if err != nil {
			return err
		}
		f.WriteString("part of a file")
		go func() {
			<-cmd.Context().Done()
			os.WriteFile(filepath.Join(aux, "cancelled"), nil, 0o644)
		}()
		switch mode {
		case "stops", "stops-usage", "stops-gate":
			<-cmd.Context().Done()
			time.Sleep(300 * time.Millisecond) // cleaning up: a second interruption would cut it short
			os.WriteFile(filepath.Join(aux, "stopped"), nil, 0o644)
			f.Abort()
			switch mode {
			case "stops-usage": // as a command that wraps every error as bad input
				return UsageErr("--spec: %w", cmd.Context().Err())
			case "stops-gate": // it had finished: its verdict stands
				return &Error{Code: 1, Err: errors.New("1 of 36 ops failed")}
			}
			return cmd.Context().Err()
		case "ignores":
			time.Sleep(time.Minute)
		case "finishes":
			<-cmd.Context().Done()
			time.Sleep(300 * time.Millisecond)
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

// child is one run of the test binary's write command through Exec.
type child struct {
	mode, grace string
	stdout      io.Writer
	// interrupt, if set, runs once the command's temporary file exists,
	// with the command's pid and the cancel of Exec's context.
	interrupt func(pid int, cancel func())

	err      error
	stderr   string
	dir, aux string
}

func (c *child) run(t *testing.T) {
	c.dir, c.aux = t.TempDir(), t.TempDir()
	t.Setenv("TOOLCMD_TEST_CHILD", c.mode)
	t.Setenv("TOOLCMD_TEST_GRACE", c.grace)
	t.Setenv("TOOLCMD_TEST_OUT", filepath.Join(c.dir, "out.gguf"))
	t.Setenv("TOOLCMD_TEST_AUX", c.aux)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if c.stdout == nil {
		c.stdout = io.Discard
	}
	if c.interrupt != nil {
		go func() {
			for ctx.Err() == nil {
				b, _ := os.ReadFile(filepath.Join(c.aux, "pid"))
				if e, _ := os.ReadDir(c.dir); len(e) > 0 && len(b) > 0 {
					pid, _ := strconv.Atoi(string(b))
					c.interrupt(pid, cancel)
					return
				}
				time.Sleep(5 * time.Millisecond)
			}
		}()
	}
	var errBuf bytes.Buffer
	exe, _ := os.Executable()
	c.err = Exec(ctx, exe, []string{"write"}, c.stdout, &errBuf)
	c.stderr = errBuf.String()
}

func (c *child) stopped() bool {
	_, err := os.Stat(filepath.Join(c.aux, "stopped"))
	return err == nil
}

// waitCancelled waits until the command has seen its context end.
func (c *child) waitCancelled() {
	for i := 0; i < 1000; i++ {
		if _, err := os.Stat(filepath.Join(c.aux, "cancelled")); err == nil {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// exit3 checks that the command ended with exit 3 passed on, its own single
// "interrupted" line, and no file left in its output directory.
func (c *child) exit3(t *testing.T) {
	t.Helper()
	var e *Error
	if !errors.As(c.err, &e) || e.Code != 3 || e.Err != nil || c.stderr != "evalrun: write: interrupted\n" {
		t.Errorf("Exec: %v, stderr %q; want exit 3 passed on and the command's own message once", c.err, c.stderr)
	}
	if left, _ := os.ReadDir(c.dir); len(left) > 0 {
		t.Errorf("left behind: %v", left)
	}
}

// TestExecStopsTheCommand: evalrun interrupted asks the command to stop; one
// that watches its context stops by itself, one that does not is ended after
// the grace; either way it says so, exits 3 and leaves no partial file.
func TestExecStopsTheCommand(t *testing.T) {
	for _, mode := range []string{"stops", "stops-usage", "ignores"} {
		t.Run(mode, func(t *testing.T) {
			c := &child{mode: mode, interrupt: func(_ int, cancel func()) { cancel() }}
			c.run(t)
			c.exit3(t)
			if mode != "ignores" && !c.stopped() {
				t.Error("ended before it could stop by itself")
			}
		})
	}
}

// TestExecProcessGroupInterrupt: a terminal's Ctrl-C, or a SIGTERM to the
// process group (timeout, systemd), reaches the command and evalrun, which
// passes it on: one interruption, not two, so the command still stops by
// itself, and says so once.
func TestExecProcessGroupInterrupt(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			c := &child{mode: "stops", interrupt: func(pid int, cancel func()) {
				syscall.Kill(pid, sig)
				time.Sleep(20 * time.Millisecond) // evalrun's handler, a moment later
				cancel()
			}}
			c.run(t)
			c.exit3(t)
			if !c.stopped() {
				t.Error("evalrun's SIGTERM was taken for a second interruption: the command did not stop by itself")
			}
		})
	}
}

// TestExecCommandFinishing: a command that finishes its work after the stop
// request (exit 0, its file written) is not reported as interrupted.
func TestExecCommandFinishing(t *testing.T) {
	c := &child{mode: "finishes", interrupt: func(_ int, cancel func()) { cancel() }}
	c.run(t)
	if c.err != nil || c.stderr != "" {
		t.Errorf("Exec: %v, stderr %q; want the command's own success", c.err, c.stderr)
	}
	if _, err := os.Stat(filepath.Join(c.dir, "out.gguf")); err != nil {
		t.Errorf("its file: %v", err)
	}
}

// TestStopNow: evalrun quitting at once (a second Ctrl-C) first has the
// command end at once, its temporary file removed, though its grace would
// have lasted long after evalrun's own exit.
func TestStopNow(t *testing.T) {
	var c *child
	c = &child{mode: "ignores", grace: "1m", interrupt: func(_ int, cancel func()) {
		cancel()
		c.waitCancelled()
		StopNow(5 * time.Second)
	}}
	c.run(t)
	c.exit3(t)
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
	c := &child{mode: "pipe", stdout: w}
	c.run(t)
	w.Close()
	var e *Error
	if !errors.As(c.err, &e) || e.Code != 141 || e.Err != nil || c.stderr != "" {
		t.Errorf("reader gone: %v, stderr %q; want exit 141 and no message", c.err, c.stderr)
	}

	c = &child{mode: "killed"}
	c.run(t)
	exe, _ := os.Executable()
	if !errors.As(c.err, &e) || e.Code != 3 || !strings.HasSuffix(c.err.Error(), filepath.Base(exe)+" write: signal: killed") {
		t.Errorf("killed: %v, want exit 3 naming the binary and command", c.err)
	}
}

// TestExecInterruptedBeforeStart: evalrun interrupted while it looks the
// plugin up says so, not "context canceled".
func TestExecInterruptedBeforeStart(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	exe, _ := os.Executable()
	err := Exec(ctx, exe, []string{"write"}, io.Discard, io.Discard)
	var e *Error
	if !errors.As(err, &e) || e.Code != 3 || !strings.HasSuffix(err.Error(), " write: interrupted") {
		t.Errorf("Exec with its context ended: %v, want exit 3 interrupted", err)
	}
}

// TestExecKeepsAFinishedVerdict: a command that had finished when the stop
// request came (ops with every op run) keeps its verdict: a gate failure
// is exit 1, not an interruption.
func TestExecKeepsAFinishedVerdict(t *testing.T) {
	c := &child{mode: "stops-gate", interrupt: func(_ int, cancel func()) { cancel() }}
	c.run(t)
	var e *Error
	if !errors.As(c.err, &e) || e.Code != 1 || c.stderr != "evalrun: 1 of 36 ops failed\n" {
		t.Errorf("Exec: %v, stderr %q; want exit 1 and the verdict", c.err, c.stderr)
	}
}
