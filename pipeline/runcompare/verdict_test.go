package runcompare

import (
	"strings"
	"testing"

	"github.com/evalrun/evalrun/pipeline/speedstat"
	"github.com/evalrun/evalrun/pipeline/summary"
)

func f(v float64) *float64 { return &v }

// TestJudge: what a nightly job's exit code rests on.
func TestJudge(t *testing.T) {
	ok := func(name string) BackendChange {
		return BackendChange{Name: name, Presence: "both", BaseStatus: summary.StatusOK, NewStatus: summary.StatusOK, Logits: LogitsChange{Verdict: BitIdentical}}
	}
	kld := func(base, new float64, beyond, worse bool) MetricChange {
		return MetricChange{Name: "kld_mean", Base: f(base), New: f(new), Delta: f(new - base), Beyond: beyond, Worse: worse}
	}
	slower := func(delta float64, simulated bool) SpeedChange {
		return SpeedChange{Test: "tg16", Simulated: simulated, Comparison: speedstat.Comparison{Delta: f(delta), Verdict: speedstat.Slower}, PAdjusted: f(0.001)}
	}
	for _, c := range []struct {
		name   string
		edit   func(b *BackendChange, r *Result)
		status string
		reason string
	}{
		{"identical", func(*BackendChange, *Result) {}, VerdictNoChange, ""},
		{"a setup change", func(_ *BackendChange, r *Result) { r.Changes = []Change{{What: "evalrun", Base: "a", New: "b"}} }, VerdictChanged, ""},
		{"better beyond ±", func(b *BackendChange, _ *Result) { b.Metrics = []MetricChange{kld(0.01, 0.005, true, false)} }, VerdictChanged, ""},
		{"worse within ±", func(b *BackendChange, _ *Result) { b.Metrics = []MetricChange{kld(0.01, 0.02, false, false)} }, VerdictNoChange, ""},
		{"worse beyond ± but by 1 %", func(b *BackendChange, _ *Result) { b.Metrics = []MetricChange{kld(0.01, 0.0101, true, true)} }, VerdictChanged, ""},
		{"worse beyond ± by 50 %", func(b *BackendChange, _ *Result) { b.Metrics = []MetricChange{kld(0.01, 0.015, true, true)} }, VerdictRegression, "npu: kld_mean 0.01 -> 0.015, worse beyond ± (+50%)"},
		{"worse from 0", func(b *BackendChange, _ *Result) { b.Metrics = []MetricChange{kld(0, 1e-9, true, true)} }, VerdictRegression, "(from 0)"},
		{"crashed", func(b *BackendChange, _ *Result) { b.NewStatus = summary.StatusCrashed }, VerdictRegression, "npu: ok -> crashed"},
		{"missing", func(b *BackendChange, _ *Result) { b.Presence = "base only" }, VerdictRegression, "npu: in the baseline, not in the new run"},
		{"3 % slower", func(b *BackendChange, _ *Result) { b.Speed = []SpeedChange{slower(-0.03, false)} }, VerdictChanged, ""},
		{"8 % slower", func(b *BackendChange, _ *Result) { b.Speed = []SpeedChange{slower(-0.08, false)} }, VerdictRegression, "npu: tg16 8.0% slower"},
		{"8 % slower, simulated", func(b *BackendChange, _ *Result) { b.Speed = []SpeedChange{slower(-0.08, true)} }, VerdictChanged, ""},
	} {
		r := &Result{MinChange: DefaultMinChange, Backends: []BackendChange{ok("npu")}}
		c.edit(&r.Backends[0], r)
		r.Judge(DefaultMaxSlowdown)
		want := map[string]int{VerdictNoChange: 0, VerdictChanged: 0, VerdictRegression: 1}[c.status]
		if r.Verdict.Status != c.status || r.Verdict.ExitCode != want || !strings.Contains(strings.Join(r.Verdict.Reasons, "\n"), c.reason) {
			t.Errorf("%s: %+v, want %s with %q", c.name, r.Verdict, c.status, c.reason)
		}
	}
}

// TestChangesNameWhatDiffers: the spec's keys first, list items by name;
// the output directory is not a change.
func TestChangesNameWhatDiffers(t *testing.T) {
	spec := func(typ, out string) map[string]any {
		return map[string]any{"output": map[string]any{"dir": out}, "backends": []any{
			map[string]any{"name": "npu-fp16", "options": map[string]any{"type": "fp16"}},
			map[string]any{"name": "npu-int8", "options": map[string]any{"type": typ}}}}
	}
	run := func(typ, out, sha, version string) *summary.Summary {
		return &summary.Summary{Run: summary.RunInfo{EffectiveSpec: spec(typ, out), EvalrunVersion: version},
			Model: summary.ModelSummary{SHA256: sha}, Backends: []summary.BackendSummary{{Name: "npu-int8", PluginSHA256: sha}}}
	}
	got := changes(run("int8", "/a", "aaaaaaaaaaaaaaaa", "v1"), run("int4", "/b", "bbbbbbbbbbbbbbbb", "v1"))
	want := []Change{{"spec backends[npu-int8].options.type", "int8", "int4"}, {"plugin npu-int8 sha256", "aaaaaaaaaaaa", "bbbbbbbbbbbb"}, {"model sha256", "aaaaaaaaaaaa", "bbbbbbbbbbbb"}}
	if len(got) != len(want) {
		t.Fatalf("changes %+v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("change %d: %+v, want %+v", i, got[i], want[i])
		}
	}
	if got := changes(run("int8", "/a", "x", "v1"), run("int8", "/b", "x", "v1")); len(got) != 0 {
		t.Errorf("the same setup: %+v", got)
	}
}
