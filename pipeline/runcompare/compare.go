package runcompare

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"

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
	// Machine is how much every backend's speed moved together between
	// the runs; nil when fewer than MinShiftBackends were measured in both.
	Machine *MachineShift `json:"machine_shift,omitempty"`
}

// MachineShift is the move of every backend's speed between two runs. A
// shared machine's speed changes between runs far beyond sampling noise
// (measured here: 14-18 % between back-to-back runs of the same binaries,
// up to 70 % within minutes) and moves every backend alike, since the bench
// interleaves them round by round; but not every test alike: a prompt batch
// and single-token decodes load the machine differently (two identical runs
// here: pp64 +37 %, tg16 +5 %, on every backend). So each test has its own
// shift, the median over the backends that ran it in both runs of new
// median / base median: robust to a minority of backends changing for
// their own reasons. It cannot tell the machine from a change common to
// every backend (a new evalrun making every backend faster), so it has no
// verdict of its own.
type MachineShift struct {
	Factor   float64 `json:"factor"`   // the median over every test: the headline
	Tests    int     `json:"tests"`    // backend × test pairs measured in both runs
	Backends int     `json:"backends"` // backends they come from
	// ByTest is each test's shift (pp64, tg16), the factor its rows are
	// divided by; a test fewer than MinShiftBackends ran uses Factor.
	ByTest map[string]float64 `json:"by_test,omitempty"`
}

// MinShiftBackends is the fewest backends measured in both runs from which
// the machine shift is estimated: with two, one backend's own change would
// move the median halfway.
const MinShiftBackends = 3

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
	// DeltaRaw is the change of the medians as measured; Delta, P and the
	// verdict are on the new run's rates divided by the machine shift.
	// Null when no shift was removed (relative rows, too few backends).
	DeltaRaw *float64 `json:"delta_raw,omitempty"`
	// PAdjusted is P adjusted for all the comparison's speed tests at
	// once (speedstat.Holm); the verdict is on it.
	PAdjusted *float64 `json:"p_adjusted,omitempty"`
	// RepsForMinChange estimates the repetitions per run the U test needs
	// to find a change of MinChange with this spread (speedstat.RepsToDetect).
	RepsForMinChange int `json:"reps_for_min_change,omitempty"`

	baseRates, newRates []float64 // what P was computed on
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
	res := &Result{Schema: Schema, Base: ref(base), New: ref(new), MinChange: minChange,
		Machine: machineShift(base.speeds(), new.speeds())}
	seen := map[string]bool{}
	for _, nb := range new.backends() {
		seen[nb.Name] = true
		c := BackendChange{Name: nb.Name, Reference: nb.Name == new.Summary.Reference.Name, NewStatus: nb.Status, Presence: "new only"}
		if bb, ok := base.backend(nb.Name); ok {
			c.Presence, c.BaseStatus = "both", bb.Status
			c.Metrics = compareMetrics(bb.Accuracy, nb.Accuracy)
			c.Speed = compareSpeed(bb.Throughput, nb.Throughput, res.Machine)
			if !c.Reference {
				c.Speed = append(c.Speed, compareRelative(base.Summary.Reference.Throughput, bb.Throughput,
					new.Summary.Reference.Throughput, nb.Throughput)...)
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
	res.judgeSpeed()
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

func compareSpeed(base, new *summary.Throughput, shift *MachineShift) []SpeedChange {
	if base == nil || new == nil {
		return nil
	}
	var out []SpeedChange
	for _, t := range []struct{ b, n *summary.BenchTest }{{base.PP, new.PP}, {base.TG, new.TG}} {
		if t.b == nil && t.n == nil {
			continue
		}
		rates := shift.remove(testName(t.n), t.n.Rates())
		c := SpeedChange{Simulated: new.Simulated || base.Simulated, Comparison: speedstat.Compare(t.b.Rates(), rates),
			baseRates: t.b.Rates(), newRates: rates}
		if shift != nil && c.Delta != nil {
			c.New = t.n.Stats
			raw := t.n.Stats.Median/t.b.Stats.Median - 1
			c.DeltaRaw = &raw
		}
		c.Test = testName(t.n)
		if c.Test == "" {
			c.Test = testName(t.b)
		}
		if t.b != nil && t.n != nil && testName(t.b) != testName(t.n) {
			c.Verdict, c.Note = speedstat.NotComparable, fmt.Sprintf("the baseline ran %s", testName(t.b))
		}
		out = append(out, c)
	}
	return out
}

// Significant reports whether the verdict is a change (faster or slower).
func (s SpeedChange) Significant() bool {
	return s.Verdict == speedstat.Faster || s.Verdict == speedstat.Slower
}

// MachineLine says how much every backend's speed moved together.
func (r *Result) MachineLine() string {
	m := r.Machine
	if m == nil {
		return fmt.Sprintf("machine: not estimated (fewer than %d backends benched in both runs); Δ judged = Δ", MinShiftBackends)
	}
	var by []string
	for _, test := range slices.Sorted(maps.Keys(m.ByTest)) {
		by = append(by, fmt.Sprintf("%s %+.1f%%", test, 100*(m.ByTest[test]-1)))
	}
	each := ""
	if len(by) > 0 {
		each = ": " + strings.Join(by, ", ")
	}
	return fmt.Sprintf("machine: every backend %+.1f%% (median over %d tests of %d backends)%s: the machine's speed, or a change common to every backend",
		100*(m.Factor-1), m.Tests, m.Backends, each)
}

// machineShift estimates the common move of every backend's speed from
// the tests both runs measured; nil with fewer than MinShiftBackends.
func machineShift(base, new map[string]*summary.Throughput) *MachineShift {
	var all []float64
	byTest := map[string][]float64{}
	backends := 0
	for name, nt := range new {
		bt := base[name]
		if bt == nil || nt == nil {
			continue
		}
		n := len(all)
		for _, t := range []struct{ b, n *summary.BenchTest }{{bt.PP, nt.PP}, {bt.TG, nt.TG}} {
			if t.b != nil && t.n != nil && t.b.Stats != nil && t.n.Stats != nil && testName(t.b) == testName(t.n) && t.b.Stats.Median > 0 {
				l := math.Log(t.n.Stats.Median / t.b.Stats.Median)
				all = append(all, l)
				byTest[testName(t.n)] = append(byTest[testName(t.n)], l)
			}
		}
		if len(all) > n {
			backends++
		}
	}
	if backends < MinShiftBackends {
		return nil
	}
	s := &MachineShift{Factor: math.Exp(speedstat.Median(all)), Tests: len(all), Backends: backends, ByTest: map[string]float64{}}
	for test, logs := range byTest {
		if len(logs) >= MinShiftBackends {
			s.ByTest[test] = math.Exp(speedstat.Median(logs))
		}
	}
	return s
}

// factor is the shift of test; 1 for a nil shift.
func (s *MachineShift) factor(test string) float64 {
	if s == nil {
		return 1
	}
	if f, ok := s.ByTest[test]; ok {
		return f
	}
	return s.Factor
}

// remove divides the rates of test (in place) by the shift's factor; a nil
// shift leaves them as they are.
func (s *MachineShift) remove(test string, rates []float64) []float64 {
	f := s.factor(test)
	for i := range rates {
		rates[i] /= f
	}
	return rates
}

// judgeSpeed gives every speed row its verdict: significant when the
// Holm-adjusted p is below Alpha and the change is at least MinChange.
func (res *Result) judgeSpeed() {
	var rows []*SpeedChange
	var ps []float64
	for i := range res.Backends {
		for j := range res.Backends[i].Speed {
			if s := &res.Backends[i].Speed[j]; s.P != nil && s.Verdict != speedstat.NotComparable {
				rows, ps = append(rows, s), append(ps, *s.P)
			}
		}
	}
	alpha := speedstat.Alpha / float64(max(len(rows), 1)) // Holm's strictest step
	for i, adj := range speedstat.Holm(ps) {
		s := rows[i]
		s.PAdjusted = &adj
		s.RepsForMinChange = speedstat.RepsToDetect(s.baseRates, s.newRates, res.MinChange, alpha)
		switch {
		case adj >= speedstat.Alpha:
			s.Verdict = speedstat.NoChange
		case math.Abs(*s.Delta) < res.MinChange:
			s.Verdict = speedstat.NoChange
			s.Note = fmt.Sprintf("significant (adjusted p=%.3g) but below the %.0f%% minimum change", adj, 100*res.MinChange)
		case *s.Delta < 0:
			s.Verdict = speedstat.Slower
		default:
			s.Verdict = speedstat.Faster
		}
	}
}

// compareRelative compares a candidate's speed relative to the reference,
// round by round: the bench runs one repetition of every backend per round,
// so repetition i of the candidate and of the reference saw the same
// machine. A test is compared when both runs have it for both backends with
// one sample per round.
func compareRelative(baseRef, base, newRef, new *summary.Throughput) []SpeedChange {
	if baseRef == nil || base == nil || newRef == nil || new == nil {
		return nil
	}
	var out []SpeedChange
	for _, t := range []struct{ br, b, nr, n *summary.BenchTest }{{baseRef.PP, base.PP, newRef.PP, new.PP}, {baseRef.TG, base.TG, newRef.TG, new.TG}} {
		rb, rn := relative(t.br, t.b), relative(t.nr, t.n)
		if rb == nil || rn == nil || testName(t.b) != testName(t.n) {
			continue
		}
		out = append(out, SpeedChange{Test: testName(t.n) + " vs reference", Relative: true, Simulated: new.Simulated || base.Simulated,
			Comparison: speedstat.Compare(rb, rn), baseRates: rb, newRates: rn})
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
