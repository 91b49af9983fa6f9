package runcompare

import (
	"fmt"

	"github.com/evalrun/evalrun/pipeline/spec"
	"github.com/evalrun/evalrun/pipeline/speedstat"
	"github.com/evalrun/evalrun/pipeline/summary"
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
		for _, gate := range g.Relative() {
			r := summary.GateResult{Name: gate.Name, Limit: gate.Limit}
			switch {
			case !found:
				r.Note = "not measured: no backend " + b.Name + " in the baseline " + base.Summary.Run.ID
			case summary.IsSpeedMetric(gate.Metric):
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

// slowdownGate fails only when the slowdown beyond the limit is
// significant: the one-sided p95 test of this run's rates against the
// baseline's scaled by (1 - limit). Value is the p95's slowdown.
func slowdownGate(r summary.GateResult, gate spec.Gate, base, new *summary.Throughput, g spec.Gates, shift *MachineShift, backend string) summary.GateResult {
	if summary.SkipSpeedGate(g, new) {
		r.Pass, r.Skipped, r.Note = true, true, summary.NoteSimulated
		return r
	}
	pick := func(t *summary.Throughput) *summary.BenchTest {
		if t == nil {
			return nil
		}
		if gate.Metric == "tg_ts" {
			return t.TG
		}
		return t.PP
	}
	bt, nt := pick(base), pick(new)
	bs, ns := summaryOf(bt), summaryOf(nt)
	if bs == nil || ns == nil {
		r.Note = "not measured"
		return r
	}
	if testName(bt) != testName(nt) {
		r.Note = fmt.Sprintf("not comparable: the baseline ran %s, this run %s", testName(bt), testName(nt))
		return r
	}
	test, machine := testName(nt), ""
	factor := shift.factor(test, backend)
	if shift != nil {
		over := "the other backends' p95 speed"
		if _, ok := shift.ByTest[test]; !ok {
			over = "every backend's p95 speed over all tests"
		}
		machine = fmt.Sprintf(" after the machine's %+.1f%% (%s)", 100*(factor-1), over)
	}
	rates := shift.remove(test, backend, nt.Rates())
	slow := 1 - ns.Fast/factor/bs.Fast
	r.Value = &slow
	exceeds, p, _ := speedstat.SlowdownExceeds(bt.Rates(), rates, gate.Limit)
	r.Pass = !exceeds
	verdict := "not significant"
	if exceeds {
		verdict = "significant"
	}
	r.Note = fmt.Sprintf("p95 %.4g -> %.4g t/s, slowdown %.1f%%%s beyond %.1f%%: %s (one-sided p95 test p=%.3g, %d+%d repetitions)",
		bs.Fast, ns.Fast, 100*slow, machine, 100*gate.Limit, verdict, p, bs.N, ns.N)
	return r
}

// summaryOf summarizes a test's samples; nil when it did not run.
func summaryOf(t *summary.BenchTest) *speedstat.Summary {
	if t == nil {
		return nil
	}
	return speedstat.Summarize(t.Rates())
}
