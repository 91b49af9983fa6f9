package pipeline

import "fmt"

// Gate is one pass/fail limit on a metric of a backend.
type Gate struct {
	Name   string  // spec key, e.g. "kld_mean_max"
	Metric string  // e.g. "kld_mean"
	Max    bool    // the metric must be ≤ Limit (else ≥)
	Limit  float64 // threshold
}

// metricValue looks up a gated metric; nil when it was not measured.
func metricValue(metric string, a *Accuracy, t *Throughput) (*float64, bool) {
	if t != nil {
		switch metric {
		case "tg_ts":
			if t.TG != nil {
				return &t.TG.AvgTS, true
			}
			return nil, true
		case "pp_ts":
			if t.PP != nil {
				return &t.PP.AvgTS, true
			}
			return nil, true
		}
	}
	switch metric {
	case "tg_ts", "pp_ts":
		return nil, true
	}
	if a == nil {
		return nil, true
	}
	switch metric {
	case "kld_mean":
		return a.KLDMean, true
	case "kld_p99":
		return a.KLDP99, true
	case "same_top_p":
		return a.SameTopP, true
	case "nmse":
		return a.NMSE, true
	case "greedy_match":
		return a.GreedyMatch, true
	case "max_abs_diff":
		return a.MaxAbsDiff, true
	case "ppl_ratio":
		return a.PPLRatio, true
	}
	return nil, false
}

// evaluateGates checks every gate. A gate whose statistic could not be
// computed fails: a check that saw nothing must not pass (the test-backend-ops
// "0/0 OK" lesson). NaN or Inf in the logits always fails.
func evaluateGates(gates []Gate, a *Accuracy, t *Throughput) []GateResult {
	var out []GateResult
	for _, g := range gates {
		v, known := metricValue(g.Metric, a, t)
		r := GateResult{Name: g.Name, Limit: g.Limit, Value: v}
		switch {
		case !known:
			r.Note = "unknown metric " + g.Metric
		case v == nil:
			r.Note = "not measured"
		case g.Max:
			r.Pass = *v <= g.Limit
		default:
			r.Pass = *v >= g.Limit
		}
		out = append(out, r)
	}
	if a != nil && (a.NaNCount > 0 || a.InfCount > 0) {
		n := float64(a.NaNCount + a.InfCount)
		out = append(out, GateResult{Name: "finite_logits", Limit: 0, Value: &n, Note: fmt.Sprintf("%d NaN, %d Inf logits", a.NaNCount, a.InfCount)})
	}
	return out
}

func (g GateResult) describe() string {
	if g.Value == nil {
		return fmt.Sprintf("%s (limit %g): %s", g.Name, g.Limit, g.Note)
	}
	if g.Note != "" {
		return fmt.Sprintf("%s: %s", g.Name, g.Note)
	}
	return fmt.Sprintf("%s: %.6g against limit %g", g.Name, *g.Value, g.Limit)
}
