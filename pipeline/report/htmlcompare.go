package report

import (
	"fmt"
	"math"
	"strings"

	"github.com/evalrun/evalrun/pipeline/runcompare"
	"github.com/evalrun/evalrun/pipeline/speedstat"
)

// compareTable lists, per backend, what evalrun compare says about its
// logits and status.
func compareTable(r *runcompare.Result) string {
	var b strings.Builder
	b.WriteString(`<table class="compare"><tr><th>backend</th><th>status</th><th>logits</th><th>changes beyond their ±</th></tr>`)
	for _, c := range r.Backends {
		status := c.NewStatus
		if c.StatusChanged() {
			status = fmt.Sprintf("%s → %s", dash(c.BaseStatus), dash(c.NewStatus))
		}
		logits := c.Logits.Verdict
		if f := c.Logits.First; f != nil {
			logits += fmt.Sprintf(": first in %s/%s", f.Dataset, f.ID)
			if f.Position != nil {
				logits += fmt.Sprintf(" at position %d", *f.Position)
			}
			logits += fmt.Sprintf(" (%d of %d changed)", c.Logits.ChangedPrompts, c.Logits.ComparedPrompts)
		}
		var beyond []string
		for _, m := range c.Metrics {
			if m.Beyond && m.Delta != nil {
				beyond = append(beyond, fmt.Sprintf("%s %+.3g", m.Name, *m.Delta))
			}
		}
		for _, sp := range c.Speed {
			if sp.Significant() {
				beyond = append(beyond, fmt.Sprintf("%s %+.1f%% (%s)", sp.Test, 100**sp.Delta, sp.Verdict))
			}
		}
		class := ""
		if c.StatusChanged() || worse(c) {
			class = "fail"
		}
		fmt.Fprintf(&b, `<tr class="%s"><td>%s</td><td>%s</td><td>%s</td><td>%s</td></tr>`, class, esc(c.Name), esc(status), esc(logits), esc(dash(strings.Join(beyond, ", "))))
	}
	b.WriteString(`</table>`)
	fmt.Fprintf(&b, `<p>%s</p>`, esc(r.MachineLine()))
	return b.String()
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// worse reports whether a backend got worse beyond the uncertainty: an
// accuracy statistic, or a significant slowdown.
func worse(c runcompare.BackendChange) bool {
	for _, m := range c.Metrics {
		if m.Beyond && m.Worse {
			return true
		}
	}
	for _, sp := range c.Speed {
		if sp.Verdict == speedstat.Slower {
			return true
		}
	}
	return false
}

// comparePoint is one value of a backend in one run, with its ± interval.
type comparePoint struct {
	v, lo, hi float64
	ok        bool
}

// compareRow is one backend in a compare panel: the baseline's and this
// run's points, and whether the change counts as worse.
type compareRow struct {
	name      string
	base, new comparePoint
	bad       bool
}

// compareChart draws two panels: KLD mean (log scale) and the generation
// test's p95 rate, baseline and this run side by side.
func compareChart(r *runcompare.Result) string {
	var kld, tg []compareRow
	for _, c := range r.Backends {
		if c.Presence != "both" {
			continue
		}
		for _, m := range c.Metrics {
			if m.Name != "kld_mean" {
				continue
			}
			kld = append(kld, compareRow{name: c.Name, base: errPoint(m.Base, m.BaseErr), new: errPoint(m.New, m.NewErr), bad: m.Beyond && m.Worse})
		}
		for _, sp := range c.Speed {
			if !strings.HasPrefix(sp.Test, "tg") {
				continue
			}
			name := c.Name + " " + sp.Test
			if sp.Simulated {
				name += " (simulated)"
			}
			bad := sp.Verdict == speedstat.Slower
			tg = append(tg, compareRow{name: name, base: ratePoint(sp.Base), new: ratePoint(sp.New), bad: bad})
		}
	}
	return `<div class="pair">` + comparePanel("KLD mean (log scale)", kld, true) + comparePanel("tg tokens/s: p95 and 95% CI", tg, false) + `</div>`
}

func errPoint(v, e *float64) comparePoint {
	if v == nil {
		return comparePoint{}
	}
	p := comparePoint{v: *v, lo: *v, hi: *v, ok: true}
	if e != nil {
		p.lo, p.hi = *v-*e, *v+*e
	}
	return p
}

func ratePoint(s *speedstat.Summary) comparePoint {
	if s == nil {
		return comparePoint{}
	}
	p := comparePoint{v: s.Fast, lo: s.Fast, hi: s.Fast, ok: true}
	if s.FastLo != nil && s.FastHi != nil {
		p.lo, p.hi = *s.FastLo, *s.FastHi
	}
	return p
}

// comparePanel draws one panel: per row a hollow (baseline) and a filled
// (this run) marker with their intervals.
func comparePanel(title string, rows []compareRow, logScale bool) string {
	tr := func(v float64) float64 {
		if logScale {
			return math.Log10(v)
		}
		return v
	}
	usable := func(p comparePoint) bool { return p.ok && (!logScale || p.v > 0) }
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, r := range rows {
		for _, p := range []comparePoint{r.base, r.new} {
			if usable(p) {
				lo, hi = math.Min(lo, tr(math.Max(p.lo, p.v/2))), math.Max(hi, tr(p.hi))
			}
		}
	}
	if math.IsInf(lo, 1) {
		return emptyChart(title + ": not measured in both runs")
	}
	if logScale {
		lo, hi = math.Floor(lo), math.Ceil(hi)
	} else {
		lo, hi = 0, hi*1.05
	}
	const rowH = 26.0
	p := newPlot(440, 56+rowH*float64(len(rows)), lo, hi, 0, float64(len(rows)))
	p.left = 150
	xt, xl := niceTicks(lo, hi, 4), numLabel
	if logScale {
		xt, xl = intTicks(lo, hi), pow10Label
	}
	p.axes(xt, nil, xl, numLabel, title, "")
	for i, r := range rows {
		yc := p.y(float64(len(rows)-i) - 0.5)
		col := "#1f77b4"
		if r.bad {
			col = "#d62728"
		}
		fmt.Fprintf(&p.b, `<g class="series" data-series="%s"><text x="%.1f" y="%.1f" text-anchor="end" font-size="11">%s</text>`, esc(r.name), p.left-6, yc+4, esc(r.name))
		for k, pt := range []comparePoint{r.base, r.new} {
			if !usable(pt) {
				continue
			}
			y := yc - 5 + 10*float64(k)
			fill := []string{"#fff", col}[k]
			who := []string{"baseline", "this run"}[k]
			fmt.Fprintf(&p.b, `<path d="M%.1f %.1fH%.1f" stroke="%s"/><circle cx="%.1f" cy="%.1f" r="4" fill="%s" stroke="%s"><title>%s, %s: %.4g [%.4g, %.4g]</title></circle>`,
				p.x(tr(math.Max(pt.lo, pt.v/2))), y, p.x(tr(pt.hi)), col, p.x(tr(pt.v)), y, fill, col, esc(r.name), who, pt.v, pt.lo, pt.hi)
		}
		p.b.WriteString(`</g>`)
	}
	return p.svg()
}
