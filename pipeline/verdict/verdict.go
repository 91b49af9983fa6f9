package verdict

import (
	"fmt"

	"github.com/evalrun/evalrun/internal/exitcode"
	"github.com/evalrun/evalrun/pipeline/diag"
	"github.com/evalrun/evalrun/pipeline/gate"
	"github.com/evalrun/evalrun/pipeline/spec"
	"github.com/evalrun/evalrun/pipeline/summary"
)

// RelativeGates checks a finished candidate's relative gates against a
// baseline run (runcompare.Gates); speeds is every backend's throughput in
// this run by name, from which a speed gate tells the machine's change
// from the candidate's.
type RelativeGates func(b *summary.BackendSummary, g spec.Gates, speeds map[string]*summary.Throughput) []summary.GateResult

// Builder gathers what decides a run's verdict, backend by backend.
type Builder struct {
	Relative RelativeGates                  // nil: no baseline
	Speeds   map[string]*summary.Throughput // every backend's, for Relative
	Statuses map[string]string              // every backend's status, for speed_baseline
	LiveRef  bool                           // false: a kld_base reference
	// BenchedApart says why two backends' benches were not interleaved in
	// one process ("" when they were), so gates.speed_baseline cannot judge
	// one against the other; nil: one process benched every backend.
	BenchedApart func(a, b string) string

	reasons                      []string
	errorSeen, gateFailed, gated bool
}

// Error records something that makes the run an error.
func (v *Builder) Error(reasons ...string) {
	v.errorSeen = true
	v.reasons = append(v.reasons, reasons...)
}

// Reference passes the reference block if it ran.
func (v *Builder) Reference(ref *summary.BackendSummary) {
	if ref.Pass = ref.Status == summary.StatusOK; !ref.Pass {
		v.Error(fmt.Sprintf("reference %s %s: %s", ref.Name, ref.Status, ref.Error))
	}
}

// Candidate fills a candidate's accuracy from its comparison, checks its
// gates and completeness, and notes why it does not pass.
func (v *Builder) Candidate(bs summary.BackendSummary, cmp *Comparison, gates spec.Gates) summary.BackendSummary {
	v.gated = v.gated || len(gates.List()) > 0 || len(gates.Relative()) > 0 || gates.RequireOffload != nil && *gates.RequireOffload
	if bs.Status != summary.StatusSkipped && (cmp.compared > 0 || bs.Status == summary.StatusOK) {
		bs.Accuracy = cmp.Accuracy(v.LiveRef)
	}
	if bs.Status != summary.StatusOK {
		v.Error(fmt.Sprintf("%s %s: %s", bs.Name, bs.Status, bs.Error))
		v.gateFailed = true
		return bs
	}
	bs.Gates = gate.Absolute(gates.List(), gate.SkipSpeed(gates.SpeedOnSimulated(), bs.Throughput), bs.Accuracy, bs.Throughput)
	if ro := gates.RequireOffload; ro != nil && *ro {
		bs.Gates = append(bs.Gates, offloadGate(bs.Diagnostics))
	}
	if v.Relative != nil {
		bs.Gates = append(bs.Gates, v.Relative(&bs, gates, v.Speeds)...)
	}
	bs.Gates = append(bs.Gates, v.inRun(bs, gates)...)
	bs.Pass = true
	for _, g := range bs.Gates {
		if !g.Pass {
			bs.Pass = false
			v.reasons = append(v.reasons, fmt.Sprintf("%s: gate %s", bs.Name, g.Describe()))
		}
	}
	if bs.Accuracy != nil && !bs.Accuracy.Complete {
		bs.Pass = false
		v.reasons = append(v.reasons, fmt.Sprintf("%s: only %d of %d positions were compared", bs.Name, bs.Accuracy.Tokens, cmp.Planned))
	}
	v.gateFailed = v.gateFailed || !bs.Pass
	return bs
}

// inRun judges a candidate's slowdown gates against its speed_baseline,
// another backend of this run whose bench was interleaved with its own.
func (v *Builder) inRun(bs summary.BackendSummary, g spec.Gates) []summary.GateResult {
	var out []summary.GateResult
	for _, slow := range g.InRun() {
		r := summary.GateResult{Name: slow.Name, Limit: slow.Limit}
		name := *g.SpeedBaseline
		apart := ""
		if v.BenchedApart != nil {
			apart = v.BenchedApart(name, bs.Name)
		}
		switch st := v.Statuses[name]; {
		case gate.SkipSpeed(g.SpeedOnSimulated(), bs.Throughput):
			r.Pass, r.Skipped, r.Note = true, true, gate.NoteSimulated
		case apart != "":
			r.Note = "not measured: " + apart
		case st != "" && st != summary.StatusOK:
			// Its repetitions stop where it failed: the rest of the pass,
			// and the machine's state then, would be missing from one side.
			r.Note = fmt.Sprintf("not measured: %s %s", name, st)
		default:
			r = gate.Slowdown(slow, v.Speeds[name], bs.Throughput, 1, "", name+" in this run")
		}
		out = append(out, r)
	}
	return out
}

// Limited notes a run that evalrun run --limit n cut short: the verdict
// stands for the first n records of each dataset only.
func (v *Builder) Limited(n int) {
	v.Note(fmt.Sprintf("--limit %d: not a full result: only the first %d records of each dataset ran", n, n))
}

// Note adds a reason that does not change the verdict.
func (v *Builder) Note(reason string) { v.reasons = append(v.reasons, reason) }

// Result is the verdict.
func (v *Builder) Result() summary.Verdict {
	switch {
	case v.errorSeen:
		return summary.Verdict{Status: summary.VerdictError, ExitCode: exitcode.Backend, Reasons: v.reasons}
	case v.gateFailed:
		return summary.Verdict{Status: summary.VerdictFail, ExitCode: exitcode.GateFailed, Reasons: v.reasons}
	case !v.gated:
		reasons := append(v.reasons, "no gates configured: every backend ran, but no limit was checked (set gates: in the spec)")
		return summary.Verdict{Status: summary.VerdictNoGates, ExitCode: exitcode.Pass, Reasons: reasons}
	default:
		return summary.Verdict{Status: summary.VerdictPass, ExitCode: exitcode.Pass, Reasons: v.reasons}
	}
}

// offloadGate is require_offload: every listed kernel ran on the device.
func offloadGate(rep *diag.Report) summary.GateResult {
	g := summary.GateResult{Name: "require_offload", Limit: 0}
	if why := diag.OffloadProblem(rep); why != "" {
		g.Note = why
		if rep != nil && rep.Kernels != nil {
			n := float64(len(rep.Kernels.NeverRan))
			g.Value = &n
		}
		return g
	}
	zero := 0.0
	g.Value, g.Pass, g.Note = &zero, true, fmt.Sprintf("%d of %d kernels ran", rep.Kernels.Ran, len(rep.Kernels.Entries))
	return g
}
