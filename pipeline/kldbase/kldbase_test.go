package kldbase

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const goldenDir = "../../testdata/llamacpp"

var baseFiles = []string{
	goldenDir + "/perplexity/stories260K-F32.plain.c128.kld",
	goldenDir + "/perplexity/stories260K-F32.default.c128.kld",
}

func openBase(t *testing.T, path string) *Reader {
	t.Helper()
	r, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// The shared base files: 24 chunks of 128 tokens of a 512-token vocabulary,
// holding the kld-text's tokens.
func TestOpenSharedBaseFiles(t *testing.T) {
	var promptIDs struct {
		TokenIDs []int32 `json:"token_ids"`
	}
	raw, err := os.ReadFile(goldenDir + "/logits/p1.F32.plain.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &promptIDs); err != nil {
		t.Fatal(err)
	}
	var gen struct {
		GeneratedIDs []int32 `json:"generated_ids"`
		Text         string  `json:"generated_text"`
	}
	raw, err = os.ReadFile(goldenDir + "/generate/p1.F32.plain.gen.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &gen); err != nil {
		t.Fatal(err)
	}

	var tokens [][]int32
	for _, path := range baseFiles {
		r := openBase(t, path)
		if r.NCtx() != 128 || r.NVocab() != 512 || r.NChunk() != 24 || r.First() != 64 || r.PerChunk() != 63 {
			t.Fatalf("%s: n_ctx %d n_vocab %d n_chunk %d first %d per chunk %d, want 128 512 24 64 63",
				path, r.NCtx(), r.NVocab(), r.NChunk(), r.First(), r.PerChunk())
		}
		if len(r.Tokens()) != 3072 {
			t.Fatalf("%s: %d tokens, want 3072", path, len(r.Tokens()))
		}
		// kld-text.txt starts "Once upon a time, there was a little bunny":
		// the prompt p1 "Once upon a time" (with BOS) ...
		if got := r.Tokens()[:5]; !slices.Equal(got, promptIDs.TokenIDs) {
			t.Errorf("%s: first tokens %v, want p1's %v", path, got, promptIDs.TokenIDs)
		}
		// ... followed by ", there was a little", which the model's greedy
		// continuation of p1 also starts with.
		if !strings.HasPrefix(gen.Text, ", there was a little ") {
			t.Fatalf("golden p1 continuation %q changed", gen.Text)
		}
		if got := r.Tokens()[5:10]; !slices.Equal(got, gen.GeneratedIDs[:5]) {
			t.Errorf("%s: tokens 5..9 %v, want %v", path, got, gen.GeneratedIDs[:5])
		}
		if r.Target(0, 0) != r.Tokens()[65] || r.Target(23, 62) != r.Tokens()[23*128+127] {
			t.Errorf("Target does not address tokens[chunk·n_ctx + first + k + 1]")
		}
		tokens = append(tokens, r.Tokens())
	}
	if !slices.Equal(tokens[0], tokens[1]) {
		t.Errorf("the default and plain base files hold different tokens")
	}
}

// Every decoded record is a probability distribution up to the quantization
// error, and its argmax is a plausible prediction of the next token.
func TestRecordsNormalise(t *testing.T) {
	for _, path := range baseFiles {
		r := openBase(t, path)
		lp := make([]float32, r.NVocab())
		var rec Record
		hits, n := 0, 0
		for c := range r.NChunk() {
			for k := range r.PerChunk() {
				if err := r.ReadRecord(c, k, &rec); err != nil {
					t.Fatal(err)
				}
				if err := r.Record(c, k, lp); err != nil {
					t.Fatal(err)
				}
				// Each kept log-prob is off by at most half a step (scale/2);
				// a clamped one (q = 0) decodes as min_log_prob, above its
				// true value, adding at most exp(min_log_prob) each.
				var sum float64
				clamped := 0
				for i, v := range lp {
					sum += math.Exp(float64(v))
					if rec.Q[i] == 0 {
						clamped++
					}
				}
				tol := math.Expm1(float64(rec.Scale)/2) + float64(clamped)*math.Exp(float64(rec.MinLogProb)) + 1e-5
				if math.Abs(sum-1) > tol {
					t.Fatalf("%s chunk %d pos %d: Σ exp(log p) = %.8f, want 1 ± %.2g", path, c, k, sum, tol)
				}
				if rec.Scale <= 0 || rec.Scale > 16.0/65535*1.0001 {
					t.Fatalf("%s chunk %d pos %d: scale %g outside (0, 16/65535]", path, c, k, rec.Scale)
				}
				top := argmax(lp)
				if rec.Q[top] < 65534 {
					t.Fatalf("%s chunk %d pos %d: the most likely token has q %d, want ≈ 65535", path, c, k, rec.Q[top])
				}
				if int32(top) == r.Target(c, k) {
					hits++
				}
				n++
			}
		}
		// PPL ≈ 5.6 on this text: the base model's top token is the text's
		// next token often, far above the 1/512 of chance.
		acc := float64(hits) / float64(n)
		t.Logf("%s: argmax = next token in %d of %d positions (%.1f%%)", filepath.Base(path), hits, n, 100*acc)
		if acc < 0.3 {
			t.Errorf("%s: argmax matches the next token in only %.1f%% of positions", path, 100*acc)
		}
	}
}

func argmax(v []float32) int {
	best := 0
	for i, x := range v {
		if x > v[best] {
			best = i
		}
	}
	return best
}
