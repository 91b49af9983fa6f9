// Command evalrun checks whether a backend (an NPU, another numerics mode, a
// quantized model) computes a language model the same way the CPU reference
// does, and how fast. See the README for the commands and exit codes.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"

	"github.com/spf13/cobra"
)

// Set by the Makefile with -ldflags "-X main.version=... -X main.gitCommit=...".
var (
	version   = "dev"
	gitCommit = "unknown"
)

// Exit codes (README "Exit codes").
const (
	exitPass       = 0
	exitGateFailed = 1
	exitUsage      = 2
	exitBackend    = 3
)

// exitError carries an exit code through cobra.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func usageErr(format string, args ...any) error {
	return &exitError{exitUsage, fmt.Errorf(format, args...)}
}

func backendErr(err error) error { return &exitError{exitBackend, err} }

func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:   "evalrun",
		Short: "Compare LLM backends (NPU, CPU numerics, quantizations) against a CPU reference",
		Long: `evalrun feeds the same token sequences through the same GGUF model on several
backends (plugins), compares their logits with the reference (KL divergence,
top-1 agreement, perplexity, error statistics) and measures tokens/sec.

Exit codes: 0 pass, 1 a gate failed, 2 bad input or usage, 3 a backend could not run.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       version + " (" + gitCommit + ")",
	}
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return usageErr("%v (see '%s --help')", err, c.CommandPath())
	})
	root.AddCommand(newRunCmd(), newBenchCmd(), newInspectCmd(), newTokenizeCmd(), newGenerateCmd(),
		newLogitsCmd(), newSynthCmd(), newKernelsCmd(), newOpsCmd())
	return root
}

func main() {
	if gitCommit == "unknown" {
		gitCommit = vcsRevision()
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	root := newRoot()
	err := root.ExecuteContext(ctx)
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

// exitCode prints err and maps it to evalrun's documented exit codes.
func exitCode(err error) int {
	if err == nil {
		return exitPass
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.err != nil && ee.code != exitGateFailed {
			fmt.Fprintln(os.Stderr, "evalrun:", ee.err)
		}
		return ee.code
	}
	fmt.Fprintln(os.Stderr, "evalrun:", err)
	// cobra's own errors (unknown command, bad args) are usage errors.
	return exitUsage
}
