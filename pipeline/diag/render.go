package diag

import (
	"fmt"
	"html"
	"io"
	"strings"
	"text/tabwriter"
)

// WorstOps is how many ops of the shadow-mode ranking evalrun run prints;
// the report files list every op.
const WorstOps = 5

// WriteText prints a backend's diagnostics as evalrun run shows them after
// its tables, short: the WorstOps worst ops of the shadow-mode ranking, the
// per-layer drift in a line, the kernel accounting and the warnings. full
// names where every op and layer is (report.md).
func WriteText(w io.Writer, backend string, r *Report, full string) {
	if r == nil {
		return
	}
	for _, s := range sections(r, false, full) {
		fmt.Fprintf(w, "\n%s: %s\n", backend, s.title)
		if len(s.rows) > 0 {
			tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
			fmt.Fprintln(tw, strings.Join(s.head, "\t")+"\t")
			for _, row := range s.rows {
				fmt.Fprintln(tw, strings.Join(row, "\t")+"\t")
			}
			tw.Flush()
		}
		for _, n := range s.notes {
			fmt.Fprintf(w, "%s\n", n)
		}
	}
}

// WriteMarkdown writes the diagnostics in full as report.md sections
// (level-3 headings).
func WriteMarkdown(w io.Writer, r *Report) {
	if r == nil {
		return
	}
	for _, s := range sections(r, true, "") {
		fmt.Fprintf(w, "\n### %s\n\n", s.title)
		if len(s.rows) > 0 {
			fmt.Fprintf(w, "| %s |\n|%s\n", strings.Join(s.head, " | "), strings.Repeat("---|", len(s.head)))
			for _, row := range s.rows {
				fmt.Fprintf(w, "| %s |\n", strings.Join(row, " | "))
			}
			fmt.Fprintln(w)
		}
		for _, n := range s.notes {
			fmt.Fprintf(w, "%s\n", n)
		}
	}
}

// WriteHTML writes the diagnostics in full for report.html: a level-3
// heading, a table and notes per section.
func WriteHTML(w io.Writer, r *Report) {
	if r == nil {
		return
	}
	for _, s := range sections(r, false, "") {
		fmt.Fprintf(w, "<h3>%s</h3>\n", html.EscapeString(s.title))
		if len(s.rows) > 0 {
			io.WriteString(w, "<table><tr>")
			for _, h := range s.head {
				fmt.Fprintf(w, "<th>%s</th>", html.EscapeString(h))
			}
			io.WriteString(w, "</tr>\n")
			for _, row := range s.rows {
				io.WriteString(w, "<tr>")
				for _, c := range row {
					fmt.Fprintf(w, "<td>%s</td>", html.EscapeString(c))
				}
				io.WriteString(w, "</tr>\n")
			}
			io.WriteString(w, "</table>\n")
		}
		for _, n := range s.notes {
			fmt.Fprintf(w, "<p>%s</p>\n", html.EscapeString(n))
		}
	}
}

type section struct {
	title string
	head  []string
	rows  [][]string
	notes []string
}

// sections are the diagnostics' tables and notes: in full, or (full != "",
// evalrun run's output) short, with where the rest is.
func sections(r *Report, md bool, full string) []section {
	warn := "WARNING: "
	if md {
		warn = "**Warning:** "
	}
	brief := full != ""
	var out []section
	if r.Shadow {
		s := section{title: "per-op error against the CPU path (shadow mode, worst first)",
			head: []string{"rank", "op", "calls", "NMSE", "cosine", "max |Δ|", "non-finite"}}
		ops := r.Ops
		if brief && len(ops) > WorstOps {
			s.title = fmt.Sprintf("per-op error against the CPU path (shadow mode): the %d worst of %d ops", WorstOps, len(ops))
			ops = ops[:WorstOps]
			s.notes = append(s.notes, fmt.Sprintf("the other %d ops: %s", len(r.Ops)-WorstOps, full))
		}
		for i, o := range ops {
			s.rows = append(s.rows, []string{fmt.Sprint(i + 1), o.Op, fmt.Sprint(o.Calls), fmt.Sprintf("%.3e", o.NMSE),
				fmt.Sprintf("%.7f", o.Cosine), fmt.Sprintf("%.3e", o.MaxAbs), fmt.Sprint(o.NonFinite)})
		}
		if len(r.Ops) == 0 {
			s.notes = append(s.notes, "no op ran on the device")
		}
		out = append(out, s)
	}
	if d := r.LayerDrift; d != nil {
		s := section{title: fmt.Sprintf("per-layer drift of the residual stream (%s chunk %d, positions %s)", d.Dataset, d.Chunk, ints(d.Positions))}
		if brief && len(d.Layers) > 0 {
			first, last := d.Layers[0], d.Layers[len(d.Layers)-1]
			grows := fmt.Sprintf("the error grows most at layer %d", d.Grows)
			for _, l := range d.Layers {
				if l.Layer == d.Grows && l.Growth > 0 {
					grows += fmt.Sprintf(" (×%.2f)", l.Growth)
				}
			}
			s.notes = append(s.notes, fmt.Sprintf("NMSE %.3e at layer %d, %.3e at layer %d; %s; every layer: %s",
				first.NMSE, first.Layer, last.NMSE, last.Layer, grows, full))
		} else {
			s.head = []string{"layer", "NMSE", "cosine", "max |Δ|", "growth"}
			for _, l := range d.Layers {
				g := "—"
				if l.Layer > 0 && l.Growth > 0 {
					g = fmt.Sprintf("×%.2f", l.Growth)
				}
				s.rows = append(s.rows, []string{fmt.Sprint(l.Layer), fmt.Sprintf("%.3e", l.NMSE), fmt.Sprintf("%.7f", l.Cosine), fmt.Sprintf("%.3e", l.MaxAbs), g})
			}
			s.notes = append(s.notes, fmt.Sprintf("the error grows most at layer %d", d.Grows))
		}
		out = append(out, s)
	}
	if k := r.Kernels; k != nil {
		s := section{title: fmt.Sprintf("kernel accounting (%s)", k.List)}
		if k.Listed > 0 {
			s.notes = append(s.notes, fmt.Sprintf("%d listed, %d ran, %d never ran; %d NPU calls", k.Listed, k.Ran, len(k.NeverRan), k.Calls))
		} else {
			s.notes = append(s.notes, fmt.Sprintf("%d kernels ran; %d NPU calls", k.Ran, k.Calls))
		}
		out = append(out, s)
	}
	if len(r.Warnings) > 0 {
		s := section{title: "warnings"}
		for _, w := range r.Warnings {
			s.notes = append(s.notes, warn+w)
		}
		out = append(out, s)
	}
	return out
}

func ints(v []int) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = fmt.Sprint(x)
	}
	return strings.Join(s, ", ")
}
