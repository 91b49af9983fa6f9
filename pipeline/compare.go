package pipeline

import (
	"math"

	"github.com/evalrun/evalrun/pipeline/metrics"
)

// comparison accumulates one backend's agreement with the reference over a
// run: llama-perplexity's KL-divergence statistics over positions that have a
// next token, test-backend-ops style logit errors over every compared row,
// and greedy-generation agreement.
type comparison struct {
	kld   metrics.KLD
	logit metrics.LogitStats

	// Non-finite candidate values when the reference is a kld_base file
	// (with a live reference LogitStats counts them).
	nan, inf int64

	planned  int // rows the run meant to compare
	compared int // rows compared

	genPrompts  int
	genMatches  int
	firstDivSum float64
}

func newComparison() *comparison { return &comparison{} }

// addLive compares a candidate row with a live reference row. tok is the
// token that follows this position (the scoring target), or -1 if none.
func (c *comparison) addLive(cand, ref []float32, tok int32) {
	c.compared++
	_ = c.logit.Add(cand, ref) // rows have the vocabulary's length: checked by the caller
	if tok >= 0 {
		_ = c.kld.AddLogits(cand, ref, tok)
	}
}

// addBase compares a candidate row with decoded base log-probabilities from a
// llama-perplexity --kl-divergence-base file.
func (c *comparison) addBase(cand, baseLogProbs []float32, tok int32) {
	c.compared++
	for _, v := range cand {
		switch {
		case math.IsNaN(float64(v)):
			c.nan++
		case math.IsInf(float64(v), 0):
			c.inf++
		}
	}
	_ = c.kld.Add(cand, baseLogProbs, tok)
}

// addGreedy records one free-running greedy generation against the reference's.
func (c *comparison) addGreedy(cand, ref []int32) {
	c.genPrompts++
	div := len(ref)
	for i := range ref {
		if i >= len(cand) || cand[i] != ref[i] {
			div = i
			break
		}
	}
	if div == len(ref) && len(cand) == len(ref) {
		c.genMatches++
	}
	c.firstDivSum += float64(div)
}

func f64(v float64) *float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil
	}
	return &v
}

// accuracy turns the accumulators into the summary's accuracy block.
func (c *comparison) accuracy(liveRef bool) *Accuracy {
	a := &Accuracy{Tokens: c.compared, Complete: c.compared == c.planned}
	ls := c.logit.Result()
	a.NaNCount, a.InfCount = int64(ls.CandNaN)+c.nan, int64(ls.CandInf)+c.inf
	if liveRef && ls.ComparedRows > 0 {
		a.NMSE = f64(ls.NMSE)
		a.CosineMin = f64(ls.CosMin)
		a.CosineMean = f64(ls.CosMean)
		a.MaxAbsDiff = f64(ls.MaxAbsDiff)
		a.Top5Overlap = f64(ls.Top5Overlap)
	}
	a.ScoredTokens = c.kld.N()
	if a.ScoredTokens > 0 {
		r := c.kld.Result()
		a.KLDMean, a.KLDMeanErr = f64(r.KLD.Value), f64(r.KLD.Err)
		a.KLDMax = f64(r.KLDQuantiles[0])
		a.KLDP999 = f64(r.KLDQuantiles[1])
		a.KLDP99 = f64(r.KLDQuantiles[2])
		a.KLDMedian = f64(r.KLDQuantiles[5])
		a.SameTopP, a.SameTopPErr = f64(r.SameTop.Value), f64(r.SameTop.Err)
		a.RMSDp, a.RMSDpErr = f64(r.RMSPDiff.Value), f64(r.RMSPDiff.Err)
		a.PPL, a.PPLErr = f64(r.PPLQ.Value), f64(r.PPLQ.Err)
		a.PPLBase, a.PPLBaseErr = f64(r.PPLBase.Value), f64(r.PPLBase.Err)
		a.PPLRatio, a.PPLRatioErr = f64(r.PPLRatio.Value), f64(r.PPLRatio.Err)
		a.LnPPLRatio, a.LnPPLRatioErr = f64(r.LnPPLRatio.Value), f64(r.LnPPLRatio.Err)
		a.DeltaPPL, a.DeltaPPLErr = f64(r.PPLDiff.Value), f64(r.PPLDiff.Err)
		if r.N >= metrics.MinStatsTokens {
			a.LlamaPerplexity = metrics.FormatLlamaPerplexity(r)
		}
	}
	if c.genPrompts > 0 {
		a.GeneratePrompts = c.genPrompts
		a.GreedyMatch = f64(float64(c.genMatches) / float64(c.genPrompts))
		a.FirstDivergenceMean = f64(c.firstDivSum / float64(c.genPrompts))
	}
	return a
}
