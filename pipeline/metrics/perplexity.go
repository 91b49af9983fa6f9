package metrics

import (
	"fmt"
	"math"
)

// Perplexity accumulates plain llama-perplexity (§1.1): the negative
// log-likelihood of each scored token, summed in float64. The zero value is
// ready to use.
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
