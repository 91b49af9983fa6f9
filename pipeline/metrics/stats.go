package metrics

import "math"

// MeanAndUncertainty returns the mean of n values from their sum and sum of
// squares, and the standard error of that mean (llama-perplexity's
// mean_and_uncertainty): the error is 0 unless the variance is positive and
// n > 10. n == 0 gives (0, 0).
func MeanAndUncertainty(sum, sum2 float64, n int) (mean, stderr float64) {
	if n < 1 {
		return 0, 0
	}
	mean = sum / float64(n)
	d := sum2/float64(n) - float64(mean*mean)
	if d > 0 && n > 10 {
		stderr = math.Sqrt(d / float64(n-1))
	}
	return mean, stderr
}

// Covariance is the covariance of the two means, from Σa, Σb and Σab over n
// pairs (llama-perplexity's covariance): 0 if n < 10.
func Covariance(sumA, sumB, sumAB float64, n int) float64 {
	if n < 10 {
		return 0
	}
	v := sumAB/float64(n) - float64((sumA/float64(n))*(sumB/float64(n)))
	return v / float64(n-1)
}

// Percentile interpolates linearly in sorted (ascending) values at fraction
// f, in float32 as llama-perplexity does: f ≤ 0 gives the first value, f ≥ 1
// the last. An empty slice gives 0.
func Percentile(sorted []float32, f float32) float32 {
	n := len(sorted)
	if n == 0 {
		return 0
	}
	if f <= 0 {
		return sorted[0]
	}
	if f >= 1 {
		return sorted[n-1]
	}
	p := f * float32(n-1)
	ip := int(p)
	r := p - float32(ip)
	hi := min(ip+1, n-1)
	lo := float32((1 - r) * sorted[ip])
	return lo + float32(r*sorted[hi])
}

// Median of sorted (ascending) values, in float32 as llama-perplexity: the
// mean of the two middle values for an even count. Empty gives 0.
func Median(sorted []float32) float32 {
	n := len(sorted)
	switch {
	case n == 0:
		return 0
	case n%2 == 0:
		return 0.5 * (sorted[n/2] + sorted[n/2-1])
	default:
		return sorted[n/2]
	}
}

// expf is C's expf: float32 in and out. float32(math.Exp) is correctly
// rounded; see the package comment.
func expf(x float32) float32 {
	return float32(math.Exp(float64(x)))
}
