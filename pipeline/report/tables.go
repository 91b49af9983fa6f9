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

func accuracyTable(w io.Writer, s *summary.Summary, md bool) error {
	t := texttable.New(w, md)
	header := []string{"backend", "status", "tokens"}
	for _, c := range accuracyColumns {
		header = append(header, c.metric.Label)
	}
	t.Header(append(header, "greedy", "verdict"))
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
		if err := t.Append(append(row, greedy, verdictCell(b))); err != nil {
			return err
		}
	}
	return t.Render()
}

// fmtTS shows a test's median rate with its 95 % confidence interval (or
// the repetition count when too few for one), marked when simulated.
func fmtTS(b *summary.BenchTest, simulated bool) string {
	if b == nil || b.Stats == nil {
		return "-"
	}
	s := fmt.Sprintf("%.0f (n=%d)", b.Stats.Median, b.Stats.N)
	if b.Stats.Lo != nil {
		s = fmt.Sprintf("%.0f [%.0f–%.0f]", b.Stats.Median, *b.Stats.Lo, *b.Stats.Hi)
	}
	if simulated {
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

func throughputTable(w io.Writer, s *summary.Summary, md bool) error {
	t := texttable.New(w, md)
	ppName, tgName := "pp t/s", "tg t/s" // median [95% CI]
	all := append([]summary.BackendSummary{s.Reference}, s.Backends...)
	for _, b := range all {
		if b.Throughput != nil && b.Throughput.PP != nil {
			ppName = fmt.Sprintf("pp%d t/s [95%% CI]", b.Throughput.PP.NPrompt)
		}
		if b.Throughput != nil && b.Throughput.TG != nil {
			tgName = fmt.Sprintf("tg%d t/s [95%% CI]", b.Throughput.TG.NGen)
		}
	}
	t.Header("backend", "device", "kernels", "threads", "load s", "warm-up s", ppName, tgName, "peak RSS load / run", "offload")
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
		if err := t.Append([]string{name, dev, kern, fmt.Sprint(b.Threads), load, warm, pp, tg, peakLoad + " / " + fmtBytes(b.PeakRSSBytes), plan}); err != nil {
			return err
		}
	}
	return t.Render()
}

// printTables prints the accuracy and throughput tables, and the device
// diagnostics in short; full names the file that holds them whole.
func printTables(w io.Writer, s *summary.Summary, full string) error {
	fmt.Fprintf(w, "\n%s: %s (%s, %d params) — reference %s\n\naccuracy vs reference\n", s.Run.Name, filepath.Base(s.Model.Path), s.Model.Arch, s.Model.NParams, s.Reference.Name)
	if err := accuracyTable(w, s, false); err != nil {
		return err
	}
	fmt.Fprintf(w, "\nthroughput (llama-bench style, timed inside each plugin)\n")
	if err := throughputTable(w, s, false); err != nil {
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
