// Command evalrun checks whether a backend (an NPU, another numerics mode, a
// quantized model) computes a language model the same way the CPU reference
// does, and how fast. See the README for the commands and exit codes.
//
// The host links no plugin code: `go list -deps ./cmd/evalrun` names no
// package under plugins/. The engine's commands (inspect, tokenize, generate,
// logits, synth) are commands of the cpu plugin binary, the NPU tools
// (kernels, ops) of the rknn plugin binary, which evalrun runs (tools.go).
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/evalrun/evalrun/backend"
	"github.com/evalrun/evalrun/internal/atomicfile"
	"github.com/evalrun/evalrun/internal/exitcode"
	"github.com/evalrun/evalrun/internal/toolcmd"
)

// Set by the Makefile with -ldflags "-X main.version=... -X main.gitCommit=...".
var (
	version   = "dev"
	gitCommit = "unknown"
)

// exitError carries one of backend's exit codes through cobra: the type the
// plugins' commands use too (a nil Err: the plugin's command said why).
type exitError = toolcmd.Error

var (
	usageErr   = toolcmd.UsageErr
	backendErr = toolcmd.BackendErr
)

// inputOrInterrupted is a usage error, or the interruption that caused it.
func inputOrInterrupted(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return backendErr(fmt.Errorf("interrupted: %w", err))
	}
	return &exitError{Code: exitcode.BadInput, Err: err}
}

func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:   "evalrun",
		Short: "Compare LLM backends (NPU, CPU numerics, quantizations) against a CPU reference",
		Long: `evalrun feeds the same token sequences through the same GGUF model on several
backends (plugins), compares their logits with the reference (KL divergence,
top-1 agreement, perplexity, error statistics) and measures tokens/sec.

Exit codes: 0 pass, 1 a gate failed, 2 bad input or usage, 3 a backend could
not run or the run was interrupted.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       version + " (" + gitCommit + ")",
		// Variables every command's plugins read are checked before any
		// starts: a typo is bad input (exit 2), not a plugin that failed.
		PersistentPreRunE: func(*cobra.Command, []string) error {
			_, err := backend.MTLSFromEnv()
			return err
		},
	}
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return usageErr("%v (see '%s --help')", err, c.CommandPath())
	})
	root.AddCommand(newRunCmd(), newCompareCmd(), newValidateCmd(), newMergeCmd(), newCacheCmd(), newBenchCmd())
	for _, t := range pluginTools {
		root.AddCommand(newToolCmd(t.plugin, t.name, t.short))
	}
	return root
}

// messages is where evalrun's own messages during a command go: stderr,
// or a run's progress while it shows one (above its bar).
var messages = &messageWriter{w: os.Stderr}

type messageWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (m *messageWriter) get() io.Writer {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.w
}

func (m *messageWriter) set(w io.Writer) {
	m.mu.Lock()
	m.w = w
	m.mu.Unlock()
}

// interruptGrace is how long evalrun winds down after SIGINT or SIGTERM
// (stopping plugins, writing what was computed) before it exits anyway.
const interruptGrace = 20 * time.Second

func main() {
	if gitCommit == "unknown" {
		gitCommit = vcsRevision()
	}
	ctx, cancel := context.WithCancel(context.Background())
	// Held by whichever ends evalrun first: the command's return or the
	// quit at once (which never gives it back, so neither reports over the
	// other: the command's writes fail once the quit removes their files).
	var ending sync.Mutex
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		stopping := func(sig os.Signal) {
			fmt.Fprintf(messages.get(), "evalrun: %v: stopping (again to quit at once)\n", sig)
			cancel()
		}
		if !toolcmd.AwaitInterruption(sigs, interruptGrace, stopping, nil) || !ending.TryLock() {
			return // the command is ending by itself
		}
		// Plugins die with the process (Pdeathsig, and their watchdogs); a
		// plugin command is first told to stop at once, so that it removes
		// its temporary files, and so are this process's writes.
		toolcmd.StopNow(time.Second)
		atomicfile.RemoveTemporaries()
		backend.RemoveSocketDirs()
		fmt.Fprintln(os.Stderr, "evalrun: interrupted")
		os.Exit(exitcode.Backend)
	}()
	err := newRoot().ExecuteContext(ctx)
	ending.Lock() // a quit under way ends the process here
	backend.RemoveSocketDirs()
	os.Exit(exitCode(err))
}

// vcsRevision is the commit the Go toolchain stamped into the binary, for
// builds that bypass the Makefile's -ldflags.
func vcsRevision() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 7 {
				return s.Value[:7]
			}
		}
	}
	return "unknown"
}

// exitCode prints err and maps it to evalrun's exit codes.
func exitCode(err error) int {
	if err == nil {
		return exitcode.Pass
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.Err != nil && ee.Code != exitcode.GateFailed {
			fmt.Fprintln(os.Stderr, "evalrun:", ee.Err)
		}
		return ee.Code
	}
	fmt.Fprintln(os.Stderr, "evalrun:", err)
	// cobra's own errors (unknown command, bad args) are usage errors.
	return exitcode.BadInput
}
