// Package speedstat turns a benchmark's per-repetition timings into figures
// that hold up on a shared machine: the median rate with a distribution-free
// confidence interval, and comparisons of two runs by the Mann-Whitney U
// test (golang.org/x/perf/benchmath's AssumeNothing, what benchstat uses).
// A single slow repetition (another process took the core) moves neither
// the median nor the test much, where llama-bench's mean ± stddev moves a
// lot.
package speedstat

import (
	"cmp"
	"math"
	"slices"
	"strconv"

	"github.com/aclements/go-moremath/stats"
	"golang.org/x/perf/benchmath"
)

// Confidence is the level of the median's confidence interval.
const Confidence = 0.95

// Alpha is the significance level of comparisons and gates.
const Alpha = 0.05

// Summary is the center and spread of one test's rates (tokens/s).
type Summary struct {
	N      int     `json:"n"`         // repetitions
	Median float64 `json:"median_ts"` // median of the per-repetition rates
	// Lo and Hi bound the median's confidence interval (order statistics);
	// null when N is too small for one (see MinRepsCI).
	Lo         *float64 `json:"ci_lo_ts"`
	Hi         *float64 `json:"ci_hi_ts"`
	Confidence float64  `json:"ci_level"` // the interval's actual level (>= Confidence)
}

// Rates converts per-repetition durations of a test of n tokens into
// tokens/s, ascending. Non-positive durations are dropped.
func Rates(samplesNS []int64, tokens int) []float64 {
	out := make([]float64, 0, len(samplesNS))
	for _, ns := range samplesNS {
		if ns > 0 {
			out = append(out, float64(tokens)*1e9/float64(ns))
		}
	}
	slices.Sort(out)
	return out
}

func sample(rates []float64) *benchmath.Sample {
	return benchmath.NewSample(slices.Sorted(slices.Values(rates)), &benchmath.DefaultThresholds)
}

// Summarize computes the median rate and its confidence interval; nil for
// no rates.
func Summarize(rates []float64) *Summary {
	if len(rates) == 0 {
		return nil
	}
	s := benchmath.AssumeNothing.Summary(sample(rates), Confidence)
	out := &Summary{N: len(rates), Median: s.Center, Confidence: s.Confidence}
	if !math.IsInf(s.Lo, 0) && !math.IsInf(s.Hi, 0) {
		out.Lo, out.Hi = &s.Lo, &s.Hi
	}
	return out
}

// MinRepsCI is the fewest repetitions whose median has a Confidence
// interval (6 at 95 %).
func MinRepsCI() int {
	for n := 2; n <= 50; n++ {
		ci := stats.QuantileCI(n, 0.5, Confidence)
		if ci.LoOrder > 0 && ci.HiOrder <= n {
			return n
		}
	}
	return 51
}

// MinRepsCompare is the fewest repetitions per run with which the U test
// can reach significance at Alpha even when the two runs do not overlap at
// all (4 at 0.05): with fewer, no comparison can ever be significant.
func MinRepsCompare() int {
	for n := 1; n <= 50; n++ {
		if uTestMinP(n) <= Alpha {
			return n
		}
	}
	return 51
}

// uTestMinP is the smallest two-sided p-value of the U test for two
// samples of n: 2 / C(2n, n).
func uTestMinP(n int) float64 {
	c := 1.0
	for i := 1; i <= n; i++ {
		c = c * float64(n+i) / float64(i)
	}
	return math.Min(1, 2/c)
}

// Verdicts of a comparison.
const (
	Faster        = "faster"
	Slower        = "slower"
	NoChange      = "no significant change"
	NotComparable = "not comparable" // a side has no samples
)

// Comparison is a new run's rates against a baseline's.
type Comparison struct {
	Base *Summary `json:"base"`
	New  *Summary `json:"new"`
	// Delta is the relative change of the median rate, (new - base) / base:
	// positive is faster.
	Delta *float64 `json:"delta"`
	// P is the two-sided Mann-Whitney U test's p-value (null when not
	// comparable); the change is significant when P < Alpha.
	P       *float64 `json:"p"`
	Alpha   float64  `json:"alpha"`
	Verdict string   `json:"verdict"`
	// Note explains a comparison that cannot be significant (too few
	// repetitions) or was not made.
	Note string `json:"note,omitempty"`
}

// Compare tests whether the new rates differ from the baseline's.
func Compare(base, new []float64) Comparison {
	c := Comparison{Base: Summarize(base), New: Summarize(new), Alpha: Alpha, Verdict: NotComparable}
	if c.Base == nil || c.New == nil {
		c.Note = "no samples in one of the runs"
		return c
	}
	d := c.New.Median/c.Base.Median - 1
	c.Delta = &d
	cmp := benchmath.AssumeNothing.Compare(sample(base), sample(new))
	p := cmp.P
	c.P = &p
	switch {
	case p >= Alpha:
		c.Verdict = NoChange
		if need := MinRepsCompare(); len(base) < need && len(new) < need {
			c.Note = noteReps(need)
		}
	case d < 0:
		c.Verdict = Slower
	default:
		c.Verdict = Faster
	}
	return c
}

func noteReps(need int) string {
	return "too few repetitions to ever be significant: need >= " + strconv.Itoa(need) + " per run"
}

// SlowdownExceeds tests whether the new rates are slower than the
// baseline's by more than limit (a fraction: 0.05 is 5 %): the one-sided
// U test of new against base × (1 - limit). It reports the p-value; the
// slowdown is established when p < Alpha. A slowdown the samples cannot
// tell from noise, or one within the limit, is not.
func SlowdownExceeds(base, new []float64, limit float64) (exceeds bool, p float64, ok bool) {
	if len(base) == 0 || len(new) == 0 {
		return false, 1, false
	}
	scaled := make([]float64, len(base))
	for i, v := range base {
		scaled[i] = v * (1 - limit)
	}
	res, err := stats.MannWhitneyUTest(new, scaled, stats.LocationLess)
	if err != nil { // e.g. every value equal: no evidence either way
		return false, 1, true
	}
	return res.P < Alpha, res.P, true
}

// Holm adjusts p-values for testing them together (Holm's step-down
// method): a comparison of two runs tests every backend's pp and tg at
// once, and at Alpha each, two identical runs would show some significant
// change more often than not once there are a dozen tests. Adjusted p <
// Alpha keeps the chance of any false "significant" among them below Alpha.
func Holm(ps []float64) []float64 {
	order := make([]int, len(ps))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(ps[a], ps[b]) })
	adj := make([]float64, len(ps))
	running := 0.0
	for rank, i := range order {
		running = math.Max(running, math.Min(1, float64(len(ps)-rank)*ps[i]))
		adj[i] = running
	}
	return adj
}

// RepsToDetect estimates how many repetitions per run the U test needs to
// find a change of the rates by the fraction change (0.05: 5 %) at level
// alpha with 80 % power, given the spread the two samples show: the
// normal-theory size for the log rates' robust standard deviation (MAD ×
// 1.4826, pooled), divided by the U test's efficiency against the t test
// (3/π for normal data; on the heavy-tailed timings of a shared machine the
// U test does better, so this errs high). 0 when a sample is empty.
func RepsToDetect(base, new []float64, change, alpha float64) int {
	if len(base) == 0 || len(new) == 0 || change <= 0 {
		return 0
	}
	sd := math.Sqrt((sq(logMADSD(base)) + sq(logMADSD(new))) / 2)
	norm := stats.NormalDist{Mu: 0, Sigma: 1}
	z := norm.InvCDF(1-alpha/2) + norm.InvCDF(0.8)
	n := 2 * sq(z*sd/math.Log1p(change)) / (3 / math.Pi)
	return max(int(math.Ceil(n)), MinRepsCompare())
}

func sq(x float64) float64 { return x * x }

// logMADSD is the robust standard deviation of the logs of xs.
func logMADSD(xs []float64) float64 {
	logs := make([]float64, 0, len(xs))
	for _, x := range xs {
		if x > 0 {
			logs = append(logs, math.Log(x))
		}
	}
	if len(logs) == 0 {
		return 0
	}
	med := Median(logs)
	dev := make([]float64, len(logs))
	for i, l := range logs {
		dev[i] = math.Abs(l - med)
	}
	return 1.4826 * Median(dev)
}

// Median is the middle value of xs (the mean of the middle two for an even
// count); xs is not modified and must not be empty.
func Median(xs []float64) float64 {
	s := slices.Sorted(slices.Values(xs))
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}
