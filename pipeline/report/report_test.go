package report

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/evalrun/evalrun/pipeline/diag"
	"github.com/evalrun/evalrun/pipeline/gate"
	"github.com/evalrun/evalrun/pipeline/summary"
)

// loadSummary reads testdata/summary.json, the summary of a real run of
// configs/default.yaml (the CPU reference, the simulated NPU in fp16 and
// int8, the CPU in ggml numerics).
func loadSummary(t *testing.T) *summary.Summary {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "summary.json"))
	if err != nil {
		t.Fatal(err)
	}
	var s summary.Summary
	if err := json.Unmarshal(data, &s); err != nil {
		t.Fatal(err)
	}
	return &s
}

// troubled turns the real summary into a run where every kind of outcome
// occurs: npu-fp16 passes (its speed gate not applied: simulated),
// npu-int8 fails a gate, cpu-ggml crashed with a
// multi-line error full of markup, and a timed-out and a skipped backend
// were added; the run was interrupted.
func troubled(t *testing.T) *summary.Summary {
	t.Helper()
	s := loadSummary(t)
	by := map[string]*summary.BackendSummary{}
	for i := range s.Backends {
		by[s.Backends[i].Name] = &s.Backends[i]
	}
	fp16 := by["npu-fp16"]
	fp16.Diagnostics = &diag.Report{Shadow: true, LayerDrift: &diag.LayerDrift{Dataset: "stories", Chunk: 1, Layers: []diag.LayerError{
		{Layer: 0, NMSE: 1e-9, Cosine: 1}, {Layer: 1, NMSE: 4e-9, Cosine: 1}, {Layer: 2, NMSE: 3e-8, Cosine: 0.999999}}}}
	fp16.Gates = append(fp16.Gates, summary.GateResult{Name: "tg_ts_min", Limit: 1e6, Pass: true, Skipped: true, Note: gate.NoteSimulated})
	by["npu-fp16"].Warnings = []string{"kernels: the list offloads nothing\nthat the run executes"}
	int8 := by["npu-int8"]
	v := 0.0123
	int8.Gates = append(int8.Gates, summary.GateResult{Name: "kld_mean_max", Limit: 0.001, Value: &v})
	int8.Pass = false
	ggml := by["cpu-ggml"]
	ggml.Status, ggml.Pass, ggml.Gates, ggml.Throughput = summary.StatusCrashed, false, nil, nil
	ggml.Error = "plugin exited: status 70\n<stderr> \"npu\" & 100% 'core' ]]> ,:\x01"
	s.Backends = append(s.Backends,
		summary.BackendSummary{Name: "npu.hang", Plugin: "rknn", Status: summary.StatusTimeout, Error: "eval stories chunk 3: timed out after 300s"},
		summary.BackendSummary{Name: "later", Plugin: "rknn", Status: summary.StatusSkipped, Error: "the reference could not run"})
	s.Verdict = summary.Verdict{Status: summary.VerdictError, ExitCode: 3, Reasons: []string{
		"npu-int8: gate kld_mean_max: 0.0123 against limit 0.001",
		"cpu-ggml crashed: plugin exited: status 70",
		"npu.hang timeout: eval stories chunk 3: timed out after 300s",
		"later skipped: the reference could not run",
		"the run was interrupted",
	}}
	return s
}

func TestWriteWritesTheFormatsAsked(t *testing.T) {
	dir := t.TempDir()
	if err := Write(dir, loadSummary(t), []string{"json", "junit"}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "junit.xml")); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"report.md", "report.html"} {
		if _, err := os.Stat(filepath.Join(dir, f)); !os.IsNotExist(err) {
			t.Fatalf("%s written although not asked for (%v)", f, err)
		}
	}
}

func TestStepSummary(t *testing.T) {
	var b strings.Builder
	if err := Markdown(&b, troubled(t)); err != nil {
		t.Fatal(err)
	}
	md := b.String()
	first, rest, ok := strings.Cut(md, "\n## Run\n")
	if !ok {
		t.Fatalf("no Run section after the summary:\n%s", md)
	}
	if n := strings.Count(first, "\n"); n > 30 {
		t.Fatalf("the summary section is %d lines, not one screen:\n%s", n, first)
	}
	for _, want := range []string{
		"# evalrun default: 💥 ERROR",
		"| ✅ | npu-fp16 | ok |", "2/2 pass, 1 not applied",
		"| ❌ | npu-int8 | ok |", "FAIL kld\\_mean\\_max",
		"| 💥 | cpu-ggml | crashed: plugin exited: status 70 … |",
		"| 💥 | npu.hang | timeout: eval stories chunk 3: timed out after 300s |",
		"| ⏭️ | later | skipped:",
		"(simulated)", // the NPU simulator's speed is labelled
		"- the run was interrupted",
		"- ⚠️ npu-fp16: kernels: the list offloads nothing …",
	} {
		if !strings.Contains(first, want) {
			t.Errorf("summary lacks %q:\n%s", want, first)
		}
	}
	if strings.Contains(first, "<stderr>") {
		t.Errorf("markup from an error reached the summary unescaped:\n%s", first)
	}
	// The offload tables are folded: every plan row sits inside <details>.
	if !strings.Contains(rest, "<details><summary>Offload plan: 36 of 36 matmuls on the NPU (fp16, 3 cores)</summary>") {
		t.Fatalf("offload plan not folded:\n%s", rest)
	}
	if !strings.Contains(rest, "<details><summary>Device diagnostics: per-op errors, per-layer drift, kernel accounting</summary>\n\n### ") {
		t.Fatalf("device diagnostics not folded:\n%s", rest)
	}
	for _, sec := range strings.Split(rest, "\n## ")[1:] {
		open := strings.Index(sec, "<details>")
		if row := strings.Index(sec, "| result_output |"); row >= 0 && (open < 0 || row < open) {
			t.Fatalf("a plan row outside <details>:\n%s", sec)
		}
	}
}

func TestAppendStepSummaryAppends(t *testing.T) {
	path := filepath.Join(t.TempDir(), "step_summary.md")
	if err := os.WriteFile(path, []byte("earlier step\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := loadSummary(t)
	for range 2 {
		if err := AppendStepSummary(path, s); err != nil {
			t.Fatal(err)
		}
	}
	data, _ := os.ReadFile(path)
	got := string(data)
	if !strings.HasPrefix(got, "earlier step\n# evalrun default: ✅ PASS") || strings.Count(got, "# evalrun default") != 2 || strings.Contains(got, "## Run") {
		t.Fatalf("step summary file:\n%s", got)
	}
}

func TestAnnotations(t *testing.T) {
	s := troubled(t)
	ws, _ := filepath.Abs(filepath.Dir(filepath.Dir(s.Run.Spec)))
	var b strings.Builder
	Annotate(&b, s, ws)
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	want := []string{
		"::warning file=configs/default.yaml,title=evalrun default%3A npu-fp16::kernels: the list offloads nothing%0Athat the run executes",
		"::error file=configs/default.yaml,title=evalrun default%3A npu-int8 failed kld_mean_max::kld_mean_max: 0.0123 against limit 0.001%0A%0Abackend npu-int8",
		"::error file=configs/default.yaml,title=evalrun default%3A cpu-ggml crashed::plugin exited: status 70%0A<stderr> \"npu\" & 100%25 'core' ]]> ,:\x01",
		"::error file=configs/default.yaml,title=evalrun default%3A npu.hang timeout::eval stories chunk 3: timed out after 300s",
		"::warning file=configs/default.yaml,title=evalrun default%3A later skipped::the reference could not run",
		"::error file=configs/default.yaml,title=evalrun default%3A run::the run was interrupted",
		"::notice file=configs/default.yaml,title=evalrun default%3A ERROR::verdict error (exit 3)",
	}
	if len(lines) != len(want) {
		t.Fatalf("%d annotations, want %d:\n%s", len(lines), len(want), b.String())
	}
	for i, w := range want {
		if !strings.HasPrefix(lines[i], w) {
			t.Errorf("annotation %d:\n got %q\nwant %q…", i, lines[i], w)
		}
	}
	// A passing run: only the notice.
	b.Reset()
	Annotate(&b, loadSummary(t), "/elsewhere")
	if got := b.String(); strings.Count(got, "\n") != 1 || !strings.HasPrefix(got, "::notice file="+s.Run.Spec+",") {
		t.Fatalf("passing run annotations:\n%s", got)
	}
}

// A run without gates reads "no gates configured" everywhere, never PASS.
func TestNoGatesIsNotAPass(t *testing.T) {
	s := loadSummary(t)
	for i := range s.Backends {
		s.Backends[i].Gates = nil
	}
	s.Verdict = summary.Verdict{Status: summary.VerdictNoGates, Reasons: []string{"no gates configured: every backend ran, but no limit was checked (set gates: in the spec)"}}
	var table, md strings.Builder
	if err := accuracyGrid(s).draw(&table, false, 0); err != nil {
		t.Fatal(err)
	}
	if err := Markdown(&md, s); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(table.String(), "PASS") || strings.Count(table.String(), "NO GATES") != len(s.Backends) {
		t.Errorf("table:\n%s", table.String())
	}
	if strings.Contains(md.String(), "PASS") || !strings.Contains(md.String(), "NO GATES CONFIGURED") {
		t.Errorf("report.md:\n%s", md.String())
	}
}
