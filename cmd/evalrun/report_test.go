package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/evalrun/evalrun/pipeline/resultsdir"
	"github.com/evalrun/evalrun/pipeline/speedstat"
	"github.com/evalrun/evalrun/pipeline/summary"
)

// TestRunReportsForGitHubActions: with GITHUB_ACTIONS=true, run prints
// annotations by default and appends the step summary to
// $GITHUB_STEP_SUMMARY, beside the report files the spec asks for.
func TestRunReportsForGitHubActions(t *testing.T) {
	t.Setenv("GITHUB_ACTIONS", "true")
	if f := newRunCmd().Flags().Lookup("github-annotations"); f == nil || f.DefValue != "true" {
		t.Fatalf("--github-annotations is not on by default under GitHub Actions: %+v", f)
	}
	t.Setenv("GITHUB_ACTIONS", "")
	if f := newRunCmd().Flags().Lookup("github-annotations"); f.DefValue != "false" {
		t.Fatal("--github-annotations on outside GitHub Actions")
	}

	data, err := os.ReadFile(filepath.Join("..", "..", "pipeline", "report", "testdata", "summary.json"))
	if err != nil {
		t.Fatal(err)
	}
	var s summary.Summary
	if err := json.Unmarshal(data, &s); err != nil {
		t.Fatal(err)
	}
	s.Backends[1].Gates[0].Pass, s.Backends[1].Pass = false, false
	dir := t.TempDir()
	stepSummary := filepath.Join(dir, "step.md")
	t.Setenv("GITHUB_STEP_SUMMARY", stepSummary)
	var out bytes.Buffer
	if err := reportRun(&out, 0, &resultsdir.Run{Summary: &s, Dir: dir}, []string{"json", "md", "junit"}, nil, true, false); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "verdict: pass (exit 0)") || !strings.Contains(out.String(), "::error file=") ||
		!strings.Contains(out.String(), "title=evalrun default%3A npu-int8 failed "+s.Backends[1].Gates[0].Name) {
		t.Fatalf("stdout:\n%s", out.String())
	}
	for _, f := range []string{"report.md", "junit.xml", "step.md"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Fatal(err)
		}
	}
	out.Reset()
	t.Setenv("GITHUB_STEP_SUMMARY", "")
	if err := reportRun(&out, 0, &resultsdir.Run{Summary: &s, Dir: dir}, []string{"json"}, nil, false, false); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.String(), "::") {
		t.Fatalf("annotations printed with the flag off:\n%s", out.String())
	}
}

// TestRunTablesFitTheTerminal: the bundled spec's run prints no line wider
// than 120 columns (runes: its ± – Δ are one column each) when its output
// is no terminal and $COLUMNS is unset, saying which columns it hid; --wide
// prints every column.
func TestRunTablesFitTheTerminal(t *testing.T) {
	// With at least MinRepsFastCI repetitions: the p95 with its interval,
	// the widest rate cells.
	if reps, _ := strconv.Atoi(sharedDefaultReps); reps < speedstat.MinRepsFastCI() {
		t.Fatalf("the shared run's %d repetitions give no p95 interval (%d do)", reps, speedstat.MinRepsFastCI())
	}
	_, narrow := sharedDefaultRun(t)
	for i, l := range strings.Split(narrow.stdout, "\n") {
		if n := utf8.RuneCountInString(l); n > 120 {
			t.Errorf("line %d is %d columns wide: %s", i+1, n, l)
		}
	}
	hasTableLines(t, "the output", narrow.stdout,
		"| backend | status | KLD mean | same top p | PPL ratio | verdict |",
		"\n6 columns hidden (tokens, KLD p99, RMS Δp, NMSE, max |Δlogit|, greedy): --wide shows them\n",
		"| backend | device | pp64 p95 t/s [95% CI] | tg16 p95 t/s [95% CI] |")
	wide := evalrun(t, []string{"COLUMNS=", "EVALRUN_BENCH_REPS=6"}, "run", "configs/default.yaml", "--out", t.TempDir(), "--wide")
	if wide.code != 0 {
		t.Fatalf("--wide: exit %d\n%s\n%s", wide.code, wide.stdout, wide.stderr)
	}
	hasTableLines(t, "--wide", wide.stdout,
		"| backend | status | tokens | KLD mean | KLD p99 | same top p | RMS Δp | PPL ratio | NMSE | max |Δlogit| | greedy | verdict |",
		"| backend | device | kernels | threads | load s | warm-up s | pp64 p95 t/s | tg16 p95 t/s | peak RSS load / run | offload |",
		"| 36 of 36 matmuls on the NPU (int8, 3 cores) |")
	if strings.Contains(wide.stdout, "hidden") {
		t.Errorf("--wide hid columns:\n%s", wide.stdout)
	}
}

// hasTableLines checks that out, its cells' padding squeezed, holds every
// wanted line.
func hasTableLines(t *testing.T, what, out string, wants ...string) {
	t.Helper()
	for _, want := range wants {
		if !strings.Contains(squeezed(out), want) {
			t.Errorf("%s lacks %q:\n%s", what, want, out)
		}
	}
}

// squeezed is text with every run of spaces one space: a table's cells
// without their padding.
func squeezed(text string) string {
	return regexp.MustCompile(` {2,}`).ReplaceAllString(text, " ")
}
