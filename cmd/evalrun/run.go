package main

import (
	"cmp"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/mattn/go-isatty"
	"github.com/spf13/cobra"

	"github.com/evalrun/evalrun/internal/exitcode"
	"github.com/evalrun/evalrun/internal/texttable"
	"github.com/evalrun/evalrun/pipeline"
	"github.com/evalrun/evalrun/pipeline/report"
	"github.com/evalrun/evalrun/pipeline/resultsdir"
	"github.com/evalrun/evalrun/pipeline/runcompare"
)

func newRunCmd() *cobra.Command {
	var outDir, pluginDir, baselinePath, shardSpec string
	var verbose, quiet, annotations, force, resume, wide bool
	var limit int
	cmd := &cobra.Command{
		Use:   "run SPEC",
		Short: "Run an experiment spec: compare every backend with the reference, measure speed, gate",
		Long: `run reads a YAML experiment spec, starts every backend as a plugin process,
feeds them the same token sequences, compares their logits with the reference
as they stream in, measures throughput one backend at a time, writes
summary.json, prompts.jsonl and the spec's output.formats (report.md,
junit.xml, report.html), prints tables and exits with the verdict: 0 pass, 1 a gate failed, 2 bad input, 3 a backend could not run or
the run was interrupted (Ctrl-C; what was computed is written).

Progress goes to stderr: a live bar per pass on a terminal (its backends,
items done, elapsed time and an ETA from the pass's measured rate), one line
per pass when it ends otherwise (logs, CI); --quiet prints only the verdict
line and errors.

--limit N runs only the first N records of every dataset (a score set's
records, then chunked; a generate set's prompts), as lm-eval's --limit: a
quick look, marked in summary.json (run.limit), the verdict and the reports
as not a full result.

Every scalar spec key can be overridden from the environment as
EVALRUN_<KEY_PATH>, e.g. EVALRUN_BENCH_REPS=1 or EVALRUN_OUTPUT_DIR=/tmp/out.

In GitHub Actions (GITHUB_ACTIONS=true, or --github-annotations) failed
gates and crashed backends are also printed as ::error annotations, and the
one-screen summary is appended to $GITHUB_STEP_SUMMARY when it is set.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			sh, err := shardFlag(shardSpec)
			if err != nil {
				return err
			}
			if cmd.Flags().Changed("limit") && limit < 1 {
				return usageErr("--limit: want a number of records >= 1, got %d", limit)
			}
			if quiet && verbose {
				return usageErr("--quiet and --verbose: choose one")
			}
			p, err := loadPlan(cmd, args[0], limit)
			if err != nil {
				return err
			}
			s := p.Spec
			level := slog.LevelInfo
			switch {
			case verbose:
				level = slog.LevelDebug
			case quiet:
				level = slog.LevelError
			}
			progress := pipeline.NewProgress(os.Stderr, progressMode(quiet))
			messages.set(progress)
			defer messages.set(os.Stderr)
			opts := pipeline.Options{
				OutDir: absPath(outDir), Force: force, PluginDir: absPath(pluginDir), Stderr: os.Stderr, Progress: progress,
				Log: slog.New(slog.NewTextHandler(progress, &slog.HandlerOptions{Level: level})), Version: version, GitCommit: gitCommit,
				Shard: sh, Resume: resume,
			}
			base, err := loadBaseline(cmp.Or(baselinePath, s.Baseline), &opts.RelativeGates)
			if err != nil {
				return err
			}
			res, err := pipeline.Run(cmd.Context(), p, opts)
			if err != nil {
				return runErr(cmd, err)
			}
			out := cmd.OutOrStdout()
			return finishRun(out, tableWidth(out, wide), res, base, s.Output.Formats, annotations, sh != nil, quiet)
		},
	}
	cmd.Flags().StringVarP(&outDir, "out", "o", "", "results directory (default: the spec's output.dir/<run-id>, listed in output.dir/index.jsonl); nothing is written outside it")
	cmd.Flags().BoolVar(&force, "force", false, "overwrite the results of an earlier run in --out (refused otherwise)")
	cmd.Flags().BoolVar(&resume, "resume", false, "continue the interrupted run in --out: its completed chunks and prompts are kept, the rest run")
	cmd.Flags().IntVar(&limit, "limit", 0, "run only the first N records of every dataset (score: N records' tokens, then chunked; generate: N prompts): a quick look, marked as not a full result")
	cmd.Flags().StringVar(&pluginDir, "plugin-dir", "", "directory to look for plugins in first")
	cmd.Flags().StringVar(&baselinePath, "baseline", "", "a baseline run (directory or summary.json) for the relative gates; overrides the spec's baseline:")
	cmd.Flags().StringVar(&shardSpec, "shard", "", "run only shard I of N (I/N, I from 0; default $JOB_COMPLETION_INDEX/$EVALRUN_SHARDS); merge the shards with evalrun merge")
	cmd.Flags().BoolVarP(&verbose, "verbose", "v", false, "debug logging, including plugin logs")
	cmd.Flags().BoolVar(&wide, "wide", false, wideUsage)
	cmd.Flags().BoolVarP(&quiet, "quiet", "q", false, "print only the verdict line (and errors): no tables, progress or log lines; the report files are written as usual")
	cmd.Flags().BoolVar(&annotations, "github-annotations", os.Getenv("GITHUB_ACTIONS") == "true",
		"print ::error/::warning workflow commands for failed gates and backends (default: on when GITHUB_ACTIONS=true)")
	return cmd
}

// wideUsage is the help of run's and merge's --wide.
const wideUsage = "print every column of the tables, however wide (default: when they are wider than $COLUMNS, the terminal or 120 columns, only their key columns)"

// tableWidth is the width the printed tables fit in: the terminal's (see
// texttable.Width), or 0 (no limit) with --wide.
func tableWidth(w io.Writer, wide bool) int {
	if wide {
		return 0
	}
	return texttable.Width(w)
}

// progressMode is how run shows its passes on stderr: nothing with
// --quiet, a live bar on a terminal, one line per pass otherwise (logs, CI).
func progressMode(quiet bool) pipeline.ProgressMode {
	switch {
	case quiet:
		return pipeline.ProgressOff
	case os.Getenv("TERM") != "dumb" && (isatty.IsTerminal(os.Stderr.Fd()) || isatty.IsCygwinTerminal(os.Stderr.Fd())):
		return pipeline.ProgressBar
	}
	return pipeline.ProgressLines
}

// finishRun compares a run (or merge) with its baseline, if any, reports it
// (reportRun, its tables within width display columns) and exits with its
// verdict.
func finishRun(w io.Writer, width int, res *resultsdir.Run, base *resultsdir.Run, formats []string, annotations, shard, quiet bool) error {
	cmp, err := writeComparison(base, res.Dir)
	if err != nil {
		return err
	}
	if err := reportRun(w, width, res, formats, cmp, annotations, quiet); err != nil {
		return backendErr(fmt.Errorf("writing results to %s: %w", res.Dir, err))
	}
	code := res.Summary.Verdict.ExitCode
	if shard && code == exitcode.GateFailed { // a shard's gates see part of the run: evalrun merge gates it
		code = exitcode.Pass
	}
	if code != exitcode.Pass {
		return &exitError{Code: code, Err: fmt.Errorf("verdict %s", res.Summary.Verdict.Status)}
	}
	return nil
}

// reportRun writes the report files the spec asks for (report.html with the
// comparison with the baseline, if any), prints the tables within width
// display columns (0: every column; quiet: the verdict line only) and, for
// GitHub Actions, the annotations and the step summary.
func reportRun(w io.Writer, width int, res *resultsdir.Run, formats []string, cmp *runcompare.Result, annotations, quiet bool) error {
	if err := report.Write(res.Dir, res.Summary, formats, cmp); err != nil {
		return err
	}
	show := func(w io.Writer, res *resultsdir.Run) error { return report.Print(w, res, width) }
	if quiet {
		show = report.PrintVerdict
	}
	if err := show(w, res); err != nil {
		return err
	}
	if annotations {
		report.Annotate(w, res.Summary, os.Getenv("GITHUB_WORKSPACE"))
	}
	if path := os.Getenv("GITHUB_STEP_SUMMARY"); path != "" {
		if err := report.AppendStepSummary(path, res.Summary); err != nil {
			return fmt.Errorf("GITHUB_STEP_SUMMARY: %w", err)
		}
	}
	return nil
}
