package main

import (
	"errors"
	"fmt"
	"log/slog"
	"os"

	"github.com/spf13/cobra"

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
verdict: 0 pass, 1 a gate failed, 2 bad input, 3 a backend could not run.

Every scalar spec key can be overridden from the environment as
EVALRUN_<KEY_PATH>, e.g. EVALRUN_BENCH_REPS=1 or EVALRUN_OUTPUT_DIR=/tmp/out.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := spec.Load(args[0])
			if err != nil {
				return &exitError{exitUsage, err}
			}
			plan, err := pipeline.NewPlan(s)
			if err != nil {
				return &exitError{exitUsage, err}
			}
			level := slog.LevelInfo
			if verbose {
				level = slog.LevelDebug
			}
			log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
			res, err := pipeline.Run(cmd.Context(), plan, pipeline.Options{
				OutDir: outDir, PluginDir: pluginDir, Stdout: cmd.OutOrStdout(), Stderr: os.Stderr, Log: log,
				Version: version, GitCommit: gitCommit,
			})
			if err != nil {
				var ie *pipeline.InputError
				if errors.As(err, &ie) {
					return &exitError{exitUsage, err}
				}
				return backendErr(err)
			}
			v := res.Summary.Verdict
			if v.ExitCode != exitPass {
				return &exitError{v.ExitCode, fmt.Errorf("verdict %s", v.Status)}
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&outDir, "out", "o", "", "results directory (default: the spec's output.dir/<run-id>)")
	cmd.Flags().StringVar(&pluginDir, "plugin-dir", "", "directory to look for plugins in first")
	cmd.Flags().BoolVarP(&verbose, "verbose", "v", false, "debug logging, including plugin logs")
	return cmd
}
