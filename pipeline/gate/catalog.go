// Package gate is the catalog of the metrics evalrun compares and gates,
// and the judging of a spec's gates from it. A metric's row says what it
// is: its name (the spec's gate keys begin with it), where its value and
// uncertainty come from in a backend's results, which direction is worse,
// whether it is a speed, and how reports show it. Absolute gates
// (Absolute), gates against a baseline run (Change, Slowdown) and gates
// against another backend of the same run (Slowdown) are judged here;
// package spec only parses the keys into Gates, and verdict, runcompare and
// report read the rows.
package gate

import "github.com/evalrun/evalrun/pipeline/summary"

// Format is how reports print a metric's value.
type Format int

const (
	General  Format = iota // %.3g
	Small                  // spans orders of magnitude (KLD): fixed point, scientific when tiny, with its ±
	Percent                // a fraction shown in percent, with its ±
	Ratio                  // near 1 (a PPL ratio): four decimals, with its ±
	Count                  // a whole number
	Position               // a token index
)

// Metric is one row of the catalog.
type Metric struct {
	Name  string // "kld_mean": the gate keys kld_mean_max, kld_mean_max_increase
	Label string // a table column's header
	Doc   string // one line for the docs
	// HigherWorse: the backend agrees less with the reference (or runs
	// slower) as the value grows; for the others as it falls.
	HigherWorse bool
	// Fraction: the value lies in [0, 1], and so must a gate's limit.
	Fraction bool
	Format   Format

	accuracy func(a *summary.Accuracy) (v, err *float64) // an accuracy metric's value and ±
	test     func(t *summary.Throughput) *summary.BenchTest
}

// Speed reports whether the metric is a throughput (tokens/s of a bench
// test) rather than an accuracy statistic.
func (m Metric) Speed() bool { return m.test != nil }

// Value is the metric's value and uncertainty (nil when it has none) in an
// accuracy block; nil for a speed metric or one not measured.
func (m Metric) Value(a *summary.Accuracy) (v, err *float64) {
	if a == nil || m.accuracy == nil {
		return nil, nil
	}
	return m.accuracy(a)
}

// Test is the bench test a speed metric measures; nil when it did not run
// (or for an accuracy metric).
func (m Metric) Test(t *summary.Throughput) *summary.BenchTest {
	if t == nil || m.test == nil {
		return nil
	}
	return m.test(t)
}

// Worsening is how much worse new is than base: new − base for a metric
// where higher is worse, base − new for the others.
func (m Metric) Worsening(base, new float64) float64 {
	if m.HigherWorse {
		return new - base
	}
	return base - new
}

func count(n int64) (*float64, *float64) {
	v := float64(n)
	return &v, nil
}

// catalog holds every metric, in summary.json's order.
var catalog = []Metric{
	{Name: "kld_mean", Label: "KLD mean", Doc: "mean KL divergence of the backend's token distributions from the reference's (nats)", HigherWorse: true, Format: Small,
		accuracy: func(a *summary.Accuracy) (*float64, *float64) { return a.KLDMean, a.KLDMeanErr }},
	{Name: "kld_p99", Label: "KLD p99", Doc: "99th percentile of the per-token KL divergence", HigherWorse: true,
		accuracy: func(a *summary.Accuracy) (*float64, *float64) { return a.KLDP99, nil }},
	{Name: "kld_max", Label: "KLD max", Doc: "largest per-token KL divergence", HigherWorse: true,
		accuracy: func(a *summary.Accuracy) (*float64, *float64) { return a.KLDMax, nil }},
	{Name: "kld_median", Label: "KLD median", Doc: "median per-token KL divergence", HigherWorse: true,
		accuracy: func(a *summary.Accuracy) (*float64, *float64) { return a.KLDMedian, nil }},
	{Name: "same_top_p", Label: "same top p", Doc: "fraction of positions where the backend's argmax is the reference's", Fraction: true, Format: Percent,
		accuracy: func(a *summary.Accuracy) (*float64, *float64) { return a.SameTopP, a.SameTopPErr }},
	{Name: "rms_dp", Label: "RMS Δp", Doc: "RMS of the change in the next token's probability", HigherWorse: true, Fraction: true, Format: Percent,
		accuracy: func(a *summary.Accuracy) (*float64, *float64) { return a.RMSDp, a.RMSDpErr }},
	{Name: "ppl", Label: "PPL", Doc: "the backend's perplexity", HigherWorse: true, Format: Ratio,
		accuracy: func(a *summary.Accuracy) (*float64, *float64) { return a.PPL, a.PPLErr }},
	{Name: "ppl_ratio", Label: "PPL ratio", Doc: "the backend's perplexity over the reference's", HigherWorse: true, Format: Ratio,
		accuracy: func(a *summary.Accuracy) (*float64, *float64) { return a.PPLRatio, a.PPLRatioErr }},
	{Name: "delta_ppl", Label: "ΔPPL", Doc: "the backend's perplexity minus the reference's", HigherWorse: true, Format: Ratio,
		accuracy: func(a *summary.Accuracy) (*float64, *float64) { return a.DeltaPPL, a.DeltaPPLErr }},
	{Name: "nmse", Label: "NMSE", Doc: "test-backend-ops' normalized mean squared error of the logits", HigherWorse: true,
		accuracy: func(a *summary.Accuracy) (*float64, *float64) { return a.NMSE, nil }},
	{Name: "cosine_min", Label: "cos min", Doc: "smallest cosine similarity of a logits row with the reference's", Format: General,
		accuracy: func(a *summary.Accuracy) (*float64, *float64) { return a.CosineMin, nil }},
	{Name: "cosine_mean", Label: "cos mean", Doc: "mean cosine similarity of a logits row with the reference's", Format: General,
		accuracy: func(a *summary.Accuracy) (*float64, *float64) { return a.CosineMean, nil }},
	{Name: "max_abs_diff", Label: "max |Δlogit|", Doc: "largest |logit difference|", HigherWorse: true,
		accuracy: func(a *summary.Accuracy) (*float64, *float64) { return a.MaxAbsDiff, nil }},
	{Name: "top5_overlap", Label: "top-5 overlap", Doc: "mean share of the reference's 5 most likely tokens among the backend's 5", Fraction: true, Format: Percent,
		accuracy: func(a *summary.Accuracy) (*float64, *float64) { return a.Top5Overlap, nil }},
	{Name: "greedy_match", Label: "greedy", Doc: "fraction of generate prompts whose free-running greedy output equals the reference's", Fraction: true, Format: Percent,
		accuracy: func(a *summary.Accuracy) (*float64, *float64) { return a.GreedyMatch, nil }},
	{Name: "first_divergence_mean", Label: "first divergence", Doc: "mean index of the first generated token that differs from the reference's", Format: Position,
		accuracy: func(a *summary.Accuracy) (*float64, *float64) { return a.FirstDivergenceMean, nil }},
	{Name: "nan_count", Label: "NaN", Doc: "NaN logits", HigherWorse: true, Format: Count,
		accuracy: func(a *summary.Accuracy) (*float64, *float64) { return count(a.NaNCount) }},
	{Name: "inf_count", Label: "Inf", Doc: "infinite logits", HigherWorse: true, Format: Count,
		accuracy: func(a *summary.Accuracy) (*float64, *float64) { return count(a.InfCount) }},
	{Name: "tg_ts", Label: "tg t/s", Doc: "generation tokens/s: the p95 of the bench's tgN repetitions",
		test: func(t *summary.Throughput) *summary.BenchTest { return t.TG }},
	{Name: "pp_ts", Label: "pp t/s", Doc: "prompt processing tokens/s: the p95 of the bench's ppN repetitions",
		test: func(t *summary.Throughput) *summary.BenchTest { return t.PP }},
}

// All returns every metric, in summary.json's order.
func All() []Metric { return catalog }

// Accuracy returns the accuracy metrics, in summary.json's order.
func Accuracy() []Metric {
	var out []Metric
	for _, m := range catalog {
		if !m.Speed() {
			out = append(out, m)
		}
	}
	return out
}

// Lookup finds a metric by name.
func Lookup(name string) (Metric, bool) {
	for _, m := range catalog {
		if m.Name == name {
			return m, true
		}
	}
	return Metric{}, false
}

// MustLookup is Lookup for the names the code itself spells.
func MustLookup(name string) Metric {
	m, ok := Lookup(name)
	if !ok {
		panic("gate: no metric " + name)
	}
	return m
}
