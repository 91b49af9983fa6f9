package engine

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

type genGolden struct {
	PromptIDs    []int32 `json:"prompt_ids"`
	GeneratedIDs []int32 `json:"generated_ids"`
	steps        [][]float32
}

func loadGenGolden(t *testing.T, prompt, variant string, nVocab int) genGolden {
	t.Helper()
	base := filepath.Join(goldenDir, "generate", fmt.Sprintf("%s.%s.plain", prompt, variant))
	var g genGolden
	readJSON(t, base+".gen.json", &g)
	g.steps = readF32File(t, base+".steps.f32", nVocab)
	if len(g.steps) != len(g.GeneratedIDs) {
		t.Fatalf("%s: %d step rows for %d generated tokens", base, len(g.steps), len(g.GeneratedIDs))
	}
	return g
}

// greedy decodes the prompt in one call (keeping only the last row), then
// one token per call through the KV cache, like llama.cpp's generation.
// It returns the generated ids and the logits row that chose each.
func greedy(t *testing.T, m *Model, prompt []int32, n int) ([]int32, [][]float32) {
	t.Helper()
	s := m.NewSession(0)
	var ids []int32
	var steps [][]float32
	keep := func(i int, logits []float32) error {
		steps = append(steps, slices.Clone(logits))
		ids = append(ids, int32(argmax(logits)))
		return nil
	}
	last := len(prompt) - 1
	if err := s.Decode(prompt, func(i int) bool { return i == last }, keep); err != nil {
		t.Fatal(err)
	}
	for len(ids) < n {
		if err := s.Decode(ids[len(ids)-1:], nil, keep); err != nil {
			t.Fatal(err)
		}
	}
	if s.Pos() != len(prompt)+n-1 {
		t.Fatalf("session position %d, want %d", s.Pos(), len(prompt)+n-1)
	}
	return ids, steps
}

// TestGreedyMatchesLlamaCpp: 64-token greedy continuations through the KV
// cache are identical to llama.cpp's, and so are the logits of every step.
// F32 uses Exact numerics; F16 and Q8_0 are tried with both and must match
// with GGML numerics (llama.cpp's own rounding); Q4_0 is reported only.
func TestGreedyMatchesLlamaCpp(t *testing.T) {
	var table strings.Builder
	fmt.Fprintf(&table, "\n%-5s %-6s %-3s %-22s %11s %11s\n", "model", "numer", "pr", "tokens", "max|Δ|", "mean|Δ|")
	type check struct {
		variant  string
		numerics Numerics
		required bool
	}
	checks := []check{
		{"F32", Exact, true},
		{"F16", GGML, true}, {"F16", Exact, false},
		{"Q8_0", GGML, true}, {"Q8_0", Exact, false},
		{"Q4_0", GGML, false},
	}
	for _, c := range checks {
		if !c.required && testing.Short() {
			continue // a row of the table only (test-arm64 runs -short under qemu)
		}
		m := openModel(t, modelPath(c.variant), c.numerics, 2)
		ps := prompts
		if testing.Short() {
			ps = prompts[:1] // under qemu: 5 prompt and 64 generated positions, one step at a time
		}
		for _, p := range ps {
			g := loadGenGolden(t, p, c.variant, m.Config.NVocab)
			ids, steps := greedy(t, m, g.PromptIDs, len(g.GeneratedIDs))
			first := -1
			for i := range ids {
				if ids[i] != g.GeneratedIDs[i] {
					first = i
					break
				}
			}
			// Compare step logits while the sequences agree (after a
			// divergence the contexts differ).
			var d diffStats
			upto := len(ids)
			if first >= 0 {
				upto = first + 1
			}
			for i := 0; i < upto; i++ {
				d.add(i, g.steps[i], steps[i])
			}
			verdict := "identical (64)"
			if first >= 0 {
				verdict = fmt.Sprintf("diverge at step %d", first)
			}
			fmt.Fprintf(&table, "%-5s %-6s %-3s %-22s %11.3e %11.3e\n", c.variant, c.numerics, p, verdict, d.maxAbs, d.meanAbs())
			if !c.required {
				continue
			}
			name := fmt.Sprintf("%s/%s/%s", c.variant, c.numerics, p)
			if first >= 0 {
				t.Errorf("%s: generation diverges from llama.cpp at step %d: got %v, want %v", name, first, ids[first:min(first+6, len(ids))], g.GeneratedIDs[first:min(first+6, len(ids))])
			}
			limit := 2e-2
			if c.variant == "F32" {
				limit = 1e-4
			}
			if d.maxAbs > limit {
				t.Errorf("%s: step logits max|Δ| %.3e > %g", name, d.maxAbs, limit)
			}
		}
	}
	t.Log(table.String())
}
