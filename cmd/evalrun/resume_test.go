package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/evalrun/evalrun/pipeline/resultsdir"
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

	if code := signalAfterFirstChunk(t, syscall.SIGINT, env, "run", specFile, "--out", resumed); code != 3 {
		t.Fatalf("interrupted: exit %d, want 3", code)
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

// signalAfterFirstChunk starts evalrun, sends sig to it (the host alone, as
// the OOM killer would kill it) once its units file (in args' --out) records
// its first score chunk, and returns its exit code (minus the signal's
// number when it killed it); then it kills the plugins it may have left.
func signalAfterFirstChunk(t *testing.T, sig syscall.Signal, env []string, args ...string) int {
	t.Helper()
	units := filepath.Join(args[slices.Index(args, "--out")+1], "units.jsonl")
	s := start(t, env, args...)
	chunkDone := func() bool {
		data, _ := os.ReadFile(units)
		return strings.Contains(string(data), `"unit":"score/`)
	}
	for deadline := time.Now().Add(60 * time.Second); !chunkDone(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no score chunk done:\n%s", s.err)
		}
	}
	s.cmd.Process.Signal(sig)
	code := s.wait(t, 60*time.Second)
	syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
	return code
}

// killAfterFirstChunk SIGKILLs evalrun after its first score chunk.
func killAfterFirstChunk(t *testing.T, env []string, args ...string) {
	t.Helper()
	if code := signalAfterFirstChunk(t, syscall.SIGKILL, env, args...); code != -int(syscall.SIGKILL) {
		t.Fatalf("killed: exit %d, want death by SIGKILL (the run ended before the kill?)", code)
	}
}

// TestResumeAfterSIGKILL kills a run outright after its first score chunk
// (no chance to write anything at the end): units.jsonl holds the units it
// finished, synced as it went, and nothing else is left half-written;
// with a torn last line added (a kill mid-write) --resume notes and ignores
// it, and gives summary.json equal to an uninterrupted run's apart from
// timings and call counters and a byte-identical prompts.jsonl. A shard
// killed the same way is refused by evalrun merge (exit 2, saying how to
// finish it), resumed with --shard --resume, and then merges into the
// uninterrupted run's results. A run made by another build of a plugin is
// not resumed (exit 2).
func TestResumeAfterSIGKILL(t *testing.T) {
	env := []string{"EVALRUN_BENCH_REPS=1", "EVALRUN_BENCH_N_PROMPT=8", "EVALRUN_BENCH_N_GEN=2",
		"EVALRUN_DATASETS_1_LIMIT=3", "EVALRUN_DATASETS_1_MAX_NEW_TOKENS=6"}
	specFile, _ := filepath.Abs("../../configs/default.yaml")
	dir := t.TempDir()
	whole, killed := filepath.Join(dir, "whole"), filepath.Join(dir, "killed")
	if r := evalrun(t, env, "run", specFile, "--out", whole); r.code != 0 {
		t.Fatalf("uninterrupted: exit %d\n%s", r.code, r.stderr)
	}
	wantSummary := withoutEvalCounts(t, comparableSummary(t, whole))
	wantPrompts, err := os.ReadFile(filepath.Join(whole, "prompts.jsonl"))
	if err != nil {
		t.Fatal(err)
	}

	killAfterFirstChunk(t, env, "run", specFile, "--out", killed)
	f, err := resultsdir.ReadUnits(killed)
	if err != nil || f.Complete || len(f.Units) == 0 || f.Units[0].Unit != "score/stories/chunk-1" || len(f.Units[0].Prompts) != 1+len(f.Manifest.Backends) {
		t.Fatalf("the killed run's units.jsonl: %+v %v", f, err)
	}
	for _, name := range []string{"summary.json", "prompts.jsonl"} {
		if _, err := os.Stat(filepath.Join(killed, name)); err == nil {
			t.Fatalf("a killed run left %s", name)
		}
	}
	t.Logf("killed with %d of %d units recorded", len(f.Units), len(f.Manifest.Units))
	units, err := os.OpenFile(filepath.Join(killed, resultsdir.UnitsFile), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	units.WriteString(`{"unit":"generate/openings/1","results":[{"backend":"cpu-gg`)
	units.Close()

	if r := evalrun(t, env, "run", specFile, "--out", killed); r.code != 2 || !strings.Contains(r.stderr, "--resume") {
		t.Fatalf("run into the killed run's directory without --resume: exit %d\n%s", r.code, r.stderr)
	}
	r := evalrun(t, env, "run", specFile, "--out", killed, "--resume")
	if r.code != 0 || !strings.Contains(r.stderr, "cut short") || !strings.Contains(r.stderr, "units_done=") || strings.Contains(r.stderr, "units_done=0 ") {
		t.Fatalf("resumed: exit %d\n%s", r.code, r.stderr)
	}
	if got := withoutEvalCounts(t, comparableSummary(t, killed)); got != wantSummary {
		t.Fatalf("resumed summary.json differs from the uninterrupted run's: %s", firstDiff(wantSummary, got))
	}
	if got, _ := os.ReadFile(filepath.Join(killed, "prompts.jsonl")); string(got) != string(wantPrompts) {
		t.Fatalf("resumed prompts.jsonl differs from the uninterrupted run's: %s", firstDiff(string(wantPrompts), string(got)))
	}
	if f, err := resultsdir.ReadUnits(killed); err != nil || !f.Complete || f.Note != "" {
		t.Fatalf("the resumed run's units.jsonl: complete %v, note %q, %v", f != nil && f.Complete, f.Note, err)
	}
	entries, _ := os.ReadDir(killed)
	for _, e := range entries {
		if strings.Contains(e.Name(), ".tmp-") {
			t.Errorf("left behind: %s", e.Name())
		}
	}

	// Two shards, the second killed: merge refuses it; resumed, the two
	// merge into the uninterrupted run's results.
	s0, s1, merged := filepath.Join(dir, "s0"), filepath.Join(dir, "s1"), filepath.Join(dir, "merged")
	if r := evalrun(t, env, "run", specFile, "--shard", "0/2", "--out", s0); r.code != 0 {
		t.Fatalf("shard 0/2: exit %d\n%s", r.code, r.stderr)
	}
	killAfterFirstChunk(t, env, "run", specFile, "--shard", "1/2", "--out", s1)
	if r := evalrun(t, nil, "merge", "--out", merged, s0, s1); r.code != 2 || !strings.Contains(r.stderr, "shard 1/2 in "+s1+" did not finish") ||
		!strings.Contains(r.stderr, "--shard 1/2 --out "+s1+" --resume") {
		t.Fatalf("merge with a killed shard: exit %d\n%s", r.code, r.stderr)
	}
	if r := evalrun(t, env, "run", specFile, "--out", s1, "--resume"); r.code != 2 || !strings.Contains(r.stderr, "resume it with --shard 1/2") {
		t.Fatalf("resume of a shard without --shard: exit %d\n%s", r.code, r.stderr)
	}
	if r := evalrun(t, env, "run", specFile, "--shard", "1/2", "--out", s1, "--resume"); r.code != 0 {
		t.Fatalf("resumed shard: exit %d\n%s", r.code, r.stderr)
	}
	if r := evalrun(t, nil, "merge", "--out", merged, s0, s1); r.code != 0 {
		t.Fatalf("merge: exit %d\n%s", r.code, r.stderr)
	}
	if got := withoutEvalCounts(t, comparableSummary(t, merged)); got != wantSummary {
		t.Fatalf("merged summary.json differs from the uninterrupted run's: %s", firstDiff(wantSummary, got))
	}
	if got, _ := os.ReadFile(filepath.Join(merged, "prompts.jsonl")); string(got) != string(wantPrompts) {
		t.Fatalf("merged prompts.jsonl differs from the uninterrupted run's: %s", firstDiff(string(wantPrompts), string(got)))
	}

	// A run another build of a plugin made is not resumed.
	path := filepath.Join(whole, resultsdir.UnitsFile)
	data, _ := os.ReadFile(path)
	head, rest, _ := strings.Cut(string(data), "\n")
	var m resultsdir.Manifest
	if err := json.Unmarshal([]byte(head), &m); err != nil || len(m.Plugins) != 1+len(m.Backends) {
		t.Fatalf("manifest plugins %+v: %v", m.Plugins, err)
	}
	m.Plugins[1].Version += "-other"
	edited, _ := json.Marshal(m)
	os.WriteFile(path, resealUnits(t, edited, rest), 0o666)
	if r := evalrun(t, env, "run", specFile, "--out", whole, "--resume"); r.code != 2 || !strings.Contains(r.stderr, "backend "+m.Plugins[1].Backend+": ") || !strings.Contains(r.stderr, "mix two builds") {
		t.Fatalf("resume of another build's run: exit %d\n%s", r.code, r.stderr)
	}
}

// resealUnits is a units file of manifest and the records in rest, their
// digests chained anew from the manifest as evalrun chains them (an edit
// that keeps the file's integrity: what another build would have written).
func resealUnits(t *testing.T, manifest []byte, rest string) []byte {
	t.Helper()
	out := append(slices.Clone(manifest), '\n')
	sum := sha256.Sum256(manifest)
	prev := sum[:]
	for _, line := range strings.Split(strings.TrimSuffix(rest, "\n"), "\n") {
		var r resultsdir.Record
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatal(err)
		}
		r.Digest = ""
		b, _ := json.Marshal(r)
		h := sha256.New()
		h.Write(prev)
		h.Write(b)
		prev = h.Sum(nil)
		r.Digest = hex.EncodeToString(prev)
		b, _ = json.Marshal(r)
		out = append(append(out, b...), '\n')
	}
	return out
}
