package runcompare

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/evalrun/evalrun/internal/atomicfile"
	"github.com/evalrun/evalrun/internal/texttable"
	"github.com/evalrun/evalrun/pipeline/resultsdir"
	"github.com/evalrun/evalrun/pipeline/speedstat"
)

// Print writes the comparison's tables: per backend its status, logits and
// headline accuracy deltas, then the throughput verdicts.
func Print(w io.Writer, r *Result) error {
	fmt.Fprintf(w, "%s -> %s\n\naccuracy and logits vs the baseline\n", r.Base.ID, r.New.ID)
	if err := summaryTable(w, r, false); err != nil {
		return err
	}
	fmt.Fprintf(w, "\nthroughput vs the baseline (p95 t/s [95%% CI]: the speed the fastest 5%% of repetitions reach; Δ judged: after the machine's change; significant: p95 test p < %.2g adjusted for all the tests (Holm) and |Δ judged| >= %.0f%%)\n%s\n", speedstat.Alpha, 100*r.MinChange, r.MachineLine())
	return speedTable(w, r, false)
}

// Markdown writes compare.md: the same tables plus every accuracy metric of
// every backend.
func Markdown(w io.Writer, r *Result) error {
	fmt.Fprintf(w, "# evalrun compare\n\n- baseline: `%s` (%s, commit %s)\n- new: `%s` (%s, commit %s)\n\n## Accuracy and logits\n\n",
		r.Base.ID, r.Base.Started, r.Base.GitCommit, r.New.ID, r.New.Started, r.New.GitCommit)
	if err := summaryTable(w, r, true); err != nil {
		return err
	}
	fmt.Fprintf(w, "\n## Throughput\n\np95 tokens/s with its 95 %% confidence interval: the speed the fastest 5 %% of the repetitions reach (the median moves with how many repetitions another job slowed, p95 with the code). Δ judged is the change after removing the machine's (below; each backend against the others' shift). A change is significant when the p95 test's p (Fisher's exact test on the repetitions above the pooled p95), adjusted for all the tests of this table at once (Holm), is below %.2g and Δ judged is at least %.0f %%; \"reps for %.0f%%\" estimates the repetitions per run that would find a change of that size with this spread.\n\n%s\n\n", speedstat.Alpha, 100*r.MinChange, 100*r.DetectChange, r.MachineLine())
	if err := speedTable(w, r, true); err != nil {
		return err
	}
	fmt.Fprintf(w, "\n## Every accuracy statistic\n\nΔ = new − baseline; ± is the two runs' standard errors in quadrature; **beyond** marks a change larger than its ± (for statistics without ±: any change).\n")
	for _, b := range r.Backends {
		if len(b.Metrics) == 0 {
			continue
		}
		fmt.Fprintf(w, "\n### %s\n\n", b.Name)
		t := texttable.New(w, true)
		t.Header("statistic", "baseline", "new", "Δ", "beyond ±", "worse")
		for _, m := range b.Metrics {
			if err := t.Append([]string{m.Name, num(m.Base, m.BaseErr), num(m.New, m.NewErr), num(m.Delta, m.Err), yes(m.Beyond), yes(m.Worse)}); err != nil {
				return err
			}
		}
		if err := t.Render(); err != nil {
			return err
		}
	}
	return nil
}

// Write writes compare.json and compare.md into dir, atomically.
func Write(dir string, r *Result) error {
	js, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	var md bytes.Buffer
	if err := Markdown(&md, r); err != nil {
		return err
	}
	if err := atomicfile.WriteFile(filepath.Join(dir, resultsdir.CompareJSON), append(js, '\n')); err != nil {
		return err
	}
	return atomicfile.WriteFile(filepath.Join(dir, resultsdir.CompareMD), md.Bytes())
}

func summaryTable(w io.Writer, r *Result, md bool) error {
	t := texttable.New(w, md)
	t.Header("backend", "status", "logits", "KLD mean Δ", "same top p Δ", "PPL ratio Δ", "other changes beyond ±")
	for _, b := range r.Backends {
		name := b.Name
		if b.Reference {
			name += " (ref)"
		}
		status := b.NewStatus
		switch {
		case b.Presence != "both":
			status = b.Presence
		case b.StatusChanged():
			status = b.BaseStatus + " -> " + b.NewStatus
		}
		var kld, top, ppl string
		var other []string
		for _, m := range b.Metrics {
			cell := delta(m)
			switch m.Name {
			case "kld_mean":
				kld = cell
			case "same_top_p":
				top = cell
			case "ppl_ratio":
				ppl = cell
			default:
				if m.Beyond {
					other = append(other, m.Name)
				}
			}
		}
		if err := t.Append([]string{name, status, logitsCell(b.Logits), dash(kld), dash(top), dash(ppl), dash(strings.Join(other, ", "))}); err != nil {
			return err
		}
	}
	return t.Render()
}

func speedTable(w io.Writer, r *Result, md bool) error {
	t := texttable.New(w, md)
	t.Header("backend", "test", "baseline p95 t/s", "new p95 t/s", "Δ", "Δ judged", "p adj", fmt.Sprintf("reps for %.0f%%", 100*r.DetectChange), "verdict")
	for _, b := range r.Backends {
		for _, s := range b.Speed {
			verdict := s.Verdict
			if s.Simulated {
				verdict += " (simulated)"
			}
			if s.Note != "" {
				verdict += ": " + s.Note
			}
			raw, judged, p, reps := "-", "-", "-", "-"
			if s.Delta != nil {
				judged = fmt.Sprintf("%+.1f%%", 100**s.Delta)
				raw = judged
			}
			if s.DeltaRaw != nil {
				raw = fmt.Sprintf("%+.1f%%", 100**s.DeltaRaw)
			}
			if s.PAdjusted != nil {
				p = fmt.Sprintf("%.3g", *s.PAdjusted)
			}
			if s.RepsToDetect > 0 {
				reps = fmt.Sprint(s.RepsToDetect)
			}
			if err := t.Append([]string{b.Name, s.Test, rate(s.Base), rate(s.New), raw, judged, p, reps, verdict}); err != nil {
				return err
			}
		}
	}
	return t.Render()
}

func logitsCell(l LogitsChange) string {
	switch {
	case l.Verdict == BitIdentical:
		return "bit-identical"
	case l.First != nil && l.First.Position != nil:
		return fmt.Sprintf("changed from %s %s position %d (%d of %d chunks/prompts)", l.First.Dataset, l.First.ID, *l.First.Position, l.ChangedPrompts, l.ComparedPrompts)
	case l.First != nil:
		return fmt.Sprintf("changed from %s %s (%d of %d chunks/prompts)", l.First.Dataset, l.First.ID, l.ChangedPrompts, l.ComparedPrompts)
	case l.Note != "":
		return l.Verdict + ": " + l.Note
	}
	return l.Verdict
}

// delta formats a change as "+1.2e-03 ± 4e-05 (beyond)".
func delta(m MetricChange) string {
	if m.Delta == nil {
		return "not in both"
	}
	s := num(m.Delta, m.Err)
	if m.Beyond {
		s += " beyond ±"
		if m.Worse {
			s += ", worse"
		}
	}
	return s
}

func num(v, e *float64) string {
	if v == nil {
		return "-"
	}
	if e == nil {
		return fmt.Sprintf("%.4g", *v)
	}
	return fmt.Sprintf("%.4g ± %.2g", *v, *e)
}

// rate formats a test's p95 tokens/s with its confidence interval.
func rate(s *speedstat.Summary) string {
	if s == nil {
		return "-"
	}
	if s.FastLo == nil {
		return fmt.Sprintf("%.0f (n=%d)", s.Fast, s.N)
	}
	return fmt.Sprintf("%.0f [%.0f–%.0f] n=%d", s.Fast, *s.FastLo, *s.FastHi, s.N)
}

func yes(b bool) string {
	if b {
		return "yes"
	}
	return ""
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
