package report

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/evalrun/evalrun/pipeline/diag"
	"github.com/evalrun/evalrun/pipeline/spec"
	"github.com/evalrun/evalrun/pipeline/summary"
)

// Markdown writes report.md. Its first section is the one-screen summary
// (verdict, one line per backend with its key figures and what failed),
// the part a CI step summary shows; the full tables, gates, offload plans
// and llama-perplexity statistics follow, the long ones folded in
// <details>.
func Markdown(w io.Writer, s *summary.Summary) error {
	if err := stepSummary(w, s); err != nil {
		return err
	}
	fmt.Fprintf(w, "\n## Run\n\n")
	fmt.Fprintf(w, "- run: `%s`, started %s, %.1f s\n", s.Run.ID, s.Run.Started.Format("2006-01-02 15:04:05 MST"), s.Run.DurationS)
	fmt.Fprintf(w, "- evalrun %s (commit %s), %s/%s, %d CPUs\n", s.Run.EvalrunVersion, s.Run.GitCommit, s.Run.Host.OS, s.Run.Host.Arch, s.Run.Host.CPUs)
	fmt.Fprintf(w, "- model: `%s` (%s, %d params, vocab %d, sha256 `%s`)\n", s.Model.Path, s.Model.Arch, s.Model.NParams, s.Model.NVocab, s.Model.SHA256)
	fmt.Fprintf(w, "- reference: %s (%s)\n", s.Reference.Name, s.Reference.Kind)
	for _, d := range s.Datasets {
		fmt.Fprintf(w, "- dataset %s (%s): %d records, %d tokens", d.Name, d.Mode, d.Records, d.Tokens)
		if d.Mode == string(spec.ModeScore) {
			fmt.Fprintf(w, ", %d chunks of %d, %d scored tokens", d.Chunks, d.NCtx, d.Scored)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "\n## Accuracy vs reference\n\n")
	if err := accuracyGrid(s).draw(w, true, 0); err != nil {
		return err
	}
	fmt.Fprintf(w, "\n## Throughput\n\n")
	if err := throughputGrid(s).draw(w, true, 0); err != nil {
		return err
	}
	for _, b := range s.Backends {
		backendSection(w, b)
	}
	return nil
}

func backendSection(w io.Writer, b summary.BackendSummary) {
	fmt.Fprintf(w, "\n## %s\n\n", b.Name)
	fmt.Fprintf(w, "- plugin `%s`, status **%s**", b.Plugin, b.Status)
	if b.Error != "" {
		fmt.Fprintf(w, ": %s", b.Error)
	}
	fmt.Fprintln(w)
	if b.Model != "" {
		fmt.Fprintf(w, "- model `%s`\n", b.Model)
	}
	if len(b.Options) > 0 {
		o, _ := json.Marshal(b.Options)
		if len(o) > 500 { // the spec's size bounds it; a report stays readable
			o = append(o[:500:500], "…"...)
		}
		fmt.Fprintf(w, "- options `%s`\n", o)
	}
	for _, warn := range b.Warnings {
		fmt.Fprintf(w, "- warning: %s\n", mdEscape(warn))
	}
	for _, g := range b.Gates {
		mark := "pass"
		if !g.Pass {
			mark = "FAIL"
		}
		fmt.Fprintf(w, "- gate %s: %s\n", g.Name, mark+" — "+g.Describe())
	}
	if b.Load != nil && offloads(b.Load.Plan) {
		fmt.Fprintf(w, "\n<details><summary>Offload plan: %s</summary>\n\n| op | shape T×K×N | device | note |\n|---|---|---|---|\n", mdEscape(b.Load.PlanSummary))
		for _, p := range b.Load.Plan {
			fmt.Fprintf(w, "| %s | %s | %s | %s |\n", mdCell(p.Op), mdCell(p.Shape), mdCell(p.Device), mdCell(p.Reason))
		}
		fmt.Fprintf(w, "\n</details>\n")
	}
	if b.Diagnostics != nil { // per-op and per-kernel tables: folded like the plan
		fmt.Fprintf(w, "\n<details><summary>Device diagnostics: per-op errors, per-layer drift, kernel accounting</summary>\n")
		diag.WriteMarkdown(w, b.Diagnostics)
		fmt.Fprintf(w, "\n</details>\n")
	}
	if b.Accuracy != nil && b.Accuracy.LlamaPerplexity != "" {
		fmt.Fprintf(w, "\n<details><summary>llama-perplexity statistics</summary>\n\n```\n%s\n```\n\n</details>\n", strings.TrimRight(b.Accuracy.LlamaPerplexity, "\n"))
	}
}

// stepSummary writes the one-screen summary: the verdict, one table row per
// backend (status, key accuracy figures, generation speed, gates) and the
// verdict's reasons.
func stepSummary(w io.Writer, s *summary.Summary) error {
	fmt.Fprintf(w, "# evalrun %s: %s %s%s\n\n", mdEscape(s.Run.Name), verdictMark(s.Verdict.Status), strings.ToUpper(s.Verdict.Status), notFull(s))
	var ds []string
	for _, d := range s.Datasets {
		ds = append(ds, fmt.Sprintf("%s (%s, %d tokens)", d.Name, d.Mode, d.Tokens))
	}
	fmt.Fprintf(w, "Model `%s` (%s, %d params), reference **%s**, datasets %s; exit code %d, %.1f s.\n\n",
		baseName(s.Model.Path), s.Model.Arch, s.Model.NParams, mdEscape(s.Reference.Name), mdEscape(strings.Join(ds, ", ")), s.Verdict.ExitCode, s.Run.DurationS)
	fmt.Fprintf(w, "| | backend | status | KLD mean | same top-1 | PPL ratio | tg p95 t/s | gates |\n|---|---|---|---|---|---|---|---|\n")
	for _, r := range summaryRows(s) {
		c := r.cells
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s | %s |\n", c[0], mdCell(c[1]), mdCell(c[2]), c[3], c[4], c[5], c[6], mdCell(c[7]))
	}
	warnings := allWarnings(s)
	if len(s.Verdict.Reasons) > 0 || len(warnings) > 0 {
		fmt.Fprintln(w)
		for i, r := range s.Verdict.Reasons {
			if i == 8 { // one screen: the rest is in report.md and summary.json
				fmt.Fprintf(w, "- … and %d more (report.md)\n", len(s.Verdict.Reasons)-i)
				break
			}
			fmt.Fprintf(w, "- %s\n", mdEscape(firstLine(r, 200)))
		}
		for i, warn := range warnings {
			if i == 4 {
				fmt.Fprintf(w, "- ⚠️ … and %d more warnings (report.md)\n", len(warnings)-i)
				break
			}
			fmt.Fprintf(w, "- ⚠️ %s\n", mdEscape(firstLine(warn, 200)))
		}
	}
	return nil
}

type summaryRow struct {
	class string   // pass, fail, error or skipped
	cells []string // mark, backend, status, KLD mean, same top-1, PPL ratio, tg t/s, gates
}

// summaryRows are the one-screen summary's rows: the reference, then every
// candidate.
func summaryRows(s *summary.Summary) []summaryRow {
	var rows []summaryRow
	for _, b := range append([]summary.BackendSummary{s.Reference}, s.Backends...) {
		name, gates := b.Name, gateCell(b)
		if b.Name == s.Reference.Name {
			name += " (ref)"
			gates = "-"
		}
		kld, same, ppl := headlineColumns[0].cell(b.Accuracy), headlineColumns[1].cell(b.Accuracy), headlineColumns[2].cell(b.Accuracy)
		tg := "-"
		if b.Throughput != nil {
			tg = fmtRate(rateStats(b.Throughput.TG))
		}
		if tg != "-" && simulated(b) {
			tg += " (simulated)"
		}
		status := b.Status
		if b.Error != "" {
			status += ": " + firstLine(b.Error, 80)
		}
		class := map[string]string{"✅": "pass", "❌": "fail", "💥": "error", "⏭️": "skipped"}[backendMark(b)]
		rows = append(rows, summaryRow{class, []string{backendMark(b), name, status, kld, same, ppl, tg, gates}})
	}
	return rows
}

// allWarnings are the backends' warnings, each prefixed with its backend.
func allWarnings(s *summary.Summary) []string {
	var out []string
	for _, b := range append([]summary.BackendSummary{s.Reference}, s.Backends...) {
		for _, w := range b.Warnings {
			out = append(out, b.Name+": "+w)
		}
	}
	return out
}

// gateCell says how a backend fared against its gates: "2/2 pass" or the
// failed ones.
func gateCell(b summary.BackendSummary) string {
	if b.Status != summary.StatusOK {
		return "not checked"
	}
	if len(b.Gates) == 0 {
		return "no gates"
	}
	var failed []string
	for _, g := range b.Gates {
		if !g.Pass {
			failed = append(failed, g.Name)
		}
	}
	if len(failed) == 0 {
		skipped := 0
		for _, g := range b.Gates {
			if g.Skipped {
				skipped++
			}
		}
		if skipped > 0 {
			return fmt.Sprintf("%d/%d pass, %d not applied", len(b.Gates)-skipped, len(b.Gates)-skipped, skipped)
		}
		return fmt.Sprintf("%d/%d pass", len(b.Gates), len(b.Gates))
	}
	return "FAIL " + strings.Join(failed, ", ")
}

func verdictMark(status string) string {
	switch status {
	case summary.VerdictPass:
		return "✅"
	case summary.VerdictFail:
		return "❌"
	case summary.VerdictNoGates:
		return "➖"
	}
	return "💥"
}

func backendMark(b summary.BackendSummary) string {
	switch {
	case b.Status == summary.StatusSkipped:
		return "⏭️"
	case b.Status != summary.StatusOK:
		return "💥"
	case b.Pass:
		return "✅"
	}
	return "❌"
}

// simulated reports whether a backend's device is a simulator, whose
// throughput says nothing about the hardware's.
func simulated(b summary.BackendSummary) bool {
	return b.Throughput != nil && b.Throughput.Simulated
}

// firstLine cuts s to its first line and at most n runes.
func firstLine(s string, n int) string {
	s, _, cut := strings.Cut(strings.TrimSpace(s), "\n")
	if r := []rune(s); len(r) > n {
		return string(r[:n]) + "…"
	} else if cut {
		return s + " …"
	}
	return s
}

func baseName(p string) string { return p[strings.LastIndexAny(p, `/\`)+1:] }

// mdEscaper is mdEscape's replacer.
var mdEscaper = strings.NewReplacer("<", "&lt;", ">", "&gt;", "&", "&amp;", "*", `\*`, "_", `\_`, "`", "\\`", "[", `\[`, "]", `\]`)

// mdEscape keeps text from a plugin or a spec from being read as Markdown
// or HTML markup.
func mdEscape(s string) string { return mdEscaper.Replace(s) }

// mdCell is mdEscape for a table cell: no pipes, no line breaks.
func mdCell(s string) string {
	return strings.NewReplacer("|", `\|`, "\n", " ", "\r", " ").Replace(mdEscape(s))
}
