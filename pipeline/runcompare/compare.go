package runcompare

import (
	"fmt"
	"math"

	"github.com/evalrun/evalrun/pipeline/speedstat"
	"github.com/evalrun/evalrun/pipeline/summary"
)

// Schema names the layout of compare.json; fields are only added.
const Schema = "evalrun/compare/v1"

// Result is compare.json: a new run against a baseline run.
type Result struct {
	Schema   string          `json:"schema"`
	Base     RunRef          `json:"base"`
	New      RunRef          `json:"new"`
	Backends []BackendChange `json:"backends"`
	// MinChange is the smallest relative throughput change reported as
	// significant (besides the U test's p < alpha).
	MinChange float64 `json:"min_change"`
}

// RunRef names a compared run.
type RunRef struct {
	Dir       string `json:"dir"`
	ID        string `json:"id"`
	Started   string `json:"started"`
	GitCommit string `json:"git_commit"`
}

// BackendChange is what changed for one backend (matched by name).
type BackendChange struct {
	Name      string `json:"name"`
	Reference bool   `json:"reference,omitempty"`
	// Presence is "both", "base only" or "new only".
	Presence   string         `json:"presence"`
	BaseStatus string         `json:"base_status,omitempty"`
	NewStatus  string         `json:"new_status,omitempty"`
	Logits     LogitsChange   `json:"logits"`
	Metrics    []MetricChange `json:"metrics,omitempty"`
	Speed      []SpeedChange  `json:"speed,omitempty"`
}

// StatusChanged reports whether the backend's status differs.
func (b BackendChange) StatusChanged() bool { return b.BaseStatus != b.NewStatus }

// MetricChange is one accuracy statistic in both runs.
type MetricChange struct {
	Name string   `json:"name"`
	Base *float64 `json:"base"`
	New  *float64 `json:"new"`
	// BaseErr and NewErr are the statistic's ± (llama-perplexity's
	// standard errors) where it has one.
	BaseErr *float64 `json:"base_err,omitempty"`
	NewErr  *float64 `json:"new_err,omitempty"`
	Delta   *float64 `json:"delta"`
	// Err is the delta's uncertainty, the two ± in quadrature; null for
	// statistics without one.
	Err *float64 `json:"delta_err,omitempty"`
	// Beyond: |delta| exceeds Err (with no ± known: the values differ).
	Beyond bool `json:"beyond_uncertainty"`
	// Worse: the change makes the backend agree less with the reference.
	Worse bool `json:"worse"`
}

// SpeedChange is one throughput test in both runs.
type SpeedChange struct {
	Test      string `json:"test"` // pp64, tg16, "tg16 vs reference"
	Simulated bool   `json:"simulated,omitempty"`
	// Relative: the samples are the candidate's speed relative to the
	// reference's in the same bench round (reference time / candidate
	// time), not tokens/s. Both were measured within milliseconds of each
	// other, so a change of the machine's speed between the runs cancels.
	Relative bool `json:"relative,omitempty"`
	speedstat.Comparison
}

// metric describes one accuracy statistic: how to read it (and its ±) and
// which direction is worse.
type metric struct {
	name        string
	get         func(a *summary.Accuracy) (v, err *float64)
	higherWorse bool
}

func val(f func(a *summary.Accuracy) *float64) func(a *summary.Accuracy) (*float64, *float64) {
	return func(a *summary.Accuracy) (*float64, *float64) { return f(a), nil }
}

func count(f func(a *summary.Accuracy) int64) func(a *summary.Accuracy) (*float64, *float64) {
	return func(a *summary.Accuracy) (*float64, *float64) { v := float64(f(a)); return &v, nil }
}

// metrics are the accuracy block's statistics, in the summary's order.
var metrics = []metric{
	{"kld_mean", func(a *summary.Accuracy) (*float64, *float64) { return a.KLDMean, a.KLDMeanErr }, true},
	{"kld_p99", val(func(a *summary.Accuracy) *float64 { return a.KLDP99 }), true},
	{"kld_max", val(func(a *summary.Accuracy) *float64 { return a.KLDMax }), true},
	{"kld_median", val(func(a *summary.Accuracy) *float64 { return a.KLDMedian }), true},
	{"same_top_p", func(a *summary.Accuracy) (*float64, *float64) { return a.SameTopP, a.SameTopPErr }, false},
	{"rms_dp", func(a *summary.Accuracy) (*float64, *float64) { return a.RMSDp, a.RMSDpErr }, true},
	{"ppl", func(a *summary.Accuracy) (*float64, *float64) { return a.PPL, a.PPLErr }, true},
	{"ppl_ratio", func(a *summary.Accuracy) (*float64, *float64) { return a.PPLRatio, a.PPLRatioErr }, true},
	{"delta_ppl", func(a *summary.Accuracy) (*float64, *float64) { return a.DeltaPPL, a.DeltaPPLErr }, true},
	{"nmse", val(func(a *summary.Accuracy) *float64 { return a.NMSE }), true},
	{"cosine_min", val(func(a *summary.Accuracy) *float64 { return a.CosineMin }), false},
	{"max_abs_diff", val(func(a *summary.Accuracy) *float64 { return a.MaxAbsDiff }), true},
	{"top5_overlap", val(func(a *summary.Accuracy) *float64 { return a.Top5Overlap }), false},
	{"greedy_match", val(func(a *summary.Accuracy) *float64 { return a.GreedyMatch }), false},
	{"first_divergence_mean", val(func(a *summary.Accuracy) *float64 { return a.FirstDivergenceMean }), false},
	{"nan_count", count(func(a *summary.Accuracy) int64 { return a.NaNCount }), true},
	{"inf_count", count(func(a *summary.Accuracy) int64 { return a.InfCount }), true},
}

// DefaultMinChange is the smallest relative throughput change called
// significant: runs made at different times on a shared machine drift by
// more than sampling noise (another job's load), which no test on the
// samples can tell from a change in the code.
const DefaultMinChange = 0.05

// Compare compares the new run with the baseline. Backends are matched by
// name: the reference first, then the new run's candidates, then those only
// the baseline has.
func Compare(base, new *Run, minChange float64) *Result {
	res := &Result{Schema: Schema, Base: ref(base), New: ref(new), MinChange: minChange}
	seen := map[string]bool{}
	for _, nb := range new.backends() {
		seen[nb.Name] = true
		c := BackendChange{Name: nb.Name, Reference: nb.Name == new.Summary.Reference.Name, NewStatus: nb.Status, Presence: "new only"}
		if bb, ok := base.backend(nb.Name); ok {
			c.Presence, c.BaseStatus = "both", bb.Status
			c.Metrics = compareMetrics(bb.Accuracy, nb.Accuracy)
			c.Speed = compareSpeed(bb.Throughput, nb.Throughput, minChange)
			if !c.Reference {
				c.Speed = append(c.Speed, compareRelative(base.Summary.Reference.Throughput, bb.Throughput,
					new.Summary.Reference.Throughput, nb.Throughput, minChange)...)
			}
			c.Logits = compareLogits(base, new, bb, nb)
		} else {
			c.Logits = LogitsChange{Verdict: NotComparable, Note: "not in the baseline"}
		}
		res.Backends = append(res.Backends, c)
	}
	for _, bb := range base.backends() {
		if !seen[bb.Name] {
			res.Backends = append(res.Backends, BackendChange{Name: bb.Name, Presence: "base only", BaseStatus: bb.Status,
				Logits: LogitsChange{Verdict: NotComparable, Note: "not in the new run"}})
		}
	}
	return res
}

func ref(r *Run) RunRef {
	s := r.Summary.Run
	return RunRef{Dir: r.Dir, ID: s.ID, Started: s.Started.Format("2006-01-02 15:04:05 MST"), GitCommit: s.GitCommit}
}

func compareMetrics(base, new *summary.Accuracy) []MetricChange {
	if base == nil || new == nil {
		return nil
	}
	var out []MetricChange
	for _, m := range metrics {
		bv, be := m.get(base)
		nv, ne := m.get(new)
		if bv == nil && nv == nil {
			continue
		}
		c := MetricChange{Name: m.name, Base: bv, New: nv, BaseErr: be, NewErr: ne}
		if bv != nil && nv != nil {
			d := *nv - *bv
			c.Delta = &d
			if be != nil && ne != nil {
				e := math.Hypot(*be, *ne)
				c.Err = &e
				c.Beyond = math.Abs(d) > e
			} else {
				c.Beyond = d != 0
			}
			c.Worse = c.Beyond && (d > 0) == m.higherWorse
		}
		out = append(out, c)
	}
	return out
}

func compareSpeed(base, new *summary.Throughput, minChange float64) []SpeedChange {
	if base == nil || new == nil {
		return nil
	}
	var out []SpeedChange
	for _, t := range []struct{ b, n *summary.BenchTest }{{base.PP, new.PP}, {base.TG, new.TG}} {
		if t.b == nil && t.n == nil {
			continue
		}
		c := SpeedChange{Simulated: new.Simulated || base.Simulated, Comparison: speedstat.Compare(t.b.Rates(), t.n.Rates())}
		c.Test = testName(t.n)
		if c.Test == "" {
			c.Test = testName(t.b)
		}
		if t.b != nil && t.n != nil && testName(t.b) != testName(t.n) {
			c.Verdict, c.Note = speedstat.NotComparable, fmt.Sprintf("the baseline ran %s", testName(t.b))
		}
		out = append(out, c.applyMinChange(minChange))
	}
	return out
}

// applyMinChange calls a significant change smaller than minChange none.
func (c SpeedChange) applyMinChange(minChange float64) SpeedChange {
	if (c.Verdict == speedstat.Faster || c.Verdict == speedstat.Slower) && math.Abs(*c.Delta) < minChange {
		c.Verdict = speedstat.NoChange
		c.Note = fmt.Sprintf("significant (p=%.3g) but below the %.0f%% minimum change", *c.P, 100*minChange)
	}
	return c
}

// compareRelative compares a candidate's speed relative to the reference,
// round by round: the bench runs one repetition of every backend per round,
// so repetition i of the candidate and of the reference saw the same
// machine. A test is compared when both runs have it for both backends with
// one sample per round.
func compareRelative(baseRef, base, newRef, new *summary.Throughput, minChange float64) []SpeedChange {
	if baseRef == nil || base == nil || newRef == nil || new == nil {
		return nil
	}
	var out []SpeedChange
	for _, t := range []struct{ br, b, nr, n *summary.BenchTest }{{baseRef.PP, base.PP, newRef.PP, new.PP}, {baseRef.TG, base.TG, newRef.TG, new.TG}} {
		rb, rn := relative(t.br, t.b), relative(t.nr, t.n)
		if rb == nil || rn == nil || testName(t.b) != testName(t.n) {
			continue
		}
		c := SpeedChange{Test: testName(t.n) + " vs reference", Relative: true, Simulated: new.Simulated || base.Simulated,
			Comparison: speedstat.Compare(rb, rn)}
		out = append(out, c.applyMinChange(minChange))
	}
	return out
}

// relative is the candidate's per-round speed relative to the reference's
// (reference time / candidate time); nil unless both ran the same test
// the same number of times.
func relative(ref, cand *summary.BenchTest) []float64 {
	if ref == nil || cand == nil || testName(ref) != testName(cand) || len(ref.SamplesNS) != len(cand.SamplesNS) || len(cand.SamplesNS) == 0 {
		return nil
	}
	out := make([]float64, 0, len(cand.SamplesNS))
	for i, ns := range cand.SamplesNS {
		if ns > 0 && ref.SamplesNS[i] > 0 {
			out = append(out, float64(ref.SamplesNS[i])/float64(ns))
		}
	}
	return out
}

func testName(b *summary.BenchTest) string {
	if b == nil {
		return ""
	}
	if b.NGen > 0 {
		return fmt.Sprintf("tg%d", b.NGen)
	}
	return fmt.Sprintf("pp%d", b.NPrompt)
}
