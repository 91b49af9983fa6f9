package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeSpec writes a spec under a temp dir with ../ made absolute.
func writeSpec(t *testing.T, name, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(strings.ReplaceAll(body, "../", mustAbs(t, "../..")+"/")), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

const kernelsSpec = `name: kernel-accounting
model: {path: ../models/stories260K.gguf}
datasets:
  - {name: stories, path: ../datasets/stories.jsonl, mode: score, n_ctx: 128, limit: 2}
reference: {name: cpu, plugin: cpu, threads: 1}
backends:
  - {name: npu, plugin: rknn, threads: 1, options: {type: fp16, kernels: %s}}
bench: {enabled: false}
gates: {kld_mean_max: 0.001%s}
`

// TestKernelAccounting: a kernel list written with --tokens 1,128 (the
// batch sizes one would guess from n_ctx 128) matches nothing a score chunk
// of n_ctx 128 runs (127 tokens, logits for 63): the run warns in the table
// and in summary.json, passes without require_offload and exits 1 with it;
// the list evalrun kernels --spec writes ran entirely.
func TestKernelAccounting(t *testing.T) {
	dir := t.TempDir()
	stale := filepath.Join(dir, "stale.json")
	if r := evalrun(t, nil, "kernels", "--model", "models/stories260K.gguf", "--tokens", "1,128", "--ops", "ffn_up,ffn_gate", "--out", stale); r.code != 0 {
		t.Fatalf("kernels --tokens: %d %s", r.code, r.stderr)
	}
	for _, require := range []bool{false, true} {
		gate := ""
		if require {
			gate = ", require_offload: true"
		}
		spec := writeSpec(t, "stale.yaml", fmt.Sprintf(kernelsSpec, stale, gate))
		out := filepath.Join(dir, fmt.Sprint("stale-", require))
		r := evalrun(t, nil, "run", spec, "--out", out)
		want := 0
		if require {
			want = 1
		}
		if r.code != want {
			t.Fatalf("require_offload %v: exit %d, want %d\n%s\n%s", require, r.code, want, r.stdout, r.stderr)
		}
		if !strings.Contains(r.stdout, "WARNING: 20 of 20 listed kernels never ran on the device") {
			t.Errorf("the table does not warn:\n%s", r.stdout)
		}
		b := byName(readSummary(t, out))["npu"]
		d := b.Diagnostics
		if d == nil || d.Kernels == nil || d.Kernels.Listed != 20 || d.Kernels.Ran != 0 || len(d.Kernels.NeverRan) != 20 || len(d.Warnings) != 1 {
			t.Fatalf("summary diagnostics %+v", d)
		}
		if require && (b.Pass || !strings.Contains(fmt.Sprint(readSummary(t, out).Verdict.Reasons), "require_offload")) {
			t.Errorf("require_offload did not fail the backend: pass %v, %v", b.Pass, b.Gates)
		}
	}

	fresh := filepath.Join(dir, "fresh.json")
	specForList := writeSpec(t, "list.yaml", fmt.Sprintf(kernelsSpec, "auto", ""))
	if r := evalrun(t, nil, "kernels", "--spec", specForList, "--ops", "ffn_up,ffn_gate", "--out", fresh); r.code != 0 {
		t.Fatalf("kernels --spec: %d %s", r.code, r.stderr)
	}
	out := filepath.Join(dir, "fresh")
	r := evalrun(t, nil, "run", writeSpec(t, "fresh.yaml", fmt.Sprintf(kernelsSpec, fresh, ", require_offload: true")), "--out", out)
	d := byName(readSummary(t, out))["npu"].Diagnostics
	if r.code != 0 || d == nil || d.Kernels.Listed != 10 || d.Kernels.Ran != 10 || len(d.Warnings) != 0 {
		t.Fatalf("kernels --spec list: exit %d, %+v\n%s", r.code, d, r.stdout)
	}
}

const shadowSpec = `name: shadow
model: {path: ../models/stories260K.gguf}
datasets:
  - {name: stories, path: ../datasets/stories.jsonl, mode: score, n_ctx: 128, limit: 3}
reference: {name: cpu, plugin: cpu, threads: 1}
backends:
  - {name: npu-int8, plugin: rknn, threads: 1, options: {type: int8, shadow: true%s}}
bench: {enabled: false}
gates: {kld_mean_max: 0.01}
`

// TestShadowDrillDown: with shadow on, int8 reports all 36 matmuls ranked
// by NMSE and the drift of every layer, in summary.json, report.md and
// report.html; the printed output is short (the worst ops, the drift in a
// line, where the rest is); keeping the worst op on the CPU lowers the
// run's KLD.
func TestShadowDrillDown(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "shadow")
	r := evalrun(t, nil, "run", writeSpec(t, "shadow.yaml", fmt.Sprintf(shadowSpec, "")), "--out", out)
	if r.code != 0 {
		t.Fatalf("exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	b := byName(readSummary(t, out))["npu-int8"]
	d := b.Diagnostics
	if d == nil || !d.Shadow || len(d.Ops) != 36 || d.LayerDrift == nil || len(d.LayerDrift.Layers) != 5 {
		t.Fatalf("diagnostics %+v", d)
	}
	for i, o := range d.Ops {
		if o.Calls == 0 || !(o.NMSE > 0) || o.Cosine >= 1 || (i > 0 && o.NMSE > d.Ops[i-1].NMSE) {
			t.Fatalf("op %d %+v not ranked by NMSE or never compared", i, o)
		}
	}
	for _, l := range d.LayerDrift.Layers {
		if !(l.NMSE > 0) {
			t.Errorf("layer %+v shows no drift", l)
		}
	}
	for _, want := range []string{"per-op error against the CPU path (shadow mode): the 5 worst of 36 ops", "     1  " + d.Ops[0].Op + " ",
		"the other 31 ops: report.md", "per-layer drift of the residual stream", "the error grows most at layer", "every layer: report.md"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, r.stdout)
		}
	}
	if n := strings.Count(r.stdout, "\n"); strings.Contains(r.stdout, " "+d.Ops[5].Op+" ") || n > 40 {
		t.Errorf("output of %d lines shows more than the 5 worst ops:\n%s", n, r.stdout)
	}
	md, _ := os.ReadFile(filepath.Join(out, "report.md"))
	html, _ := os.ReadFile(filepath.Join(out, "report.html"))
	last := d.Ops[len(d.Ops)-1].Op
	if !strings.Contains(string(md), "| 1 | "+d.Ops[0].Op+" |") || !strings.Contains(string(md), "| 36 | "+last+" |") {
		t.Errorf("report.md lacks the ranked op table")
	}
	if !strings.Contains(string(html), "<tr><td>36</td><td>"+last+"</td>") {
		t.Errorf("report.html lacks the ranked op table")
	}

	top := d.Ops[0].Op
	out2 := filepath.Join(dir, "cpu-ops")
	r = evalrun(t, nil, "run", writeSpec(t, "cpuops.yaml", fmt.Sprintf(shadowSpec, ", cpu_ops: ["+top+"]")), "--out", out2)
	b2 := byName(readSummary(t, out2))["npu-int8"]
	if r.code != 0 || len(b2.Diagnostics.Ops) != 35 {
		t.Fatalf("cpu_ops %s: exit %d, %d ops compared\n%s", top, r.code, len(b2.Diagnostics.Ops), r.stderr)
	}
	k1, k2 := *b.Accuracy.KLDMean, *b2.Accuracy.KLDMean
	t.Logf("KLD with every matmul on the NPU %.6g; with %s on the CPU %.6g", k1, top, k2)
	if !(k2 < k1) {
		t.Errorf("keeping %s on the CPU did not lower the KLD: %g -> %g", top, k1, k2)
	}
}
