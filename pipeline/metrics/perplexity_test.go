package metrics

import (
	"fmt"
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

// Perplexity accumulates plain llama-perplexity (llamacpp-reference.md §1.1): the negative
// log-likelihood of each scored token, summed in float64. It lives with the
// tests, which check it (and so the shared NLL arithmetic) against
// llama.cpp's printed figures; the host reports perplexity from the KL
// statistics.
type Perplexity struct {
	sum, sum2 float64
	n         int
}

// Add scores token tok against one logit row exactly as llama-perplexity:
// nll = −(l_tok − m − log Σ expf(l_i − m)), with m the maximum, the
// difference l_tok − m in float, the sum and the log in double.
func (p *Perplexity) Add(logits []float32, tok int32) error {
	if tok < 0 || int(tok) >= len(logits) {
		return fmt.Errorf("metrics: token %d outside the vocabulary of %d", tok, len(logits))
	}
	m := logits[0]
	for _, l := range logits[1:] {
		m = max(m, l)
	}
	var sum float64
	for _, l := range logits {
		sum += float64(expf(l - m))
	}
	p.AddNLL(-(float64(logits[tok]-m) - math.Log(sum)))
	return nil
}

// AddNLL adds one token's negative log-likelihood computed elsewhere (a
// base-file writer computes it in float, as llama.cpp does in that mode).
func (p *Perplexity) AddNLL(nll float64) {
	p.sum += nll
	p.sum2 += float64(nll * nll)
	p.n++
}

// N is the number of tokens scored.
func (p *Perplexity) N() int { return p.n }

// PPL is exp of the mean NLL so far, llama.cpp's running "[chunk]ppl," value.
func (p *Perplexity) PPL() float64 { return math.Exp(p.sum / float64(p.n)) }

// Final returns llama-perplexity's "Final estimate": PPL = exp(mean NLL)
// and its uncertainty PPL·sqrt(var/(N−1)) with var = mean(NLL²) − mean².
// Like llama.cpp it fails when var is not positive (fewer than two tokens,
// or all NLLs equal).
func (p *Perplexity) Final() (ppl, uncertainty float64, err error) {
	n := float64(p.n)
	mean := p.sum / n
	variance := p.sum2/n - float64(mean*mean)
	ppl = math.Exp(mean)
	if !(variance > 0) || p.n < 2 {
		return ppl, 0, fmt.Errorf("metrics: perplexity over %d tokens has no positive variance of log(prob)", p.n)
	}
	return ppl, math.Sqrt(variance/(n-1)) * ppl, nil
}

// FormatFinalEstimate prints llama-perplexity's final line (without the
// newline): "Final estimate: PPL = %.4lf +/- %.5lf".
func FormatFinalEstimate(ppl, uncertainty float64) string {
	return fmt.Sprintf("Final estimate: PPL = %.4f +/- %.5f", cf(ppl), cf(uncertainty))
}

// FormatChunkPPL prints llama-perplexity's running value after a chunk:
// "[%d]%.4lf," (1-based chunk number).
func FormatChunkPPL(chunk int, ppl float64) string {
	return fmt.Sprintf("[%d]%.4f,", chunk, cf(ppl))
}
