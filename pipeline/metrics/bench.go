package metrics

import "math"

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
		ts[i] = 1e9 * float64(nTokens) / float64(s)
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
