package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRunLimit: --limit 2 on the default spec compares only the first two
// records of each dataset (stories' two records are 4 chunks of 128, openings'
// two prompts), marks summary.json (run.limit and a verdict reason), the
// printed verdict and report.md as not a full result, and, run with --out,
// writes nothing beside its directory (no index.jsonl). Its stderr, not a
// terminal, has one progress line per pass naming the backends.
func TestRunLimit(t *testing.T) {
	root := filepath.Join(t.TempDir(), "a")
	out := filepath.Join(root, "runA")
	r := evalrun(t, []string{"EVALRUN_BENCH_ENABLED=false"}, "run", "configs/default.yaml", "--limit", "2", "--out", out)
	if r.code != 0 {
		t.Fatalf("exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	s := readSummary(t, out)
	if s.Run.Limit != 2 {
		t.Errorf("run.limit %d, want 2", s.Run.Limit)
	}
	for _, d := range s.Datasets {
		if d.Records != 2 || d.Mode == "score" && d.Chunks != 4 {
			t.Errorf("dataset %s: %d records, %d chunks", d.Name, d.Records, d.Chunks)
		}
	}
	const note = "--limit 2: not a full result"
	if len(s.Verdict.Reasons) == 0 || !strings.HasPrefix(s.Verdict.Reasons[0], note) {
		t.Errorf("verdict reasons %q", s.Verdict.Reasons)
	}
	prompts, err := os.ReadFile(filepath.Join(out, "prompts.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	// The reference and 3 candidates, each 4 chunks and 2 prompts.
	if n := strings.Count(string(prompts), "\n"); n != 4*(4+2) {
		t.Errorf("prompts.jsonl has %d lines, want 24", n)
	}
	if !strings.Contains(r.stdout, "verdict: pass (exit 0), not a full result (--limit 2)\n  - "+note) {
		t.Errorf("the printed verdict does not say so:\n%s", r.stdout)
	}
	md, _ := os.ReadFile(filepath.Join(out, "report.md"))
	if !strings.HasPrefix(string(md), "# evalrun default: ✅ PASS, not a full result (--limit 2)\n") || !strings.Contains(string(md), note) {
		t.Errorf("report.md does not say so:\n%.400s", md)
	}
	var passes []string
	for _, l := range strings.Split(strings.TrimSpace(r.stderr), "\n") {
		if !strings.HasPrefix(l, "time=") { // the log's lines
			passes = append(passes, l)
		}
	}
	const backends = " [cpu-exact (ref), npu-fp16, npu-int8, cpu-ggml]: "
	if len(passes) != 2 || !strings.HasPrefix(passes[0], "score"+backends+"4/4 chunks (508 tokens), ") ||
		!strings.HasPrefix(passes[1], "generate"+backends+"2/2 prompts (64 tokens), ") {
		t.Errorf("progress: want one line per pass (score, generate), got:\n%s", r.stderr)
	}
	if entries, _ := os.ReadDir(root); len(entries) != 1 || entries[0].Name() != "runA" {
		t.Errorf("--out %s wrote beside it: %v", out, entries)
	}

	for _, bad := range []struct{ args []string }{
		{[]string{"configs/default.yaml", "--limit", "0"}},
		{[]string{"configs/kld-base.yaml", "--limit", "2"}},
	} {
		r := evalrun(t, nil, append([]string{"run"}, bad.args...)...)
		if r.code != 2 || !strings.HasPrefix(r.stderr, "evalrun: --limit: ") {
			t.Errorf("run %v: exit %d, stderr %q", bad.args, r.code, r.stderr)
		}
	}
}

// TestRunQuiet: --quiet prints one line, the verdict and where the results
// are, and nothing on stderr (no progress, no log) when all goes well.
func TestRunQuiet(t *testing.T) {
	out := filepath.Join(t.TempDir(), "q")
	r := evalrun(t, []string{"EVALRUN_BENCH_ENABLED=false"}, "run", "configs/default.yaml", "--limit", "1", "--quiet", "--out", out)
	want := "verdict: pass (exit 0), not a full result (--limit 1); results: " + out + "\n"
	if r.code != 0 || r.stdout != want || r.stderr != "" {
		t.Errorf("exit %d\nstdout %q, want %q\nstderr %q", r.code, r.stdout, want, r.stderr)
	}
	if _, err := os.Stat(filepath.Join(out, "report.md")); err != nil {
		t.Errorf("--quiet wrote no report.md: %v", err)
	}
	if r := evalrun(t, nil, "run", "configs/default.yaml", "--quiet", "--verbose"); r.code != 2 || !strings.Contains(r.stderr, "--quiet and --verbose") {
		t.Errorf("--quiet --verbose: exit %d, %q", r.code, r.stderr)
	}
}
