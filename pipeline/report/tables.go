package report

import (
	"fmt"
	"io"
	"math"
	"path/filepath"
	"strings"

	"github.com/evalrun/evalrun/internal/texttable"
	"github.com/evalrun/evalrun/pipeline/diag"
	"github.com/evalrun/evalrun/pipeline/gate"
	"github.com/evalrun/evalrun/pipeline/speedstat"
	"github.com/evalrun/evalrun/pipeline/summary"
)

func fmtPM(v, e *float64, scale float64, prec int) string {
	if v == nil {
		return "-"
	}
	if e == nil {
		return fmt.Sprintf("%.*f", prec, *v*scale)
	}
	return fmt.Sprintf("%.*f ± %.*f", prec, *v*scale, prec, *e*scale)
}

// fmtSmall prints a statistic that spans many orders of magnitude (KLD):
// fixed point for readable values, scientific for tiny ones.
func fmtSmall(v, e *float64) string {
	if v == nil {
		return "-"
	}
	if *v != 0 && math.Abs(*v) < 1e-3 {
		if e == nil {
			return fmt.Sprintf("%.3g", *v)
		}
		return fmt.Sprintf("%.3g ± %.2g", *v, *e)
	}
	return fmtPM(v, e, 1, 6)
}

func fmtG(v *float64) string {
	if v == nil {
		return "-"
	}
	return fmt.Sprintf("%.3g", *v)
}

func fmtPct(v *float64) string {
	if v == nil {
		return "-"
	}
	return fmt.Sprintf("%.2f%%", *v*100)
}

func verdictCell(b summary.BackendSummary) string {
	switch {
	case b.Status != summary.StatusOK:
		return strings.ToUpper(b.Status)
	case b.Pass && len(b.Gates) == 0:
		return "NO GATES"
	case b.Pass:
		return "PASS"
	default:
		return "FAIL"
	}
}

// column is a metric of the catalog shown in a table, with its ± or not.
type column struct {
	metric  gate.Metric
	withErr bool
}

func columns(names ...string) []column {
	var out []column
	for _, n := range names {
		name, withErr := strings.CutSuffix(n, "±")
		out = append(out, column{gate.MustLookup(name), withErr})
	}
	return out
}

// headlineColumns are the one-screen summary's metrics.
var headlineColumns = columns("kld_mean±", "same_top_p±", "ppl_ratio±")

// junitColumns are the figures a JUnit failure's body lists.
var junitColumns = columns("kld_mean±", "kld_p99", "same_top_p", "ppl_ratio±", "nmse", "nan_count", "inf_count")

// accuracyColumns are the run table's metrics.
var accuracyColumns = columns("kld_mean±", "kld_p99", "same_top_p±", "rms_dp", "ppl_ratio±", "nmse", "max_abs_diff")

// cell prints a metric as the catalog's format says; "-" when not measured.
func (c column) cell(a *summary.Accuracy) string {
	v, e := c.metric.Value(a)
	if v == nil {
		return "-"
	}
	if !c.withErr {
		e = nil
	}
	switch c.metric.Format {
	case gate.Small:
		return fmtSmall(v, e)
	case gate.Percent:
		if e == nil {
			return fmtPct(v)
		}
		return fmtPM(v, e, 100, 2) + "%"
	case gate.Ratio:
		return fmtPM(v, e, 1, 4)
	case gate.Count:
		return fmt.Sprintf("%.0f", *v)
	case gate.Position:
		return fmt.Sprintf("%.1f", *v)
	}
	return fmtG(v)
}

// grid is a table's cells before they are drawn, with the key columns
// that a table printed within a width shows when not every column fits.
type grid struct {
	header []string
	key    []bool // per column
	rows   [][]string
}

// column adds a column to the header; key: shown however narrow the table.
func (g *grid) column(name string, key bool) {
	g.header = append(g.header, name)
	g.key = append(g.key, key)
}

// keyOnly is g with its key columns only, and the names of the others.
func (g grid) keyOnly() (grid, []string) {
	var out grid
	var hidden []string
	for i, h := range g.header {
		if !g.key[i] {
			hidden = append(hidden, h)
			continue
		}
		out.column(h, true)
	}
	for _, row := range g.rows {
		var kept []string
		for i, c := range row {
			if g.key[i] {
				kept = append(kept, c)
			}
		}
		out.rows = append(out.rows, kept)
	}
	return out, hidden
}

// draw writes g as a table: in Markdown when md (every column: a file is
// no terminal); otherwise within width display columns (0: no limit, every
// column). When not every column fits, only the key columns show, followed
// by a line that names the hidden ones; when even those do not fit, their
// cells wrap.
func (g grid) draw(w io.Writer, md bool, width int) error {
	shown, hidden := g, []string(nil)
	fits := func(g grid) bool {
		return md || width <= 0 || texttable.TableWidth(append([][]string{g.header}, g.rows...)...) <= width
	}
	if !fits(g) {
		shown, hidden = g.keyOnly()
	}
	t := texttable.New(w, md)
	if !fits(shown) {
		t = texttable.NewWithin(w, width)
	}
	cells := func(row []string) []string { return row }
	if md { // a pipe in a cell ("max |Δlogit|") would end it
		cells = func(row []string) []string {
			var out []string
			for _, c := range row {
				out = append(out, strings.ReplaceAll(c, "|", `\|`))
			}
			return out
		}
	}
	t.Header(cells(shown.header))
	for _, row := range shown.rows {
		if err := t.Append(cells(row)); err != nil {
			return err
		}
	}
	if err := t.Render(); err != nil {
		return err
	}
	if len(hidden) > 0 {
		note := fmt.Sprintf("%d columns hidden (%s): --wide shows them", len(hidden), strings.Join(hidden, ", "))
		if texttable.DisplayWidth(note) > width {
			note = fmt.Sprintf("%d columns hidden: --wide shows them", len(hidden))
		}
		fmt.Fprintln(w, note)
	}
	return nil
}

// headline reports whether an accuracy column is one of the one-screen
// summary's metrics, which a narrow table keeps.
func headline(c column) bool {
	for _, h := range headlineColumns {
		if h.metric.Name == c.metric.Name {
			return true
		}
	}
	return false
}

// accuracyGrid is the accuracy table: a row per candidate; narrow, its
// name, status, the headline metrics and its verdict.
func accuracyGrid(s *summary.Summary) grid {
	var g grid
	g.column("backend", true)
	g.column("status", true)
	g.column("tokens", false)
	for _, c := range accuracyColumns {
		g.column(c.metric.Label, headline(c))
	}
	g.column("greedy", false)
	g.column("verdict", true)
	for _, b := range s.Backends {
		row := []string{b.Name, b.Status, "-"}
		a := b.Accuracy
		if a != nil {
			row[2] = fmt.Sprint(a.Tokens)
			if a.NaNCount+a.InfCount > 0 {
				row[1] += fmt.Sprintf(" (%d NaN, %d Inf)", a.NaNCount, a.InfCount)
			}
		}
		for _, c := range accuracyColumns {
			row = append(row, c.cell(a))
		}
		greedy := "-"
		if a != nil && a.GreedyMatch != nil {
			greedy = fmt.Sprintf("%.0f%% (div@%.1f)", *a.GreedyMatch*100, *a.FirstDivergenceMean)
		}
		g.rows = append(g.rows, append(row, greedy, verdictCell(b)))
	}
	return g
}

// rateStats are a test's rate statistics computed from its repetitions,
// as evalrun compare and the speed gates compute them (a summary written
// before the p95 existed has none in its stats); the summary's own when it
// kept no repetitions; nil when the test did not run.
func rateStats(b *summary.BenchTest) *speedstat.Summary {
	if b == nil {
		return nil
	}
	if st := speedstat.Summarize(speedstat.TestRates(b)); st != nil {
		return st
	}
	return b.Stats
}

// fmtRate shows a test's p95 rate, the speed the fastest 5 % of its
// repetitions reach, with its 95 % confidence interval, or with the
// repetition count when they are too few for one.
func fmtRate(st *speedstat.Summary) string {
	switch {
	case st == nil:
		return "-"
	case st.FastLo == nil || st.FastHi == nil:
		return fmt.Sprintf("%.0f (n=%d)", st.Fast, st.N)
	}
	return fmt.Sprintf("%.0f [%.0f–%.0f]", st.Fast, *st.FastLo, *st.FastHi)
}

// fmtTS is fmtRate for a test of the throughput table, marked when the
// device is simulated.
func fmtTS(b *summary.BenchTest, simulated bool) string {
	s := fmtRate(rateStats(b))
	if s != "-" && simulated {
		s += " simulated"
	}
	return s
}

func fmtBytes(n *int64) string {
	if n == nil {
		return "-"
	}
	return fmt.Sprintf("%.1f MiB", float64(*n)/(1<<20))
}

// throughputGrid is the throughput table: a row per benched backend, the
// reference first; narrow, its name, device and rates.
func throughputGrid(s *summary.Summary) grid {
	ppName, tgName := "pp p95 t/s", "tg p95 t/s"
	ppCI, tgCI := "", "" // named when a cell shows the interval
	all := append([]summary.BackendSummary{s.Reference}, s.Backends...)
	for _, b := range all {
		if b.Throughput == nil {
			continue
		}
		if t := b.Throughput.PP; t != nil {
			ppName = fmt.Sprintf("pp%d p95 t/s", t.NPrompt)
			if st := rateStats(t); st != nil && st.FastLo != nil {
				ppCI = " [95% CI]"
			}
		}
		if t := b.Throughput.TG; t != nil {
			tgName = fmt.Sprintf("tg%d p95 t/s", t.NGen)
			if st := rateStats(t); st != nil && st.FastLo != nil {
				tgCI = " [95% CI]"
			}
		}
	}
	ppName, tgName = ppName+ppCI, tgName+tgCI
	var g grid
	for _, c := range []struct {
		name string
		key  bool
	}{{"backend", true}, {"device", true}, {"kernels", false}, {"threads", false}, {"load s", false}, {"warm-up s", false},
		{ppName, true}, {tgName, true}, {"peak RSS load / run", false}, {"offload", false}} {
		g.column(c.name, c.key)
	}
	for _, b := range all {
		if b.Kind == "kld_base" {
			continue
		}
		dev := "-"
		if b.Info != nil {
			dev = b.Info.Device
		}
		load, warm, plan, kern, peakLoad := "-", "-", "-", "-", "-"
		if b.Load != nil {
			load = fmt.Sprintf("%.3f", b.Load.LoadS)
			warm = fmt.Sprintf("%.3f", b.Load.WarmupS)
			if b.Load.PlanSummary != "" {
				plan = b.Load.PlanSummary
			}
			if b.Load.Kernels != "" {
				kern = b.Load.Kernels
			}
			peakLoad = fmtBytes(b.Load.PeakRSSBytes)
		}
		pp, tg := "-", "-"
		if b.Throughput != nil {
			pp, tg = fmtTS(b.Throughput.PP, b.Throughput.Simulated), fmtTS(b.Throughput.TG, b.Throughput.Simulated)
		}
		name := b.Name
		if b.Name == s.Reference.Name {
			name += " (ref)"
		}
		g.rows = append(g.rows, []string{name, dev, kern, fmt.Sprint(b.Threads), load, warm, pp, tg, peakLoad + " / " + fmtBytes(b.PeakRSSBytes), plan})
	}
	return g
}

// printTables prints the accuracy and throughput tables within width
// display columns (0: every column, however wide), and the device
// diagnostics in short; full names the file that holds them whole.
func printTables(w io.Writer, s *summary.Summary, width int, full string) error {
	fmt.Fprintf(w, "\n%s: %s (%s, %d params) — reference %s\n\naccuracy vs reference\n", s.Run.Name, filepath.Base(s.Model.Path), s.Model.Arch, s.Model.NParams, s.Reference.Name)
	if err := accuracyGrid(s).draw(w, false, width); err != nil {
		return err
	}
	fmt.Fprintf(w, "\nthroughput (timed inside each plugin; p95: the rate the fastest 5%% of repetitions reach)\n")
	if err := throughputGrid(s).draw(w, false, width); err != nil {
		return err
	}
	if h := s.Host; h != nil && h.HostIPCShare != nil {
		fmt.Fprintf(w, "\nhost + IPC: %.1f%% of the %.1f s of accuracy passes (plugins computing: %.1f s; host decoding %.2f s, comparing %.2f s)\n",
			100**h.HostIPCShare, h.PassesS, h.ComputeS, h.DecodeS, h.MetricsS)
	}
	for _, b := range s.Backends {
		diag.WriteText(w, b.Name, b.Diagnostics, full)
	}
	return nil
}

// offloads reports whether any op of a plan runs off the CPU (an all-CPU
// plan is summarised in one line).
func offloads(plan []summary.PlanEntry) bool {
	for _, p := range plan {
		if p.Device != "cpu" {
			return true
		}
	}
	return false
}
