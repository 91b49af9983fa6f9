package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/evalrun/evalrun/internal/atomicfile"
	"github.com/evalrun/evalrun/pipeline/report"
	"github.com/evalrun/evalrun/pipeline/resultsdir"
	"github.com/evalrun/evalrun/pipeline/runcompare"
)

func newCompareCmd() *cobra.Command {
	var outDir string
	var minChange float64
	cmd := &cobra.Command{
		Use:   "compare BASE NEW",
		Short: "Compare a run with a baseline run: accuracy deltas, logits digests, throughput significance",
		Long: `compare reads two runs (their directories or summary.json files; prompts.jsonl
beside them gives the per-chunk digests) and prints, per backend: whether its
logits are bit-identical to the baseline's or the first chunk/prompt and
position where they changed, every accuracy statistic's delta and whether it
is beyond the statistics' own ± (the two runs' standard errors in
quadrature), throughput p95s with a significance verdict from the per-repetition
samples (Fisher's exact test at the 95th percentile, the machine's shift
removed), and status changes. It writes compare.md,
compare.json and compare.html (NEW's report.html with the changes drawn)
into --out (default: NEW's run directory).

Exit codes: 0 compared, 2 a run could not be read.`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if minChange < 0 || minChange >= 1 {
				return usageErr("--min-change %g: a fraction between 0 and 1", minChange)
			}
			base, err := resultsdir.Load(args[0])
			if err != nil {
				return usageErr("baseline: %v", err)
			}
			newRun, err := resultsdir.Load(args[1])
			if err != nil {
				return usageErr("new run: %v", err)
			}
			res := runcompare.Compare(base, newRun, minChange)
			dir := newRun.Dir
			if outDir != "" {
				dir = absPath(outDir)
				if err := os.MkdirAll(dir, 0o777); err != nil {
					return usageErr("--out: %v", err)
				}
			}
			if err := runcompare.Write(dir, res); err != nil {
				return usageErr("writing the comparison: %v", err)
			}
			// NEW's report.html with the changes: compare.html.
			var page bytes.Buffer
			if err := report.HTMLCompared(&page, newRun.Summary, res); err != nil {
				return err
			}
			if err := atomicfile.WriteFile(filepath.Join(dir, resultsdir.CompareHTML), page.Bytes()); err != nil {
				return usageErr("writing the comparison: %v", err)
			}
			if err := runcompare.Print(cmd.OutOrStdout(), res); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "\ncomparison: %s\n", filepath.Join(dir, resultsdir.CompareMD))
			return nil
		},
	}
	cmd.Flags().StringVarP(&outDir, "out", "o", "", "directory for compare.md and compare.json (default: NEW's run directory)")
	cmd.Flags().Float64Var(&minChange, "min-change", runcompare.DefaultMinChange,
		"smallest relative throughput change reported as significant (runs at different times on a shared machine drift)")
	return cmd
}

// writeComparison compares a finished run (or merge) with its baseline into
// the run's directory (compare.md, compare.json); nothing without a baseline.
func writeComparison(base *resultsdir.Run, dir string) (*runcompare.Result, error) {
	if base == nil {
		return nil, nil
	}
	run, err := resultsdir.Load(dir)
	if err == nil {
		res := runcompare.Compare(base, run, runcompare.DefaultMinChange)
		if err = runcompare.Write(dir, res); err == nil {
			return res, nil
		}
	}
	return nil, backendErr(fmt.Errorf("writing the comparison to %s: %w", dir, err))
}
