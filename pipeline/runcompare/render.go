package runcompare

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/evalrun/evalrun/internal/atomicfile"
	"github.com/evalrun/evalrun/internal/texttable"
	"github.com/evalrun/evalrun/pipeline/gate"
	"github.com/evalrun/evalrun/pipeline/resultsdir"
	"github.com/evalrun/evalrun/pipeline/speedstat"
)

// Print writes the comparison for a terminal or a CI log: the verdict and
// its reasons, what changed between the runs' setups, then per backend the
// logits and headline accuracy deltas, then the throughput verdicts. The
// tables fit 120 columns; wide adds every accuracy statistic of every
// backend (as compare.md has them).
func Print(w io.Writer, r *Result, wide bool) error {
	w = &wrapWriter{w: w, width: textWidth}
	fmt.Fprintf(w, "evalrun compare: %s -> %s\n\n", r.Base.ID, r.New.ID)
	printVerdict(w, r)
	fmt.Fprintf(w, "\nwhat changed (baseline -> new)\n")
	printChanges(w, r)
	fmt.Fprintf(w, "\naccuracy and logits vs the baseline (Δ = new − baseline ± the two runs' uncertainty; worse/better: beyond ±)\n")
	if err := summaryTable(w, r, false, wide); err != nil {
		return err
	}
	if also := alsoBeyond(r, wide); len(also) > 0 {
		fmt.Fprintf(w, "also beyond ±: %s\n", strings.Join(also, "; "))
	}
	if !hasSpeed(r) {
		fmt.Fprintf(w, "\nthroughput: not compared (no bench in both runs)\n")
	} else if err := printSpeed(w, r, wide); err != nil {
		return err
	}
	if wide {
		return everyStatistic(w, r, false)
	}
	return nil
}

func hasSpeed(r *Result) bool {
	for _, b := range r.Backends {
		if len(b.Speed) > 0 {
			return true
		}
	}
	return false
}

func printSpeed(w io.Writer, r *Result, wide bool) error {
	fmt.Fprintf(w, "\nthroughput vs the baseline: p95 t/s [95%% CI], the speed the fastest 5%% of repetitions reach; Δ judged: after\nthe machine's change; significant: p95 test p < %.2g adjusted for all the tests (Holm) and |Δ judged| >= %.0f%%\n%s\n", speedstat.Alpha, 100*r.MinChange, r.MachineLine())
	if err := speedTable(w, r, false, wide); err != nil {
		return err
	}
	printSpeedNotes(w, r)
	return nil
}

func printVerdict(w io.Writer, r *Result) {
	fmt.Fprintf(w, "verdict: %s (exit %d)\n", r.Verdict.Status, r.Verdict.ExitCode)
	for _, reason := range r.Verdict.Reasons {
		fmt.Fprintf(w, "  - %s\n", reason)
	}
}

func printChanges(w io.Writer, r *Result) {
	if len(r.Changes) == 0 {
		fmt.Fprintln(w, "  nothing: the same spec, plugins, model, datasets, evalrun and machine")
		return
	}
	for _, c := range r.Changes {
		fmt.Fprintf(w, "  %s: %s -> %s\n", c.What, dash(c.Base), dash(c.New))
	}
}

// alsoBeyond lists, per backend, the statistics beyond their ± that the
// table has no column for.
func alsoBeyond(r *Result, wide bool) []string {
	headline := headlineColumns(wide)
	var out []string
	for _, b := range r.Backends {
		var names []string
		for _, m := range b.Metrics {
			if m.Beyond && !slices.Contains(headline, m.Name) {
				names = append(names, m.Name)
			}
		}
		if len(names) > 0 {
			out = append(out, b.Name+": "+strings.Join(names, ", "))
		}
	}
	return out
}

// printSpeedNotes prints the notes of the speed rows below the table, so
// that the table stays narrow.
func printSpeedNotes(w io.Writer, r *Result) {
	seen := map[string]bool{}
	for _, b := range r.Backends {
		for _, s := range b.Speed {
			if s.Note != "" && !seen[s.Note] {
				seen[s.Note] = true
				fmt.Fprintf(w, "note: %s\n", s.Note)
			}
		}
	}
}

// headlineColumns are the statistics the accuracy table has a column for:
// two on a terminal, so that the table fits 120 columns; wide (and
// compare.md) adds the PPL ratio.
func headlineColumns(wide bool) []string {
	if wide {
		return []string{"kld_mean", "same_top_p", "ppl_ratio"}
	}
	return []string{"kld_mean", "same_top_p"}
}

// Markdown writes compare.md: the same tables plus every accuracy metric of
// every backend.
func Markdown(w io.Writer, r *Result) error {
	fmt.Fprintf(w, "# evalrun compare: %s\n\n- baseline: `%s` (%s, commit %s)\n- new: `%s` (%s, commit %s)\n- exit code %d\n",
		r.Verdict.Status, r.Base.ID, r.Base.Started, r.Base.GitCommit, r.New.ID, r.New.Started, r.New.GitCommit, r.Verdict.ExitCode)
	for _, reason := range r.Verdict.Reasons {
		fmt.Fprintf(w, "- %s\n", reason)
	}
	fmt.Fprintf(w, "\n## What changed\n\n")
	if len(r.Changes) == 0 {
		fmt.Fprintf(w, "Nothing: the same spec, plugins, model, datasets, evalrun and machine.\n")
	} else {
		t := texttable.New(w, true)
		t.Header("what", "baseline", "new")
		for _, c := range r.Changes {
			if err := t.Append([]string{c.What, dash(c.Base), dash(c.New)}); err != nil {
				return err
			}
		}
		if err := t.Render(); err != nil {
			return err
		}
	}
	fmt.Fprintf(w, "\n## Accuracy and logits\n\n")
	if err := summaryTable(w, r, true, true); err != nil {
		return err
	}
	fmt.Fprintf(w, "\n## Throughput\n\np95 tokens/s with its 95 %% confidence interval: the speed the fastest 5 %% of the repetitions reach (the median moves with how many repetitions another job slowed, p95 with the code). Δ judged is the change after removing the machine's (below; each backend against the others' shift). A change is significant when the p95 test's p (Fisher's exact test on the repetitions above the pooled p95), adjusted for all the tests of this table at once (Holm), is below %.2g and Δ judged is at least %.0f %%; \"reps for %.0f%%\" estimates the repetitions per run that would find a change of that size with this spread.\n\n%s\n\n", speedstat.Alpha, 100*r.MinChange, 100*r.DetectChange, r.MachineLine())
	if err := speedTable(w, r, true, true); err != nil {
		return err
	}
	return everyStatistic(w, r, true)
}

// everyStatistic writes every accuracy statistic of every backend.
func everyStatistic(w io.Writer, r *Result, md bool) error {
	if md {
		fmt.Fprintf(w, "\n## Every accuracy statistic\n\nΔ = new − baseline; ± is the two runs' standard errors in quadrature; **beyond** marks a change larger than its ± (for statistics without ±: any change).\n")
	} else {
		fmt.Fprintf(w, "\nevery accuracy statistic (Δ = new − baseline ± the two runs' uncertainty)\n")
	}
	for _, b := range r.Backends {
		if len(b.Metrics) == 0 {
			continue
		}
		if md {
			fmt.Fprintf(w, "\n### %s\n\n", b.Name)
		} else {
			fmt.Fprintf(w, "\n%s\n", b.Name)
		}
		t := texttable.New(w, md)
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

func summaryTable(w io.Writer, r *Result, md, wide bool) error {
	t := texttable.New(w, md)
	cols := headlineColumns(md || wide)
	header := []string{"backend", "status", "logits"}
	for _, c := range cols {
		header = append(header, gate.MustLookup(c).Label+" Δ")
	}
	t.Header(header)
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
		cells := map[string]string{}
		for _, m := range b.Metrics {
			cells[m.Name] = delta(m)
		}
		row := []string{name, status, logitsCell(b.Logits)}
		for _, c := range cols {
			row = append(row, dash(cells[c]))
		}
		if err := t.Append(row); err != nil {
			return err
		}
	}
	return t.Render()
}

// speedTable has a row per backend and test; on a terminal without wide,
// the columns that fit 120: the judged change, its adjusted p and a short
// verdict (the notes follow the table).
func speedTable(w io.Writer, r *Result, md, wide bool) error {
	t := texttable.New(w, md)
	full := md || wide
	if full {
		t.Header("backend", "test", "baseline p95 t/s", "new p95 t/s", "Δ", "Δ judged", "p adj", fmt.Sprintf("reps for %.0f%%", 100*r.DetectChange), "verdict")
	} else {
		t.Header("backend", "test", "baseline p95 t/s", "new p95 t/s", "Δ judged", "p adj", "verdict")
	}
	for _, b := range r.Backends {
		for _, s := range b.Speed {
			verdict := s.Verdict
			if !full && verdict == speedstat.NoChange {
				verdict = "no change"
			}
			if s.Simulated {
				verdict += " (simulated)"
			}
			if s.Note != "" && md {
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
			row := []string{b.Name, s.Test, rate(s.Base), rate(s.New), judged, p, verdict}
			if full {
				row = []string{b.Name, s.Test, rate(s.Base), rate(s.New), raw, judged, p, reps, verdict}
			}
			if err := t.Append(row); err != nil {
				return err
			}
		}
	}
	return t.Render()
}

// textWidth is where Print wraps its prose lines (the tables fit it too).
const textWidth = 120

// wrapWriter wraps each line longer than width at spaces, indenting the
// continuation; table lines (starting with a border) pass unchanged.
type wrapWriter struct {
	w     io.Writer
	width int
	line  []byte
}

func (ww *wrapWriter) Write(p []byte) (int, error) {
	for _, c := range p {
		if c != '\n' {
			ww.line = append(ww.line, c)
			continue
		}
		if _, err := io.WriteString(ww.w, wrapLine(string(ww.line), ww.width)+"\n"); err != nil {
			return 0, err
		}
		ww.line = ww.line[:0]
	}
	return len(p), nil
}

func wrapLine(s string, width int) string {
	if utf8.RuneCountInString(s) <= width || strings.HasPrefix(s, "+") || strings.HasPrefix(s, "|") {
		return s
	}
	indent := "    "
	if strings.HasPrefix(s, "  - ") {
		indent = "      "
	}
	var out strings.Builder
	col := 0
	for i, word := range strings.Split(s, " ") {
		n := utf8.RuneCountInString(word)
		if i > 0 {
			if col+1+n > width && col > len(indent) {
				out.WriteString("\n" + indent)
				col = len(indent)
			} else {
				out.WriteByte(' ')
				col++
			}
		}
		out.WriteString(word)
		col += n
	}
	return out.String()
}

func logitsCell(l LogitsChange) string {
	switch {
	case l.Verdict == BitIdentical:
		return "bit-identical"
	case l.First != nil && l.First.Position != nil:
		return fmt.Sprintf("changed @ %s/%s pos %d (%d/%d)", l.First.Dataset, l.First.ID, *l.First.Position, l.ChangedPrompts, l.ComparedPrompts)
	case l.First != nil:
		return fmt.Sprintf("changed @ %s/%s (%d/%d)", l.First.Dataset, l.First.ID, l.ChangedPrompts, l.ComparedPrompts)
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
	switch {
	case m.Beyond && m.Worse:
		s += " worse"
	case m.Beyond:
		s += " better"
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
		return fmt.Sprintf("%.0f n=%d", s.Fast, s.N)
	}
	return fmt.Sprintf("%.0f [%.0f–%.0f]", s.Fast, *s.FastLo, *s.FastHi)
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
