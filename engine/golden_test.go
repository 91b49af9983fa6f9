package engine

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The llama.cpp goldens (plain config: flash attention off, F32 KV cache)
// and the bundled models they were made from.
const (
	goldenDir = "../testdata/llamacpp"
	modelDir  = "../models"
)

var variantFiles = map[string]string{
	"F32":  "stories260K.gguf",
	"F16":  "stories260K-f16.gguf",
	"Q8_0": "stories260K-q8_0.gguf",
	"Q4_0": "stories260K-q4_0.gguf",
}

var (
	variants = []string{"F32", "F16", "Q8_0", "Q4_0"}
	prompts  = []string{"p1", "p2", "p3"}
)

func modelPath(variant string) string { return filepath.Join(modelDir, variantFiles[variant]) }

func readF32File(t *testing.T, path string, nVocab int) [][]float32 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(b)%(4*nVocab) != 0 {
		t.Fatalf("%s: %d bytes is not a whole number of %d-logit rows", path, len(b), nVocab)
	}
	rows := make([][]float32, len(b)/(4*nVocab))
	for i := range rows {
		rows[i] = make([]float32, nVocab)
		for j := range rows[i] {
			rows[i][j] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*(i*nVocab+j):]))
		}
	}
	return rows
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

type logitsGolden struct {
	TokenIDs []int32 `json:"token_ids"`
	NVocab   int     `json:"n_vocab"`
	logits   [][]float32
}

func loadLogitsGolden(t *testing.T, prompt, variant string) logitsGolden {
	t.Helper()
	base := filepath.Join(goldenDir, "logits", fmt.Sprintf("%s.%s.plain", prompt, variant))
	var g logitsGolden
	readJSON(t, base+".json", &g)
	g.logits = readF32File(t, base+".f32", g.NVocab)
	if len(g.logits) != len(g.TokenIDs) {
		t.Fatalf("%s: %d logit rows for %d tokens", base, len(g.logits), len(g.TokenIDs))
	}
	return g
}

// decodeAll runs the tokens through a fresh session in one Decode and returns
// the logits of every row.
func decodeAll(t *testing.T, m *Model, ids []int32) [][]float32 {
	t.Helper()
	s := m.NewSession(0)
	rows := make([][]float32, len(ids))
	err := s.Decode(ids, nil, func(i int, logits []float32) error {
		rows[i] = append([]float32(nil), logits...)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range rows {
		if r == nil {
			t.Fatalf("row %d was not emitted", i)
		}
	}
	return rows
}

func openModel(t testing.TB, path string, numerics Numerics, threads int) *Model {
	t.Helper()
	m, err := Open(path, Options{Numerics: numerics, Threads: threads})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// diffStats compares two logit rows: max and mean |Δ|, KL(ref‖ours) in
// float64, and whether the argmax (first index of the maximum) agrees.
type diffStats struct {
	maxAbs, sumAbs float64
	n              int
	sumKLD         float64
	rows           int
	argmaxMismatch []int
}

func (d *diffStats) add(pos int, ref, ours []float32) {
	for i := range ref {
		a := math.Abs(float64(ours[i]) - float64(ref[i]))
		d.maxAbs = max(d.maxAbs, a)
		d.sumAbs += a
		d.n++
	}
	d.sumKLD += kld(ref, ours)
	d.rows++
	if argmax(ref) != argmax(ours) {
		d.argmaxMismatch = append(d.argmaxMismatch, pos)
	}
}

func (d *diffStats) meanAbs() float64 { return d.sumAbs / float64(d.n) }
func (d *diffStats) meanKLD() float64 { return d.sumKLD / float64(d.rows) }

func logSoftmax(x []float32) []float64 {
	m := math.Inf(-1)
	for _, v := range x {
		m = max(m, float64(v))
	}
	var s float64
	for _, v := range x {
		s += math.Exp(float64(v) - m)
	}
	lse := m + math.Log(s)
	out := make([]float64, len(x))
	for i, v := range x {
		out[i] = float64(v) - lse
	}
	return out
}

// kld is KL(softmax(p) ‖ softmax(q)).
func kld(p, q []float32) float64 {
	lp, lq := logSoftmax(p), logSoftmax(q)
	var k float64
	for i := range lp {
		k += math.Exp(lp[i]) * (lp[i] - lq[i])
	}
	return k
}

func argmax(x []float32) int {
	best := 0
	for i, v := range x {
		if v > x[best] {
			best = i
		}
	}
	return best
}

// TestLogitsMatchLlamaCpp decodes every golden prompt with every bundled
// model in one batch and compares all rows with llama.cpp's logits.
func TestLogitsMatchLlamaCpp(t *testing.T) {
	type check struct {
		variant  string
		numerics Numerics
	}
	var checks []check
	checks = append(checks, check{"F32", Exact})
	for _, v := range variants {
		checks = append(checks, check{v, GGML})
	}
	for _, v := range variants[1:] {
		checks = append(checks, check{v, Exact})
	}
	var table strings.Builder
	fmt.Fprintf(&table, "\n%-5s %-6s %-3s %11s %11s %11s %s\n", "model", "numer", "pr", "max|Δ|", "mean|Δ|", "mean KLD", "argmax")
	for i, c := range checks {
		m := openModel(t, modelPath(c.variant), c.numerics, 2)
		ps := prompts
		if testing.Short() && i > 1 {
			// Under qemu the long prompt (109 of the 127 positions) for F32 in
			// both numerics only: attention does not depend on the weights'
			// type, and TestGreedyMatchesLlamaCpp decodes 69 positions of
			// the others.
			ps = prompts[:2]
		}
		for _, p := range ps {
			name := fmt.Sprintf("%s/%s/%s", c.variant, c.numerics, p)
			g := loadLogitsGolden(t, p, c.variant)
			got := decodeAll(t, m, g.TokenIDs)
			var d diffStats
			for i := range got {
				d.add(i, g.logits[i], got[i])
			}
			agree := "same"
			if len(d.argmaxMismatch) > 0 {
				agree = fmt.Sprintf("differs at %v", d.argmaxMismatch)
			}
			fmt.Fprintf(&table, "%-5s %-6s %-3s %11.3e %11.3e %11.3e %s\n", c.variant, c.numerics, p, d.maxAbs, d.meanAbs(), d.meanKLD(), agree)
			switch {
			case c.variant == "F32" && c.numerics == Exact:
				if d.maxAbs > 1e-4 {
					t.Errorf("%s: max|Δ| %.3e > 1e-4", name, d.maxAbs)
				}
			case c.numerics == GGML:
				if d.maxAbs > 2e-2 {
					t.Errorf("%s: max|Δ| %.3e > 2e-2", name, d.maxAbs)
				}
				if len(d.argmaxMismatch) > 0 {
					t.Errorf("%s: argmax differs from llama.cpp at positions %v", name, d.argmaxMismatch)
				}
			default: // Exact numerics on a quantized file
				// Exact keeps activations in f32 while llama.cpp rounds
				// them to F16 or Q8_0: that alone moves Q8_0/Q4_0 by
				// 1e-4..5e-4 (llama.cpp's own Q8_0-vs-F32 KLD is 8e-4).
				limit := 1e-3
				if c.variant == "F16" {
					limit = 1e-5
				}
				if d.meanKLD() > limit {
					t.Errorf("%s: mean KLD %.3e > %g", name, d.meanKLD(), limit)
				}
			}
		}
	}
	t.Log(table.String())
}
