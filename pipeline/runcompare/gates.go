package runcompare

import (
	"fmt"

	"github.com/evalrun/evalrun/pipeline/gate"
	"github.com/evalrun/evalrun/pipeline/resultsdir"
	"github.com/evalrun/evalrun/pipeline/spec"
	"github.com/evalrun/evalrun/pipeline/summary"
)

// Gates returns the pipeline's relative-gate hook for a baseline run: each
// candidate's relative gates are checked against the baseline's backend of
// the same name (gate.Change, gate.Slowdown). A gate whose metric is
// missing on either side fails ("not measured"), as absolute gates do. A
// speed gate judges the candidate's rates divided by the machine shift
// between the runs (see MachineShift) when this run and the baseline share
// enough backends.
func Gates(base *resultsdir.Run) func(b *summary.BackendSummary, g spec.Gates, speeds map[string]*summary.Throughput) []summary.GateResult {
	return func(b *summary.BackendSummary, g spec.Gates, speeds map[string]*summary.Throughput) []summary.GateResult {
		bb, found := base.Backend(b.Name)
		var out []summary.GateResult
		for _, rel := range g.BaselineRun() {
			var r summary.GateResult
			switch {
			case !found:
				r = summary.GateResult{Name: rel.Name, Limit: rel.Limit, Note: "not measured: no backend " + b.Name + " in the baseline " + base.Summary.Run.ID}
			case rel.Bound == gate.MaxSlowdown:
				r = slowdownGate(rel, bb.Throughput, b.Throughput, g.SpeedOnSimulated(), machineShift(base.Speeds(), speeds), b.Name)
			default:
				r = gate.Change(rel, bb.Accuracy, b.Accuracy)
			}
			out = append(out, r)
		}
		return out
	}
}

// slowdownGate judges a slowdown gate against the baseline run, the
// machine's shift between the runs divided out (gate.Slowdown).
func slowdownGate(g gate.Gate, base, new *summary.Throughput, onSimulated bool, shift *MachineShift, backend string) summary.GateResult {
	if gate.SkipSpeed(onSimulated, new) {
		return summary.GateResult{Name: g.Name, Limit: g.Limit, Pass: true, Skipped: true, Note: gate.NoteSimulated}
	}
	test, machine := gate.MustLookup(g.Metric).Test(new).Name(), ""
	factor := shift.factor(test, backend)
	if shift != nil {
		over := "the other backends' p95 speed"
		if _, ok := shift.ByTest[test]; !ok {
			over = "every backend's p95 speed over all tests"
		}
		machine = fmt.Sprintf(" after the machine's %+.1f%% (%s)", 100*(factor-1), over)
	}
	return gate.Slowdown(g, base, new, factor, machine, "the baseline")
}
