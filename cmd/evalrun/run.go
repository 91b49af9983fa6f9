package main

import (
	"errors"
	"fmt"
	"log/slog"
	"os"

	"github.com/spf13/cobra"

	"github.com/evalrun/evalrun/backend"
	"github.com/evalrun/evalrun/pipeline"
	"github.com/evalrun/evalrun/pipeline/spec"
)

func newRunCmd() *cobra.Command {
	var outDir, pluginDir string
	var verbose bool
	cmd := &cobra.Command{
		Use:   "run SPEC",
		Short: "Run an experiment spec: compare every backend with the reference, measure speed, gate",
		Long: `run reads a YAML experiment spec, starts every backend as a plugin process,
feeds them the same token sequences, compares their logits with the reference
as they stream in, measures throughput one backend at a time, writes
summary.json, prompts.jsonl and report.md, prints tables and exits with the
verdict: 0 pass, 1 a gate failed, 2 bad input, 3 a backend could not run or
the run was interrupted (Ctrl-C; what was computed is written).

Every scalar spec key can be overridden from the environment as
EVALRUN_<KEY_PATH>, e.g. EVALRUN_BENCH_REPS=1 or EVALRUN_OUTPUT_DIR=/tmp/out.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			s, err := spec.Load(ctx, args[0])
			if err != nil {
				return inputOrInterrupted(ctx, err)
			}
			plan, err := pipeline.NewPlan(ctx, s)
			if err != nil {
				return inputOrInterrupted(ctx, err)
			}
			level := slog.LevelInfo
			if verbose {
				level = slog.LevelDebug
			}
			res, err := pipeline.Run(ctx, plan, pipeline.Options{
				OutDir: absPath(outDir), PluginDir: absPath(pluginDir), Stdout: cmd.OutOrStdout(), Stderr: os.Stderr,
				Log: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})), Version: version, GitCommit: gitCommit,
			})
			var ie *pipeline.InputError
			switch {
			case errors.As(err, &ie):
				return inputOrInterrupted(ctx, err)
			case err != nil:
				return backendErr(err)
			case res.Summary.Verdict.ExitCode != backend.ExitPass:
				return &exitError{res.Summary.Verdict.ExitCode, fmt.Errorf("verdict %s", res.Summary.Verdict.Status)}
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&outDir, "out", "o", "", "results directory (default: the spec's output.dir/<run-id>)")
	cmd.Flags().StringVar(&pluginDir, "plugin-dir", "", "directory to look for plugins in first")
	cmd.Flags().BoolVarP(&verbose, "verbose", "v", false, "debug logging, including plugin logs")
	return cmd
}
