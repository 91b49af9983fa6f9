// Package verdict decides a run: each candidate's agreement with the
// reference, accumulated unit by unit (Comparison: the same sums in the
// same order whether a run is whole, resumed or merged from shards), its
// gates checked, and the run's verdict (Builder).
package verdict

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"

	"github.com/evalrun/evalrun/pipeline/metrics"
	"github.com/evalrun/evalrun/pipeline/spec"
	"github.com/evalrun/evalrun/pipeline/summary"
)

// Comparison accumulates one backend's agreement with the reference over a
// run or one prompt: llama-perplexity's KL-divergence statistics over
// positions that have a next token, test-backend-ops style logit errors over
// every compared row, and greedy-generation agreement.
type Comparison struct {
	kld   metrics.KLD
	logit metrics.LogitStats
	// pos profiles a unit's KLD and top-1 agreement by position; positions
	// is the run's, merged from its units' (report.html draws it).
	pos       metrics.Positions
	positions *metrics.Positions

	// Non-finite candidate values when the reference is a kld_base file
	// (with a live reference LogitStats counts them).
	nan, inf int64

	Planned  int // rows the run meant to compare
	compared int // rows compared

	genPrompts  int
	genMatches  int
	firstDivSum float64
}

// AddLive compares a candidate row with a prepared live reference row and
// adds the result to c, a unit's comparison (the run merges units in plan
// order: see Add). tok is the token that follows this position (the scoring
// target), or -1 if none; pos is the row's position in its sequence.
func (c *Comparison) AddLive(cand []float32, ref *metrics.RefRow, tok int32, pos int) error {
	if tok < 0 {
		err := metrics.AddLogitRow(cand, ref, &c.logit)
		if err == nil {
			c.compared++
		}
		return err
	}
	row, err := metrics.CompareLive(cand, ref, tok, &c.logit)
	if err != nil {
		return err
	}
	c.compared++
	c.kld.AddRow(row)
	c.pos.Add(pos, row)
	return nil
}

// AddBase compares a candidate row with decoded base log-probabilities from
// a llama-perplexity --kl-divergence-base file.
func (c *Comparison) AddBase(cand, baseLogProbs []float32, tok int32, pos int) error {
	row, err := metrics.BaseKLDRow(cand, baseLogProbs, tok)
	if err != nil {
		return err
	}
	for _, v := range cand {
		switch {
		case math.IsNaN(float64(v)):
			c.nan++
		case math.IsInf(float64(v), 0):
			c.inf++
		}
	}
	c.compared++
	c.kld.AddRow(row)
	c.pos.Add(pos, row)
	return nil
}

// Add merges a unit's comparison into the run's. The run adds its units in
// plan order, and so does a merge of shards: the same sums in the same
// order, the same bits.
func (c *Comparison) Add(u *Comparison) {
	c.kld.Merge(&u.kld)
	c.logit.Merge(&u.logit)
	if c.positions == nil {
		c.positions = &metrics.Positions{}
	}
	c.positions.Merge(&u.pos)
	c.nan += u.nan
	c.inf += u.inf
	c.compared += u.compared
	c.genPrompts += u.genPrompts
	c.genMatches += u.genMatches
	c.firstDivSum += u.firstDivSum
}

// unitState is a unit's comparison as a shard's units file keeps it.
type unitState struct {
	KLD         []byte  `json:"kld"`
	Logit       []byte  `json:"logit"`
	Positions   []byte  `json:"positions"`
	NaN         int64   `json:"nan,omitempty"`
	Inf         int64   `json:"inf,omitempty"`
	Compared    int     `json:"compared"`
	GenPrompts  int     `json:"gen_prompts,omitempty"`
	GenMatches  int     `json:"gen_matches,omitempty"`
	FirstDivSum float64 `json:"first_div_sum,omitempty"`
}

// MarshalState encodes the comparison of a unit for the units file.
func (c *Comparison) MarshalState() (json.RawMessage, error) {
	kld, err := c.kld.MarshalBinary()
	if err != nil {
		return nil, err
	}
	logit, err := c.logit.MarshalBinary()
	if err != nil {
		return nil, err
	}
	pos, err := c.pos.MarshalBinary()
	if err != nil {
		return nil, err
	}
	return json.Marshal(unitState{KLD: kld, Logit: logit, Positions: pos, NaN: c.nan, Inf: c.inf, Compared: c.compared,
		GenPrompts: c.genPrompts, GenMatches: c.genMatches, FirstDivSum: c.firstDivSum})
}

// UnmarshalState decodes what MarshalState wrote, checking its counts.
func UnmarshalState(data []byte) (*Comparison, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var st unitState
	if err := dec.Decode(&st); err != nil {
		return nil, err
	}
	c := &Comparison{nan: st.NaN, inf: st.Inf, compared: st.Compared, genPrompts: st.GenPrompts, genMatches: st.GenMatches, firstDivSum: st.FirstDivSum}
	if err := c.kld.UnmarshalBinary(st.KLD); err != nil {
		return nil, err
	}
	if err := c.logit.UnmarshalBinary(st.Logit); err != nil {
		return nil, err
	}
	if err := c.pos.UnmarshalBinary(st.Positions); err != nil {
		return nil, err
	}
	if c.compared < c.kld.N() || c.genMatches > c.genPrompts || c.nan < 0 || c.inf < 0 {
		return nil, fmt.Errorf("inconsistent counts")
	}
	return c, nil
}

// AddGreedy records one free-running greedy generation against the reference's.
func (c *Comparison) AddGreedy(cand, ref []int32) {
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

// Accuracy turns the accumulators into the summary's accuracy block.
func (c *Comparison) Accuracy(liveRef bool) *summary.Accuracy {
	a := &summary.Accuracy{Tokens: c.compared, Complete: c.compared == c.Planned}
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
		if c.positions != nil { // the run's comparison, not a prompt's
			kld, _ := c.kld.Values()
			a.Profile = &summary.AccuracyProfile{KLDHistogram: metrics.HistogramKLD(kld), ByPosition: c.positions.Result()}
		}
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

// Compared is the number of rows compared.
func (c *Comparison) Compared() int { return c.compared }

// Prompt is a prompts.jsonl line for one prompt's (or chunk's) comparison.
func (c *Comparison) Prompt(backendName, ds, id string, mode spec.Mode, liveRef bool) summary.PromptResult {
	a := c.Accuracy(liveRef)
	p := summary.PromptResult{
		Backend: backendName, Dataset: ds, ID: id, Mode: string(mode), Tokens: a.Tokens,
		KLDMean: a.KLDMean, KLDMax: a.KLDMax, SameTopP: a.SameTopP, PPL: a.PPL, PPLBase: a.PPLBase,
		NMSE: a.NMSE, CosineMin: a.CosineMin, MaxAbsDiff: a.MaxAbsDiff, NaNCount: a.NaNCount, InfCount: a.InfCount,
	}
	if c.genPrompts == 1 {
		m := c.genMatches == 1
		d := int(c.firstDivSum)
		p.GreedyMatch, p.FirstDivergence = &m, &d
	}
	return p
}
