package report

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/evalrun/evalrun/pipeline/resultsdir"
	"github.com/evalrun/evalrun/pipeline/runcompare"
	"github.com/evalrun/evalrun/pipeline/summary"
)

// charts are the figures report.html must show, by id.
var charts = []string{"kld-distribution", "kld-position", "same-top-position", "plan", "throughput"}

func TestHTMLSelfContained(t *testing.T) {
	s := troubled(t)
	s.Backends[2].Error = "<script>alert(1)</script> & more"
	var b strings.Builder
	if err := HTMLCompared(&b, s, compared(t, s)); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	// Nothing is fetched: no external script, stylesheet, image or font.
	if m := regexp.MustCompile(`(?i)(src|href)\s*=|url\(|@import|https?://[^"]*`).FindAllString(page, -1); len(m) > 0 {
		for _, u := range m {
			if u != "http://www.w3.org/2000/svg" { // the SVG namespace name, not a fetch
				t.Fatalf("report.html refers to something outside it: %q", u)
			}
		}
	}
	for _, id := range append(charts, "layer-drift", "compare") {
		fig := regexp.MustCompile(`(?s)<figure class="chart" id="` + id + `">.*?</figure>`).FindString(page)
		if fig == "" || !strings.Contains(fig, "<svg") || !strings.Contains(fig, `class="series"`) {
			t.Errorf("chart %s missing or without data:\n%.300s", id, fig)
		}
	}
	// Text from plugins and specs is escaped.
	if strings.Contains(page, "<script>alert") || !strings.Contains(page, "crashed: &lt;script&gt;alert(1)&lt;/script&gt; &amp; more") {
		t.Fatal("a backend's error text reached the page unescaped")
	}
	// Every backend's series is in the distribution and position charts;
	// the plan shows both NPU backends' 36 matmuls.
	for _, name := range []string{"npu-fp16", "npu-int8", "cpu-ggml"} {
		if strings.Count(page, `data-series="`+name+`"`) < 3 {
			t.Errorf("backend %s is not drawn in every chart", name)
		}
	}
	if n := strings.Count(page, `fill="#2ca02c" stroke="#fff"`); n != 72 {
		t.Errorf("plan chart has %d NPU cells, want 2 × 36", n)
	}
	if !strings.Contains(page, "<li>npu-fp16: kernels: the list offloads nothing") {
		t.Error("a plugin's warning is not listed")
	}
	if !strings.Contains(page, "npu-fp16 tg16 (simulated)") {
		t.Error("simulated throughput not labelled")
	}
	// The comparison: npu-int8's KLD grew beyond its ± (a red row and
	// marker), cpu-ggml crashed this time.
	cmp := regexp.MustCompile(`(?s)<figure class="chart" id="compare">.*?</figure>`).FindString(page)
	for _, want := range []string{`<tr class="fail"><td>npu-int8</td><td>ok</td>`, `<td>kld_mean +0.0105</td>`,
		`<tr class="fail"><td>cpu-ggml</td><td>ok → crashed</td>`, `<tr class=""><td>npu-fp16</td><td>ok</td>`,
		`fill="#d62728" stroke="#d62728"><title>npu-int8, this run: 0.0123`} {
		if !strings.Contains(cmp, want) {
			t.Errorf("comparison lacks %q:\n%s", want, cmp)
		}
	}
	if len(page) > 400<<10 {
		t.Errorf("report.html is %d KiB", len(page)>>10)
	}
}

// compared is evalrun compare's result for s against the unmodified run,
// with npu-int8's KLD mean raised to the value its failed gate names.
func compared(t *testing.T, s *summary.Summary) *runcompare.Result {
	for i := range s.Backends {
		if b := &s.Backends[i]; b.Name == "npu-int8" {
			a := *b.Accuracy
			v := 0.0123
			a.KLDMean = &v
			b.Accuracy = &a
		}
	}
	return runcompare.Compare(&resultsdir.Run{Summary: loadSummary(t)}, &resultsdir.Run{Summary: s}, runcompare.DefaultMinChange)
}

// TestHTMLEmptyCharts: a run with nothing to draw still has every chart,
// each saying why it is empty.
func TestHTMLEmptyCharts(t *testing.T) {
	s := loadSummary(t)
	for i := range s.Backends {
		s.Backends[i].Accuracy, s.Backends[i].Load, s.Backends[i].Throughput = nil, nil, nil
	}
	s.Reference.Throughput = nil
	var b strings.Builder
	if err := HTML(&b, s); err != nil {
		t.Fatal(err)
	}
	for _, msg := range []string{"every compared distribution is bit-identical, or nothing was scored", "no position with a non-zero KLD",
		"no scored position", "every plan runs on the CPU", "no throughput measured"} {
		if !strings.Contains(b.String(), msg) {
			t.Errorf("no %q", msg)
		}
	}
}

// chromium finds a headless-capable Chromium.
func chromium(t *testing.T) string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("Chromium not installed (Debian: apt-get install chromium; .ci/run installs it): report.html not rendered")
	return ""
}

// artifacts is where a test leaves files for a person to look at:
// $TEST_EVALRUN_ARTIFACTS if set, else the test's temporary directory.
func artifacts(t *testing.T) string {
	if d := os.Getenv("TEST_EVALRUN_ARTIFACTS"); d != "" {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		return d
	}
	return t.TempDir()
}

// TestHTMLRendersInChromium opens report.html in headless Chromium: the
// page's own check (every chart's SVG laid out with a size and marks) must
// report all charts, and a screenshot is kept in the artifacts.
func TestHTMLRendersInChromium(t *testing.T) {
	bin := chromium(t)
	dir := artifacts(t)
	page := filepath.Join(dir, "report.html")
	f, err := os.Create(page)
	if err != nil {
		t.Fatal(err)
	}
	s := troubled(t)
	if err := HTMLCompared(f, s, compared(t, s)); err != nil {
		t.Fatal(err)
	}
	f.Close()
	run := func(args ...string) string {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		args = append([]string{"--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run",
			"--user-data-dir=" + t.TempDir(), "--virtual-time-budget=5000"}, args...)
		out, err := exec.CommandContext(ctx, bin, append(args, "file://"+page)...).Output()
		if err != nil {
			t.Fatalf("%s %v: %v", bin, args, err)
		}
		return string(out)
	}
	dom := run("--dump-dom")
	want := len(charts) + 2 // and the layer drift, the comparison with the baseline
	if !strings.Contains(dom, `data-charts="`+itoa(want)+"/"+itoa(want)+`"`) || strings.Count(dom, `data-rendered="yes"`) != want {
		m := regexp.MustCompile(`data-charts="[^"]*"`).FindString(dom)
		t.Fatalf("Chromium rendered %s charts, want %d/%d:\n%.2000s", m, want, want, dom)
	}
	shot := filepath.Join(dir, "report.png")
	run("--window-size=1000,3600", "--screenshot="+shot) // tall enough for every chart
	if st, err := os.Stat(shot); err != nil || st.Size() < 20<<10 {
		t.Fatalf("screenshot %s: %v", shot, err)
	}
	t.Logf("report.html rendered by Chromium with %d/%d charts; screenshot %s", want, want, shot)
}

func itoa(n int) string { return strconv.Itoa(n) }
