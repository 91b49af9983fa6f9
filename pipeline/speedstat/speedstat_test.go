package speedstat

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

func TestRatesAndSummary(t *testing.T) {
	// 64 tokens in 8, 16, ..., 80 ms (one repetition ruined by another
	// process: 800 ms); a zero duration is dropped.
	ns := []int64{8e6, 16e6, 24e6, 32e6, 40e6, 48e6, 56e6, 64e6, 72e6, 800e6, 0}
	r := Rates(ns, 64)
	if len(r) != 10 || r[0] != 80 || r[9] != 8000 {
		t.Fatalf("rates %v", r)
	}
	s := Summarize(r)
	// Median of 10 rates: between the 5th and 6th (64/0.048 = 1333.3, 64/0.04 = 1600).
	if s.N != 10 || math.Abs(s.Median-(64/0.048+64/0.04)/2) > 1e-9 || s.Lo == nil || s.Hi == nil || *s.Lo > 64/0.048 || *s.Hi < 1600 || s.Confidence < Confidence {
		t.Fatalf("summary %+v lo %v hi %v", s, s.Lo, s.Hi)
	}
	// p95 of 10: the fastest (64/0.008 = 8000), with no 95 % interval.
	if s.Fast != 8000 || s.FastLo != nil || s.FastHi != nil {
		t.Fatalf("p95 of 10: %v, interval %v..%v", s.Fast, s.FastLo, s.FastHi)
	}
	if small := Summarize(r[:5]); small.Lo != nil || small.Hi != nil {
		t.Fatalf("5 samples have no 95%% interval of the median, got %v..%v", *small.Lo, *small.Hi)
	}
	if Summarize(nil) != nil {
		t.Fatal("no samples, a summary")
	}
	big := Summarize(spread(1000, 100))
	if big.FastLo == nil || !(*big.FastLo <= big.Fast && big.Fast <= *big.FastHi) || math.Abs(big.Fast/1000-1.009) > 0.001 {
		t.Fatalf("p95 of 100 rates spread ±1 %% around 1000: %v [%v, %v]", big.Fast, big.FastLo, big.FastHi)
	}
}

func TestMinReps(t *testing.T) {
	if MinRepsCI() != 6 || MinRepsFastCI() != 76 || MinRepsCompare(Alpha) != 60 || MinRepsCompare(Alpha/8) != 90 {
		t.Fatalf("min reps: CI %d, p95 CI %d, compare %d and %d for 8 tests; want 6, 76, 60 and 90", MinRepsCI(), MinRepsFastCI(), MinRepsCompare(Alpha), MinRepsCompare(Alpha/8))
	}
	if n := MinRepsFastCI(); Summarize(spread(1000, n-1)).FastLo != nil || Summarize(spread(1000, n)).FastLo == nil {
		t.Fatalf("the p95's interval does not start at %d repetitions", n)
	}
}

// The p95 test against Fisher's exact test by hand: 80 + 80 values, the
// pooled p95 cut leaves 8 above it; all 8 in one sample has probability
// C(80,8)/C(160,8) on either side.
func TestQuantileTest(t *testing.T) {
	base, new := spread(1000, 80), spread(1000, 80)
	for i := range new {
		new[i] *= 1.5
	}
	two, lower := quantileTest(base, new, FastQuantile)
	one := math.Exp(lchoose(80, 8) - lchoose(160, 8))
	if math.Abs(two-2*one) > 1e-12 || math.Abs(lower-1) > 1e-12 {
		t.Fatalf("separated: two-sided %v want %v, lower %v want 1", two, 2*one, lower)
	}
	if _, lower := quantileTest(new, base, FastQuantile); math.Abs(lower-one) > 1e-12 {
		t.Fatalf("new below: one-sided %v want %v", lower, one)
	}
	// A coarse timer: every repetition of a run the same. Nothing is
	// strictly above the pooled p95, so the ties count as above it.
	same := func(v float64) []float64 { return slices.Repeat([]float64{v}, 80) }
	if two, _ := quantileTest(same(1000), same(2000), FastQuantile); two > 1e-6 {
		t.Fatalf("tied runs, twice as fast: p %v", two)
	}
	if _, lower := quantileTest(same(1000), same(1000), FastQuantile); lower != 1 {
		t.Fatalf("identical tied runs: one-sided p %v", lower)
	}
	if Rates([]int64{1e6}, 0) != nil {
		t.Fatal("a test of no tokens has rates")
	}
	// Interleaved: the 8 split 4/4, the likeliest table: p = 1.
	if two, _ := quantileTest(spread(1000, 80), spread(1000.1, 80), FastQuantile); two < 0.99 {
		t.Fatalf("interleaved: %v", two)
	}
}

func lchoose(n, k float64) float64 {
	a, _ := math.Lgamma(n + 1)
	b, _ := math.Lgamma(k + 1)
	c, _ := math.Lgamma(n - k + 1)
	return a - b - c
}

func spread(center float64, n int) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = center * (1 + 0.02*float64(i-n/2)/float64(n)) // ±1 %
	}
	return out
}

func TestCompare(t *testing.T) {
	base := spread(1000, 80)
	if c := Compare(base, spread(900, 80)); c.Verdict != Slower || *c.P >= Alpha || math.Abs(*c.Delta+0.1) > 1e-9 {
		t.Fatalf("10%% slower: %+v", c)
	}
	if c := Compare(base, spread(1100, 80)); c.Verdict != Faster || *c.Delta <= 0 {
		t.Fatalf("10%% faster: %+v", c)
	}
	// Interleaved values: no change.
	if c := Compare(base, spread(1000.5, 80)); c.Verdict != NoChange || *c.P < Alpha || c.Note != "" {
		t.Fatalf("same: %+v", c)
	}
	// The slow repetitions' share is the machine's: more of them, the same
	// fast mode, no change (the median moves by a third).
	busy := spread(1000, 80)
	for i := range 40 {
		busy[i] *= 0.6
	}
	if c := Compare(base, busy); c.Verdict != NoChange || *c.Delta != 0 { // the p95 did not move
		t.Fatalf("half the repetitions slowed by another process: %+v", c)
	}
	// Fifty repetitions can never be significant, however far apart: say so.
	c := Compare(spread(1000, 50), spread(500, 50))
	if c.Verdict != NoChange || !strings.Contains(c.Note, ">= 60") {
		t.Fatalf("50 reps: %+v", c)
	}
	if c := Compare(nil, base); c.Verdict != NotComparable || c.P != nil {
		t.Fatalf("no base samples: %+v", c)
	}
}

func TestSlowdownExceeds(t *testing.T) {
	base := spread(1000, 80)
	for _, tc := range []struct {
		new   []float64
		limit float64
		want  bool
	}{
		{spread(900, 80), 0.05, true},   // 10 % slower, limit 5 %
		{spread(970, 80), 0.05, false},  // 3 % slower: within the limit
		{spread(900, 80), 0.15, false},  // within a 15 % limit
		{spread(1000, 80), 0.00, false}, // the same
		{spread(1100, 80), 0.05, false}, // faster
		{spread(900, 20), 0.05, false},  // 20+80 cannot establish it
	} {
		got, p, ok := SlowdownExceeds(base, tc.new, tc.limit)
		if !ok || got != tc.want {
			t.Errorf("center %v n %d limit %v: exceeds %v (p %.3g), want %v", tc.new[len(tc.new)/2], len(tc.new), tc.limit, got, p, tc.want)
		}
	}
	if _, _, ok := SlowdownExceeds(nil, base, 0.05); ok {
		t.Fatal("no baseline samples: ok")
	}
}

// Holm's step-down adjustment, against R's p.adjust(p, "holm").
func TestHolm(t *testing.T) {
	got := Holm([]float64{0.01, 0.04, 0.03, 0.005})
	want := []float64{0.03, 0.06, 0.06, 0.02}
	for i := range want {
		if math.Abs(got[i]-want[i]) > 1e-12 {
			t.Fatalf("Holm %v, want %v", got, want)
		}
	}
	if got := Holm([]float64{0.3, 0.9}); got[0] != 0.6 || got[1] != 0.9 {
		t.Fatalf("Holm capped and monotone: %v", got)
	}
	if len(Holm(nil)) != 0 {
		t.Fatal("no p-values")
	}
}

// lognormal draws n rates around center with log-sd sigma, deterministic.
func lognormal(r *rand.Rand, center, sigma float64, n int) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = center * math.Exp(sigma*r.NormFloat64())
	}
	return out
}

// RepsToDetect's estimate is what a user relies on to size a bench: at
// the repetitions it names, a change of that size is found most of the
// time (80 % power by design); at a quarter of them, rarely.
func TestRepsToDetectFindsTheChange(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	const sigma, change = 0.1, 0.05
	n := RepsToDetect(lognormal(r, 1000, sigma, 1000), lognormal(r, 1000, sigma, 1000), change, Alpha)
	// Normal theory: the sd of log p95 is sqrt(0.95·0.05)/φ(1.645) sigma =
	// 2.11 sigma, so 2 (1.96 + 0.84)^2 (2.11 sigma)^2 / log(1.05)^2 ≈ 293.
	if n < 200 || n > 400 {
		t.Fatalf("reps for 5%% at sigma 0.1: %d", n)
	}
	found := func(reps int) int {
		hits := 0
		for range 200 {
			if c := Compare(lognormal(r, 1000, sigma, reps), lognormal(r, 1000*(1-change), sigma, reps)); c.Verdict == Slower {
				hits++
			}
		}
		return hits
	}
	if hits := found(n); hits < 140 {
		t.Errorf("at %d reps a 5%% slowdown was found %d times of 200, want >= 140", n, hits)
	}
	if hits := found(n / 4); hits > 100 {
		t.Errorf("at %d reps a 5%% slowdown was found %d times of 200, want few", n/4, hits)
	}
	if wide := RepsToDetect(lognormal(r, 1000, 2*sigma, 1000), lognormal(r, 1000, 2*sigma, 1000), change, Alpha); wide < 5*n/2 {
		t.Errorf("twice the spread: %d reps, want about 4x %d", wide, n)
	}
	if RepsToDetect(nil, []float64{1}, change, Alpha) != 0 {
		t.Error("no samples: 0")
	}
}
