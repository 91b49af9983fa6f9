package sampling

import "testing"

func TestGreedyFirstIndexWinsTies(t *testing.T) {
	if got := Greedy([]float32{1, 3, 3, 2}); got != 1 {
		t.Fatalf("Greedy = %d, want 1 (first of the tied maxima)", got)
	}
	nan := float32(0)
	nan = nan / nan
	if got := Greedy([]float32{nan, -1, nan}); got != 1 {
		t.Fatalf("Greedy with NaN = %d, want 1", got)
	}
}

func TestSampleSeededAndRestricted(t *testing.T) {
	logits := []float32{5, 4.9, 4.8, -10, -10, -10}
	p := Params{Temperature: 1, TopK: 3, TopP: 1, Seed: 42}
	a, b := New(p), New(p)
	counts := map[int32]int{}
	for i := 0; i < 300; i++ {
		x, y := a.Sample(logits), b.Sample(logits)
		if x != y {
			t.Fatalf("same seed gave %d and %d at draw %d", x, y, i)
		}
		counts[x]++
	}
	for id := range counts {
		if id > 2 {
			t.Fatalf("top-k 3 sampled token %d", id)
		}
	}
	if len(counts) < 2 {
		t.Fatalf("temperature 1 over near-equal logits always picked one token: %v", counts)
	}
}

func TestRepeatPenaltyChangesGreedyChoice(t *testing.T) {
	s := New(Params{Temperature: 0, RepeatPenalty: 2, RepeatLastN: 8})
	logits := []float32{1, 3, 2}
	if got := s.Sample(logits); got != 1 {
		t.Fatalf("before penalty got %d, want 1", got)
	}
	s.Accept(1)
	if got := s.Sample(logits); got != 2 {
		t.Fatalf("after penalising token 1 (3/2=1.5 < 2) got %d, want 2", got)
	}
}

func TestMinPKeepsOnlyLikelyTokens(t *testing.T) {
	s := New(Params{Temperature: 1, MinP: 0.5, TopP: 1, Seed: 7})
	logits := []float32{10, 0, 0, 0}
	for i := 0; i < 100; i++ {
		if got := s.Sample(logits); got != 0 {
			t.Fatalf("min-p 0.5 sampled unlikely token %d", got)
		}
	}
}
