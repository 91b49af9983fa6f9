package pipeline

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"

	"github.com/evalrun/evalrun/pipeline/metrics"
	"github.com/evalrun/evalrun/pipeline/spec"
	"github.com/evalrun/evalrun/pipeline/summary"
)

// comparison accumulates one backend's agreement with the reference over a
// run or one prompt: llama-perplexity's KL-divergence statistics over
// positions that have a next token, test-backend-ops style logit errors over
// every compared row, and greedy-generation agreement.
type comparison struct {
	kld   metrics.KLD
	logit metrics.LogitStats
	// pos profiles a unit's KLD and top-1 agreement by position; positions
	// is the run's, merged from its units' (report.html draws it).
	pos       metrics.Positions
	positions *metrics.Positions

	// Non-finite candidate values when the reference is a kld_base file
	// (with a live reference LogitStats counts them).
	nan, inf int64

	planned  int // rows the run meant to compare
	compared int // rows compared

	genPrompts  int
	genMatches  int
	firstDivSum float64
}

// addLive compares a candidate row with a prepared live reference row and
// adds the result to a unit's comparison (the run merges units in plan
// order: see add). tok is the token that follows this position (the scoring
// target), or -1 if none; pos is the row's position in its sequence.
func addLive(cand []float32, ref *metrics.RefRow, tok int32, pos int, unit *comparison) error {
	if err := metrics.AddLogitRow(cand, ref, &unit.logit); err != nil {
		return err
	}
	unit.compared++
	if tok < 0 {
		return nil
	}
	row, err := metrics.LiveKLDRow(cand, ref, tok)
	if err != nil {
		return err
	}
	unit.kld.AddRow(row)
	unit.pos.Add(pos, row)
	return nil
}

// addBase compares a candidate row with decoded base log-probabilities from
// a llama-perplexity --kl-divergence-base file.
func addBase(cand, baseLogProbs []float32, tok int32, pos int, unit *comparison) error {
	row, err := metrics.BaseKLDRow(cand, baseLogProbs, tok)
	if err != nil {
		return err
	}
	for _, v := range cand {
		switch {
		case math.IsNaN(float64(v)):
			unit.nan++
		case math.IsInf(float64(v), 0):
			unit.inf++
		}
	}
	unit.compared++
	unit.kld.AddRow(row)
	unit.pos.Add(pos, row)
	return nil
}

// add merges a unit's comparison into the run's. The run adds its units in
// plan order, and so does a merge of shards: the same sums in the same
// order, the same bits.
func (c *comparison) add(u *comparison) {
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

func (c *comparison) marshalState() (json.RawMessage, error) {
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

func unmarshalState(data []byte) (*comparison, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var st unitState
	if err := dec.Decode(&st); err != nil {
		return nil, err
	}
	c := &comparison{nan: st.NaN, inf: st.Inf, compared: st.Compared, genPrompts: st.GenPrompts, genMatches: st.GenMatches, firstDivSum: st.FirstDivSum}
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
func (c *comparison) accuracy(liveRef bool) *summary.Accuracy {
	a := &summary.Accuracy{Tokens: c.compared, Complete: c.compared == c.planned}
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

// metricValue looks up a gated metric; nil when it was not measured.
func metricValue(metric string, a *summary.Accuracy, t *summary.Throughput) (v *float64, known bool) {
	switch metric {
	case "tg_ts", "pp_ts":
		if t == nil {
			return nil, true
		}
		if b := map[string]*summary.BenchTest{"tg_ts": t.TG, "pp_ts": t.PP}[metric]; b != nil {
			return &b.AvgTS, true
		}
		return nil, true
	}
	if a == nil {
		a = &summary.Accuracy{}
	}
	p, ok := map[string]*float64{"kld_mean": a.KLDMean, "kld_p99": a.KLDP99, "same_top_p": a.SameTopP, "nmse": a.NMSE,
		"greedy_match": a.GreedyMatch, "max_abs_diff": a.MaxAbsDiff, "ppl_ratio": a.PPLRatio}[metric]
	return p, ok
}

// evaluateGates checks every gate. A gate whose statistic could not be
// computed fails: a check that saw nothing must not pass (the test-backend-ops
// "0/0 OK" lesson). NaN or Inf in the logits always fails.
func evaluateGates(gates spec.Gates, a *summary.Accuracy, t *summary.Throughput) []summary.GateResult {
	var out []summary.GateResult
	for _, g := range gates.List() {
		v, known := metricValue(g.Metric, a, t)
		r := summary.GateResult{Name: g.Name, Limit: g.Limit, Value: v}
		switch {
		case summary.IsSpeedMetric(g.Metric) && summary.SkipSpeedGate(gates, t):
			r.Pass, r.Skipped, r.Note = true, true, summary.NoteSimulated
		case !known:
			r.Note = "unknown metric " + g.Metric
		case v == nil:
			r.Note = "not measured"
		default:
			r.Pass = g.Pass(*v)
		}
		out = append(out, r)
	}
	if a != nil && (a.NaNCount > 0 || a.InfCount > 0) {
		n := float64(a.NaNCount + a.InfCount)
		out = append(out, summary.GateResult{Name: "finite_logits", Limit: 0, Value: &n, Note: fmt.Sprintf("%d NaN, %d Inf logits", a.NaNCount, a.InfCount)})
	}
	return out
}
