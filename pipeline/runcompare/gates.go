package runcompare

import (
	"fmt"

	"github.com/evalrun/evalrun/pipeline/spec"
	"github.com/evalrun/evalrun/pipeline/summary"
	"github.com/evalrun/evalrun/pipeline/verdict"
)

// Gates returns the pipeline's relative-gate hook for a baseline run: each
// candidate's relative gates are checked against the baseline's backend of
// the same name. A gate whose metric is missing on either side fails ("not
// measured"), as absolute gates do. A speed gate judges the candidate's
// rates divided by the machine shift between the runs (see MachineShift)
// when this run and the baseline share enough backends.
func Gates(base *Run) func(b *summary.BackendSummary, g spec.Gates, speeds map[string]*summary.Throughput) []summary.GateResult {
	return func(b *summary.BackendSummary, g spec.Gates, speeds map[string]*summary.Throughput) []summary.GateResult {
		bb, found := base.backend(b.Name)
		var out []summary.GateResult
		for _, gate := range g.BaselineRun() {
			r := summary.GateResult{Name: gate.Name, Limit: gate.Limit}
			switch {
			case !found:
				r.Note = "not measured: no backend " + b.Name + " in the baseline " + base.Summary.Run.ID
			case spec.IsSpeedMetric(gate.Metric):
				r = slowdownGate(r, gate, bb.Throughput, b.Throughput, g, machineShift(base.speeds(), speeds), b.Name)
			default:
				r = accuracyGate(r, gate, bb.Accuracy, b.Accuracy)
			}
			out = append(out, r)
		}
		return out
	}
}

// accuracyGate: the metric may get worse than the baseline's by at most the
// limit (kld_mean and ppl_ratio up, same_top_p down).
func accuracyGate(r summary.GateResult, gate spec.Gate, base, new *summary.Accuracy) summary.GateResult {
	var m metric
	for _, x := range metrics {
		if x.name == gate.Metric {
			m = x
		}
	}
	if m.get == nil {
		r.Note = "unknown metric " + gate.Metric
		return r
	}
	if base == nil || new == nil {
		r.Note = "not measured"
		return r
	}
	bv, _ := m.get(base)
	nv, _ := m.get(new)
	if bv == nil || nv == nil {
		r.Note = "not measured"
		return r
	}
	worse := *nv - *bv
	if !m.higherWorse {
		worse = -worse
	}
	r.Value = &worse
	r.Pass = worse <= gate.Limit
	r.Note = fmt.Sprintf("%s %.6g -> %.6g: %.3g worse than the baseline, limit %g", gate.Metric, *bv, *nv, worse, gate.Limit)
	return r
}

// slowdownGate judges a slowdown gate against the baseline run, the
// machine's shift between the runs divided out (verdict.Slowdown).
func slowdownGate(r summary.GateResult, gate spec.Gate, base, new *summary.Throughput, g spec.Gates, shift *MachineShift, backend string) summary.GateResult {
	if verdict.SkipSpeedGate(g, new) {
		r.Pass, r.Skipped, r.Note = true, true, summary.NoteSimulated
		return r
	}
	test, machine := new.Test(gate.Metric).Name(), ""
	factor := shift.factor(test, backend)
	if shift != nil {
		over := "the other backends' p95 speed"
		if _, ok := shift.ByTest[test]; !ok {
			over = "every backend's p95 speed over all tests"
		}
		machine = fmt.Sprintf(" after the machine's %+.1f%% (%s)", 100*(factor-1), over)
	}
	return verdict.Slowdown(r, gate, base, new, factor, machine, "the baseline")
}
