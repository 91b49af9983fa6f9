package runcompare

import (
	"fmt"
	"math"

	"github.com/evalrun/evalrun/internal/exitcode"
	"github.com/evalrun/evalrun/pipeline/speedstat"
	"github.com/evalrun/evalrun/pipeline/summary"
)

// Compare's verdicts.
const (
	// VerdictNoChange: nothing in the setup, the logits, the accuracy beyond
	// its uncertainty or the speed differs.
	VerdictNoChange = "no change"
	// VerdictChanged: something differs, none of it a regression (exit 0).
	VerdictChanged = "changed, no regression"
	// VerdictRegression: a backend got worse (exit 1); Reasons say how.
	VerdictRegression = "regression"
)

// DefaultMaxSlowdown is the largest significant slowdown (after the
// machine's shift) compare lets pass: the same 5 % the bundled nightly
// spec's slowdown gates allow.
const DefaultMaxSlowdown = 0.05

// Verdict is what a nightly job acts on: its exit code is 0 for no change
// or a change that is no regression, 1 for a regression.
type Verdict struct {
	Status   string   `json:"status"`
	ExitCode int      `json:"exit_code"`
	Reasons  []string `json:"reasons,omitempty"`
}

// Judge decides the comparison's verdict. A regression is any of:
//   - a backend that ran in the baseline failed, crashed, timed out or is
//     missing in the new run;
//   - an accuracy statistic worse beyond its ± (the two runs' standard
//     errors in quadrature; any change for a statistic without one) and by
//     at least MinChange of the baseline's value (any worsening from 0);
//   - a test significantly slower (the p95 test after the machine's shift,
//     Holm-adjusted, beyond MinChange) by more than maxSlowdown, both after
//     the machine's shift and as measured. A simulated device's speed is
//     not judged, as its speed gates are not.
func (r *Result) Judge(maxSlowdown float64) {
	r.MaxSlowdown = maxSlowdown
	var reasons []string
	changed := len(r.Changes) > 0
	for i := range r.Backends {
		b := &r.Backends[i]
		switch {
		case b.Presence == "base only":
			reasons = append(reasons, fmt.Sprintf("%s: in the baseline, not in the new run", b.Name))
			continue
		case b.Presence == "new only":
			changed = true
			continue
		case b.BaseStatus == summary.StatusOK && b.NewStatus != summary.StatusOK:
			reasons = append(reasons, fmt.Sprintf("%s: %s -> %s", b.Name, b.BaseStatus, b.NewStatus))
		case b.StatusChanged():
			changed = true
		}
		changed = changed || b.Logits.Verdict == Changed
		var worse []MetricChange
		for _, m := range b.Metrics {
			changed = changed || m.Beyond
			if m.Worse && worseBy(m) >= r.MinChange {
				worse = append(worse, m)
			}
		}
		if len(worse) > 0 {
			m := worse[0] // the catalog's order: the headline statistic first
			reason := fmt.Sprintf("%s: %s %s -> %s, worse beyond ± (%s)", b.Name, m.Name, num(m.Base, nil), num(m.New, nil), relative(m))
			if len(worse) > 1 {
				reason += fmt.Sprintf(", and %d more statistics", len(worse)-1)
			}
			reasons = append(reasons, reason)
		}
		for j := range b.Speed {
			s := &b.Speed[j]
			changed = changed || s.Significant()
			if s.Verdict != speedstat.Slower || s.Simulated || s.Delta == nil || -*s.Delta <= maxSlowdown {
				continue
			}
			if s.DeltaRaw != nil && -*s.DeltaRaw <= maxSlowdown {
				// Removing the machine's change can clear a slowdown, not
				// push one beyond the limit alone: the backends of one run
				// on a shared machine do not move together (two identical
				// runs beside a CPU hog: cpu-ggml pp64 -4.7 % as measured,
				// -15.4 % against the others' +12.7 %).
				s.Note = fmt.Sprintf("%.1f%% slower once the machine's change is removed, %.1f%% as measured: within the %.0f%% allowed as measured, so no regression",
					-100**s.Delta, -100**s.DeltaRaw, 100*maxSlowdown)
				continue
			}
			reasons = append(reasons, fmt.Sprintf("%s: %s %.1f%% slower (p95, the machine's change removed; p adj %.3g), beyond the %.0f%% allowed", b.Name, s.Test, -100**s.Delta, *s.PAdjusted, 100*maxSlowdown))
		}
	}
	switch {
	case len(reasons) > 0:
		r.Verdict = Verdict{Status: VerdictRegression, ExitCode: exitcode.GateFailed, Reasons: reasons}
	case changed:
		r.Verdict = Verdict{Status: VerdictChanged, ExitCode: exitcode.Pass}
	default:
		r.Verdict = Verdict{Status: VerdictNoChange, ExitCode: exitcode.Pass}
	}
}

// worseBy is how much worse the statistic got, relative to the baseline's
// value (+Inf from 0).
func worseBy(m MetricChange) float64 {
	if m.Delta == nil || m.Base == nil {
		return 0
	}
	if *m.Base == 0 {
		return math.Inf(1)
	}
	return math.Abs(*m.Delta / *m.Base)
}

func relative(m MetricChange) string {
	if w := worseBy(m); !math.IsInf(w, 1) {
		return fmt.Sprintf("%+.0f%%", 100*w)
	}
	return "from 0"
}
