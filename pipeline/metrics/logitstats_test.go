package metrics

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

func TestLogitStatsHandComputed(t *testing.T) {
	var s LogitStats
	// Row 1: a = (1, 2, 3), b = (1, 2, 4): Σ(a−b)² = 1, Σa² = 14.
	// cos = 17/sqrt(14·21); max |Δ| = 1; top-3 sets equal; argmax 2 = 2.
	if err := s.Add([]float32{1, 2, 3}, []float32{1, 2, 4}); err != nil {
		t.Fatal(err)
	}
	// Row 2: a = (3, 2, 1), b = (1, 2, 3): Σ(a−b)² = 8, Σa² = 14;
	// cos = 10/14; max |Δ| = 2; argmax 0 ≠ 2.
	if err := s.Add([]float32{3, 2, 1}, []float32{1, 2, 3}); err != nil {
		t.Fatal(err)
	}
	r := s.Result()
	cos1, cos2 := 17/math.Sqrt(14*21), 10.0/14
	if r.Rows != 2 || r.ComparedRows != 2 || r.SkippedRows != 0 {
		t.Errorf("rows %d compared %d skipped %d", r.Rows, r.ComparedRows, r.SkippedRows)
	}
	if !near(r.NMSE, 9.0/28, 1e-15) {
		t.Errorf("NMSE %v, want 9/28", r.NMSE)
	}
	if !near(r.CosMin, cos2, 1e-15) || !near(r.CosMean, (cos1+cos2)/2, 1e-15) {
		t.Errorf("cos min %v mean %v, want %v %v", r.CosMin, r.CosMean, cos2, (cos1+cos2)/2)
	}
	if r.MaxAbsDiff != 2 || r.Top1Agree != 0.5 || r.Top5Overlap != 1 {
		t.Errorf("max |Δ| %v top-1 %v top-5 %v, want 2 0.5 1", r.MaxAbsDiff, r.Top1Agree, r.Top5Overlap)
	}
}

func TestLogitStatsTop5(t *testing.T) {
	var s LogitStats
	a := []float32{9, 8, 7, 6, 5, 4, 3, 2, 1, 0}
	b := []float32{9, 8, 7, 0, 1, 2, 3, 4, 5, 6} // top5: 0 1 2 9 8 → 3 shared
	s.Add(a, b)
	if r := s.Result(); r.Top5Overlap != 0.6 || r.Top1Agree != 1 {
		t.Errorf("top-5 overlap %v top-1 %v, want 0.6 1", r.Top5Overlap, r.Top1Agree)
	}
	// Ties go to the lower index, so the argmax is llama.cpp's (first index).
	if got := topK([]float32{1, 5, 5, 2, 5, 0}, 3, nil); !slices.Equal(got, []int{1, 2, 4}) {
		t.Errorf("topK with ties: %v, want [1 2 4]", got)
	}
	if got := topK([]float32{1, 3, 2}, 5, nil); !slices.Equal(got, []int{1, 2, 0}) {
		t.Errorf("topK of a 3-entry row: %v, want [1 2 0]", got)
	}
}

// A NaN or Inf row is counted and skipped; the other rows' statistics stay
// finite and unchanged.
func TestLogitStatsNonFinite(t *testing.T) {
	var clean, mixed LogitStats
	good := [][2][]float32{
		{{1, 2, 3}, {1, 2, 4}},
		{{0.5, -1, 2}, {0.4, -1, 2.5}},
	}
	for _, g := range good {
		clean.Add(g[0], g[1])
		mixed.Add(g[0], g[1])
	}
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	mixed.Add([]float32{nan, 1, nan}, []float32{1, 2, 3})
	mixed.Add([]float32{1, 2, 3}, []float32{-inf, 2, 3})
	mixed.Add([]float32{inf, 2, nan}, []float32{1, 2, 3})
	c, m := clean.Result(), mixed.Result()
	if m.Rows != 5 || m.SkippedRows != 3 || m.ComparedRows != 2 {
		t.Errorf("rows %d skipped %d compared %d, want 5 3 2", m.Rows, m.SkippedRows, m.ComparedRows)
	}
	if m.CandNaN != 3 || m.CandInf != 1 || m.RefNaN != 0 || m.RefInf != 1 {
		t.Errorf("NaN/Inf counts cand %d/%d ref %d/%d, want 3/1 0/1", m.CandNaN, m.CandInf, m.RefNaN, m.RefInf)
	}
	if m.NMSE != c.NMSE || m.CosMin != c.CosMin || m.CosMean != c.CosMean || m.MaxAbsDiff != c.MaxAbsDiff ||
		m.Top5Overlap != c.Top5Overlap || m.Top1Agree != c.Top1Agree {
		t.Errorf("non-finite rows changed the statistics:\n%+v\n%+v", m, c)
	}
	if math.IsNaN(m.NMSE) || m.NMSE == 0 {
		t.Errorf("NMSE %v", m.NMSE)
	}
}

func TestLogitStatsEdgeRows(t *testing.T) {
	var s LogitStats
	if err := s.Add([]float32{1, 2}, []float32{1}); err == nil {
		t.Error("rows of different lengths accepted")
	}
	if err := s.Add(nil, nil); err == nil {
		t.Error("empty rows accepted")
	}
	s.Add([]float32{0, 0}, []float32{0, 0})
	s.Add([]float32{0, 0}, []float32{1, 0})
	r := s.Result()
	if r.Rows != 2 || r.CosMin != 0 || r.CosMean != 0.5 {
		t.Errorf("zero rows: rows %d cos min %v mean %v, want 2 0 0.5", r.Rows, r.CosMin, r.CosMean)
	}
	// Σa² = 0: NMSE is x/0 as in test-backend-ops.
	if !math.IsInf(r.NMSE, 1) {
		t.Errorf("NMSE with an all-zero candidate %v, want +Inf", r.NMSE)
	}
	var empty LogitStats
	if r := empty.Result(); r.Rows != 0 || !math.IsNaN(r.NMSE) {
		t.Errorf("no rows: %+v", r)
	}
}

// TestRowsFoldIntoSeveralAccumulators: a row computed once and added to a
// run's and a prompt's accumulator gives each the bits it gets alone.
func TestRowsFoldIntoSeveralAccumulators(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var alone, run, prompt LogitStats
	var kAlone, kRun, kPrompt KLD
	var ref RefRow
	for range 50 {
		a, b := make([]float32, 300), make([]float32, 300)
		for i := range a {
			b[i] = float32(rng.NormFloat64() * 4)
			a[i] = b[i] + float32(rng.NormFloat64()*0.1)
		}
		tok := int32(rng.IntN(300))
		if err := alone.Add(a, b); err != nil {
			t.Fatal(err)
		}
		if err := kAlone.AddLogits(a, b, tok); err != nil {
			t.Fatal(err)
		}
		ref.Set(b)
		if err := AddLogitRow(a, &ref, &run, &prompt); err != nil {
			t.Fatal(err)
		}
		row, err := LiveKLDRow(a, &ref, tok)
		if err != nil {
			t.Fatal(err)
		}
		kRun.AddRow(row)
		kPrompt.AddRow(row)
	}
	if alone.Result() != run.Result() || run.Result() != prompt.Result() {
		t.Errorf("logit stats differ:\n%+v\n%+v\n%+v", alone.Result(), run.Result(), prompt.Result())
	}
	ra, rr, rp := kAlone.Result(), kRun.Result(), kPrompt.Result()
	if ra != rr || rr != rp {
		t.Errorf("KLD results differ:\n%+v\n%+v\n%+v", ra, rr, rp)
	}
}
