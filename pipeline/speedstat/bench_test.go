package speedstat

import (
	"strconv"
	"testing"
)

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
