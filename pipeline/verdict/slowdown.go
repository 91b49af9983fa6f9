package verdict

import (
	"fmt"

	"github.com/evalrun/evalrun/pipeline/spec"
	"github.com/evalrun/evalrun/pipeline/speedstat"
	"github.com/evalrun/evalrun/pipeline/summary"
)

// Slowdown judges a slowdown gate (tg_ts_max_slowdown, pp_ts_max_slowdown):
// it fails only when the slowdown beyond the limit is significant, by the
// one-sided p95 test of new's rates against base's scaled by (1 - limit).
// Value is the p95's slowdown. With too few repetitions on either side for
// the test to ever be significant the gate is not measured, and fails.
// factor is the machine's change between the two measurements, divided out
// of new's rates (1 within one run); machine describes it for the note (""
// for none), against names base.
func Slowdown(r summary.GateResult, gate spec.Gate, base, new *summary.Throughput, factor float64, machine, against string) summary.GateResult {
	bt, nt := base.Test(gate.Metric), new.Test(gate.Metric)
	bs, ns := summarize(bt), summarize(nt)
	if bs == nil || ns == nil {
		r.Note = "not measured"
		if bs == nil && ns != nil {
			r.Note += ": " + against + " has no " + gate.Metric
		}
		return r
	}
	if least := speedstat.MinRepsCompare(speedstat.Alpha); bs.N < least || ns.N < least {
		// The test could never call a slowdown significant: a gate that
		// cannot fail must not pass.
		r.Note = fmt.Sprintf("not measured: %d repetitions (%s) and %d (this backend); the p95 test needs >= %d a side to find any slowdown (bench.reps)", bs.N, against, ns.N, least)
		return r
	}
	if bt.Name() != nt.Name() {
		r.Note = fmt.Sprintf("not comparable: %s ran %s, this backend %s", against, bt.Name(), nt.Name())
		return r
	}
	rates := speedstat.TestRates(nt)
	for i := range rates {
		rates[i] /= factor
	}
	slow := 1 - ns.Fast/factor/bs.Fast
	r.Value = &slow
	exceeds, p, _ := speedstat.SlowdownExceeds(speedstat.TestRates(bt), rates, gate.Limit)
	r.Pass = !exceeds
	verdict := "not significant"
	if exceeds {
		verdict = "significant"
	}
	r.Note = fmt.Sprintf("p95 %.4g t/s (%s) -> %.4g t/s, slowdown %.1f%%%s beyond %.1f%%: %s (one-sided p95 test p=%.3g, %d+%d repetitions)",
		bs.Fast, against, ns.Fast, 100*slow, machine, 100*gate.Limit, verdict, p, bs.N, ns.N)
	return r
}

// summarize summarizes a test's samples; nil when it did not run.
func summarize(t *summary.BenchTest) *speedstat.Summary {
	if t == nil {
		return nil
	}
	return speedstat.Summarize(speedstat.TestRates(t))
}

// SkipSpeedGate reports whether speed gates are not applied to a backend
// whose throughput is t: a simulated device, unless the gates say so.
func SkipSpeedGate(gates spec.Gates, t *summary.Throughput) bool {
	return t != nil && t.Simulated && !gates.SpeedOnSimulated()
}
