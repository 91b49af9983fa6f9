package gate

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/evalrun/evalrun/pipeline/speedstat"
	"github.com/evalrun/evalrun/pipeline/summary"
)

// Bound is what a gate asks of its metric; the gate key's suffix names it.
type Bound int

const (
	Max         Bound = iota // metric_max: the value must be <= Limit
	Min                      // metric_min: >= Limit
	MaxIncrease              // metric_max_increase: may grow over the baseline run's by at most Limit
	MaxDrop                  // metric_max_drop: may fall below the baseline run's by at most Limit
	MaxSlowdown              // metric_max_slowdown: tokens/s may fall by at most this fraction, unless not significant
)

// suffixes are the gate keys' endings, longest first.
var suffixes = []struct {
	suffix string
	bound  Bound
}{{"_max_increase", MaxIncrease}, {"_max_drop", MaxDrop}, {"_max_slowdown", MaxSlowdown}, {"_max", Max}, {"_min", Min}}

// Gate is one threshold of a spec.
type Gate struct {
	Name   string  // the spec key, e.g. "kld_mean_max"
	Metric string  // the metric it limits, e.g. "kld_mean"
	Bound  Bound   // what it asks of the metric
	Limit  float64 // the threshold, or the largest change for the worse
}

// Parse reads a gate key and its limit. The key must name a metric of the
// catalog and a bound that makes sense for it: _max for a metric where
// higher is worse, _min for the others; _max_increase and _max_drop the
// same way against a baseline; _max_slowdown for a speed.
func Parse(key string, limit float64) (Gate, error) {
	for _, s := range suffixes {
		name, ok := strings.CutSuffix(key, s.suffix)
		if !ok {
			continue
		}
		m, known := Lookup(name)
		if !known {
			return Gate{}, fmt.Errorf("%s: no metric %q", key, name)
		}
		if want := m.bounds(); !slices.Contains(want, s.bound) {
			return Gate{}, fmt.Errorf("%s: %s takes %s", key, name, suffixList(name, want))
		}
		return Gate{Name: key, Metric: name, Bound: s.bound, Limit: limit}, nil
	}
	return Gate{}, fmt.Errorf("%s: a gate key ends in _max, _min, _max_increase, _max_drop or _max_slowdown", key)
}

// bounds are the gate bounds that make sense for m.
func (m Metric) bounds() []Bound {
	switch {
	case m.Speed():
		return []Bound{Min, MaxSlowdown}
	case m.HigherWorse:
		return []Bound{Max, MaxIncrease}
	}
	return []Bound{Min, MaxDrop}
}

func suffixList(name string, bs []Bound) string {
	var keys []string
	for _, b := range bs {
		for _, s := range suffixes {
			if s.bound == b {
				keys = append(keys, name+s.suffix)
			}
		}
	}
	return strings.Join(keys, " or ")
}

// Relative reports whether the gate compares with a baseline (a run, or a
// backend of this run for a slowdown gate with speed_baseline).
func (g Gate) Relative() bool { return g.Bound >= MaxIncrease }

// Pass reports whether value meets an absolute gate. NaN never passes.
func (g Gate) Pass(value float64) bool {
	switch {
	case math.IsNaN(value):
		return false
	case g.Bound == Max:
		return value <= g.Limit
	}
	return value >= g.Limit
}

// NoteSimulated explains a speed gate not applied to a simulated device.
const NoteSimulated = "not applied: simulated device throughput (speed_gates_on_simulated: true applies it)"

// SkipSpeed reports whether speed gates are not applied to a backend whose
// throughput is t: a simulated device, unless the spec's
// speed_gates_on_simulated says so (onSimulated).
func SkipSpeed(onSimulated bool, t *summary.Throughput) bool {
	return t != nil && t.Simulated && !onSimulated
}

// Absolute checks absolute gates. A gate whose statistic could not be
// computed fails: a check that saw nothing must not pass (the
// test-backend-ops "0/0 OK" lesson). NaN or Inf in the logits always fails.
// A speed gate reads the test's p95 rate, the speed the fastest 5 % of its
// repetitions reach, as the slowdown gates and evalrun compare judge it
// (not llama-bench's mean, which moves with how many repetitions a
// neighbour slowed); it is not applied when skipSpeed (SkipSpeed).
func Absolute(gates []Gate, skipSpeed bool, a *summary.Accuracy, t *summary.Throughput) []summary.GateResult {
	var out []summary.GateResult
	for _, g := range gates {
		r := summary.GateResult{Name: g.Name, Limit: g.Limit}
		m, known := Lookup(g.Metric)
		var rates *speedstat.Summary
		if m.Speed() {
			if rates = summarize(m.Test(t)); rates != nil {
				r.Value = &rates.Fast
			}
		} else {
			r.Value, _ = m.Value(a)
		}
		switch {
		case !known:
			r.Note = "unknown metric " + g.Metric
		case m.Speed() && skipSpeed:
			r.Pass, r.Skipped, r.Note = true, true, NoteSimulated
		case r.Value == nil:
			r.Note = "not measured"
		default:
			r.Pass = g.Pass(*r.Value)
			if rates != nil {
				r.Note = fmt.Sprintf("p95 %.6g t/s of %d repetitions against limit %g", rates.Fast, rates.N, g.Limit)
			}
		}
		out = append(out, r)
	}
	if a != nil && (a.NaNCount > 0 || a.InfCount > 0) {
		n := float64(a.NaNCount + a.InfCount)
		out = append(out, summary.GateResult{Name: "finite_logits", Limit: 0, Value: &n, Note: fmt.Sprintf("%d NaN, %d Inf logits", a.NaNCount, a.InfCount)})
	}
	return out
}

// Change judges an accuracy gate against a baseline (MaxIncrease,
// MaxDrop): the metric may get worse than the baseline's by at most the
// limit. Value is how much worse it got. Missing on either side fails ("not
// measured").
func Change(g Gate, base, new *summary.Accuracy) summary.GateResult {
	r := summary.GateResult{Name: g.Name, Limit: g.Limit}
	m, known := Lookup(g.Metric)
	if !known || m.Speed() {
		r.Note = "unknown metric " + g.Metric
		return r
	}
	bv, _ := m.Value(base)
	nv, _ := m.Value(new)
	if bv == nil || nv == nil {
		r.Note = "not measured"
		return r
	}
	worse := m.Worsening(*bv, *nv)
	r.Value = &worse
	r.Pass = worse <= g.Limit
	r.Note = fmt.Sprintf("%s %.6g -> %.6g: %.3g worse than the baseline, limit %g", g.Metric, *bv, *nv, worse, g.Limit)
	return r
}

// Slowdown judges a slowdown gate (tg_ts_max_slowdown, pp_ts_max_slowdown):
// it fails only when the slowdown beyond the limit is significant, by the
// one-sided p95 test of new's rates against base's scaled by (1 - limit).
// Value is the p95's slowdown. With too few repetitions on either side for
// the test to ever be significant the gate is not measured, and fails.
// factor is the machine's change between the two measurements, divided out
// of new's rates (1 within one run); machine describes it for the note (""
// for none), against names base.
func Slowdown(g Gate, base, new *summary.Throughput, factor float64, machine, against string) summary.GateResult {
	r := summary.GateResult{Name: g.Name, Limit: g.Limit}
	m, known := Lookup(g.Metric)
	if !known || !m.Speed() {
		r.Note = "unknown metric " + g.Metric
		return r
	}
	bt, nt := m.Test(base), m.Test(new)
	bs, ns := summarize(bt), summarize(nt)
	if bs == nil || ns == nil {
		r.Note = "not measured"
		if bs == nil && ns != nil {
			r.Note += ": " + against + " has no " + g.Metric
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
	exceeds, p, _ := speedstat.SlowdownExceeds(speedstat.TestRates(bt), rates, g.Limit)
	r.Pass = !exceeds
	verdict := "not significant"
	if exceeds {
		verdict = "significant"
	}
	r.Note = fmt.Sprintf("p95 %.4g t/s (%s) -> %.4g t/s, slowdown %.1f%%%s beyond %.1f%%: %s (one-sided p95 test p=%.3g, %d+%d repetitions)",
		bs.Fast, against, ns.Fast, 100*slow, machine, 100*g.Limit, verdict, p, bs.N, ns.N)
	return r
}

// summarize summarizes a test's samples; nil when it did not run.
func summarize(t *summary.BenchTest) *speedstat.Summary {
	if t == nil {
		return nil
	}
	return speedstat.Summarize(speedstat.TestRates(t))
}
