package report

import (
	"fmt"
	"html"
	"math"
	"strings"
)

// The charts of report.html are SVG written here rather than drawn by a
// JavaScript library: the file stays a small fraction of a charting
// library's size (docs/design-notes.md), needs no network and no script to show its
// charts, renders the same in any browser and can be checked as text.

// palette colours series by backend, in the summary's order.
var palette = []string{"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf"}

func color(i int) string { return palette[i%len(palette)] }

// svgPlot maps data coordinates into an SVG canvas with axes.
type svgPlot struct {
	b                      strings.Builder
	w, h                   float64 // canvas
	left, right, top, bot  float64 // margins
	xmin, xmax, ymin, ymax float64
}

func newPlot(w, h, xmin, xmax, ymin, ymax float64) *svgPlot {
	if xmax <= xmin {
		xmax = xmin + 1
	}
	if ymax <= ymin {
		ymax = ymin + 1
	}
	p := &svgPlot{w: w, h: h, left: 64, right: 16, top: 12, bot: 40, xmin: xmin, xmax: xmax, ymin: ymin, ymax: ymax}
	fmt.Fprintf(&p.b, `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 %g %g" width="%g" height="%g" role="img">`, w, h, w, h)
	return p
}

func (p *svgPlot) x(v float64) float64 {
	return p.left + (v-p.xmin)/(p.xmax-p.xmin)*(p.w-p.left-p.right)
}

func (p *svgPlot) y(v float64) float64 {
	return p.h - p.bot - (v-p.ymin)/(p.ymax-p.ymin)*(p.h-p.top-p.bot)
}

// axes draws the frame, grid lines and tick labels; label formats a tick.
func (p *svgPlot) axes(xTicks, yTicks []float64, xLabel func(float64) string, yLabel func(float64) string, xTitle, yTitle string) {
	fmt.Fprintf(&p.b, `<g class="axes" font-size="11" fill="#444">`)
	for _, t := range xTicks {
		x := p.x(t)
		fmt.Fprintf(&p.b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#eee"/><text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`,
			x, p.top, x, p.h-p.bot, x, p.h-p.bot+14, esc(xLabel(t)))
	}
	for _, t := range yTicks {
		y := p.y(t)
		fmt.Fprintf(&p.b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#eee"/><text x="%.1f" y="%.1f" text-anchor="end">%s</text>`,
			p.left, y, p.w-p.right, y, p.left-4, y+4, esc(yLabel(t)))
	}
	fmt.Fprintf(&p.b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="none" stroke="#888"/>`, p.left, p.top, p.w-p.left-p.right, p.h-p.top-p.bot)
	fmt.Fprintf(&p.b, `<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`, (p.left+p.w-p.right)/2, p.h-6, esc(xTitle))
	fmt.Fprintf(&p.b, `<text transform="translate(12 %.1f) rotate(-90)" text-anchor="middle">%s</text></g>`, (p.top+p.h-p.bot)/2, esc(yTitle))
}

// line draws one series; points with NaN y break the line.
func (p *svgPlot) line(name, color string, xs, ys []float64, tips []string) {
	fmt.Fprintf(&p.b, `<g class="series" data-series="%s" stroke="%s" fill="%s">`, esc(name), color, color)
	var seg []string
	flush := func() {
		if len(seg) > 1 {
			fmt.Fprintf(&p.b, `<polyline fill="none" stroke-width="1.8" points="%s"/>`, strings.Join(seg, " "))
		}
		seg = seg[:0]
	}
	for i := range xs {
		if math.IsNaN(ys[i]) {
			flush()
			continue
		}
		x, y := p.x(xs[i]), p.y(ys[i])
		seg = append(seg, fmt.Sprintf("%.1f,%.1f", x, y))
		fmt.Fprintf(&p.b, `<circle cx="%.1f" cy="%.1f" r="2"><title>%s</title></circle>`, x, y, esc(tips[i]))
	}
	flush()
	p.b.WriteString(`</g>`)
}

func (p *svgPlot) text(x, y float64, anchor, s string) {
	fmt.Fprintf(&p.b, `<text x="%.1f" y="%.1f" text-anchor="%s" font-size="12">%s</text>`, x, y, anchor, esc(s))
}

func (p *svgPlot) svg() string { return p.b.String() + `</svg>` }

// niceTicks returns about n round tick values covering [lo, hi].
func niceTicks(lo, hi float64, n int) []float64 {
	if hi <= lo || n < 1 {
		return []float64{lo}
	}
	raw := (hi - lo) / float64(n)
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	step := mag
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if m*mag >= raw {
			step = m * mag
			break
		}
	}
	var out []float64
	for t := math.Ceil(lo/step) * step; t <= hi+step*1e-9; t += step {
		out = append(out, math.Round(t/step)*step)
	}
	return out
}

// intTicks is niceTicks for log10 axes: whole powers of ten only.
func intTicks(lo, hi float64) []float64 {
	var out []float64
	step := math.Max(1, math.Ceil((hi-lo)/8))
	for t := math.Ceil(lo); t <= hi; t += step {
		out = append(out, t)
	}
	return out
}

func pow10Label(v float64) string { return fmt.Sprintf("1e%d", int(math.Round(v))) }

func numLabel(v float64) string { return fmt.Sprintf("%g", v) }

func esc(s string) string { return html.EscapeString(s) }

// legend is an HTML legend for the series of a chart.
func legend(names []string, notes []string) string {
	var b strings.Builder
	b.WriteString(`<div class="legend">`)
	for i, n := range names {
		fmt.Fprintf(&b, `<span><i style="background:%s"></i>%s`, color(i), esc(n))
		if i < len(notes) && notes[i] != "" {
			fmt.Fprintf(&b, ` <small>(%s)</small>`, esc(notes[i]))
		}
		b.WriteString(`</span>`)
	}
	b.WriteString(`</div>`)
	return b.String()
}

// emptyChart is what a chart shows when the run has nothing to draw in it,
// so every chart is present and says why it is empty.
func emptyChart(msg string) string {
	p := newPlot(640, 80, 0, 1, 0, 1)
	p.text(320, 44, "middle", msg)
	return p.svg()
}
