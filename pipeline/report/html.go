package report

import (
	"fmt"
	"html/template"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/evalrun/evalrun/pipeline/diag"
	"github.com/evalrun/evalrun/pipeline/metrics"
	"github.com/evalrun/evalrun/pipeline/runcompare"
	"github.com/evalrun/evalrun/pipeline/speedstat"
	"github.com/evalrun/evalrun/pipeline/summary"
)

// HTML writes report.html: one self-contained file (inline CSS and SVG, no
// network) with the one-screen summary and charts: the per-token KLD
// distribution per backend, KLD and top-1 agreement over token position,
// the per-matmul offload plans, throughput with its spread, and, given a
// baseline, the changes against it.
func HTML(w io.Writer, s *summary.Summary) error { return HTMLCompared(w, s, nil) }

// HTMLCompared is HTML with the changes from a baseline run, as evalrun
// compare found them (nil: none).
func HTMLCompared(w io.Writer, s *summary.Summary, cmp *runcompare.Result) error {
	page, err := runPage(s)
	if err != nil {
		return err
	}
	if cmp != nil {
		page.Charts = append(page.Charts, htmlChart{ID: "compare", Title: "Against the baseline " + cmp.Base.ID,
			Note: "per backend: the logits against the baseline's (digests), then KLD mean and generation speed in the baseline (hollow) and this run (filled) with their ±; red: a change beyond its uncertainty that makes the backend worse, or a significant slowdown",
			SVG:  template.HTML(compareTable(cmp) + compareChart(cmp))})
	}
	return pageTemplate.Execute(w, page)
}

// runPage is a run's report page.
func runPage(s *summary.Summary) (htmlPage, error) {
	var sum strings.Builder
	if err := stepSummary(&sum, s); err != nil {
		return htmlPage{}, err
	}
	page := htmlPage{
		Title:   fmt.Sprintf("evalrun %s: %s%s", s.Run.Name, strings.ToUpper(s.Verdict.Status), notFull(s)),
		Verdict: s.Verdict.Status,
		Summary: summaryTable(s),
		Meta: fmt.Sprintf("run %s, started %s, %.1f s · model %s (%s, %d params) · reference %s · evalrun %s",
			s.Run.ID, s.Run.Started.Format("2006-01-02 15:04:05 MST"), s.Run.DurationS, baseName(s.Model.Path), s.Model.Arch, s.Model.NParams, s.Reference.Name, s.Run.EvalrunVersion),
		Reasons: append(slices.Clone(s.Verdict.Reasons), allWarnings(s)...),
	}
	names := candidateNames(s)
	page.Charts = []htmlChart{
		{ID: "kld-distribution", Title: "Per-token KLD distribution", Note: "fraction of scored tokens per bin of KL(reference‖backend), log scale; tokens with KLD = 0 (bit-identical distributions) are counted in the legend",
			SVG: template.HTML(kldDistribution(s)), Legend: template.HTML(legend(names, zeroNotes(s)))},
		{ID: "kld-position", Title: "KLD over token position", Note: "mean KLD of the tokens at each position of their sequence (score chunks, generated steps), log scale",
			SVG: template.HTML(positionChart(s, true)), Legend: template.HTML(legend(names, nil))},
		{ID: "same-top-position", Title: "Same top-1 over token position", Note: "fraction of tokens whose argmax equals the reference's",
			SVG: template.HTML(positionChart(s, false)), Legend: template.HTML(legend(names, nil))},
		{ID: "plan", Title: "Per-matmul plan", Note: "where each named matmul ran, by layer (hover for shape and reason)",
			SVG: template.HTML(planChart(s)), Legend: template.HTML(`<div class="legend"><span><i style="background:#2ca02c"></i>NPU</span><span><i style="background:#bbb"></i>CPU</span></div>`)},
		{ID: "throughput", Title: "Throughput", Note: "tokens/s per backend and test: the p95 of the repetitions, the speed the fastest 5% of them reach (bar), with its 95% confidence interval (whisker; none below " + strconv.Itoa(speedstat.MinRepsFastCI()) + " repetitions), each repetition a dot; a simulated device's bars are pale and labelled",
			SVG: template.HTML(throughputChart(s))},
	}
	if drift := layerDriftChart(s); drift != "" {
		page.Charts = append(page.Charts, htmlChart{ID: "layer-drift", Title: "Per-layer drift (shadow mode)",
			Note: "NMSE of each layer's output (the residual stream) against the reference's on the same tokens, log scale",
			SVG:  template.HTML(drift), Legend: template.HTML(legend(names, nil))})
	}
	for _, b := range s.Backends {
		if b.Diagnostics != nil { // the per-op table of shadow mode in full, folded as in report.md
			var d strings.Builder
			diag.WriteHTML(&d, b.Diagnostics)
			page.Diagnostics = append(page.Diagnostics, htmlDiag{Backend: b.Name, Body: template.HTML(d.String())})
		}
	}
	return page, nil
}

// HTMLCompare writes compare.html: the comparison's verdict and what changed
// first, then the comparison's table and charts, then the new run's own
// charts.
func HTMLCompare(w io.Writer, s *summary.Summary, cmp *runcompare.Result) error {
	run, err := runPage(s)
	if err != nil {
		return err
	}
	class := "pass"
	if cmp.Verdict.Status == runcompare.VerdictRegression {
		class = "fail"
	}
	reasons := slices.Clone(cmp.Verdict.Reasons)
	if len(cmp.Changes) == 0 {
		reasons = append(reasons, "what changed: nothing (the same spec, plugins, model, datasets, evalrun and machine)")
	}
	for _, c := range cmp.Changes {
		reasons = append(reasons, fmt.Sprintf("changed: %s: %s -> %s", c.What, dashIfEmpty(c.Base), dashIfEmpty(c.New)))
	}
	cp := htmlPage{
		Title:       fmt.Sprintf("evalrun compare: %s", strings.ToUpper(cmp.Verdict.Status)),
		Verdict:     class,
		Meta:        fmt.Sprintf("baseline %s -> new %s · exit %d", cmp.Base.ID, cmp.New.ID, cmp.Verdict.ExitCode),
		Reasons:     reasons,
		Diagnostics: run.Diagnostics,
		Charts: []htmlChart{{ID: "compare", Title: "Against the baseline " + cmp.Base.ID,
			Note: "per backend: the logits against the baseline's (digests), then KLD mean and generation speed in the baseline (hollow) and this run (filled) with their ±; red: a change beyond its uncertainty that makes the backend worse, or a significant slowdown",
			SVG:  template.HTML(compareTable(cmp) + compareChart(cmp))}},
	}
	for _, c := range run.Charts {
		c.Title = "New run: " + c.Title
		cp.Charts = append(cp.Charts, c)
	}
	return pageTemplate.Execute(w, cp)
}

func dashIfEmpty(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

type htmlPage struct {
	Title, Verdict, Meta string
	Summary              template.HTML
	Reasons              []string
	Charts               []htmlChart
	Diagnostics          []htmlDiag
}

// htmlDiag is a backend's device diagnostics, rendered by package diag.
type htmlDiag struct {
	Backend string
	Body    template.HTML
}

type htmlChart struct {
	ID, Title, Note string
	SVG, Legend     template.HTML
}

// summaryTable is the one-screen summary as an HTML table.
func summaryTable(s *summary.Summary) template.HTML {
	var b strings.Builder
	b.WriteString(`<table><tr><th></th><th>backend</th><th>status</th><th>KLD mean</th><th>same top-1</th><th>PPL ratio</th><th>tg p95 t/s</th><th>gates</th></tr>`)
	for _, r := range summaryRows(s) {
		// A word, not the Markdown's emoji: a browser without an emoji font
		// shows boxes.
		fmt.Fprintf(&b, `<tr class="%s"><td><b>%s</b></td>`, esc(r.class), strings.ToUpper(r.class))
		for _, c := range r.cells[1:] {
			fmt.Fprintf(&b, "<td>%s</td>", esc(c))
		}
		b.WriteString("</tr>")
	}
	b.WriteString("</table>")
	return template.HTML(b.String())
}

func candidateNames(s *summary.Summary) []string {
	var out []string
	for _, b := range s.Backends {
		out = append(out, b.Name)
	}
	return out
}

func profile(b summary.BackendSummary) *summary.AccuracyProfile {
	if b.Accuracy == nil {
		return nil
	}
	return b.Accuracy.Profile
}

func zeroNotes(s *summary.Summary) []string {
	var out []string
	for _, b := range s.Backends {
		note := "no data"
		if p := profile(b); p != nil && p.KLDHistogram != nil {
			note = fmt.Sprintf("%d tokens with KLD = 0", p.KLDHistogram.Zero)
		}
		out = append(out, note)
	}
	return out
}

// backendHistogram is a backend's KLD histogram with the backend's index
// (its colour).
type backendHistogram struct {
	index int
	name  string
	h     *metrics.KLDHistogram
}

func kldHistograms(s *summary.Summary) []backendHistogram {
	var out []backendHistogram
	for i, b := range s.Backends {
		if p := profile(b); p != nil && p.KLDHistogram != nil {
			out = append(out, backendHistogram{i, b.Name, p.KLDHistogram})
		}
	}
	return out
}

// kldDistribution draws each backend's histogram of log10 KLD as the
// fraction of its tokens per bin, over the bins any backend fills.
func kldDistribution(s *summary.Summary) string {
	hists := kldHistograms(s)
	lo, hi, maxFrac := math.MaxInt, -1, 0.0
	for _, bh := range hists {
		total := histTotal(bh.h)
		for i, c := range bh.h.Counts {
			if c > 0 {
				lo, hi = min(lo, i), max(hi, i)
				maxFrac = math.Max(maxFrac, float64(c)/total)
			}
		}
	}
	if hi < 0 {
		return emptyChart("no token with a non-zero KLD: every compared distribution is bit-identical, or nothing was scored")
	}
	h0 := hists[0].h
	edge := func(i int) float64 { return h0.Lo + float64(i)*h0.Width }
	p := newPlot(900, 300, edge(lo), edge(hi+1), 0, maxFrac*1.08)
	p.axes(intTicks(edge(lo), edge(hi+1)), niceTicks(0, maxFrac*1.08, 5), pow10Label, func(v float64) string { return fmt.Sprintf("%.0f%%", v*100) },
		"KLD per token", "share of tokens")
	for _, bh := range hists {
		h, total := bh.h, histTotal(bh.h)
		var xs, ys []float64
		var tips []string
		for i := lo; i <= hi && i < len(h.Counts); i++ {
			frac := float64(h.Counts[i]) / total
			xs = append(xs, edge(i)+h.Width/2)
			ys = append(ys, frac)
			tips = append(tips, fmt.Sprintf("%s: %d tokens (%.1f%%) with KLD in [%.3g, %.3g)", bh.name, h.Counts[i], 100*frac, math.Pow(10, edge(i)), math.Pow(10, edge(i+1))))
		}
		p.line(bh.name, color(bh.index), xs, ys, tips)
	}
	return p.svg()
}

// layerDriftChart draws the per-layer NMSE of the backends that ran in
// shadow mode; "" when none did.
func layerDriftChart(s *summary.Summary) string {
	ymin, ymax, xmax := math.Inf(1), math.Inf(-1), 0.0
	for _, b := range s.Backends {
		if b.Diagnostics == nil || b.Diagnostics.LayerDrift == nil {
			continue
		}
		for _, l := range b.Diagnostics.LayerDrift.Layers {
			xmax = math.Max(xmax, float64(l.Layer))
			if l.NMSE > 0 {
				ymin, ymax = math.Min(ymin, math.Log10(l.NMSE)), math.Max(ymax, math.Log10(l.NMSE))
			}
		}
	}
	if math.IsInf(ymin, 1) {
		return ""
	}
	ymin, ymax = math.Floor(ymin), math.Ceil(ymax)
	if ymax == ymin {
		ymax++
	}
	p := newPlot(900, 260, 0, math.Max(xmax, 1), ymin, ymax)
	p.axes(niceTicks(0, math.Max(xmax, 1), 8), intTicks(ymin, ymax), numLabel, pow10Label, "layer", "NMSE")
	for i, b := range s.Backends {
		if b.Diagnostics == nil || b.Diagnostics.LayerDrift == nil {
			continue
		}
		var xs, ys []float64
		var tips []string
		for _, l := range b.Diagnostics.LayerDrift.Layers {
			y := math.NaN()
			if l.NMSE > 0 {
				y = math.Log10(l.NMSE)
			}
			xs, ys = append(xs, float64(l.Layer)), append(ys, y)
			tips = append(tips, fmt.Sprintf("%s layer %d: NMSE %.3g, cosine %.6f, max |Δ| %.3g", b.Name, l.Layer, l.NMSE, l.Cosine, l.MaxAbs))
		}
		p.line(b.Name, color(i), xs, ys, tips)
	}
	return p.svg()
}

// histTotal is the number of tokens a histogram counts.
func histTotal(h *metrics.KLDHistogram) float64 {
	total := float64(h.Zero)
	for _, c := range h.Counts {
		total += float64(c)
	}
	return total
}

// positionChart draws KLD (log scale) or top-1 agreement by position.
func positionChart(s *summary.Summary, kld bool) string {
	xmax, ymin, ymax := 0.0, math.Inf(1), math.Inf(-1)
	value := func(pb float64Bucket) float64 {
		if !kld {
			return pb.same
		}
		if math.IsNaN(pb.kld) || pb.kld <= 0 {
			return math.NaN()
		}
		return math.Log10(pb.kld)
	}
	series := make([][]float64Bucket, len(s.Backends))
	for i, b := range s.Backends {
		series[i] = buckets(profile(b))
		for _, pb := range series[i] {
			xmax = math.Max(xmax, pb.pos)
			if v := value(pb); !math.IsNaN(v) {
				ymin, ymax = math.Min(ymin, v), math.Max(ymax, v)
			}
		}
	}
	if math.IsInf(ymin, 1) {
		if kld {
			return emptyChart("no position with a non-zero KLD")
		}
		return emptyChart("no scored position")
	}
	var yTicks []float64
	yLabel := numLabel
	yTitle := "same top-1"
	if kld {
		ymin, ymax = math.Floor(ymin), math.Ceil(ymax)
		if ymax == ymin {
			ymax++
		}
		yTicks, yLabel, yTitle = intTicks(ymin, ymax), pow10Label, "mean KLD"
	} else {
		ymin = math.Min(math.Floor(ymin*20)/20, 0.95)
		ymax = 1
		yTicks = niceTicks(ymin, ymax, 5)
		yLabel = func(v float64) string { return fmt.Sprintf("%.0f%%", v*100) }
	}
	p := newPlot(900, 300, 0, math.Max(xmax, 1), ymin, ymax)
	p.axes(niceTicks(0, math.Max(xmax, 1), 8), yTicks, numLabel, yLabel, "token position", yTitle)
	for i, b := range s.Backends {
		var xs, ys []float64
		var tips []string
		for k, pb := range series[i] {
			if k > 0 && pb.pos-series[i][k-1].pos > pb.width { // no rows in between: the line breaks
				xs, ys, tips = append(xs, pb.pos), append(ys, math.NaN()), append(tips, "")
			}
			xs = append(xs, pb.pos)
			ys = append(ys, value(pb))
			tips = append(tips, fmt.Sprintf("%s, positions %s: %d tokens, mean KLD %.3g, same top-1 %.2f%%", b.Name, pb.label, pb.n, pb.kld, 100*pb.same))
		}
		p.line(b.Name, color(i), xs, ys, tips)
	}
	return p.svg()
}

type float64Bucket struct {
	pos, width, kld, same float64
	n                     int64
	label                 string
}

func buckets(p *summary.AccuracyProfile) []float64Bucket {
	if p == nil || p.ByPosition == nil {
		return nil
	}
	w := p.ByPosition.Width
	var out []float64Bucket
	for _, b := range p.ByPosition.Buckets {
		fb := float64Bucket{pos: float64(b.Pos) + float64(w-1)/2, width: float64(w), kld: math.NaN(), same: b.SameTopP, n: b.N, label: strconv.Itoa(b.Pos)}
		if w > 1 {
			fb.label += "–" + strconv.Itoa(b.Pos+w-1)
		}
		if b.KLDMean != nil {
			fb.kld = *b.KLDMean
		}
		out = append(out, fb)
	}
	return out
}

// planChart draws each offloading backend's plan as a grid: a row per
// layer, a column per matmul kind, coloured by device.
func planChart(s *summary.Summary) string {
	type grid struct {
		name  string
		cells map[[2]string]summary.PlanEntry
	}
	var grids []grid
	var kinds, layers []string
	for _, b := range append([]summary.BackendSummary{s.Reference}, s.Backends...) {
		if b.Load == nil || !offloads(b.Load.Plan) {
			continue
		}
		g := grid{name: b.Name + ": " + b.Load.PlanSummary, cells: map[[2]string]summary.PlanEntry{}}
		for _, e := range b.Load.Plan {
			kind, layer := splitOp(e.Op)
			if !slices.Contains(kinds, kind) {
				kinds = append(kinds, kind)
			}
			if !slices.Contains(layers, layer) {
				layers = append(layers, layer)
			}
			g.cells[[2]string{layer, kind}] = e
		}
		grids = append(grids, g)
	}
	if len(grids) == 0 {
		return emptyChart("no backend offloads a matmul: every plan runs on the CPU")
	}
	const cw, ch, left, head = 78.0, 16.0, 70.0, 34.0
	gh := head + ch*float64(len(layers)) + 14
	w, h := left+cw*float64(len(kinds))+10, gh*float64(len(grids))
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 %g %g" width="%g" height="%g" role="img" font-size="11">`, w, h, w, h)
	for gi, g := range grids {
		y0 := float64(gi) * gh
		fmt.Fprintf(&b, `<text x="0" y="%.1f" font-size="12" font-weight="bold">%s</text>`, y0+12, esc(g.name))
		for ki, k := range kinds {
			fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`, left+cw*float64(ki)+cw/2, y0+head-4, esc(k))
		}
		b.WriteString(`<g class="series">`)
		for li, l := range layers {
			y := y0 + head + ch*float64(li)
			fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="end">%s</text>`, left-4, y+ch-4, esc(l))
			for ki, k := range kinds {
				e, ok := g.cells[[2]string{l, k}]
				if !ok {
					continue
				}
				fill := "#bbb"
				if e.Device != "cpu" {
					fill = "#2ca02c"
				}
				tip := fmt.Sprintf("%s: %s on %s", e.Op, e.Shape, e.Device)
				if e.Reason != "" {
					tip += " — " + e.Reason
				}
				fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s" stroke="#fff"><title>%s</title></rect>`,
					left+cw*float64(ki), y, cw, ch, fill, esc(tip))
			}
		}
		b.WriteString(`</g>`)
	}
	b.WriteString(`</svg>`)
	return b.String()
}

// splitOp splits a llama.cpp graph name ("ffn_up-3", "result_output") into
// its kind and layer ("out" for ops outside the layers).
func splitOp(op string) (kind, layer string) {
	if i := strings.LastIndexByte(op, '-'); i > 0 {
		if _, err := strconv.Atoi(op[i+1:]); err == nil {
			return op[:i], "layer " + op[i+1:]
		}
	}
	return op, "out"
}

// throughputChart draws horizontal bars of each backend's pp and tg p95
// rate with its confidence interval and each repetition as a dot.
func throughputChart(s *summary.Summary) string {
	type bar struct {
		label string
		t     *summary.BenchTest
		stats *speedstat.Summary
		sim   bool
		color string
	}
	var bars []bar
	all := append([]summary.BackendSummary{s.Reference}, s.Backends...)
	for _, test := range []string{"pp", "tg"} {
		for i, b := range all {
			col := "#7f7f7f" // the reference; candidate k has the colour of its series elsewhere
			if i > 0 {
				col = color(i - 1)
			}
			if b.Throughput == nil {
				continue
			}
			t := b.Throughput.PP
			if test == "tg" {
				t = b.Throughput.TG
			}
			st := rateStats(t)
			if st == nil {
				continue
			}
			label := fmt.Sprintf("%s %s%d", b.Name, test, t.NPrompt+t.NGen)
			if simulated(b) {
				label += " (simulated)"
			}
			bars = append(bars, bar{label: label, t: t, stats: st, sim: simulated(b), color: col})
		}
	}
	if len(bars) == 0 {
		return emptyChart("no throughput measured (bench disabled, or no backend ran)")
	}
	xmax := 0.0
	for _, b := range bars {
		for _, r := range speedstat.TestRates(b.t) {
			xmax = math.Max(xmax, r)
		}
	}
	const rowH = 22.0
	p := newPlot(900, 52+rowH*float64(len(bars)), 0, xmax*1.05, 0, float64(len(bars)))
	p.left = 260
	p.axes(niceTicks(0, xmax*1.05, 6), nil, numLabel, numLabel, "tokens/s", "")
	for i, b := range bars {
		yc := p.y(float64(len(bars)-i) - 0.5)
		fill := b.color
		opacity := "0.85"
		if b.sim {
			opacity = "0.35" // a simulator's speed is no device's
		}
		fmt.Fprintf(&p.b, `<g class="series" data-series="%s"><text x="%.1f" y="%.1f" text-anchor="end" font-size="11">%s</text>`, esc(b.label), p.left-6, yc+4, esc(b.label))
		st := b.stats
		ci := fmt.Sprintf("no confidence interval from %d repetitions", st.N)
		if st.FastLo != nil && st.FastHi != nil {
			ci = fmt.Sprintf("%.0f%% CI %.1f–%.1f", 100*speedstat.Confidence, *st.FastLo, *st.FastHi)
		}
		fmt.Fprintf(&p.b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s" fill-opacity="%s"><title>%s: p95 %.1f t/s (%s) over %d repetitions</title></rect>`,
			p.x(0), yc-rowH*0.35, p.x(st.Fast)-p.x(0), rowH*0.7, fill, opacity, esc(b.label), st.Fast, ci, st.N)
		if st.FastLo != nil && st.FastHi != nil {
			fmt.Fprintf(&p.b, `<path d="M%.1f %.1fV%.1fM%.1f %.1fH%.1fM%.1f %.1fV%.1f" stroke="#222" fill="none"/>`,
				p.x(*st.FastLo), yc-5, yc+5, p.x(*st.FastLo), yc, p.x(*st.FastHi), p.x(*st.FastHi), yc-5, yc+5)
		}
		for _, r := range speedstat.TestRates(b.t) {
			fmt.Fprintf(&p.b, `<circle cx="%.1f" cy="%.1f" r="2.2" fill="#222"/>`, p.x(r), yc)
		}
		p.b.WriteString(`</g>`)
	}
	return p.svg()
}

var pageTemplate = template.Must(template.New("report").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.Title}}</title>
<style>
body{font:14px/1.4 system-ui,sans-serif;margin:24px auto;max-width:960px;color:#222}
h1{font-size:22px;margin:0 0 4px} h1.pass{color:#1a7f37} h1.fail,h1.error{color:#cf222e}
.meta{color:#666;font-size:12px;margin-bottom:12px}
table{border-collapse:collapse;margin:8px 0 16px;font-size:13px} td,th{border:1px solid #ddd;padding:3px 8px;text-align:left}
tr.fail td,tr.error td{background:#fff0f0} tr.skipped td{color:#888}
figure.chart{margin:24px 0;border-top:1px solid #ddd;padding-top:8px} figure.chart h2{font-size:16px;margin:4px 0}
figure.chart p{color:#666;font-size:12px;margin:0 0 6px} svg{max-width:100%;height:auto;display:block}
.legend span{margin-right:14px;font-size:12px} .legend i{display:inline-block;width:10px;height:10px;margin-right:4px;border-radius:2px}
.pair{display:flex;gap:16px;flex-wrap:wrap}
details.diagnostics{margin:12px 0} details.diagnostics h3{font-size:14px;margin:12px 0 4px}
</style></head>
<body data-charts="pending">
<h1 class="{{.Verdict}}">{{.Title}}</h1>
<div class="meta">{{.Meta}}</div>
{{.Summary}}
{{if .Reasons}}<ul>{{range .Reasons}}<li>{{.}}</li>{{end}}</ul>{{end}}
{{range .Charts}}<figure class="chart" id="{{.ID}}"><h2>{{.Title}}</h2><p>{{.Note}}</p>{{.SVG}}{{.Legend}}</figure>
{{end}}
{{range .Diagnostics}}<details class="diagnostics"><summary>{{.Backend}}: device diagnostics (per-op errors, per-layer drift, kernel accounting)</summary>
{{.Body}}</details>
{{end}}
<script>
// Marks the page once every chart has laid out a drawing with a size: a
// headless browser's test reads data-charts (nothing is fetched).
addEventListener("load", function () {
  var figs = document.querySelectorAll("figure.chart"), ok = 0;
  figs.forEach(function (f) {
    var svg = f.querySelector("svg"), r = svg && svg.getBoundingClientRect();
    if (svg && r.width > 0 && r.height > 0 && svg.querySelector("polyline,rect,circle,text")) { ok++; f.dataset.rendered = "yes"; }
  });
  document.body.dataset.charts = ok + "/" + figs.length;
});
</script>
</body></html>
`))
