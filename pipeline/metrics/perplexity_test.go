package metrics

import (
	"math"
	"testing"
)

// Rows with p = (¼, ¾): NLL ln 4 for token 0, ln(4/3) for token 1.
// Two tokens: mean m = ln(4/√3), var = (ln 3 / 2)², σ = sqrt(var/1),
// PPL = 4/√3 ± PPL·ln3/2.
func TestPerplexityHandComputed(t *testing.T) {
	var p Perplexity
	row := []float32{0, float32(math.Log(3))}
	if err := p.Add(row, 0); err != nil {
		t.Fatal(err)
	}
	if err := p.Add(row, 1); err != nil {
		t.Fatal(err)
	}
	ppl, unc, err := p.Final()
	if err != nil {
		t.Fatal(err)
	}
	want := 4 / math.Sqrt(3)
	if !near(ppl, want, 1e-6) || !near(unc, want*math.Log(3)/2, 1e-6) || p.N() != 2 {
		t.Errorf("PPL %v ± %v over %d, want %v ± %v over 2", ppl, unc, p.N(), want, want*math.Log(3)/2)
	}
	if !near(p.PPL(), want, 1e-6) {
		t.Errorf("running PPL %v, want %v", p.PPL(), want)
	}
	if got := FormatFinalEstimate(ppl, unc); got != "Final estimate: PPL = 2.3094 +/- 1.26857" {
		t.Errorf("final line %q", got)
	}
	// Uniform rows: every NLL is ln 4, the variance is 0; llama.cpp
	// reports an error instead of an estimate.
	var flat Perplexity
	for range 3 {
		flat.Add([]float32{1, 1, 1, 1}, 2)
	}
	if ppl, _, err := flat.Final(); err == nil || !near(ppl, 4, 1e-6) {
		t.Errorf("flat rows: PPL %v, err %v; want 4 and an error", ppl, err)
	}
	if err := flat.Add([]float32{1, 2}, 2); err == nil {
		t.Error("token 2 of 2 accepted")
	}
}

// The NLL is llama.cpp's: l_tok − m in float, the sum of expf in double,
// so shifting every logit by a constant changes nothing.
func TestPerplexityShiftInvariant(t *testing.T) {
	var a, b Perplexity
	row := []float32{0.5, -2, 3, 1.25}
	shifted := make([]float32, len(row))
	for i, v := range row {
		shifted[i] = v + 1024 // exact in float32
	}
	for tok := range int32(4) {
		a.Add(row, tok)
		b.Add(shifted, tok)
	}
	if a.PPL() != b.PPL() {
		t.Errorf("PPL %v vs %v after shifting the logits", a.PPL(), b.PPL())
	}
}
