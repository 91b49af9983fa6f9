package runcompare

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"

	"github.com/evalrun/evalrun/pipeline/gate"
	"github.com/evalrun/evalrun/pipeline/resultsdir"
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
	// significant (besides the p95 test's p < alpha).
	MinChange float64 `json:"min_change"`
	// DetectChange is the change every speed row's reps_to_detect is
	// estimated for.
	DetectChange float64 `json:"detect_change"`
	// Changes is what differs between the runs' setups (spec, plugins,
	// model, datasets, evalrun, machine): what changed, before any statistic.
	Changes []Change `json:"changes"`
	// MaxSlowdown is the largest significant slowdown not called a
	// regression (Judge).
	MaxSlowdown float64 `json:"max_slowdown"`
	// Verdict: no change, changed with no regression, or a regression.
	Verdict Verdict `json:"verdict"`
	// Machine is how much every backend's speed moved together between
	// the runs; nil when fewer than MinShiftBackends were measured in both.
	Machine *MachineShift `json:"machine_shift,omitempty"`
}

// MachineShift is the move of every backend's speed between two runs. A
// shared machine's speed changes between runs far beyond sampling noise
// and moves every backend alike, since the bench interleaves them round by
// round; but not every test alike: a prompt batch and single-token decodes
// load the machine differently (measured: docs/design-notes.md). So each
// test has its own shift: the median, over the backends that ran it in
// both runs, of new p95 / base p95. A backend's row is judged against the
// shift of the other backends when they are at least MinShiftBackends
// (leave one out), so its own change does not move the yardstick; the
// median keeps a minority of backends changing for their own reasons from
// moving it (with exactly MinShiftBackends in all, the median over all of
// them: the other two's median would be their mean). It cannot tell the
// machine from a change common to every backend (a new evalrun making
// every backend faster), so it has no verdict of its own.
type MachineShift struct {
	Factor   float64 `json:"factor"`   // the median over every test: the headline
	Tests    int     `json:"tests"`    // backend × test pairs measured in both runs
	Backends int     `json:"backends"` // backends they come from
	// ByTest is each test's shift over every backend (pp64, tg16); a row
	// is divided by the same median without its own backend when at least
	// MinShiftBackends others ran the test. A test fewer than
	// MinShiftBackends ran uses Factor.
	ByTest map[string]float64 `json:"by_test,omitempty"`

	logs map[string]map[string]float64 // test -> backend -> log(new p95 / base p95)
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
	Test      string `json:"test"` // pp64, tg16
	Simulated bool   `json:"simulated,omitempty"`
	speedstat.Comparison
	// DeltaRaw is the change of the p95s as measured; Delta, P and the
	// verdict are on the new run's rates divided by the machine shift.
	// Null when no shift was removed (too few backends).
	DeltaRaw *float64 `json:"delta_raw,omitempty"`
	// PAdjusted is P adjusted for all the comparison's speed tests at
	// once (speedstat.Holm); the verdict is on it.
	PAdjusted *float64 `json:"p_adjusted,omitempty"`
	// RepsToDetect estimates the repetitions per run the p95 test needs to
	// find a change of DetectChange with this spread, at the strictest
	// Holm level (speedstat.RepsToDetect).
	RepsToDetect int `json:"reps_to_detect,omitempty"`

	baseRates, newRates []float64 // what P was computed on
}

// DefaultMinChange is the smallest relative throughput change called
// significant: runs made at different times on a shared machine drift by
// more than sampling noise (another job's load), which no test on the
// samples can tell from a change in the code. Below DetectChange, so that
// a change of that size is called more often than not.
const DefaultMinChange = 0.03

// DetectChange is the change the bundled spec's repetitions are sized to
// find, and what every speed row's reps_to_detect estimates.
const DetectChange = 0.05

// Compare compares the new run with the baseline. Backends are matched by
// name: the reference first, then the new run's candidates, then those only
// the baseline has.
func Compare(base, new *resultsdir.Run, minChange float64) *Result {
	res := &Result{Schema: Schema, Base: ref(base), New: ref(new), MinChange: minChange, DetectChange: DetectChange,
		Machine: machineShift(base.Speeds(), new.Speeds())}
	seen := map[string]bool{}
	for _, nb := range new.Backends() {
		seen[nb.Name] = true
		c := BackendChange{Name: nb.Name, Reference: nb.Name == new.Summary.Reference.Name, NewStatus: nb.Status, Presence: "new only"}
		if bb, ok := base.Backend(nb.Name); ok {
			c.Presence, c.BaseStatus = "both", bb.Status
			c.Metrics = compareMetrics(bb.Accuracy, nb.Accuracy)
			c.Speed = compareSpeed(bb.Throughput, nb.Throughput, res.Machine, nb.Name)
			c.Logits = compareLogits(base, new, bb, nb)
		} else {
			c.Logits = LogitsChange{Verdict: NotComparable, Note: "not in the baseline"}
		}
		res.Backends = append(res.Backends, c)
	}
	for _, bb := range base.Backends() {
		if !seen[bb.Name] {
			res.Backends = append(res.Backends, BackendChange{Name: bb.Name, Presence: "base only", BaseStatus: bb.Status,
				Logits: LogitsChange{Verdict: NotComparable, Note: "not in the new run"}})
		}
	}
	res.judgeSpeed()
	res.Changes = changes(base.Summary, new.Summary)
	res.Judge(DefaultMaxSlowdown)
	return res
}

func ref(r *resultsdir.Run) RunRef {
	s := r.Summary.Run
	return RunRef{Dir: r.Dir, ID: s.ID, Started: s.Started.Format("2006-01-02 15:04:05 MST"), GitCommit: s.GitCommit}
}

func compareMetrics(base, new *summary.Accuracy) []MetricChange {
	if base == nil || new == nil {
		return nil
	}
	var out []MetricChange
	for _, m := range gate.Accuracy() {
		bv, be := m.Value(base)
		nv, ne := m.Value(new)
		if bv == nil && nv == nil {
			continue
		}
		c := MetricChange{Name: m.Name, Base: bv, New: nv, BaseErr: be, NewErr: ne}
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
			c.Worse = c.Beyond && (d > 0) == m.HigherWorse
		}
		out = append(out, c)
	}
	return out
}

func compareSpeed(base, new *summary.Throughput, shift *MachineShift, backend string) []SpeedChange {
	if base == nil || new == nil {
		return nil
	}
	var out []SpeedChange
	for _, t := range []struct{ b, n *summary.BenchTest }{{base.PP, new.PP}, {base.TG, new.TG}} {
		if t.b == nil && t.n == nil {
			continue
		}
		rates := shift.remove(t.n.Name(), backend, speedstat.TestRates(t.n))
		c := SpeedChange{Simulated: new.Simulated || base.Simulated, Comparison: speedstat.Compare(speedstat.TestRates(t.b), rates),
			baseRates: speedstat.TestRates(t.b), newRates: rates}
		if shift != nil && c.Delta != nil {
			c.New = speedstat.Summarize(speedstat.TestRates(t.n)) // as measured
			raw := c.New.Fast/c.Base.Fast - 1
			c.DeltaRaw = &raw
		}
		c.Test = t.n.Name()
		if c.Test == "" {
			c.Test = t.b.Name()
		}
		if t.b != nil && t.n != nil && t.b.Name() != t.n.Name() {
			c.Verdict, c.Note = speedstat.NotComparable, fmt.Sprintf("the baseline ran %s", t.b.Name())
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
	logs := map[string]map[string]float64{}
	backends := 0
	for name, nt := range new {
		bt := base[name]
		if bt == nil || nt == nil {
			continue
		}
		n := len(all)
		for _, t := range []struct{ b, n *summary.BenchTest }{{bt.PP, nt.PP}, {bt.TG, nt.TG}} {
			if t.b == nil || t.n == nil || t.b.Name() != t.n.Name() {
				continue
			}
			// From the samples: a baseline written before p95 was recorded
			// has none in its stats.
			if b, n := speedstat.Summarize(speedstat.TestRates(t.b)), speedstat.Summarize(speedstat.TestRates(t.n)); b != nil && n != nil && b.Fast > 0 {
				l := math.Log(n.Fast / b.Fast)
				all = append(all, l)
				test := t.n.Name()
				if logs[test] == nil {
					logs[test] = map[string]float64{}
				}
				logs[test][name] = l
			}
		}
		if len(all) > n {
			backends++
		}
	}
	if backends < MinShiftBackends {
		return nil
	}
	s := &MachineShift{Factor: math.Exp(speedstat.Median(all)), Tests: len(all), Backends: backends, ByTest: map[string]float64{}, logs: logs}
	for test, by := range logs {
		if len(by) >= MinShiftBackends {
			s.ByTest[test] = math.Exp(speedstat.Median(slices.Collect(maps.Values(by))))
		}
	}
	return s
}

// factor is the shift a row of backend's test is divided by: the median
// over the other backends that ran the test when they are at least
// MinShiftBackends (with fewer, one of them changing would carry it: the
// test's median over all, ByTest), Factor when fewer than
// MinShiftBackends ran it; 1 for a nil shift.
func (s *MachineShift) factor(test, backend string) float64 {
	if s == nil {
		return 1
	}
	all, ok := s.ByTest[test]
	if !ok {
		return s.Factor
	}
	var others []float64
	for name, l := range s.logs[test] {
		if name != backend {
			others = append(others, l)
		}
	}
	if len(others) < MinShiftBackends {
		return all
	}
	return math.Exp(speedstat.Median(others))
}

// remove divides the rates of backend's test (in place) by the shift's
// factor; a nil shift leaves them as they are.
func (s *MachineShift) remove(test, backend string, rates []float64) []float64 {
	f := s.factor(test, backend)
	for i := range rates {
		rates[i] /= f
	}
	return rates
}

// judgeSpeed gives every speed row its verdict: significant when the
// Holm-adjusted p is below Alpha and the change is at least MinChange,
// both after the machine's change is removed and as measured.
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
	need := speedstat.MinRepsCompare(alpha)
	for i, adj := range speedstat.Holm(ps) {
		s := rows[i]
		s.PAdjusted = &adj
		s.RepsToDetect = speedstat.RepsToDetect(s.baseRates, s.newRates, res.DetectChange, alpha)
		switch {
		case adj >= speedstat.Alpha:
			s.Verdict = speedstat.NoChange
			if len(s.baseRates) < need && len(s.newRates) < need {
				s.Note = fmt.Sprintf("too few repetitions to ever be significant among %d tests: need >= %d per run", len(rows), need)
			}
		case math.Abs(*s.Delta) < res.MinChange:
			s.Verdict = speedstat.NoChange
			s.Note = fmt.Sprintf("significant (adjusted p=%.3g) but below the %.0f%% minimum change", adj, 100*res.MinChange)
		case s.DeltaRaw != nil && *s.DeltaRaw*math.Copysign(1, *s.Delta) < res.MinChange:
			// The backends of one run do not move together on a shared
			// machine (CI measured +0.8 % and +22 % for two of them between
			// identical runs), so a change the correction alone creates is
			// as likely its error as the backend's.
			s.Verdict = speedstat.NoChange
			s.Note = fmt.Sprintf("%+.1f%% only once the machine's change is removed; as measured %+.1f%%", 100**s.Delta, 100**s.DeltaRaw)
		case *s.Delta < 0:
			s.Verdict = speedstat.Slower
		default:
			s.Verdict = speedstat.Faster
		}
	}
}
