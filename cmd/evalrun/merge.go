package main

import (
	"os"

	"github.com/spf13/cobra"

	"github.com/evalrun/evalrun/pipeline"
	"github.com/evalrun/evalrun/pipeline/resultsdir"
)

func newMergeCmd() *cobra.Command {
	var outDir, baselinePath string
	var allowPartial, annotations, wide bool
	cmd := &cobra.Command{
		Use:   "merge SHARD_DIR... --out DIR",
		Short: "Merge the results directories of a run's shards into the results of the whole run",
		Long: `merge combines the results directories that 'evalrun run SPEC --shard I/N'
wrote (in any order) into one: summary.json equal to what one unsharded run
gives (every statistic, except timings and run ids), prompts.jsonl with the
same lines, report.md. It refuses shards of different specs, models, plugin
versions or options, and names duplicate and missing shards (exit 2);
--allow-partial merges an incomplete set and marks the result partial (its
verdict then fails: not every position was compared). Otherwise it exits
with the merged verdict, as run does. --baseline, as for run, judges the
relative gates against a baseline run and writes compare.md and
compare.json beside the merged results.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts := pipeline.MergeOptions{Dirs: args, OutDir: absPath(outDir), AllowPartial: allowPartial, Version: version, GitCommit: gitCommit}
			base, err := loadBaseline(baselinePath, &opts.RelativeGates)
			if err != nil {
				return err
			}
			s, err := pipeline.Merge(opts)
			if err != nil {
				return runErr(cmd, err)
			}
			res := &resultsdir.Run{Summary: s, Dir: opts.OutDir}
			out := cmd.OutOrStdout()
			return finishRun(out, tableWidth(out, wide), res, base, []string{"md", "junit", "html"}, annotations, false, false)
		},
	}
	cmd.Flags().StringVarP(&outDir, "out", "o", "", "results directory of the merged run")
	cmd.MarkFlagRequired("out")
	cmd.Flags().BoolVar(&annotations, "github-annotations", os.Getenv("GITHUB_ACTIONS") == "true",
		"print ::error/::warning workflow commands for failed gates and backends (default: on when GITHUB_ACTIONS=true)")
	cmd.Flags().StringVar(&baselinePath, "baseline", "", "a baseline run (directory or summary.json) for the relative gates, as run --baseline")
	cmd.Flags().BoolVar(&allowPartial, "allow-partial", false, "merge although shards are missing; the result is marked partial")
	cmd.Flags().BoolVar(&wide, "wide", false, wideUsage)
	return cmd
}

// shardFlag is --shard I/N, or JOB_COMPLETION_INDEX with EVALRUN_SHARDS
// (a Kubernetes Indexed Job); nil when neither is given.
func shardFlag(v string) (*resultsdir.Shard, error) {
	if v != "" {
		s, err := resultsdir.ParseShard(v)
		if err != nil {
			return nil, usageErr("--shard: %v", err)
		}
		return &s, nil
	}
	s, ok, err := resultsdir.ShardFromEnv(os.Getenv)
	if err != nil {
		return nil, usageErr("%v", err)
	}
	if !ok {
		return nil, nil
	}
	return &s, nil
}
