package report

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/evalrun/evalrun/pipeline/resultsdir"
	"github.com/evalrun/evalrun/pipeline/speedstat"
	"github.com/evalrun/evalrun/pipeline/summary"
)

// withReps gives every bench test of s n repetitions, its own repeated
// (the bundled spec's reps: 300; testdata's run had 30).
func withReps(s *summary.Summary, n int) {
	for _, b := range append([]*summary.BackendSummary{&s.Reference}, backends(s)...) {
		if b.Throughput == nil {
			continue
		}
		for _, t := range []**summary.BenchTest{&b.Throughput.PP, &b.Throughput.TG} {
			if *t == nil {
				continue
			}
			var samples []int64
			for len(samples) < n {
				samples = append(samples, (*t).SamplesNS...)
			}
			*t = speedstat.NewBenchTest((*t).NPrompt, (*t).NGen, samples[:n])
		}
	}
}

func backends(s *summary.Summary) []*summary.BackendSummary {
	var out []*summary.BackendSummary
	for i := range s.Backends {
		out = append(out, &s.Backends[i])
	}
	return out
}

func printed(t *testing.T, s *summary.Summary, width int) string {
	t.Helper()
	var b strings.Builder
	if err := Print(&b, &resultsdir.Run{Summary: s, Dir: "/results/20261129-024529-default"}, width); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// headerCells are the cells of the table header line that starts with
// "| backend".
func headerCells(out string) [][]string {
	var heads [][]string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "|") && strings.Contains(l, " backend ") {
			var cells []string
			for _, c := range strings.Split(strings.Trim(l, "|"), " | ") {
				cells = append(cells, strings.TrimSpace(c))
			}
			heads = append(heads, cells)
		}
	}
	return heads
}

var (
	allAccuracy   = []string{"backend", "status", "tokens", "KLD mean", "KLD p99", "same top p", "RMS Δp", "PPL ratio", "NMSE", "max |Δlogit|", "greedy", "verdict"}
	keyAccuracy   = []string{"backend", "status", "KLD mean", "same top p", "PPL ratio", "verdict"}
	allThroughput = []string{"backend", "device", "kernels", "threads", "load s", "warm-up s", "pp64 p95 t/s [95% CI]", "tg16 p95 t/s [95% CI]", "peak RSS load / run", "offload"}
	keyThroughput = []string{"backend", "device", "pp64 p95 t/s [95% CI]", "tg16 p95 t/s [95% CI]"}
)

// TestPrintFitsTheWidth: the bundled spec's run output fits in 120
// columns, counted in runes (the tables' ± – Δ — are one column each, not
// the bytes UTF-8 takes), by showing the key columns and saying how to see
// the others; with no width (--wide) every column shows.
func TestPrintFitsTheWidth(t *testing.T) {
	for _, reps := range []int{30, 300} {
		s := loadSummary(t)
		withReps(s, reps)
		t.Run(fmt.Sprint(reps, " reps"), func(t *testing.T) {
			out := printed(t, s, 120)
			for i, l := range strings.Split(out, "\n") {
				if n := utf8.RuneCountInString(l); n > 120 {
					t.Errorf("line %d is %d columns wide:\n%s", i+1, n, l)
				}
			}
			ppHead, tgHead := "pp64 p95 t/s [95% CI]", "tg16 p95 t/s [95% CI]"
			if reps < speedstat.MinRepsFastCI() {
				ppHead, tgHead = "pp64 p95 t/s", "tg16 p95 t/s"
			}
			heads := headerCells(out)
			wantKeyThroughput := []string{"backend", "device", ppHead, tgHead}
			if len(heads) != 2 || !slices.Equal(heads[0], keyAccuracy) || !slices.Equal(heads[1], wantKeyThroughput) {
				t.Errorf("headers %q, want %q and %q:\n%s", heads, keyAccuracy, wantKeyThroughput, out)
			}
			for _, note := range []string{
				"6 columns hidden (tokens, KLD p99, RMS Δp, NMSE, max |Δlogit|, greedy): --wide shows them",
				"6 columns hidden (kernels, threads, load s, warm-up s, peak RSS load / run, offload): --wide shows them",
			} {
				if !strings.Contains(out, "\n"+note+"\n") {
					t.Errorf("no line %q:\n%s", note, out)
				}
			}
			wide := printed(t, s, 0)
			heads = headerCells(wide)
			wantAll := slices.Clone(allThroughput)
			wantAll[6], wantAll[7] = ppHead, tgHead
			if len(heads) != 2 || !slices.Equal(heads[0], allAccuracy) || !slices.Equal(heads[1], wantAll) || strings.Contains(wide, "hidden") {
				t.Errorf("--wide: headers %q, want %q and %q:\n%s", heads, allAccuracy, wantAll, wide)
			}
			if !strings.Contains(wide, "| 36 of 36 matmuls on the NPU (fp16, 3 cores) |") {
				t.Errorf("--wide lacks the offload plan:\n%s", wide)
			}
		})
	}
}

// TestPrintWrapsWhenTheKeyColumnsDoNotFit: on a terminal narrower than the
// key columns their cells wrap at spaces instead of running past its edge.
func TestPrintWrapsWhenTheKeyColumnsDoNotFit(t *testing.T) {
	out := printed(t, loadSummary(t), 80)
	for _, l := range strings.Split(out, "\n") {
		if (strings.HasPrefix(l, "|") || strings.HasPrefix(l, "+")) && utf8.RuneCountInString(l) > 80 {
			t.Errorf("a table line of %d columns:\n%s", utf8.RuneCountInString(l), out)
		}
	}
	if !strings.Contains(out, "| 1.04e-06 ± ") || !strings.Contains(out, "\n6 columns hidden: --wide shows them\n") {
		t.Errorf("the KLD mean's cell is not wrapped, or the hidden columns not named:\n%s", out)
	}
}

// TestSpeedIsTheP95Everywhere: the run's table, report.md (its one-screen
// summary and throughput table) and report.html show the p95 rate, the
// statistic compare and the speed gates judge, with its interval when the
// repetitions allow one and their count when not.
func TestSpeedIsTheP95Everywhere(t *testing.T) {
	s := loadSummary(t)
	withReps(s, 300)
	tg := rateStats(s.Reference.Throughput.TG)
	if tg.FastLo == nil || tg.Fast == tg.Median {
		t.Fatalf("the test needs a p95 with an interval, apart from the median: %+v", tg)
	}
	want := fmt.Sprintf("%.0f [%.0f–%.0f]", tg.Fast, *tg.FastLo, *tg.FastHi)
	var md, html strings.Builder
	if err := Markdown(&md, s); err != nil {
		t.Fatal(err)
	}
	if err := HTML(&html, s); err != nil {
		t.Fatal(err)
	}
	first, _, _ := strings.Cut(md.String(), "\n## Run\n")
	for what, text := range map[string]string{"printed": printed(t, s, 120), "report.md's summary": first, "report.md": md.String(), "report.html": html.String()} {
		if !strings.Contains(text, want) {
			t.Errorf("%s does not show the reference's tg16 p95 %s", what, want)
		}
		if strings.Contains(text, "median") {
			t.Errorf("%s still mentions the median", what)
		}
	}
	if !strings.Contains(first, "| tg p95 t/s |") || !strings.Contains(html.String(), "<th>tg p95 t/s</th>") {
		t.Error("the one-screen summary's speed column is not labelled p95")
	}
	few := loadSummary(t) // 30 repetitions: too few for the p95's interval
	st := rateStats(few.Reference.Throughput.TG)
	if out := printed(t, few, 120); st.FastLo != nil || !strings.Contains(out, fmt.Sprintf("| %.0f (n=30) ", st.Fast)) {
		t.Errorf("30 repetitions: no p95 with its count %.0f (n=30):\n%s", st.Fast, out)
	}
}

// TestMarkdownKeepsEveryColumn: report.md is no terminal: its tables keep
// every column, however wide.
func TestMarkdownKeepsEveryColumn(t *testing.T) {
	var md strings.Builder
	if err := Markdown(&md, loadSummary(t)); err != nil {
		t.Fatal(err)
	}
	for _, head := range [][]string{allAccuracy, {"backend", "device", "kernels", "threads", "load s", "warm-up s", "pp64 p95 t/s", "tg16 p95 t/s", "peak RSS load / run", "offload"}} {
		var cells []string
		for _, h := range head {
			cells = append(cells, strings.ReplaceAll(h, "|", `\|`))
		}
		if line := "| " + strings.Join(cells, " | ") + " |"; !strings.Contains(strings.Join(strings.Fields(md.String()), " "), line) {
			t.Errorf("report.md lacks the header %s", line)
		}
	}
	if strings.Contains(md.String(), "hidden") {
		t.Error("report.md hides columns")
	}
}
