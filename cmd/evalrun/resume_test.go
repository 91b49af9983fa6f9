package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestResumeAfterSIGINT interrupts a run of the default spec with SIGINT
// after its first score chunk, resumes it with --resume and diffs it with
// an uninterrupted run: summary.json equal apart from timings, run ids and
// the call counters (eval calls and rows, NPU calls per kernel: they count
// what the resumed process computed); prompts.jsonl the same lines (so the
// same digests). A resume with
// another spec, or of a directory with no run, is bad input.
func TestResumeAfterSIGINT(t *testing.T) {
	env := []string{"EVALRUN_BENCH_REPS=1", "EVALRUN_BENCH_N_PROMPT=8", "EVALRUN_BENCH_N_GEN=2",
		"EVALRUN_DATASETS_1_LIMIT=3", "EVALRUN_DATASETS_1_MAX_NEW_TOKENS=6"}
	specFile, _ := filepath.Abs("../../configs/default.yaml")
	dir := t.TempDir()
	whole, resumed := filepath.Join(dir, "whole"), filepath.Join(dir, "resumed")
	if r := evalrun(t, env, "run", specFile, "--out", whole); r.code != 0 {
		t.Fatalf("uninterrupted: exit %d\n%s", r.code, r.stderr)
	}

	s := start(t, env, "run", specFile, "--out", resumed)
	for deadline := time.Now().Add(60 * time.Second); !strings.Contains(s.err.String(), "score: 1/"); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no score chunk done:\n%s", s.err)
		}
	}
	s.cmd.Process.Signal(syscall.SIGINT)
	if code := s.wait(t, 60*time.Second); code != 3 {
		t.Fatalf("interrupted: exit %d, want 3\n%s", code, s.err)
	}
	if sum := readSummary(t, resumed); sum.Backends[0].Accuracy == nil || sum.Backends[0].Accuracy.Complete {
		t.Fatalf("the run was not interrupted half-way: %+v", sum.Backends[0].Accuracy)
	}
	if r := evalrun(t, env, "run", specFile, "--out", resumed); r.code != 2 || !strings.Contains(r.stderr, "--force") {
		t.Fatalf("run into the interrupted run's directory without --resume: exit %d\n%s", r.code, r.stderr)
	}

	r := evalrun(t, env, "run", specFile, "--out", resumed, "--resume")
	if r.code != 0 {
		t.Fatalf("resumed: exit %d\n%s", r.code, r.stderr)
	}
	if !strings.Contains(r.stderr, "units_done=") || strings.Contains(r.stderr, "units_done=0 ") {
		t.Errorf("the resume kept no unit:\n%s", r.stderr)
	}
	want, got := withoutEvalCounts(t, comparableSummary(t, whole)), withoutEvalCounts(t, comparableSummary(t, resumed))
	if got != want {
		t.Fatalf("resumed summary.json differs from the uninterrupted run's: %s", firstDiff(want, got))
	}
	wantLines, gotLines := sortedLines(t, filepath.Join(whole, "prompts.jsonl")), sortedLines(t, filepath.Join(resumed, "prompts.jsonl"))
	if !slices.Equal(gotLines, wantLines) {
		t.Fatalf("resumed prompts.jsonl differs (%d lines, want %d)", len(gotLines), len(wantLines))
	}

	// Resuming the finished run again runs only the bench and gives the
	// same results; the kernel accounting then lists the bench's kernels.
	withoutKernels := func(dir string) string {
		var s map[string]any
		json.Unmarshal([]byte(withoutEvalCounts(t, comparableSummary(t, dir))), &s)
		for _, b := range s["backends"].([]any) {
			if d, ok := b.(map[string]any)["diagnostics"].(map[string]any); ok {
				delete(d, "kernels")
			}
		}
		out, _ := json.MarshalIndent(s, "", " ")
		return string(out)
	}
	want = withoutKernels(whole)
	if r := evalrun(t, env, "run", specFile, "--out", resumed, "--resume"); r.code != 0 || withoutKernels(resumed) != want {
		t.Fatalf("second resume: exit %d: %s", r.code, firstDiff(want, withoutKernels(resumed)))
	}

	other := append(slices.Clone(env), "EVALRUN_DATASETS_0_LIMIT=2")
	if r := evalrun(t, other, "run", specFile, "--out", resumed, "--resume"); r.code != 2 || !strings.Contains(r.stderr, "another spec") {
		t.Errorf("resume with another spec: exit %d\n%s", r.code, r.stderr)
	}
	empty := filepath.Join(dir, "empty")
	os.Mkdir(empty, 0o777)
	if r := evalrun(t, env, "run", specFile, "--out", empty, "--resume"); r.code != 2 || !strings.Contains(r.stderr, "nothing to resume") {
		t.Errorf("resume of an empty directory: exit %d\n%s", r.code, r.stderr)
	}
}

// withoutEvalCounts drops the backends' eval blocks and their device
// diagnostics' call counts (they count what each process computed).
func withoutEvalCounts(t *testing.T, summary string) string {
	t.Helper()
	var s map[string]any
	if err := json.Unmarshal([]byte(summary), &s); err != nil {
		t.Fatal(err)
	}
	for _, b := range append([]any{s["reference"]}, s["backends"].([]any)...) {
		delete(b.(map[string]any), "eval")
		dropCalls(b.(map[string]any)["diagnostics"])
	}
	out, _ := json.MarshalIndent(s, "", " ")
	return string(out)
}

func dropCalls(v any) {
	switch v := v.(type) {
	case map[string]any:
		delete(v, "calls")
		delete(v, "npu_calls")
		for _, x := range v {
			dropCalls(x)
		}
	case []any:
		for _, x := range v {
			dropCalls(x)
		}
	}
}
