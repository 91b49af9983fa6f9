// Package speedstat turns a benchmark's per-repetition timings into figures
// that hold up on a shared machine. Each test is summarized by its median
// rate with a distribution-free confidence interval (what benchstat shows)
// and by its fast quantile, the rate the fastest 5 % of repetitions reach
// (p95), which comparisons of runs judge.
//
// Why p95: on a shared VM the repetitions of one test fall into a fast mode
// (nothing else on the core) and slower ones, and the share of slow ones
// changes with the neighbours' load from minute to minute. The median moves
// with that share; the fast mode's speed is the code's. Between identical
// runs the p95 test calls far fewer rows significant than a U test on the
// medians of the same samples (measured: docs/design-notes.md).
package speedstat

import (
	"cmp"
	"math"
	"slices"
	"strconv"

	"github.com/aclements/go-moremath/stats"
	"golang.org/x/perf/benchmath"

	"github.com/evalrun/evalrun/pipeline/summary"
)

// Confidence is the level of the confidence intervals.
const Confidence = 0.95

// Alpha is the significance level of comparisons and gates.
const Alpha = 0.05

// FastQuantile is the quantile of the rates that comparisons judge (p95).
const FastQuantile = 0.95

// Summary is a test's center and spread: summary.SpeedStats.
type Summary = summary.SpeedStats

// Rates converts per-repetition durations of a test of n tokens into
// tokens/s, ascending. Non-positive durations are dropped; no tokens, no
// rates.
func Rates(samplesNS []int64, tokens int) []float64 {
	if tokens <= 0 {
		return nil // no test (a corrupt summary): no rate
	}
	out := make([]float64, 0, len(samplesNS))
	for _, ns := range samplesNS {
		if ns > 0 {
			out = append(out, Rate(ns, tokens))
		}
	}
	slices.Sort(out)
	return out
}

func sorted(rates []float64) stats.Sample {
	return stats.Sample{Xs: slices.Sorted(slices.Values(rates)), Sorted: true}
}

// Summarize computes the median rate and p95 with their confidence
// intervals; nil for no rates.
func Summarize(rates []float64) *Summary {
	if len(rates) == 0 {
		return nil
	}
	s := sorted(rates)
	m := benchmath.AssumeNothing.Summary(benchmath.NewSample(s.Xs, &benchmath.DefaultThresholds), Confidence)
	out := &Summary{N: len(rates), Median: m.Center, Confidence: m.Confidence}
	out.Lo, out.Hi = finite(m.Lo, m.Hi)
	var lo, hi float64
	out.Fast, lo, hi = stats.QuantileCI(len(rates), FastQuantile, Confidence).SampleCI(s)
	out.FastLo, out.FastHi = finite(lo, hi)
	return out
}

// finite returns lo and hi, or nils when either is infinite (the sample
// is too small for the interval).
func finite(lo, hi float64) (*float64, *float64) {
	if math.IsInf(lo, 0) || math.IsInf(hi, 0) {
		return nil, nil
	}
	return &lo, &hi
}

// MinRepsCI is the fewest repetitions whose median has a Confidence
// interval (6 at 95 %).
func MinRepsCI() int { return minRepsQuantileCI(0.5) }

// MinRepsFastCI is the fewest repetitions whose p95 has a Confidence
// interval (76 at 95 %); with fewer, reports show the p95 and the count.
func MinRepsFastCI() int { return minRepsQuantileCI(FastQuantile) }

func minRepsQuantileCI(q float64) int {
	for n := 2; n <= 1000; n++ {
		ci := stats.QuantileCI(n, q, Confidence)
		if ci.LoOrder > 0 && ci.HiOrder <= n {
			return n
		}
	}
	return 1001
}

// MinRepsCompare is the fewest repetitions per run with which the p95 test
// can reach significance at level alpha even when the two runs do not
// overlap at all: with fewer, no comparison can ever be significant. 60 at
// Alpha; a table of m tests adjusted together (Holm) needs it at Alpha/m:
// 90 for the bundled spec's 8.
func MinRepsCompare(alpha float64) int {
	for n := 1; n <= 1000; n++ {
		base, new := make([]float64, n), make([]float64, n)
		for i := range n {
			base[i], new[i] = float64(i+1), float64(n+i+1)
		}
		if p, _ := quantileTest(base, new, FastQuantile); p < alpha {
			return n
		}
	}
	return 1001
}

// quantileTest tests whether two samples share their q-quantile, the
// generalization of Mood's median test: the pooled values above the
// pooled sample's q-quantile are split between the samples, and under the
// null hypothesis new's share is hypergeometric (Fisher's exact test on
// that 2x2 table). two is the two-sided p-value (the probability of a
// split no likelier than the one seen), lower the one-sided one that new's
// quantile is the lower.
func quantileTest(base, new []float64, q float64) (two, lower float64) {
	pooled := slices.Concat(base, new)
	slices.Sort(pooled)
	n := len(pooled)
	at := min(n-1, max(0, int(math.Ceil(q*float64(n)))-1))
	cut := pooled[at]
	// Values tied at the cut (coarse timers) go above it when none is
	// strictly above (which would leave no test) or when that brings the
	// count nearer the n-1-at the quantile puts there.
	strict, tied := 0, 0
	for _, x := range pooled {
		if x > cut {
			strict++
		} else if x == cut {
			tied++
		}
	}
	want := n - 1 - at
	orEqual := strict == 0 || abs(strict+tied-want) < abs(strict-want)
	above := func(xs []float64) int {
		k := 0
		for _, x := range xs {
			if x > cut || orEqual && x == cut {
				k++
			}
		}
		return k
	}
	kNew := above(new)
	d := stats.HypergeometicDist{N: n, K: kNew + above(base), Draws: len(new)}
	lo, hi := d.Bounds()
	// Sums of the splits excluded: identical samples give exactly 1.
	seen := d.PMF(float64(kNew))
	var likelier, higher float64
	for k := lo; k <= hi; k++ {
		pk := d.PMF(k)
		if pk > seen*(1+1e-7) {
			likelier += pk
		}
		if k > float64(kNew) {
			higher += pk
		}
	}
	return max(0, 1-likelier), max(0, 1-higher)
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
	// Delta is the relative change of the p95 rate, (new - base) / base:
	// positive is faster.
	Delta *float64 `json:"delta"`
	// P is the two-sided p-value of the test that both runs share their
	// p95 (null when not comparable); the change is significant when P <
	// Alpha.
	P       *float64 `json:"p"`
	Alpha   float64  `json:"alpha"`
	Verdict string   `json:"verdict"`
	// Note explains a comparison that cannot be significant (too few
	// repetitions) or was not made.
	Note string `json:"note,omitempty"`
}

// Compare tests whether the new rates' p95 differs from the baseline's.
func Compare(base, new []float64) Comparison {
	c := Comparison{Base: Summarize(base), New: Summarize(new), Alpha: Alpha, Verdict: NotComparable}
	if c.Base == nil || c.New == nil {
		c.Note = "no samples in one of the runs"
		return c
	}
	d := c.New.Fast/c.Base.Fast - 1
	c.Delta = &d
	p, _ := quantileTest(base, new, FastQuantile)
	c.P = &p
	switch {
	case p >= Alpha:
		c.Verdict = NoChange
		if need := MinRepsCompare(Alpha); len(base) < need && len(new) < need {
			c.Note = "too few repetitions to ever be significant: need >= " + strconv.Itoa(need) + " per run"
		}
	case d < 0:
		c.Verdict = Slower
	default:
		c.Verdict = Faster
	}
	return c
}

// SlowdownExceeds tests whether the new rates' p95 is below the
// baseline's by more than limit (a fraction: 0.05 is 5 %): the one-sided
// test of new against base × (1 - limit). It reports the p-value; the
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
	_, p = quantileTest(scaled, new, FastQuantile)
	return p < Alpha, p, true
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

// RepsToDetect estimates how many repetitions per run the p95 test needs
// to find a change of the rates by the fraction change (0.05: 5 %) at level
// alpha with 80 % power, given the spread the two samples show: the
// normal-theory size for the standard error of log p95 each sample shows
// (logFastSD). 0 when a sample has fewer than 40
// repetitions.
func RepsToDetect(base, new []float64, change, alpha float64) int {
	sdB, sdN := logFastSD(base), logFastSD(new)
	if sdB == 0 || sdN == 0 || change <= 0 {
		return 0
	}
	sd := math.Sqrt((sq(sdB) + sq(sdN)) / 2)
	norm := stats.NormalDist{Mu: 0, Sigma: 1}
	z := norm.InvCDF(1-alpha/2) + norm.InvCDF(0.8)
	n := 2 * sq(z*sd/math.Log1p(change))
	return max(int(math.Ceil(n)), MinRepsCompare(alpha))
}

func sq(x float64) float64 { return x * x }

func abs(x int) int { return max(x, -x) }

// logFastSD is the standard deviation of log p95 for one repetition,
// sqrt(q(1-q)) / f(p95) with the density f of the log rates at p95 from
// the spacing of the quantiles 2.5 points either side (a sparsity
// estimate: no distribution assumed; Maritz-Jarrett's error runs low this
// far in the tail, docs/design-notes.md). 0 below 40 rates or when they are
// all equal.
func logFastSD(rates []float64) float64 {
	const q, h = FastQuantile, 0.025
	if len(rates) < 40 {
		return 0
	}
	s := sorted(rates)
	lo, hi := s.Quantile(q-h), s.Quantile(q+h)
	if lo <= 0 || hi <= lo {
		return 0
	}
	return math.Sqrt(q*(1-q)) * (math.Log(hi) - math.Log(lo)) / (2 * h)
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
