package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/evalrun/evalrun/pipeline/resultsdir"
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
	if err := reportRun(&out, &resultsdir.Run{Summary: &s, Dir: dir}, []string{"json", "md", "junit"}, nil, true, false); err != nil {
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
	if err := reportRun(&out, &resultsdir.Run{Summary: &s, Dir: dir}, []string{"json"}, nil, false, false); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.String(), "::") {
		t.Fatalf("annotations printed with the flag off:\n%s", out.String())
	}
}
