package pipeline

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/evalrun/evalrun/internal/exitcode"
	"github.com/evalrun/evalrun/pipeline/plan"
	"github.com/evalrun/evalrun/pipeline/resultsdir"
	"github.com/evalrun/evalrun/pipeline/spec"
	"github.com/evalrun/evalrun/pipeline/summary"
)

// comparable is summary.json without what differs between two runs of the
// same spec: run ids and provenance, timings, peak memory and speed figures
// (but not which throughput tests exist and how many samples they have).
func comparable(t *testing.T, s *summary.Summary) string {
	t.Helper()
	c := *s
	c.Run = summary.RunInfo{Name: s.Run.Name, Spec: s.Run.Spec, EvalrunVersion: s.Run.EvalrunVersion}
	c.Host = nil
	var bs []summary.BackendSummary
	for _, b := range append([]summary.BackendSummary{s.Reference}, s.Backends...) {
		b.PeakRSSBytes = nil
		if b.Load != nil {
			l := *b.Load
			l.LoadS, l.WarmupS, l.HostS, l.MemoryBytes, l.PeakRSSBytes = 0, 0, 0, 0, nil
			b.Load = &l
		}
		if b.Eval != nil {
			b.Eval = &summary.EvalTiming{Calls: b.Eval.Calls, Rows: b.Eval.Rows}
		}
		if b.Throughput != nil {
			tp := summary.Throughput{}
			for _, p := range []struct{ in, out **summary.BenchTest }{{&b.Throughput.PP, &tp.PP}, {&b.Throughput.TG, &tp.TG}} {
				if *p.in != nil {
					*p.out = &summary.BenchTest{NPrompt: (*p.in).NPrompt, NGen: (*p.in).NGen, SamplesNS: make([]int64, len((*p.in).SamplesNS))}
				}
			}
			b.Throughput = &tp
		}
		bs = append(bs, b)
	}
	c.Reference, c.Backends = bs[0], bs[1:]
	data, err := json.MarshalIndent(c, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func shardPlan(t *testing.T) *plan.Plan {
	return testPlan(t, 64, 256, 32, 5,
		spec.Backend{Name: "same", Plugin: "fake", Gates: spec.Gates{KLDMeanMax: ptr(0)}},
		spec.Backend{Name: "noisy", Plugin: "fake", Gates: spec.Gates{KLDMeanMax: ptr(1)}})
}

func shardFakes() map[string]*fakeBackend {
	noisy := newFake(64)
	noisy.noise = 0.7
	return map[string]*fakeBackend{"ref": newFake(64), "same": newFake(64), "noisy": noisy}
}

// runShards runs every shard of n into dir/shard-I and returns the
// directories.
func runShards(t *testing.T, p *plan.Plan, n int, dir string) []string {
	t.Helper()
	var dirs []string
	for i := range n {
		out := filepath.Join(dir, fmt.Sprintf("shard-%d", i))
		var errb bytes.Buffer
		_, err := Run(context.Background(), p, Options{OutDir: out, Stderr: &errb, Launch: fakeLauncher(shardFakes()), Version: "test", Shard: &resultsdir.Shard{Index: i, Total: n}})
		if err != nil {
			t.Fatalf("shard %d/%d: %v\n%s", i, n, err, errb.String())
		}
		dirs = append(dirs, out)
	}
	return dirs
}

func mergeShards(dirs []string, out string, partial bool) (*resultsdir.Run, error) {
	s, err := Merge(MergeOptions{Dirs: dirs, OutDir: out, AllowPartial: partial, Version: "test"})
	return &resultsdir.Run{Summary: s, Dir: out}, err
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// TestShardsMergeToTheUnshardedRun: 1, 3, 7 and 20 shards (more shards than
// units: some run nothing), merged from directories given in any order,
// give the unsharded summary bit for bit (every statistic, percentiles,
// ±, greedy figures, gates, verdict) and the same prompts.jsonl lines.
func TestShardsMergeToTheUnshardedRun(t *testing.T) {
	p := shardPlan(t)
	whole, _ := runFakes(t, p, shardFakes())
	want := comparable(t, whole.Summary)
	wantPrompts := readFile(t, filepath.Join(whole.Dir, "prompts.jsonl"))
	if whole.Summary.Backends[1].Accuracy.KLDMean == nil || *whole.Summary.Backends[1].Accuracy.KLDMean == 0 {
		t.Fatal("the noisy candidate must differ from the reference for the test to mean anything")
	}
	for _, n := range []int{1, 3, 7, 20} {
		dir := t.TempDir()
		dirs := runShards(t, p, n, dir)
		slices.Reverse(dirs)
		res, err := mergeShards(dirs, filepath.Join(dir, "merged"), false)
		if err != nil {
			t.Fatalf("%d shards: %v", n, err)
		}
		if got := comparable(t, readSummary(t, res.Dir)); got != want {
			t.Fatalf("%d shards merged differ from the unsharded run:\n%s", n, lineDiff(want, got))
		}
		if got := readFile(t, filepath.Join(res.Dir, "prompts.jsonl")); got != wantPrompts {
			t.Fatalf("%d shards: prompts.jsonl differs:\n%s", n, lineDiff(wantPrompts, got))
		}
		if m := res.Summary.Run.Merged; m == nil || len(m.Shards) != n || m.Partial {
			t.Fatalf("merged marker %+v", m)
		}
	}
}

func lineDiff(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	var out []string
	for i := range max(len(al), len(bl)) {
		var x, y string
		if i < len(al) {
			x = al[i]
		}
		if i < len(bl) {
			y = bl[i]
		}
		if x != y {
			out = append(out, fmt.Sprintf("line %d:\n- %s\n+ %s", i+1, x, y))
		}
	}
	return strings.Join(out[:min(len(out), 10)], "\n")
}

func TestMergeRefusesIncompleteDuplicateAndForeignShards(t *testing.T) {
	p := shardPlan(t)
	dir := t.TempDir()
	dirs := runShards(t, p, 3, dir)
	out := filepath.Join(dir, "out")

	_, err := mergeShards([]string{dirs[0], dirs[2]}, out, false)
	if err == nil || !strings.Contains(err.Error(), "missing shard 1/3") || !strings.Contains(err.Error(), "score/score/chunk-2") {
		t.Fatalf("missing shard: %v", err)
	}
	if _, ok := err.(*exitcode.InputError); !ok {
		t.Fatalf("missing shard: %T, want an exitcode.InputError (exit 2)", err)
	}

	dup := filepath.Join(dir, "copy-of-2")
	if err := os.CopyFS(dup, os.DirFS(dirs[2])); err != nil {
		t.Fatal(err)
	}
	_, err = mergeShards(append(slices.Clone(dirs), dup), out, false)
	if err == nil || !strings.Contains(err.Error(), "shard 2/3 given twice") || !strings.Contains(err.Error(), dup) {
		t.Fatalf("duplicate shard: %v", err)
	}

	other := shardPlan(t)
	other.Spec.Candidates[1].Gates.KLDMeanMax = ptr(2)
	otherDirs := runShards(t, other, 3, t.TempDir())
	_, err = mergeShards([]string{dirs[0], dirs[1], otherDirs[2]}, out, false)
	if err == nil || !strings.Contains(err.Error(), "different specs") {
		t.Fatalf("shards of two specs: %v", err)
	}

	res, err := mergeShards([]string{dirs[0], dirs[2]}, out, true)
	if err != nil {
		t.Fatal(err)
	}
	s := res.Summary
	if !s.Run.Merged.Partial || len(s.Run.Merged.Missing) == 0 || s.Verdict.Status != summary.VerdictFail || s.Backends[0].Accuracy.Complete {
		t.Fatalf("partial merge: %+v verdict %+v", s.Run.Merged, s.Verdict)
	}
}

// A backend's bench runs in the shard of its speed_baseline's bench, so a
// sharded run's merge judges the in-run slowdown gate as one process would:
// a build 20 % slower fails it against the other build, for any number of
// shards.
func TestShardsBenchASpeedBaselinePairTogether(t *testing.T) {
	p := speedPairPlan(t, 128, 60, spec.Gates{PPTSMaxSlowdown: ptr(0.05)})
	fakes := func() map[string]*fakeBackend {
		m := map[string]*fakeBackend{"ref": newFake(32), "old": newFake(32), "new": newFake(32)}
		for name, f := range m {
			f.benchNS = jitter(1)
			if name == "new" {
				f.benchNS = jitter(1.25) // 20 % fewer tokens/s
			}
		}
		return m
	}
	for _, n := range []int{2, 3, 4} {
		dir := t.TempDir()
		var dirs []string
		for i := range n {
			out := filepath.Join(dir, fmt.Sprintf("shard-%d", i))
			var errb bytes.Buffer
			if _, err := Run(context.Background(), p, Options{OutDir: out, Stderr: &errb, Launch: fakeLauncher(fakes()), Version: "test", Shard: &resultsdir.Shard{Index: i, Total: n}}); err != nil {
				t.Fatalf("shard %d/%d: %v\n%s", i, n, err, errb.String())
			}
			dirs = append(dirs, out)
		}
		res, err := mergeShards(dirs, filepath.Join(dir, "merged"), false)
		if err != nil {
			t.Fatalf("%d shards: merge: %v", n, err)
		}
		g := res.Summary.Backends[1].Gates
		if len(g) != 1 || g[0].Pass || g[0].Value == nil || *g[0].Value < 0.19 || !strings.Contains(g[0].Note, "(old in this run)") {
			t.Errorf("%d shards: new's gates %+v", n, g)
		}
	}
}

// A run cut by --limit stays marked when its shards are merged: run.limit
// and the verdict's reason, as the unsharded run has them.
func TestMergeKeepsLimit(t *testing.T) {
	p := shardPlan(t)
	p.Datasets[0].Limit, p.Datasets[0].Cut = 1, true // as --limit 1 leaves a record out
	whole, _ := runFakes(t, p, shardFakes())
	dir := t.TempDir()
	res, err := mergeShards(runShards(t, p, 2, dir), filepath.Join(dir, "merged"), false)
	if err != nil {
		t.Fatal(err)
	}
	got, want := res.Summary, whole.Summary
	if want.Run.Limit != 1 || got.Run.Limit != 1 || !slices.Equal(got.Verdict.Reasons, want.Verdict.Reasons) ||
		!strings.HasPrefix(got.Verdict.Reasons[0], "--limit 1: not a full result") {
		t.Errorf("merged: limit %d, reasons %q; unsharded: limit %d, reasons %q", got.Run.Limit, got.Verdict.Reasons, want.Run.Limit, want.Verdict.Reasons)
	}
}
