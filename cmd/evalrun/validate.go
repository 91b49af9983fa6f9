package main

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"os"

	"github.com/spf13/cobra"

	"github.com/evalrun/evalrun/internal/exitcode"
	"github.com/evalrun/evalrun/pipeline"
	"github.com/evalrun/evalrun/pipeline/plan"
	"github.com/evalrun/evalrun/pipeline/resultsdir"
	"github.com/evalrun/evalrun/pipeline/runcompare"
	"github.com/evalrun/evalrun/pipeline/spec"
)

// loadPlan reads a spec (with its EVALRUN_ overrides) and plans it: the
// checks that need no plugin. limit, when > 0, is run --limit: every
// dataset cut to its first limit records.
func loadPlan(cmd *cobra.Command, path string, limit int) (*plan.Plan, error) {
	ctx := cmd.Context()
	s, err := spec.Load(ctx, path)
	if err != nil {
		return nil, inputOrInterrupted(ctx, err)
	}
	if limit > 0 {
		if err := s.LimitRecords(limit); err != nil {
			return nil, usageErr("--limit: %v", err)
		}
	}
	p, err := plan.New(ctx, s)
	if err != nil {
		return nil, inputOrInterrupted(ctx, err)
	}
	return p, nil
}

// loadBaseline reads the baseline run the relative gates compare with ("" =
// none) and sets gates to check them (Options.RelativeGates or
// merge.Options.RelativeGates).
func loadBaseline(path string, gates *pipeline.RelativeGates) (*resultsdir.Run, error) {
	if path == "" {
		return nil, nil
	}
	base, err := resultsdir.Load(path)
	if err != nil {
		return nil, usageErr("baseline: %v", err)
	}
	*gates = runcompare.Gates(base)
	return base, nil
}

// runErr maps an error of pipeline.Run or Validate to an exit code.
func runErr(cmd *cobra.Command, err error) error {
	var ie *exitcode.InputError
	if errors.As(err, &ie) {
		return inputOrInterrupted(cmd.Context(), err)
	}
	return backendErr(err)
}

func newValidateCmd() *cobra.Command {
	var pluginDir, baselinePath string
	cmd := &cobra.Command{
		Use:   "validate SPEC",
		Short: "Check a spec as run does before any backend computes: spec, model, datasets, plugins and their options",
		Long: `validate makes every check run makes before a backend computes, and nothing
more: the spec (keys, values, paths, EVALRUN_ variables, the baseline run of
relative gates), the model and its
vocabulary against every backend's model, the datasets tokenized against the
model's context, and each backend's plugin found, started and asked to
validate its options (paths in them relative to the spec's directory). It
prints the plugins' warnings and exits 0 (valid), 2 (bad input) or 3 (a
plugin could not start).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			p, err := loadPlan(cmd, args[0], 0)
			if err != nil {
				return err
			}
			opts := pipeline.Options{PluginDir: absPath(pluginDir), Log: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))}
			if _, err := loadBaseline(cmp.Or(baselinePath, p.Spec.Baseline), &opts.RelativeGates); err != nil {
				return err
			}
			warnings, err := pipeline.Validate(cmd.Context(), p, opts)
			for _, w := range warnings {
				fmt.Fprintln(cmd.ErrOrStderr(), "warning:", w)
			}
			if err != nil {
				return runErr(cmd, err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s: valid (%d backends, %d warnings)\n", args[0], len(p.Spec.Backends()), len(warnings))
			return nil
		},
	}
	cmd.Flags().StringVar(&pluginDir, "plugin-dir", "", "directory to look for plugins in first")
	cmd.Flags().StringVar(&baselinePath, "baseline", "", "a baseline run (directory or summary.json) for the relative gates; overrides the spec's baseline:")
	return cmd
}
