package toolcmd

import (
	"bytes"
	"errors"
	"testing"

	"github.com/spf13/cobra"

	"github.com/evalrun/evalrun/internal/exitcode"
)

// tool is a command whose outcome is chosen by its --fail flag.
func tool(stderr *bytes.Buffer) *cobra.Command {
	var fail string
	cmd := &cobra.Command{
		Use:  "tool --fail usage|backend|gate|plain",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch fail {
			case "usage":
				return UsageErr("--model: %s is not a GGUF file", "x.txt")
			case "backend":
				return BackendErr(errors.New("decode: out of memory"))
			case "gate":
				return &Error{exitcode.GateFailed, errors.New("2 of 36 ops failed")}
			case "plain":
				return errors.New("something else")
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&fail, "fail", "", "which error to return")
	cmd.SetErr(stderr)
	return cmd
}

func TestRunExitCodesAndMessages(t *testing.T) {
	for _, c := range []struct {
		args   []string
		code   int
		stderr string
	}{
		{[]string{"tool"}, exitcode.Pass, ""},
		{[]string{"tool", "--fail", "usage"}, exitcode.BadInput, "evalrun: --model: x.txt is not a GGUF file\n"},
		{[]string{"tool", "--fail", "backend"}, exitcode.Backend, "evalrun: decode: out of memory\n"},
		{[]string{"tool", "--fail", "gate"}, exitcode.GateFailed, "evalrun: 2 of 36 ops failed\n"},
		{[]string{"tool", "--fail", "plain"}, exitcode.BadInput, "evalrun: something else\n"},
		{[]string{"tool", "--bogus"}, exitcode.BadInput, "evalrun: unknown flag: --bogus (see 'evalrun tool --help')\n"},
		{[]string{"tool", "extra"}, exitcode.BadInput, "evalrun: unknown command \"extra\" for \"evalrun tool\"\n"},
	} {
		var stderr bytes.Buffer
		code, ran := Run(c.args, tool(&stderr))
		if !ran || code != c.code || stderr.String() != c.stderr {
			t.Errorf("Run(%q) = %d, %v, stderr %q; want %d, true, %q", c.args, code, ran, stderr.String(), c.code, c.stderr)
		}
	}
}

// TestRunOnlyItsCommands: a binary without a command name serves as a
// plugin (go-plugin starts it with no arguments).
func TestRunOnlyItsCommands(t *testing.T) {
	for _, args := range [][]string{nil, {}, {"other"}, {"--fail", "usage"}} {
		var stderr bytes.Buffer
		if code, ran := Run(args, tool(&stderr)); ran || code != 0 || stderr.Len() != 0 {
			t.Errorf("Run(%q) = %d, %v, stderr %q; want nothing run", args, code, ran, stderr.String())
		}
	}
}

func TestErrorUnwraps(t *testing.T) {
	base := errors.New("base")
	if err := BackendErr(base); !errors.Is(err, base) || err.Error() != "base" {
		t.Errorf("BackendErr(base) = %v, does not wrap it", err)
	}
	if err := (&Error{Code: 1}); err.Error() != "exit status 1" || err.Unwrap() != nil {
		t.Errorf("an Error without Err says %q", err.Error())
	}
}
