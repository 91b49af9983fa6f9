package metrics

import (
	"math"
	"strconv"
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

func TestBenchStatsLlamaBenchSample(t *testing.T) {
	// llama-bench README JSON sample: pp512 with 5 repetitions.
	avgNS, stdNS, avgTS, stdTS := BenchStats([]int64{74601900, 71632900, 71745200, 71952700, 70745500}, 512)
	if avgNS != 72135640 || stdNS != 1453752 {
		t.Errorf("avg_ns %d stddev_ns %d, want 72135640 1453752", avgNS, stdNS)
	}
	if got := []string{fmt6(avgTS), fmt6(stdTS)}; got[0] != "7100.002165" || got[1] != "140.341520" {
		t.Errorf("avg_ts %s stddev_ts %s, want 7100.002165 140.341520", got[0], got[1])
	}
	// The mean of rates is not the rate of the mean time.
	if fmt6(512e9/float64(avgNS)) == fmt6(avgTS) {
		t.Error("avg_ts equals n/avg_ns")
	}
	if a, s, ts, sts := BenchStats([]int64{1000}, 1); a != 1000 || s != 0 || ts != 1e6 || sts != 0 {
		t.Errorf("one repetition: %d %d %v %v, want 1000 0 1e6 0", a, s, ts, sts)
	}
	if a, s, ts, sts := BenchStats(nil, 1); a != 0 || s != 0 || ts != 0 || sts != 0 {
		t.Error("no samples: not all zero")
	}
	// Integer arithmetic truncates: {1, 2} → avg 1, Σt²/(n−1) − avg²·n/(n−1) = 5 − 2 = 3, sqrt → 1.
	if a, s, _, _ := BenchStats([]int64{1, 2}, 1); a != 1 || s != 1 {
		t.Errorf("{1,2}: avg_ns %d stddev_ns %d, want 1 1", a, s)
	}
}

// fmt6 is std::to_string's "%f", as llama-bench prints floats.
func fmt6(v float64) string { return strconv.FormatFloat(v, 'f', 6, 64) }
