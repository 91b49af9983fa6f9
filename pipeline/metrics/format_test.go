package metrics

import (
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

const goldenDir = "../../testdata/llamacpp/perplexity"

func kldStdouts(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(goldenDir + "/kld.*.stdout.txt")
	if err != nil || len(files) != 7 {
		t.Fatalf("want the 7 kld.*.stdout.txt goldens, got %v (%v)", files, err)
	}
	return files
}

// statsBlocks cuts llama.cpp's three statistics blocks out of its stdout.
func statsBlocks(t *testing.T, stdout string) string {
	t.Helper()
	start := strings.Index(stdout, "====== Perplexity statistics ======")
	end := strings.Index(stdout, "Same top p:")
	if start < 0 || end < 0 {
		t.Fatal("no statistics blocks")
	}
	return stdout[start : end+strings.Index(stdout[end:], "\n")+1]
}

// Numbers parsed from llama.cpp's printed blocks, formatted again, give
// llama.cpp's text byte for byte: same labels, widths, signs and units.
func TestFormatReproducesLlamaBlocks(t *testing.T) {
	for _, path := range kldStdouts(t) {
		t.Run(filepath.Base(path), func(t *testing.T) {
			raw, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			printed, err := ParseLlamaPerplexity(string(raw))
			if err != nil {
				t.Fatal(err)
			}
			want := statsBlocks(t, string(raw))
			if got := FormatLlamaPerplexity(printed.Result); got != want {
				t.Errorf("formatted blocks differ from llama.cpp's:\n got:\n%s\nwant:\n%s", got, want)
			}

			// The per-chunk table, row by row.
			var rows []string
			for _, l := range strings.Split(string(raw), "\n") {
				if regexp.MustCompile(`^\s*\d+\s+\d`).MatchString(l) {
					rows = append(rows, l)
				}
			}
			if len(printed.Chunks) != 24 || len(rows) != 24 {
				t.Fatalf("%d parsed chunk rows, %d in the text; want 24", len(printed.Chunks), len(rows))
			}
			for i, r := range printed.Chunks {
				if got := FormatChunkRow(i+1, r); got != rows[i] {
					t.Errorf("chunk %d:\n got %q\nwant %q", i+1, got, rows[i])
				}
			}
			if !strings.Contains(string(raw), "\n"+ChunkTableHeader+"\n") {
				t.Error("ChunkTableHeader differs from llama.cpp's header line")
			}
		})
	}
}

// The parsed values are the printed ones, percentages as fractions.
func TestParseLlamaPerplexityValues(t *testing.T) {
	raw, err := os.ReadFile(goldenDir + "/kld.Q8_0.plain.stdout.txt")
	if err != nil {
		t.Fatal(err)
	}
	p, err := ParseLlamaPerplexity(string(raw))
	if err != nil {
		t.Fatal(err)
	}
	checks := []struct {
		name      string
		got, want float64
	}{
		{"PPL(Q)", p.PPLQ.Value, 5.614208}, {"PPL(Q) ±", p.PPLQ.Err, 0.293805},
		{"PPL(base)", p.PPLBase.Value, 5.614191}, {"Cor", p.Cor, 0.9997},
		{"ln ratio ±", p.LnPPLRatio.Err, 0.001202}, {"ΔPPL", p.PPLDiff.Value, 0.000017},
		{"KLD", p.KLD.Value, 0.000839}, {"KLD ±", p.KLD.Err, 0.000031},
		{"max KLD", p.KLDQuantiles[0], 0.021210}, {"median KLD", p.KLDQuantiles[5], 0.000559},
		{"min KLD", p.KLDQuantiles[10], -0.000001},
		{"mean Δp", p.PDiff.Value, -0.00024}, {"max Δp", p.PDiffQuantiles[0], 0.05462},
		{"min Δp", p.PDiffQuantiles[12], -0.098}, {"RMS Δp", p.RMSPDiff.Value, 0.00935},
		{"same top", p.SameTop.Value, 0.98413}, {"same top ±", p.SameTop.Err, 0.00322},
		{"last chunk PPL", p.Chunks[23].PPLQ.Value, 5.6142}, {"last chunk same top", p.Chunks[23].SameTop.Value, 0.98413},
		{"chunk 1 KLD ±", p.Chunks[0].KLD.Err, 0.00013},
	}
	for _, c := range checks {
		if math.Abs(c.got-c.want) > 1e-12 {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
}

func TestParseLlamaPerplexityErrors(t *testing.T) {
	raw, err := os.ReadFile(goldenDir + "/kld.F16.plain.stdout.txt")
	if err != nil {
		t.Fatal(err)
	}
	text := string(raw)
	missing := strings.Replace(text, " 0.1%   Δp:", " 0.2%   Δp:", 1)
	if _, err := ParseLlamaPerplexity(missing); err == nil || !strings.Contains(err.Error(), `"0.1% Δp"`) {
		t.Errorf("missing 0.1%% Δp line: error %v", err)
	}
	// Older builds printed "99.0%" twice: refused, naming the line.
	dup := strings.Replace(text, "95.0%   KLD:", "99.0%   KLD:", 1)
	if _, err := ParseLlamaPerplexity(dup); err == nil || !strings.Contains(err.Error(), "repeats") {
		t.Errorf("repeated 99.0%% KLD line: error %v", err)
	}
	bad := strings.Replace(text, "Mean    KLD:", "Mean    KLD: x", 1)
	if _, err := ParseLlamaPerplexity(bad); err == nil || !strings.Contains(err.Error(), "Mean KLD") {
		t.Errorf("bad number: error %v", err)
	}
	if _, err := ParseLlamaPerplexity(""); err == nil {
		t.Error("empty output parsed")
	}
}

// C's printf spellings of non-finite values.
func TestFormatNonFinite(t *testing.T) {
	r := Result{Cor: math.NaN()}
	r.PPLQ.Err = math.Inf(1)
	r.LnPPLRatio.Value = math.Inf(-1)
	out := FormatLlamaPerplexity(r)
	for _, want := range []string{
		"Cor(ln(PPL(Q)), ln(PPL(base))):    nan%\n",
		"Mean PPL(Q)                   :   0.000000 ±        inf\n",
		"Mean ln(PPL(Q)/PPL(base))     :       -inf ±   0.000000\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in\n%s", want, out)
		}
	}
	p, err := ParseLlamaPerplexity(out)
	if err != nil {
		t.Fatal(err)
	}
	if !math.IsNaN(p.Cor) || !math.IsInf(p.PPLQ.Err, 1) || !math.IsInf(p.LnPPLRatio.Value, -1) {
		t.Errorf("non-finite values did not parse back: %v %v %v", p.Cor, p.PPLQ.Err, p.LnPPLRatio.Value)
	}
}

var finalRE = regexp.MustCompile(`Final estimate: PPL = ([0-9.]+) \+/- ([0-9.]+)`)

// "Final estimate" and the running "[chunk]ppl," values as llama.cpp prints.
func TestFormatPerplexityLines(t *testing.T) {
	files, _ := filepath.Glob(goldenDir + "/*.stderr.txt")
	n := 0
	for _, path := range files {
		raw, _ := os.ReadFile(path)
		m := finalRE.FindStringSubmatch(string(raw))
		if m == nil {
			continue
		}
		ppl, _ := strconv.ParseFloat(m[1], 64)
		unc, _ := strconv.ParseFloat(m[2], 64)
		if got := FormatFinalEstimate(ppl, unc); got != m[0] {
			t.Errorf("%s: got %q, want %q", path, got, m[0])
		}
		n++
	}
	if n != 10 {
		t.Errorf("checked %d Final estimate lines, want 10 (8 ppl + 2 base runs)", n)
	}
	raw, err := os.ReadFile(goldenDir + "/ppl.F32.plain.stdout.txt")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(raw)), "\n")
	line := lines[len(lines)-1]
	var rebuilt strings.Builder
	for i, m := range regexp.MustCompile(`\[(\d+)\]([0-9.]+),`).FindAllStringSubmatch(line, -1) {
		v, _ := strconv.ParseFloat(m[2], 64)
		rebuilt.WriteString(FormatChunkPPL(i+1, v))
	}
	if rebuilt.String() != line {
		t.Errorf("running values:\n got %q\nwant %q", rebuilt.String(), line)
	}
}
