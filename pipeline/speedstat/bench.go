package speedstat

import (
	"math"

	"github.com/evalrun/evalrun/pipeline/summary"
)

// BenchStats computes llama-bench's avg_ns, stddev_ns, avg_ts and
// stddev_ts from the per-repetition times of one test that processed
// nTokens tokens (n_prompt + n_gen) per repetition.
//
//   - avg_ts is the mean of the per-repetition rates 1e9·nTokens/t, not
//     nTokens/avg_ns; stddev_ts = sqrt(Σts²/(R−1) − mean²·R/(R−1)), 0 if R ≤ 1.
//   - avg_ns and stddev_ns use the same formulas in uint64 integer
//     arithmetic, truncating every division and the square root, exactly
//     as llama-bench. Like llama-bench, Σt² wraps around past 2⁶⁴ (at R = 5,
//     repetitions over about 1.9 s), making stddev_ns meaningless there;
//     avg_ts and stddev_ts are float64 and unaffected.
//
// Samples must be positive durations in nanoseconds. No samples give zeros.
func BenchStats(samplesNS []int64, nTokens int) (avgNS, stddevNS uint64, avgTS, stddevTS float64) {
	n := len(samplesNS)
	if n == 0 {
		return 0, 0, 0, 0
	}
	var sum, sq uint64
	for _, s := range samplesNS {
		sum += uint64(s)
		sq += uint64(s) * uint64(s)
	}
	avgNS = sum / uint64(n)

	ts := make([]float64, n)
	var sumTS, sqTS float64
	for i, s := range samplesNS {
		ts[i] = Rate(s, nTokens)
		sumTS += ts[i]
	}
	for _, v := range ts {
		sqTS += float64(v * v)
	}
	avgTS = sumTS / float64(n)

	if n > 1 {
		un := uint64(n)
		stddevNS = uint64(math.Sqrt(float64(sq/(un-1) - avgNS*avgNS*un/(un-1))))
		fn := float64(n)
		stddevTS = math.Sqrt(sqTS/(fn-1) - float64(avgTS*avgTS*fn)/(fn-1))
	}
	return avgNS, stddevNS, avgTS, stddevTS
}

// Rate is a repetition's tokens/s: tokens processed in ns nanoseconds, as
// llama-bench computes samples_ts. Every rate evalrun shows comes from it.
func Rate(ns int64, tokens int) float64 { return 1e9 * float64(tokens) / float64(ns) }

// SamplesTS are a test's per-repetition rates in repetition order
// (llama-bench's samples_ts).
func SamplesTS(b *summary.BenchTest) []float64 {
	out := make([]float64, len(b.SamplesNS))
	for i, ns := range b.SamplesNS {
		out[i] = Rate(ns, b.NPrompt+b.NGen)
	}
	return out
}

// TestRates are a test's per-repetition tokens/s, ascending (Rates); none
// for no test.
func TestRates(b *summary.BenchTest) []float64 {
	if b == nil {
		return nil
	}
	return Rates(b.SamplesNS, b.NPrompt+b.NGen)
}

// NewBenchTest computes llama-bench's statistics and the median with its
// confidence interval for one test.
func NewBenchTest(nPrompt, nGen int, samples []int64) *summary.BenchTest {
	avgNS, sdNS, avgTS, sdTS := BenchStats(samples, nPrompt+nGen)
	return &summary.BenchTest{NPrompt: nPrompt, NGen: nGen, AvgNS: avgNS, StddevNS: sdNS, AvgTS: avgTS, StddevTS: sdTS, SamplesNS: samples,
		Stats: Summarize(Rates(samples, nPrompt+nGen))}
}
