package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/evalrun/evalrun/internal/testkit"
	"github.com/evalrun/evalrun/pipeline/summary"
)

// binDir holds evalrun and its plugins, built once for the end-to-end tests,
// which run them as a user would: real processes, real plugins.
var binDir string

func TestMain(m *testing.M) {
	testkit.Main(m, map[string]string{
		"evalrun":             "./cmd/evalrun",
		"evalrun-plugin-cpu":  "./plugins/cpu",
		"evalrun-plugin-rknn": "./plugins/rknn",
		"slowwriter":          "./cmd/evalrun/testdata/slowwriter",
		"evalrun-plugin-liar": "./backend/backendtest/liar",
	}, func(dir string) { binDir = dir })
}

type result struct {
	code           int
	stdout, stderr string
}

// evalrun runs the built binary from the repository root with extra
// environment variables.
func evalrun(t *testing.T, env []string, args ...string) result {
	t.Helper()
	cmd := exec.Command(filepath.Join(binDir, "evalrun"), args...)
	cmd.Dir = "../.."
	cmd.Env = append(os.Environ(), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return result{code, out.String(), errb.String()}
}

func readSummary(t *testing.T, dir string) *summary.Summary {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "summary.json"))
	if err != nil {
		t.Fatal(err)
	}
	var s summary.Summary
	if err := json.Unmarshal(data, &s); err != nil {
		t.Fatal(err)
	}
	return &s
}

func byName(s *summary.Summary) map[string]summary.BackendSummary {
	m := map[string]summary.BackendSummary{}
	for _, b := range s.Backends {
		m[b.Name] = b
	}
	return m
}

// TestRknnSimSpec runs configs/rknn-sim.yaml as shipped (bench shortened):
// the simulated NPU in fp16 really rounds (KLD > 0) yet stays within 1e-4
// and 99.5% same top token; int8 is measurably worse.
func TestRknnSimSpec(t *testing.T) {
	out := t.TempDir()
	r := evalrun(t, []string{"EVALRUN_BENCH_REPS=1", "EVALRUN_BENCH_N_PROMPT=16", "EVALRUN_BENCH_N_GEN=4"},
		"run", "configs/rknn-sim.yaml", "--out", out, "--wide")
	if r.code != 0 {
		t.Fatalf("exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if strings.Contains(r.stderr, "ERROR") {
		t.Errorf("a normal run logged an error:\n%s", r.stderr)
	}
	s := readSummary(t, out)
	b := byName(s)
	fp16, int8 := b["npu-fp16"], b["npu-int8"]
	for _, x := range []summary.BackendSummary{fp16, int8} {
		if x.Status != "ok" || !x.Pass || !x.Accuracy.Complete || x.Throughput == nil || x.Throughput.TG == nil {
			t.Fatalf("%s: %+v", x.Name, x)
		}
		if !strings.Contains(x.Load.PlanSummary, "36 of 36 matmuls on the NPU") {
			t.Fatalf("%s plan: %q", x.Name, x.Load.PlanSummary)
		}
	}
	k16, k8 := *fp16.Accuracy.KLDMean, *int8.Accuracy.KLDMean
	t.Logf("npu-fp16: KLD %.3g, same top %.4f; npu-int8: KLD %.3g, same top %.4f", k16, *fp16.Accuracy.SameTopP, k8, *int8.Accuracy.SameTopP)
	if !(k16 > 0 && k16 <= 1e-4) || *fp16.Accuracy.SameTopP < 0.995 {
		t.Fatalf("npu-fp16: KLD %g same top %g", k16, *fp16.Accuracy.SameTopP)
	}
	if k8 <= k16 {
		t.Fatalf("npu-int8 KLD %g not above fp16's %g", k8, k16)
	}
	if !strings.Contains(r.stdout, "36 of 36 matmuls on the NPU (fp16, 3 cores)") || !strings.Contains(r.stdout, "npu-int8") {
		t.Fatalf("the --wide table does not show the offload plans:\n%s", r.stdout)
	}
	for _, f := range []string{"prompts.jsonl", "report.md", "junit.xml", "report.html"} { // output.formats defaults to all
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Fatal(err)
		}
	}
}

// TestNightlySpec runs configs/nightly.yaml as the nightly workflows do
// (docs/ci/): last night's plugins given by EVALRUN_BACKENDS_3/4_PLUGIN_PATH
// (here copies of this build's). Tonight's npu-fp16 and cpu-ggml judge their
// speed against them in the same run, on 60 repetitions a side (the
// fewest the test can judge). Whether a gate passes is the machine's say
// (two copies of one build), so the exit may be 0 or 1; that it judged the
// right backends is checked.
func TestNightlySpec(t *testing.T) {
	last := t.TempDir()
	env := []string{"EVALRUN_BENCH_REPS=60", "EVALRUN_BENCH_N_PROMPT=16", "EVALRUN_BENCH_N_GEN=4"}
	for i, name := range map[int]string{3: "evalrun-plugin-rknn", 4: "evalrun-plugin-cpu"} {
		data, err := os.ReadFile(filepath.Join(binDir, name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(last, name), data, 0o755); err != nil {
			t.Fatal(err)
		}
		env = append(env, fmt.Sprintf("EVALRUN_BACKENDS_%d_PLUGIN_PATH=%s", i, filepath.Join(last, name)))
	}
	out := t.TempDir()
	r := evalrun(t, env, "run", "configs/nightly.yaml", "--out", out)
	if r.code != 0 && r.code != 1 {
		t.Fatalf("exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	b := byName(readSummary(t, out))
	for name, against := range map[string]string{"npu-fp16": "npu-fp16-last", "cpu-ggml": "cpu-ggml-last"} {
		if p := b[against].Plugin; !strings.HasPrefix(p, last) {
			t.Errorf("%s ran %q, not last night's copy in %s", against, p, last)
		}
		judged := 0
		for _, g := range b[name].Gates {
			if !strings.HasSuffix(g.Name, "_max_slowdown") {
				continue
			}
			judged++
			if g.Value == nil || g.Skipped || !strings.Contains(g.Note, "("+against+" in this run)") || !strings.Contains(g.Note, "60+60 repetitions") {
				t.Errorf("%s: %+v", name, g)
			}
		}
		if judged != 2 {
			t.Errorf("%s: %d slowdown gates, want pp and tg: %+v", name, judged, b[name].Gates)
		}
	}
	if r.code == 1 {
		t.Logf("a speed gate failed between two copies of one build (the machine): %s", r.stdout)
	}
}

const faultSpec = `name: faults
model: {path: ../models/stories260K.gguf}
datasets:
  - {name: stories, path: ../datasets/stories.jsonl, mode: score, n_ctx: 64, limit: 2}
  - {name: openings, path: ../datasets/openings.jsonl, mode: generate, max_new_tokens: 6, limit: 2}
reference: {name: cpu, plugin: cpu, threads: 1}
backends:
  - {name: healthy, plugin: rknn, threads: 1, options: {type: fp16}}
  - {name: crash, plugin: rknn, threads: 1, options: {faults: {crash_after: 150}}}
  - {name: hang, plugin: rknn, threads: 1, options: {faults: {hang_after: 150}}}
  - {name: nan, plugin: rknn, threads: 1, options: {faults: {nan_after: 40}}}
  - {name: bitflip, plugin: rknn, threads: 1, options: {faults: {bitflip_after: 40, bitflip_bit: 26}}}
bench: {n_prompt: 8, n_gen: 2, reps: 1}
gates: {kld_mean_max: 0.001}
timeouts: {eval: 3s}
`

// TestFaultInjection: every simulated device fault ends with its documented
// status, the run exits 3 (a backend could not run), and the healthy
// backend's results are complete in summary.json.
func TestFaultInjection(t *testing.T) {
	dir := t.TempDir()
	specPath := filepath.Join(dir, "faults.yaml")
	spec := strings.ReplaceAll(faultSpec, "../", mustAbs(t, "../..")+"/")
	if err := os.WriteFile(specPath, []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	r := evalrun(t, nil, "run", specPath, "--out", out)
	if r.code != 3 {
		t.Fatalf("exit %d, want 3\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	s := readSummary(t, out)
	b := byName(s)
	want := map[string]string{"healthy": "ok", "crash": "crashed", "hang": "timeout", "nan": "ok", "bitflip": "ok"}
	for name, st := range want {
		if b[name].Status != st {
			t.Errorf("%s: status %s (%s), want %s", name, b[name].Status, b[name].Error, st)
		}
	}
	h := b["healthy"]
	if !h.Pass || h.Accuracy == nil || !h.Accuracy.Complete || h.Throughput == nil || h.Throughput.PP == nil || h.Throughput.TG == nil {
		t.Fatalf("healthy backend incomplete: %+v", h)
	}
	if n := b["nan"]; n.Pass || n.Accuracy.NaNCount == 0 {
		t.Errorf("nan: pass %v, nan_count %d", n.Pass, n.Accuracy.NaNCount)
	}
	// One flipped exponent bit (×/÷ 256) in the first output of every NPU run:
	// finite logits, but the KLD gate catches it.
	if f := b["bitflip"]; f.Pass || f.Accuracy.NaNCount != 0 || f.Accuracy.KLDMean == nil || *f.Accuracy.KLDMean <= 0.001 {
		t.Errorf("bitflip: pass %v, NaN %d, KLD %v", f.Pass, f.Accuracy.NaNCount, f.Accuracy.KLDMean)
	}
	if c := b["crash"]; !strings.Contains(c.Error, "crash") || c.Accuracy == nil || c.Accuracy.Tokens == 0 {
		t.Errorf("crash: %q, accuracy %+v (what it computed before crashing must be kept)", c.Error, c.Accuracy)
	}
	if s.Verdict.Status != "error" || s.Verdict.ExitCode != 3 {
		t.Errorf("verdict %+v", s.Verdict)
	}
}

func mustAbs(t *testing.T, p string) string {
	a, err := filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestBadInputExitCodes(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte("name: x\nmodel: {path: "+mustAbs(t, "../../models/stories260K.gguf")+"}\nbackend: []\n"), 0o644)
	r := evalrun(t, nil, "run", bad)
	if r.code != 2 || !strings.Contains(r.stderr, "bad.yaml:3") || !strings.Contains(r.stderr, `"backend"`) {
		t.Fatalf("unknown key: exit %d, stderr %q", r.code, r.stderr)
	}
	ds := filepath.Join(dir, "bad.jsonl")
	os.WriteFile(ds, []byte("{\"id\":\"a\",\"text\":\"ok\"}\n{\"id\":\"b\",\"txt\":\"typo\"}\n"), 0o644)
	spec := filepath.Join(dir, "ds.yaml")
	os.WriteFile(spec, []byte(fmt.Sprintf("name: x\nmodel: {path: %s}\ndatasets: [{name: d, path: %s, mode: generate}]\nreference: {plugin: cpu}\nbackends: [{name: c, plugin: cpu}]\n", mustAbs(t, "../../models/stories260K.gguf"), ds)), 0o644)
	r = evalrun(t, nil, "run", spec)
	if r.code != 2 || !strings.Contains(r.stderr, "bad.jsonl:2") {
		t.Fatalf("bad dataset line: exit %d, stderr %q", r.code, r.stderr)
	}
	r = evalrun(t, nil, "run")
	if r.code != 2 {
		t.Fatalf("missing argument: exit %d", r.code)
	}
	r = evalrun(t, nil, "inspect", "README.md")
	if r.code != 2 || !strings.Contains(r.stderr, "README.md") {
		t.Fatalf("not a GGUF: exit %d, stderr %q", r.code, r.stderr)
	}
	r = evalrun(t, []string{"EVALRUN_REFERENCE_PLUGIN=nosuch"}, "run", "configs/default.yaml", "--out", dir+"/o")
	if r.code != 2 || !strings.Contains(r.stderr, `reference.plugin (from $EVALRUN_REFERENCE_PLUGIN): find plugin "nosuch"`) {
		t.Fatalf("missing plugin: exit %d\n%s", r.code, r.stderr)
	}
}

func TestOpsAndKernelsCommands(t *testing.T) {
	r := evalrun(t, nil, "ops", "--model", "models/stories260K.gguf", "--driver", "sim", "--type", "fp16")
	if r.code != 0 || !strings.Contains(r.stdout, "36/36 tests passed") {
		t.Fatalf("ops fp16: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	r = evalrun(t, nil, "ops", "--model", "models/stories260K.gguf", "--driver", "sim", "--type", "int4")
	if r.code != 0 || !strings.Contains(r.stdout, "36/36 tests passed") {
		t.Fatalf("ops int4 is judged by its own NMSE limit (4e-2), not MUL_MAT's 5e-4: exit %d\n%s", r.code, r.stdout)
	}
	kl := filepath.Join(t.TempDir(), "k.json")
	r = evalrun(t, nil, "kernels", "--model", "models/stories260K.gguf", "--tokens", "1", "--ops", "ffn_up,ffn_gate", "--out", kl)
	if r.code != 0 {
		t.Fatalf("kernels: %d %s", r.code, r.stderr)
	}
	var list struct {
		Pairs []struct {
			Name string `json:"name"`
		} `json:"pairs"`
	}
	data, _ := os.ReadFile(kl)
	if err := json.Unmarshal(data, &list); err != nil || len(list.Pairs) != 10 {
		t.Fatalf("kernels: %v, %d pairs, want 10 (ffn_up and ffn_gate of 5 layers)", err, len(list.Pairs))
	}
	r = evalrun(t, nil, "ops", "--kernels", kl, "--driver", "hardware")
	if r.code != 3 || !strings.Contains(r.stderr, "rknpu") {
		t.Fatalf("hardware driver without the build tag: exit %d %q", r.code, r.stderr)
	}
}

func TestBenchCommand(t *testing.T) {
	r := evalrun(t, nil, "bench", "--model", "models/stories260K.gguf", "--plugin", "cpu", "-p", "16", "-n", "4", "-r", "2", "-o", "json", "-t", "1")
	if r.code != 0 {
		t.Fatalf("bench: %d %s", r.code, r.stderr)
	}
	if r.stderr != "" {
		t.Errorf("a normal bench printed on stderr:\n%s", r.stderr)
	}
	var recs []map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &recs); err != nil || len(recs) != 2 {
		t.Fatalf("bench json: %v %q", err, r.stdout)
	}
	for _, rec := range recs {
		if len(rec["samples_ns"].([]any)) != 2 || rec["avg_ts"].(float64) <= 0 {
			t.Fatalf("bench record %v", rec)
		}
	}
	if recs[0]["n_prompt"].(float64) != 16 || recs[1]["n_gen"].(float64) != 4 {
		t.Fatalf("bench tests %v", recs)
	}
}
