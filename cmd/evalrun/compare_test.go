package main

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/evalrun/evalrun/pipeline/runcompare"
	"github.com/evalrun/evalrun/pipeline/speedstat"
)

func readCompare(t *testing.T, dir string) *runcompare.Result {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "compare.json"))
	if err != nil {
		t.Fatal(err)
	}
	var r runcompare.Result
	if err := json.Unmarshal(data, &r); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "compare.md")); err != nil {
		t.Fatal(err)
	}
	return &r
}

// defaultSpecWith is configs/default.yaml with paths made absolute (so it
// runs from a temp dir) and lines replaced: each pair is the start of one
// line of the file and what replaces that whole line.
func defaultSpecWith(t *testing.T, lineWith ...string) string {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	text, err := os.ReadFile("../../configs/default.yaml")
	if err != nil {
		t.Fatal(err)
	}
	s := strings.ReplaceAll(string(text), "../", root+"/")
	for i := 0; i+1 < len(lineWith); i += 2 {
		re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(lineWith[i]) + `.*$`)
		if len(re.FindAllString(s, -1)) != 1 {
			t.Fatalf("configs/default.yaml: %q is not one line", lineWith[i])
		}
		s = re.ReplaceAllString(s, lineWith[i+1])
	}
	path := filepath.Join(t.TempDir(), "spec.yaml")
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// ggmlReferenceSpec is configs/default.yaml with the reference's numerics
// swapped to ggml, with a relative gate against a baseline.
func ggmlReferenceSpec(t *testing.T) string {
	return defaultSpecWith(t, "    numerics: exact ", "    numerics: ggml",
		"  kld_mean_max: 0.001 ", "  kld_mean_max_increase: 0\n  kld_mean_max: 0.001")
}

// Two runs of the shipped default spec: compare says every backend's
// logits are bit-identical and every accuracy delta is zero, exit 0. Then
// the reference's numerics swapped to ggml with --baseline: compare names
// the reference as the changed backend with the first chunk and position,
// gives the candidates' KLD deltas with their ±, and the relative gate
// kld_mean_max_increase: 0 fails the run with exit 1.
func TestCompareRuns(t *testing.T) {
	dir := t.TempDir()
	a, _ := sharedDefaultRun(t)
	b, c := filepath.Join(dir, "b"), filepath.Join(dir, "c")
	reps := []string{"COLUMNS=", "EVALRUN_BENCH_REPS=" + sharedDefaultReps}
	if r := evalrun(t, reps, "run", "configs/default.yaml", "--out", b); r.code != 0 {
		t.Fatalf("run %s: exit %d\n%s\n%s", b, r.code, r.stdout, r.stderr)
	}
	before := append(listFiles(t, a), listFiles(t, dir)...)
	r := evalrun(t, nil, "compare", a, b)
	if r.code != 0 || !strings.Contains(r.stdout, "bit-identical") || !strings.Contains(r.stdout, "what changed (baseline -> new)\n  nothing:") {
		t.Fatalf("compare: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if after := append(listFiles(t, a), listFiles(t, dir)...); !slices.Equal(before, after) {
		t.Fatalf("compare wrote into the runs: %v", slices.DeleteFunc(after, func(f string) bool { return slices.Contains(before, f) }))
	}
	// Two runs of one spec: no change, unless the machine made a test's
	// speed differ significantly (then a change, no regression unless it
	// is a slowdown beyond 5 %): exit 0 either way here.
	if !strings.Contains(r.stdout, "verdict: no change (exit 0)") && !strings.Contains(r.stdout, "verdict: changed, no regression (exit 0)") {
		t.Fatalf("two runs of the default spec:\n%s", r.stdout)
	}
	for _, line := range strings.Split(r.stdout, "\n") {
		if w := utf8.RuneCountInString(line); w > 120 {
			t.Errorf("compare's line is %d columns wide: %s", w, line)
		}
	}
	if r := evalrun(t, nil, "compare", a, b, "--out", filepath.Join(dir, "ab")); r.code != 0 {
		t.Fatalf("compare --out: %d %s", r.code, r.stderr)
	}
	res := readCompare(t, filepath.Join(dir, "ab"))
	if res.Verdict.ExitCode != 0 || len(res.Changes) != 0 {
		t.Fatalf("compare.json: verdict %+v, changes %+v", res.Verdict, res.Changes)
	}

	if len(res.Backends) != 4 {
		t.Fatalf("%d backends compared", len(res.Backends))
	}
	for _, be := range res.Backends {
		if be.Logits.Verdict != runcompare.BitIdentical || be.StatusChanged() || be.Presence != "both" {
			t.Errorf("%s: logits %+v, status %s -> %s", be.Name, be.Logits, be.BaseStatus, be.NewStatus)
		}
		for _, m := range be.Metrics {
			if m.Delta == nil || *m.Delta != 0 || m.Beyond {
				t.Errorf("%s %s: delta %v beyond %v in identical runs", be.Name, m.Name, m.Delta, m.Beyond)
			}
		}
		if len(be.Speed) != 2 {
			t.Fatalf("%s: %d speed tests, want pp and tg", be.Name, len(be.Speed))
		}
		// Timing on a machine shared with other jobs drifts between runs
		// far beyond the statistics' own noise (docs/design-notes.md), so
		// the verdict is checked for consistency with its own statistics,
		// not for a value.
		for _, s := range be.Speed {
			// A change is judged only when the measured change points the
			// same way beyond the minimum too (the machine's shift removed
			// can create one alone).
			significant := *s.PAdjusted < speedstat.Alpha && math.Abs(*s.Delta) >= res.MinChange &&
				(s.DeltaRaw == nil || *s.DeltaRaw*math.Copysign(1, *s.Delta) >= res.MinChange)
			if significant == (s.Verdict == speedstat.NoChange) || s.Base.N != 90 || s.New.N != 90 || s.Simulated != strings.HasPrefix(be.Name, "npu") {
				t.Errorf("%s %s: %+v (p %v, delta %v)", be.Name, s.Test, s.Comparison, *s.P, *s.Delta)
			}
			t.Logf("%s %s: %s (Δ %+.1f%%, adjusted p %.3g)", be.Name, s.Test, s.Verdict, 100**s.Delta, *s.PAdjusted)
		}
	}
	// The same run against itself: the same samples, no significant change
	// (--out is created when it does not exist yet).
	dir = filepath.Join(dir, "new", "dir")
	if r := evalrun(t, nil, "compare", a, a, "--out", dir); r.code != 0 {
		t.Fatalf("compare a a: %d %s", r.code, r.stderr)
	}
	for _, be := range readCompare(t, dir).Backends {
		for _, s := range be.Speed {
			if s.Verdict != speedstat.NoChange || *s.P != 1 || *s.PAdjusted != 1 {
				t.Errorf("a vs a: %s %s: %+v", be.Name, s.Test, s.Comparison)
			}
		}
	}

	// Without bench: the change checked here is in the logits (the speed
	// verdicts were checked above, and their runs cost most of this test);
	// what changed lists it first.
	r = evalrun(t, append(reps, "EVALRUN_BENCH_ENABLED=false"), "run", ggmlReferenceSpec(t), "--baseline", a, "--out", c)
	if r.code != 1 || !strings.Contains(r.stdout, "gate kld_mean_max_increase") {
		t.Fatalf("ggml reference against the baseline: exit %d, want 1 (a relative gate)\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	res = readCompare(t, c) // run --baseline writes the comparison too
	ref := res.Backends[0]
	if !ref.Reference || ref.Name != "cpu-exact" || ref.Logits.Verdict != runcompare.Changed || ref.Logits.First == nil ||
		ref.Logits.First.Dataset != "stories" || ref.Logits.First.ID != "chunk-1" || ref.Logits.First.Position == nil || *ref.Logits.First.Position != 64 {
		t.Fatalf("reference: %+v first %+v", ref.Logits, ref.Logits.First)
	}
	ac := filepath.Join(dir, "ac")
	r = evalrun(t, nil, "compare", a, c, "--out", ac)
	if !strings.Contains(r.stdout, "changed @ stories/chunk-1 pos 64") ||
		!strings.Contains(r.stdout, "what changed (baseline -> new)\n  spec bench.enabled: true -> false\n  spec gates.kld_mean_max_increase: - -> 0\n  spec reference.options.numerics: exact -> ggml\n") {
		t.Fatalf("compare a c: exit %d\n%s", r.code, r.stdout)
	}
	if cmp := readCompare(t, ac); r.code != cmp.Verdict.ExitCode || (r.code == 1) != (cmp.Verdict.Status == runcompare.VerdictRegression) {
		t.Fatalf("compare a c: exit %d, verdict %+v", r.code, cmp.Verdict)
	}
	// report.html of the run with --baseline draws the changes; compare's
	// compare.html opens with the verdict and what changed.
	page, err := os.ReadFile(filepath.Join(c, "report.html"))
	if err != nil || !strings.Contains(string(page), `<figure class="chart" id="compare"><h2>Against the baseline `) ||
		!strings.Contains(string(page), "<td>cpu-exact</td><td>ok</td><td>changed: first in stories/chunk-1 at position 64") {
		t.Fatalf("report.html does not show the comparison (%v)", err)
	}
	page, err = os.ReadFile(filepath.Join(ac, "compare.html"))
	h1, changed, table := strings.Index(string(page), "<h1 class="), strings.Index(string(page), "changed: spec reference.options.numerics: exact -&gt; ggml"),
		strings.Index(string(page), "<td>cpu-exact</td><td>ok</td><td>changed: first in stories/chunk-1 at position 64")
	if err != nil || h1 < 0 || changed < h1 || table < changed || !strings.Contains(string(page)[h1:h1+80], "evalrun compare: ") {
		t.Fatalf("compare.html: verdict at %d, change at %d, table at %d (%v)", h1, changed, table, err)
	}
	for _, be := range res.Backends[1:] {
		if be.Logits.Verdict != runcompare.BitIdentical {
			t.Errorf("%s: the candidates compute as before: %+v", be.Name, be.Logits)
		}
		kld := be.Metrics[0]
		if kld.Name != "kld_mean" || kld.Delta == nil || *kld.Delta == 0 || kld.Err == nil || *kld.Err <= 0 {
			t.Errorf("%s: KLD delta %+v", be.Name, kld)
		}
		t.Logf("%s: KLD mean %.6g -> %.6g, Δ %.3g ± %.2g (beyond: %v)", be.Name, *kld.Base, *kld.New, *kld.Delta, *kld.Err, kld.Beyond)
	}
	// cpu-ggml now computes exactly as the reference: its KLD fell to 0,
	// by more than its ±.
	if g := res.Backends[3]; g.Name != "cpu-ggml" || *g.Metrics[0].New != 0 || !g.Metrics[0].Beyond || g.Metrics[0].Worse {
		t.Errorf("cpu-ggml: %+v", g.Metrics[0])
	}

	// npu-int8 computing in int4: a regression, exit 1; what changed shows
	// the option first.
	d := filepath.Join(dir, "d")
	if r := evalrun(t, []string{"EVALRUN_BENCH_ENABLED=false"}, "run", defaultSpecWith(t, "      type: int8", "      type: int4"), "--out", d); r.code != 1 {
		t.Fatalf("int4 run: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	r = evalrun(t, nil, "compare", a, d)
	first := strings.Index(r.stdout, "what changed (baseline -> new)\n  spec backends[npu-int8].options.type: int8 -> int4\n")
	if r.code != 1 || first < 0 || !strings.Contains(r.stdout, "verdict: regression (exit 1)\n  - npu-int8: kld_mean ") || first > strings.Index(r.stdout, "accuracy and logits") {
		t.Fatalf("compare a d (int8 -> int4): exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}

	// A baseline that is not a run: exit 2 before anything runs.
	if r := evalrun(t, nil, "run", "configs/default.yaml", "--baseline", dir+"/nowhere", "--out", filepath.Join(dir, "d")); r.code != 2 || !strings.Contains(r.stderr, "baseline") {
		t.Fatalf("bad baseline: exit %d %s", r.code, r.stderr)
	}
	if r := evalrun(t, nil, "compare", a, filepath.Join(dir, "nowhere")); r.code != 2 {
		t.Fatalf("compare with a missing run: exit %d %s", r.code, r.stderr)
	}
}

// evalrun bench labels a simulated device's speed as simulated, and only
// that.
func TestBenchLabelsSimulatedSpeed(t *testing.T) {
	for _, c := range []struct {
		args []string
		sim  bool
	}{
		{[]string{"--plugin", "rknn", "--option", "driver=sim"}, true},
		{[]string{"--plugin", "cpu"}, false},
	} {
		r := evalrun(t, nil, append([]string{"bench", "--model", "models/stories260K.gguf", "-p", "8", "-n", "2", "-r", "1", "-t", "1", "-o", "md"}, c.args...)...)
		if r.code != 0 || strings.Count(r.stdout, "(simulated)") != map[bool]int{true: 2, false: 0}[c.sim] {
			t.Fatalf("%v: exit %d\n%s%s", c.args, r.code, r.stdout, r.stderr)
		}
	}
}

// listFiles lists every file below dir.
// sharedDefaultReps is the shared default run's bench repetitions: 90, the
// fewest with which compare can call one of the 8 tests significant (the
// shipped 300 make each run several times longer), and more than the 76
// with which a p95 has its interval.
const sharedDefaultReps = "90"

var sharedDefault struct {
	once sync.Once
	dir  string
	r    result
	ok   bool
}

// sharedDefaultRun is one run of configs/default.yaml, as shipped but for
// its bench repetitions, with no $COLUMNS, made once for the tests that
// read it (TestCompareRuns compares another with it, TestRunTablesFitTheTerminal
// reads its tables): the run costs a core for about 20 s.
func sharedDefaultRun(t *testing.T) (dir string, r result) {
	t.Helper()
	sharedDefault.once.Do(func() {
		sharedDefault.dir = filepath.Join(binDir, "shared-default-run")
		sharedDefault.r = evalrun(t, []string{"COLUMNS=", "EVALRUN_BENCH_REPS=" + sharedDefaultReps}, "run", "configs/default.yaml", "--out", sharedDefault.dir)
		sharedDefault.ok = true
	})
	if !sharedDefault.ok || sharedDefault.r.code != 0 {
		t.Fatalf("the shared run of configs/default.yaml: exit %d\n%s\n%s", sharedDefault.r.code, sharedDefault.r.stdout, sharedDefault.r.stderr)
	}
	return sharedDefault.dir, sharedDefault.r
}

func listFiles(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			out = append(out, path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestPlantedSlowdownFailsTheInRunGate: tonight's plugin 5 % slower than
// last night's, benched in the same rounds of one run: its slowdown gate
// against last night's backend (gates.speed_baseline) fails, exit 1. Both
// are the liar plugin timing a wait per repetition, tonight's 5 % longer:
// real compute differs by more than 5 % between two processes on a busy
// 2-core machine (CI once measured last's p95 14 % under an identical
// tonight's, 21627 against 25171 t/s), so only a planted time is a 5 %
// that must be found.
func TestPlantedSlowdownFailsTheInRunGate(t *testing.T) {
	liar := filepath.Join(binDir, "evalrun-plugin-liar")
	spec := writeCase(t, `name: planted
model: {path: ROOT/models/stories260K.gguf}
datasets:
  - {name: stories, path: ROOT/datasets/stories.jsonl, mode: score, n_ctx: 64, limit: 2}
reference: {name: ref, plugin: cpu, threads: 1}
backends:
  - name: tonight
    plugin_path: `+liar+`
    threads: 1
    options: {lie: bench-sleep-slower-5}
    gates: {speed_baseline: last, pp_ts_max_slowdown: 0, tg_ts_max_slowdown: 0}
  - {name: last, plugin_path: `+liar+`, threads: 1, options: {lie: bench-sleep}}
bench: {enabled: true, n_prompt: 64, n_gen: 16, reps: 150}
`)
	out := t.TempDir()
	r := evalrun(t, nil, "run", spec, "--out", out)
	if r.code != 1 {
		t.Fatalf("exit %d, want 1 (a slowdown gate)\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	failed := 0
	for _, g := range byName(readSummary(t, out))["tonight"].Gates {
		t.Logf("%s: pass %v: %s", g.Name, g.Pass, g.Note)
		if strings.HasSuffix(g.Name, "_max_slowdown") && !g.Pass && strings.Contains(g.Note, "(last in this run)") {
			failed++
		}
	}
	if failed == 0 {
		t.Fatalf("no slowdown gate failed against last:\n%s", r.stdout)
	}
}
