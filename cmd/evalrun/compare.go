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
	var minChange, maxSlowdown float64
	var wide bool
	cmd := &cobra.Command{
		Use:   "compare BASE NEW",
		Short: "Compare a run with a baseline run: what changed, and whether it regressed",
		Long: `compare reads two runs (their directories or summary.json files; prompts.jsonl
beside them gives the per-chunk digests) and prints:
  - the verdict: no change, changed (no regression), or regression, with why;
  - what changed between the runs' setups: the effective specs, each backend's
    plugin (version, device, binary sha256, CPU kernels), the model's and the
    datasets' sha256, evalrun's version, the machine;
  - per backend: whether its logits are bit-identical to the baseline's or the
    first chunk/prompt and position where they changed, and the headline
    accuracy deltas with their uncertainty (the two runs' standard errors in
    quadrature);
  - throughput p95s with a significance verdict from the per-repetition
    samples (Fisher's exact test at the 95th percentile, the machine's shift
    removed, Holm-adjusted over the table).
A regression is a backend that ran in the baseline and failed, crashed, timed
out or is missing now; an accuracy statistic worse beyond its ± by at least
--min-change of the baseline's value; or a test significantly slower by more
than --max-slowdown, with the machine's shift removed and as measured
(simulated devices' speed is not judged).
Nothing is written into either run: --out DIR writes compare.md, compare.json
and compare.html (the verdict and the changes first, then the new run's
charts) into DIR.

Exit codes: 0 no change, or a change that is no regression; 1 a regression;
2 a run could not be read, or a bad flag.`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if minChange < 0 || minChange >= 1 {
				return usageErr("--min-change %g: a fraction between 0 and 1", minChange)
			}
			if maxSlowdown < 0 || maxSlowdown >= 1 {
				return usageErr("--max-slowdown %g: a fraction between 0 and 1", maxSlowdown)
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
			res.Judge(maxSlowdown)
			if err := runcompare.Print(cmd.OutOrStdout(), res, wide); err != nil {
				return err
			}
			if outDir != "" {
				dir := absPath(outDir)
				if err := writeCompare(dir, newRun, res); err != nil {
					return usageErr("--out: %v", err)
				}
				fmt.Fprintf(cmd.OutOrStdout(), "\ncomparison: %s\n", filepath.Join(dir, resultsdir.CompareMD))
			}
			if res.Verdict.ExitCode != 0 {
				return &exitError{Code: res.Verdict.ExitCode}
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&outDir, "out", "o", "", "write compare.md, compare.json and compare.html into this directory (default: print only)")
	cmd.Flags().Float64Var(&minChange, "min-change", runcompare.DefaultMinChange,
		"smallest relative change reported as significant (speed) and called a regression (accuracy beyond its ±)")
	cmd.Flags().Float64Var(&maxSlowdown, "max-slowdown", runcompare.DefaultMaxSlowdown,
		"largest significant slowdown (p95, the machine's change removed, and as measured) that is not a regression")
	cmd.Flags().BoolVar(&wide, "wide", false, "also print every accuracy statistic of every backend")
	return cmd
}

// writeCompare writes compare.md, compare.json and compare.html into dir.
func writeCompare(dir string, newRun *resultsdir.Run, res *runcompare.Result) error {
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return err
	}
	if err := runcompare.Write(dir, res); err != nil {
		return err
	}
	var page bytes.Buffer
	if err := report.HTMLCompare(&page, newRun.Summary, res); err != nil {
		return err
	}
	return atomicfile.WriteFile(filepath.Join(dir, resultsdir.CompareHTML), page.Bytes())
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
