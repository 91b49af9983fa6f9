package main

import (
	"errors"
	"os"
	"os/exec"

	"github.com/spf13/cobra"

	"github.com/evalrun/evalrun/backend"
)

// newToolCmd is a command of the rknn plugin binary, run with the
// arguments as given: the NPU code and its option parsing stay in the plugin,
// which is the binary a board needs anyway. The plugin is looked up in
// $EVALRUN_PLUGIN_DIR, then beside evalrun; its exit code is evalrun's.
func newToolCmd(name, short string) *cobra.Command {
	return &cobra.Command{
		Use:                name + " ...",
		Short:              short + " (evalrun-plugin-rknn " + name + "; --help for its flags)",
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			var dirs []string
			if d := os.Getenv("EVALRUN_PLUGIN_DIR"); d != "" {
				dirs = append(dirs, d)
			}
			path, err := backend.FindPlugin("rknn", dirs...)
			if err != nil {
				return backendErr(err)
			}
			c := exec.CommandContext(cmd.Context(), path, append([]string{name}, args...)...)
			c.Stdin, c.Stdout, c.Stderr = os.Stdin, cmd.OutOrStdout(), cmd.ErrOrStderr()
			err = c.Run()
			var ee *exec.ExitError
			if errors.As(err, &ee) && ee.ExitCode() > 0 {
				return &exitError{ee.ExitCode(), nil} // the tool said why
			}
			if err != nil {
				return backendErr(err)
			}
			return nil
		},
	}
}
