package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/evalrun/evalrun/pipeline/runcompare"
	"github.com/evalrun/evalrun/pipeline/summary"
)

// comparableSummary is summary.json without what differs between two runs
// of one spec: run ids and provenance, timings, memory and speed figures
// (the throughput tests and their sample counts stay).
func comparableSummary(t *testing.T, dir string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "summary.json"))
	if err != nil {
		t.Fatal(err)
	}
	var s map[string]any
	if err := json.Unmarshal(data, &s); err != nil {
		t.Fatal(err)
	}
	drop := func(m any, keys ...string) {
		if m, ok := m.(map[string]any); ok {
			for _, k := range keys {
				delete(m, k)
			}
		}
	}
	drop(s["run"], "id", "started", "finished", "duration_s", "shard", "merged", "spec")
	drop(s, "host")
	backends := append([]any{s["reference"]}, s["backends"].([]any)...)
	for _, b := range backends {
		bm := b.(map[string]any)
		drop(bm, "peak_rss_bytes")
		drop(bm["load"], "load_s", "warmup_s", "host_s", "memory_bytes", "peak_rss_bytes")
		drop(bm["eval"], "call_s", "compute_s", "decode_s")
		if tp, ok := bm["throughput"].(map[string]any); ok {
			for _, key := range []string{"pp", "tg"} {
				if tm, ok := tp[key].(map[string]any); ok {
					tm["samples_ns"] = len(tm["samples_ns"].([]any))
					drop(tm, "avg_ns", "stddev_ns", "avg_ts", "stddev_ts", "host_s", "stats")
				}
			}
		}
	}
	out, _ := json.MarshalIndent(s, "", " ")
	return string(out)
}

func sortedLines(t *testing.T, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	slices.Sort(lines)
	return lines
}

// firstDiff shows the first differing line of two texts.
func firstDiff(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := range min(len(al), len(bl)) {
		if al[i] != bl[i] {
			return fmt.Sprintf("line %d:\n- %s\n+ %s", i+1, al[i], bl[i])
		}
	}
	return fmt.Sprintf("%d lines vs %d", len(al), len(bl))
}

// TestShardedRunsMergeToTheUnshardedRun runs the default spec and
// configs/rknn-sim.yaml whole and as 1, 3 and 7 shards (each shard its own
// evalrun process, all at once), merges each set and diffs: summary.json is
// equal in every field but timings and run ids, prompts.jsonl has the same
// lines. The datasets are cut to a few chunks and prompts to keep the test
// short; TEST_EVALRUN_FULL_SPECS=1 runs the specs as shipped.
func TestShardedRunsMergeToTheUnshardedRun(t *testing.T) {
	env := []string{"EVALRUN_BENCH_REPS=1", "EVALRUN_BENCH_N_PROMPT=8", "EVALRUN_BENCH_N_GEN=2"}
	if os.Getenv("TEST_EVALRUN_FULL_SPECS") == "" {
		env = append(env, "EVALRUN_DATASETS_0_LIMIT=2", "EVALRUN_DATASETS_1_LIMIT=3", "EVALRUN_DATASETS_1_MAX_NEW_TOKENS=6")
	}
	for _, specFile := range []string{"configs/default.yaml", "configs/rknn-sim.yaml"} {
		t.Run(filepath.Base(specFile), func(t *testing.T) {
			dir := t.TempDir()
			whole := evalrun(t, env, "run", specFile, "--out", filepath.Join(dir, "whole"))
			if whole.code != 0 {
				t.Fatalf("unsharded: exit %d\n%s", whole.code, whole.stderr)
			}
			want := comparableSummary(t, filepath.Join(dir, "whole"))
			wantLines := sortedLines(t, filepath.Join(dir, "whole", "prompts.jsonl"))
			for _, n := range []int{1, 3, 7} {
				var dirs []string
				results := make([]result, n)
				var wg sync.WaitGroup
				for i := range n {
					d := filepath.Join(dir, fmt.Sprintf("n%d-shard%d", n, i))
					dirs = append(dirs, d)
					wg.Go(func() {
						results[i] = evalrun(t, env, "run", specFile, "--out", d, "--shard", fmt.Sprintf("%d/%d", i, n))
					})
				}
				wg.Wait()
				for i, r := range results {
					if r.code != 0 { // a shard's gates judge its part only: it exits 0 unless a backend could not run
						t.Fatalf("shard %d/%d: exit %d\n%s", i, n, r.code, r.stderr)
					}
				}
				out := filepath.Join(dir, fmt.Sprintf("n%d-merged", n))
				m := evalrun(t, nil, append([]string{"merge", "--out", out}, dirs...)...)
				if m.code != 0 {
					t.Fatalf("merge of %d shards: exit %d\n%s\n%s", n, m.code, m.stdout, m.stderr)
				}
				if got := comparableSummary(t, out); got != want {
					t.Fatalf("%d shards merged: summary.json differs from the unsharded run's: %s", n, firstDiff(want, got))
				}
				if got := sortedLines(t, filepath.Join(out, "prompts.jsonl")); !slices.Equal(got, wantLines) {
					t.Fatalf("%d shards merged: prompts.jsonl differs (%d lines, want %d)", n, len(got), len(wantLines))
				}
				t.Logf("%d shards merged: summary.json and prompts.jsonl (%d lines) equal to the unsharded run's", n, len(wantLines))
			}
		})
	}
}

// TestMergeNamesMissingAndDuplicateShards: the exit code and message a CI
// merge job shows when a shard is missing or given twice, or the shards
// come from two specs; merge --baseline writes the comparison.
func TestMergeNamesMissingAndDuplicateShards(t *testing.T) {
	env := []string{"EVALRUN_BENCH_ENABLED=false", "EVALRUN_DATASETS_0_LIMIT=2", "EVALRUN_DATASETS_1_LIMIT=2", "EVALRUN_DATASETS_1_MAX_NEW_TOKENS=4"}
	dir := t.TempDir()
	var dirs []string
	for i := range 3 {
		d := filepath.Join(dir, fmt.Sprintf("s%d", i))
		dirs = append(dirs, d)
		if r := evalrun(t, append(env, fmt.Sprintf("JOB_COMPLETION_INDEX=%d", i), "EVALRUN_SHARDS=3"), "run", "configs/default.yaml", "--out", d); r.code != 0 {
			t.Fatalf("shard %d: exit %d %s", i, r.code, r.stderr)
		}
	}
	r := evalrun(t, nil, "merge", "--out", filepath.Join(dir, "m1"), dirs[0], dirs[2])
	if r.code != 2 || !strings.Contains(r.stderr, "missing shard 1/3") {
		t.Fatalf("missing shard: exit %d %q", r.code, r.stderr)
	}
	r = evalrun(t, nil, "merge", "--out", filepath.Join(dir, "m2"), dirs[0], dirs[1], dirs[2], dirs[1])
	if r.code != 2 || !strings.Contains(r.stderr, "shard 1/3 given twice") {
		t.Fatalf("duplicate shard: exit %d %q", r.code, r.stderr)
	}
	other := filepath.Join(dir, "other")
	// A gate no backend meets: the shard's verdict fails, yet it exits 0
	// (the merge gates the run), so a CI matrix or an Indexed Job goes on.
	if r := evalrun(t, append(env, "EVALRUN_GATES_KLD_MEAN_MAX=0"), "run", "configs/default.yaml", "--out", other, "--shard", "1/3"); r.code != 0 || readSummary(t, other).Verdict.Status != "fail" {
		t.Fatalf("other spec: exit %d %s", r.code, r.stderr)
	}
	r = evalrun(t, nil, "merge", "--out", filepath.Join(dir, "m3"), dirs[0], other, dirs[2])
	if r.code != 2 || !strings.Contains(r.stderr, "different specs") {
		t.Fatalf("two specs: exit %d %q", r.code, r.stderr)
	}
	r = evalrun(t, nil, "merge", "--allow-partial", "--out", filepath.Join(dir, "m4"), dirs[0], dirs[2])
	if r.code != 1 {
		t.Fatalf("partial merge: exit %d, want 1 (not every position compared)\n%s", r.code, r.stdout)
	}
	if s := readSummary(t, filepath.Join(dir, "m4")); s.Run.Merged == nil || !s.Run.Merged.Partial {
		t.Fatalf("partial merge not marked partial: %+v", s.Run.Merged)
	}
	// merge --baseline, as run --baseline, writes compare.md and
	// compare.json beside the merged results and draws them in report.html:
	// merged again against the first merge, every backend's logits are
	// bit-identical.
	whole, again := filepath.Join(dir, "m5"), filepath.Join(dir, "m6")
	if r := evalrun(t, nil, append([]string{"merge", "--out", whole}, dirs...)...); r.code != 0 {
		t.Fatalf("merge: exit %d\n%s", r.code, r.stderr)
	}
	if _, err := os.Stat(filepath.Join(whole, "compare.json")); err == nil {
		t.Fatal("a merge without a baseline wrote compare.json")
	}
	if r := evalrun(t, nil, append([]string{"merge", "--baseline", whole, "--out", again}, dirs...)...); r.code != 0 {
		t.Fatalf("merge --baseline: exit %d\n%s", r.code, r.stderr)
	}
	cmp := readCompare(t, again)
	for _, be := range cmp.Backends {
		if be.Logits.Verdict != runcompare.BitIdentical {
			t.Errorf("merge --baseline: %s: %+v", be.Name, be.Logits)
		}
	}
	if page, err := os.ReadFile(filepath.Join(again, "report.html")); err != nil || len(cmp.Backends) != 1+len(readSummary(t, whole).Backends) ||
		!strings.Contains(string(page), `<figure class="chart" id="compare"><h2>Against the baseline `) {
		t.Fatalf("merge --baseline: report.html without the comparison (%v), %d backends compared", err, len(cmp.Backends))
	}
	if r := evalrun(t, nil, "run", "configs/default.yaml", "--shard", "3/3"); r.code != 2 || !strings.Contains(r.stderr, "0..2") {
		t.Fatalf("--shard 3/3: exit %d %q", r.code, r.stderr)
	}
}

// TestReferenceCacheWarmRun: the default spec run twice with EVALRUN_CACHE:
// the second run's reference computes no score chunk (cache hits = chunks,
// misses = 0) and the summary is the same; a truncated entry is detected,
// recomputed and written again; evalrun cache stats and prune work on it.
func TestReferenceCacheWarmRun(t *testing.T) {
	dir := t.TempDir()
	cache := filepath.Join(dir, "cache")
	env := []string{"EVALRUN_CACHE=" + cache, "EVALRUN_BENCH_ENABLED=false", "EVALRUN_DATASETS_0_LIMIT=2", "EVALRUN_DATASETS_1_LIMIT=2", "EVALRUN_DATASETS_1_MAX_NEW_TOKENS=4"}
	run := func(name string) *summary.Summary {
		if r := evalrun(t, env, "run", "configs/default.yaml", "--out", filepath.Join(dir, name)); r.code != 0 {
			t.Fatalf("%s: exit %d\n%s", name, r.code, r.stderr)
		}
		return readSummary(t, filepath.Join(dir, name))
	}
	normal := func(name string) string {
		s := comparableSummary(t, filepath.Join(dir, name))
		var m map[string]any
		json.Unmarshal([]byte(s), &m)
		delete(m["reference"].(map[string]any), "cache")
		delete(m["reference"].(map[string]any), "eval")
		out, _ := json.MarshalIndent(m, "", " ")
		return string(out)
	}
	cold, warm := run("cold"), run("warm")
	chunks := cold.Datasets[0].Chunks
	t.Logf("%d score chunks; reference cache: cold %+v, warm %+v; reference Eval calls: cold %d, warm %d",
		chunks, *cold.Reference.Cache, *warm.Reference.Cache, cold.Reference.Eval.Calls, warm.Reference.Eval.Calls)
	if c, w := cold.Reference.Cache, warm.Reference.Cache; c.Misses != chunks || c.Written != chunks || w.Hits != chunks || w.Misses != 0 {
		t.Fatalf("cold %+v, warm %+v, %d chunks", c, w, chunks)
	}
	if cold.Reference.Eval.Calls-warm.Reference.Eval.Calls != chunks {
		t.Fatalf("reference calls: cold %d, warm %d", cold.Reference.Eval.Calls, warm.Reference.Eval.Calls)
	}
	if a, b := normal("cold"), normal("warm"); a != b {
		t.Fatalf("warm run's summary differs: %s", firstDiff(a, b))
	}
	r := evalrun(t, env, "cache", "stats")
	if r.code != 0 || !strings.Contains(r.stdout, fmt.Sprintf("%d entries", chunks)) {
		t.Fatalf("cache stats: exit %d %q", r.code, r.stdout)
	}
	var entry string
	filepath.WalkDir(cache, func(p string, d os.DirEntry, _ error) error {
		if !d.IsDir() && entry == "" {
			entry = p
		}
		return nil
	})
	data, _ := os.ReadFile(entry)
	os.WriteFile(entry, data[:len(data)-100], 0o644)
	again := run("truncated")
	if c := again.Reference.Cache; c.Corrupt != 1 || c.Misses != 1 || c.Written != 1 || c.Hits != chunks-1 {
		t.Fatalf("truncated entry: %+v", c)
	}
	if a, b := normal("cold"), normal("truncated"); a != b {
		t.Fatalf("summary after recomputing differs: %s", firstDiff(a, b))
	}
	r = evalrun(t, env, "cache", "prune", "--max-bytes", "1")
	if r.code != 0 || !strings.Contains(r.stdout, fmt.Sprintf("removed %d entries", chunks)) {
		t.Fatalf("cache prune: exit %d %q", r.code, r.stdout)
	}
	for _, args := range [][]string{{"stats", "--dir", entry}, {"prune", "--max-age", "1h", "--dir", ""}} {
		if r := evalrun(t, nil, append([]string{"cache"}, args...)...); r.code != 2 || !strings.Contains(r.stderr, "cache: ") {
			t.Errorf("cache %v: exit %d %q, want 2 naming the directory", args, r.code, r.stderr)
		}
	}
}
