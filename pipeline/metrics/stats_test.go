package metrics

import (
	"math"
	"testing"
)

func near(a, b, tol float64) bool { return math.Abs(a-b) <= tol }

func TestMeanAndUncertainty(t *testing.T) {
	// 1..11: mean 6, population variance 10, σ_mean = sqrt(10/10) = 1.
	var s, s2 float64
	for i := 1; i <= 11; i++ {
		s += float64(i)
		s2 += float64(i * i)
	}
	if m, e := MeanAndUncertainty(s, s2, 11); m != 6 || !near(e, 1, 1e-12) {
		t.Errorf("1..11: %v ± %v, want 6 ± 1", m, e)
	}
	// n ≤ 10: no uncertainty (llama.cpp's rule), but the mean.
	if m, e := MeanAndUncertainty(55, 385, 10); m != 5.5 || e != 0 {
		t.Errorf("1..10: %v ± %v, want 5.5 ± 0", m, e)
	}
	if m, e := MeanAndUncertainty(0, 0, 0); m != 0 || e != 0 {
		t.Errorf("empty: %v ± %v", m, e)
	}
}

func TestCovariance(t *testing.T) {
	// a = 1..10, b = 2a: cov of the means = Var(a)·2/(n−1) = 8.25·2/9.
	var sa, sb, sab float64
	for i := 1; i <= 10; i++ {
		sa += float64(i)
		sb += 2 * float64(i)
		sab += 2 * float64(i*i)
	}
	if c := Covariance(sa, sb, sab, 10); !near(c, 8.25*2/9, 1e-12) {
		t.Errorf("covariance %v, want %v", c, 8.25*2/9)
	}
	if c := Covariance(sa, sb, sab, 9); c != 0 {
		t.Errorf("n = 9: covariance %v, want 0", c)
	}
}

func TestPercentileAndMedian(t *testing.T) {
	v := []float32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}
	for _, c := range []struct{ f, want float32 }{
		{0, 1}, {-1, 1}, {1, 11}, {2, 11},
		{0.5, 6},       // p = 5
		{0.25, 3.5},    // p = 2.5
		{0.999, 10.99}, // p = 9.99
		{0.001, 1.01},
	} {
		if got := Percentile(v, c.f); !near(float64(got), float64(c.want), 1e-5) {
			t.Errorf("Percentile(1..11, %v) = %v, want %v", c.f, got, c.want)
		}
	}
	if Median(v) != 6 || Median(v[:10]) != 5.5 || Median(nil) != 0 || Percentile(nil, 0.5) != 0 {
		t.Errorf("median: %v, %v", Median(v), Median(v[:10]))
	}
}
