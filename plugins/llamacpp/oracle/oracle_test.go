package oracle

import (
	"bufio"
	"cmp"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/evalrun/evalrun/engine"
	"github.com/evalrun/evalrun/engine/ggml"
	"github.com/evalrun/evalrun/engine/synth"
	"github.com/evalrun/evalrun/plugins/llamacpp/llama"
	"github.com/evalrun/evalrun/plugins/llamacpp/llamaplugin"
)

// The engine's ggml numerics must give llama.cpp's logits bit for bit
// (flash attention off, F32 KV cache, one thread or two: llama.cpp's own
// results do not depend on it). The texts come from datasets/oracle.jsonl,
// which the tests have not been tuned on beyond its first records; the
// synthetic models add shapes the bundled one lacks (768-wide rows: 24
// quantization blocks, repacked Q4_0 matrices, 64-wide heads).

func libOrSkip(t *testing.T) *llama.Library {
	t.Helper()
	dir := os.Getenv(llamaplugin.LibDirEnv)
	if dir == "" {
		d, ok := llamaplugin.RepoLibDir(".")
		if !ok {
			t.Skipf("llama.cpp libraries not installed (run `make llamacpp` or set %s): skipping the oracle", llamaplugin.LibDirEnv)
		}
		dir = d
	}
	lib, err := llama.Open(dir, "")
	if err != nil {
		t.Fatal(err)
	}
	if v := lib.CPUVariant; v != "zen4" && v != "skylakex" && v != "icelake" && v != "sapphirerapids" && v != "cooperlake" && v != "cascadelake" && v != "cannonlake" {
		t.Skipf("llama.cpp runs its %q CPU variant here; the engine reproduces the AVX-512 builds", v)
	}
	return lib
}

func oracleTexts(t *testing.T, n int) []string {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "..", "..", "datasets", "oracle.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var texts []string
	sc := bufio.NewScanner(f)
	for sc.Scan() && len(texts) < n {
		var r struct{ Text string }
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		texts = append(texts, r.Text)
	}
	return texts
}

// pair is one model in both implementations, with a llama.cpp context per
// thread count (cleared between runs: creating one costs more than a run).
type pair struct {
	path string
	lm   *llama.Model
	em   *engine.Model
	ctxs map[int]*llama.Context
}

func open(t *testing.T, lib *llama.Library, path string) *pair {
	t.Helper()
	lm, err := lib.LoadModel(path, llama.ModelParams{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(lm.Free)
	em, err := engine.Open(path, engine.Options{Numerics: engine.GGML, Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { em.Close() })
	p := &pair{path: path, lm: lm, em: em, ctxs: map[int]*llama.Context{}}
	t.Cleanup(func() {
		for _, c := range p.ctxs {
			c.Free()
		}
	})
	return p
}

func (p *pair) context(t *testing.T, threads int, obs *llama.Observer) *llama.Context {
	t.Helper()
	ctx, err := p.lm.NewContext(llama.ContextParams{NCtx: 512, NBatch: 512, NUBatch: 512, NSeqMax: 1, Threads: threads,
		FlashAttn: llama.FlashAttnOff, TypeK: int32(ggml.F32), TypeV: int32(ggml.F32), Observe: obs})
	if err != nil {
		t.Fatal(err)
	}
	return ctx
}

// mismatch compares rows of logits; it returns "" when all are identical.
func mismatch(ours, theirs map[int][]float32) string {
	for i := range len(ours) + len(theirs) {
		a, b := ours[i], theirs[i]
		if a == nil && b == nil {
			continue
		}
		if len(a) != len(b) {
			return fmt.Sprintf("row %d: %d logits here, %d from llama.cpp", i, len(a), len(b))
		}
		for j := range a {
			if math.Float32bits(a[j]) != math.Float32bits(b[j]) {
				return fmt.Sprintf("row %d, token %d: %v here, %v from llama.cpp", i, j, a[j], b[j])
			}
		}
	}
	return ""
}

// run decodes tokens in both, batched (logits for rows >= from) or one token
// at a time, and returns the first difference.
func (p *pair) run(t *testing.T, threads int, tokens []int32, from int, incremental bool) string {
	t.Helper()
	ctx := p.ctxs[threads]
	if ctx == nil {
		ctx = p.context(t, threads, nil)
		p.ctxs[threads] = ctx
	}
	ctx.Clear()
	s := p.em.NewSession(512)
	ours, theirs := map[int][]float32{}, map[int][]float32{}
	keep := func(m map[int][]float32, i int, l []float32) { m[i] = append([]float32(nil), l...) }
	if incremental {
		for i := range tokens {
			if err := ctx.Decode(0, i, tokens[i:i+1], func(int) bool { return true }); err != nil {
				t.Fatal(err)
			}
			l, err := ctx.Logits(0)
			if err != nil {
				t.Fatal(err)
			}
			keep(theirs, i, l)
			if err := s.Decode(tokens[i:i+1], nil, func(_ int, l []float32) error { keep(ours, i, l); return nil }); err != nil {
				t.Fatal(err)
			}
		}
		return mismatch(ours, theirs)
	}
	want := func(i int) bool { return i >= from }
	if err := ctx.Decode(0, 0, tokens, want); err != nil {
		t.Fatal(err)
	}
	for i := from; i < len(tokens); i++ {
		l, err := ctx.Logits(i)
		if err != nil {
			t.Fatal(err)
		}
		keep(theirs, i, l)
	}
	if err := s.Decode(tokens, want, func(i int, l []float32) error { keep(ours, i, l); return nil }); err != nil {
		t.Fatal(err)
	}
	return mismatch(ours, theirs)
}

// check compares every way of decoding tokens; llama.cpp runs with one
// thread, and also with two when both is set (its threads spin while they
// wait, which is slow on a loaded machine: a few runs prove the point).
func (p *pair) check(t *testing.T, tokens []int32, what string, both bool) {
	t.Helper()
	threads := []int{1}
	if both {
		threads = append(threads, 2)
	}
	for _, threads := range threads {
		for _, c := range []struct {
			name string
			from int
			incr bool
		}{{"all rows", 0, false}, {"second half", len(tokens) / 2, false}, {"last row", len(tokens) - 1, false}, {"one token at a time", 0, true}} {
			if d := p.run(t, threads, tokens, c.from, c.incr); d != "" {
				t.Fatalf("%s, %s, %d tokens, %s, llama.cpp with %d threads: %s\nfirst differing graph node: %s",
					filepath.Base(p.path), what, len(tokens), c.name, threads, d, p.firstNode(t, tokens))
			}
		}
	}
}

func TestBundledModels(t *testing.T) {
	lib := libOrSkip(t)
	texts := oracleTexts(t, 16)
	for _, v := range []string{"", "-f16", "-q8_0", "-q4_0"} {
		p := open(t, lib, filepath.Join("..", "..", "..", "models", "stories260K"+v+".gguf"))
		for i, text := range texts {
			tokens := p.em.Tokenizer().Encode(text, true)
			if len(tokens) > 200 {
				tokens = tokens[:200]
			}
			p.check(t, tokens, fmt.Sprintf("oracle text %d", i+1), i == 0)
		}
	}
}

func TestSyntheticModels(t *testing.T) {
	if testing.Short() {
		t.Skip("short: no synthetic models")
	}
	lib := libOrSkip(t)
	texts := oracleTexts(t, 20)[16:20]
	for _, typ := range []ggml.Type{ggml.F32, ggml.F16, ggml.Q8_0, ggml.Q4_0} {
		path := filepath.Join(t.TempDir(), strings.ToLower(typ.String())+".gguf")
		cfg := synth.Config{NEmbd: 256, NLayer: 2, NHead: 4, NHeadKV: 2, NFF: 768, NVocab: 512, Type: typ, Seed: 3, NCtx: 512}
		if err := synth.Generate(cfg, path); err != nil {
			t.Fatal(err)
		}
		p := open(t, lib, path)
		for i, text := range texts {
			tokens := p.em.Tokenizer().Encode(text, true)
			p.check(t, tokens[:min(len(tokens), 96)], fmt.Sprintf("oracle text %d", 17+i), false)
		}
	}
}

// firstNode finds the first of the engine's matmul inputs and outputs that
// differs from llama.cpp's graph node of the same name (llama.cpp observed
// node by node, which can itself change its numbers: a hint, not a proof).
func (p *pair) firstNode(t *testing.T, tokens []int32) string {
	var ours []nodeData
	em, err := engine.Open(p.path, engine.Options{Numerics: engine.GGML, Threads: 1})
	if err != nil {
		return err.Error()
	}
	defer em.Close()
	em.UseMatMul(recorder{em.CPUMatMul(), &ours})
	theirs := map[string][]float32{}
	ctx := p.context(t, 1, &llama.Observer{Node: func(tt *llama.Tensor) {
		if d := tt.F32(); d != nil && tt.Op == ggmlOpMulMat {
			if _, seen := theirs[tt.Name]; !seen {
				theirs[tt.Name] = append([]float32(nil), d...)
			}
		}
	}})
	defer ctx.Free()
	if err := ctx.Decode(0, 0, tokens, func(int) bool { return true }); err != nil {
		return err.Error()
	}
	if err := em.NewSession(512).Decode(tokens, nil, func(int, []float32) error { return nil }); err != nil {
		return err.Error()
	}
	for _, o := range ours {
		ref, ok := theirs[o.name]
		if !ok || len(ref) != len(o.data) {
			continue
		}
		for i := range ref {
			if math.Float32bits(ref[i]) != math.Float32bits(o.data[i]) {
				return fmt.Sprintf("%s, element %d: %v here, %v from llama.cpp", o.name, i, o.data[i], ref[i])
			}
		}
	}
	return "none of the matmul outputs (the difference is in what follows them)"
}

const ggmlOpMulMat = 29 // GGML_OP_MUL_MAT in v0.5.0's enum

type nodeData struct {
	name string
	data []float32
}

// recorder keeps a copy of every matmul's output.
type recorder struct {
	inner engine.MatMuler
	out   *[]nodeData
}

func (r recorder) MatMul(op *engine.MatMulOp, x, out []float32) error {
	err := r.inner.MatMul(op, x, out)
	*r.out = append(*r.out, nodeData{op.Name, append([]float32(nil), out[:op.T*op.N]...)})
	return err
}

// archVariants are the layouts of every architecture the engine computes,
// as real conversions lay them out: Llama 3.1+'s rope_freqs, the llama
// graph's optional biases, a head size other than n_embd/n_head, RoPE
// scaling (linear, YaRN), Qwen2's biases, Qwen3's Q/K norms; norm weights
// are random around 1 so a norm on the wrong rows shows.
var archVariants = []struct {
	name string
	cfg  synth.Config
	full bool // swa_full in both: a full-size sliding-window cache (else the ring)
}{
	{"llama3-rope-freqs", synth.Config{Arch: "llama", RopeFreqs: true, RopeBase: 500000, NormNoise: 0.2}, false},
	{"llama-biases-headdim", synth.Config{Arch: "llama", Biases: true, HeadDim: 128, NormNoise: 0.2}, false},
	{"llama-linear", synth.Config{Arch: "llama", RopeScaling: "linear", RopeFactor: 4, NormNoise: 0.2}, false},
	{"llama-yarn", synth.Config{Arch: "llama", RopeScaling: "yarn", RopeFactor: 4, RopeOrigCtx: 512, NormNoise: 0.2}, false},
	{"qwen2", synth.Config{Arch: "qwen2", RopeBase: 1000000, NormNoise: 0.2}, false},
	{"qwen2-yarn", synth.Config{Arch: "qwen2", RopeScaling: "yarn", RopeFactor: 4, RopeOrigCtx: 512, NormNoise: 0.2}, false},
	{"qwen3", synth.Config{Arch: "qwen3", RopeBase: 1000000, NormNoise: 0.2}, false},
	{"qwen3-biases-headdim", synth.Config{Arch: "qwen3", Biases: true, HeadDim: 128, NormNoise: 0.2}, false},
	// Gemma 2: soft caps, GEGLU, post norms; a window on layer 0. Gemma 3
	// (4B+): Q/K norms, the window's own RoPE base, the global layer
	// linearly scaled. In the ring llama.cpp's tools use (the default) and
	// in libllama's full-size cache (-full).
	{"gemma2", synth.Config{Arch: "gemma2", SlidingWindow: 300, NormNoise: 0.2}, false},
	{"gemma3", synth.Config{Arch: "gemma3", SlidingWindow: 100, SWAPattern: 2, RopeBase: 1000000, RopeBaseSWA: 10000,
		NormNoise: 0.2}, false},
	{"gemma2-full", synth.Config{Arch: "gemma2", SlidingWindow: 100, NormNoise: 0.2}, true},
	{"gemma3-full", synth.Config{Arch: "gemma3", SlidingWindow: 100, SWAPattern: 2, RopeBase: 1000000, RopeBaseSWA: 10000,
		RopeScaling: "linear", RopeFactor: 8, NormNoise: 0.2}, true},
	// Phi-3: fused QKV and gate/up; Phi-3-128k's long factors (context 2048
	// beyond the original 512).
	{"phi3", synth.Config{Arch: "phi3", NormNoise: 0.2}, false},
	{"phi3-longrope", synth.Config{Arch: "phi3", LongRope: true, RopeOrigCtx: 512, NormNoise: 0.2}, false},
	// Phi-4-mini: 3/4 of each head rotated, long factors, tied output.
	{"phi4-mini", synth.Config{Arch: "phi3", LongRope: true, RopeOrigCtx: 512, RopeDim: 48, NormNoise: 0.2}, false},
	{"minicpm-biases", synth.Config{Arch: "minicpm", Biases: true, NormNoise: 0.2}, false},
	{"internlm2", synth.Config{Arch: "internlm2", RopeBase: 1000000, NormNoise: 0.2}, false},
	// GLM-4: Q/K/V biases, half the head rotated, post norms, fused gate/up.
	{"glm4", synth.Config{Arch: "glm4", NormNoise: 0.2}, false},
}

// longTokens is one stream of at least n tokens: the oracle texts, each
// with its BOS, concatenated.
func longTokens(t *testing.T, em *engine.Model, n int) []int32 {
	var out []int32
	for _, text := range oracleTexts(t, 240) {
		out = append(out, em.Tokenizer().Encode(text, true)...)
		if len(out) >= n {
			return out[:n]
		}
	}
	t.Fatalf("the oracle texts have %d tokens, want %d", len(out), n)
	return nil
}

// TestArchitectures holds every architecture and variant the engine
// computes to llama.cpp, bit for bit, in batches of 512 (as evalrun feeds a
// plugin): F32 over a 2048-token context, so RoPE scaling and the frequency
// factors reach the long-context positions where they matter; the other
// weight types over the first batch: what depends on the position (RoPE,
// windows, the ring cache) does not depend on the weights' type, and what
// depends on the type (the matmuls) does not depend on the position.
// make oracle-archs runs every type at 2048 through the plugins.
func TestArchitectures(t *testing.T) {
	if testing.Short() {
		t.Skip("short: no synthetic models")
	}
	lib := libOrSkip(t)
	const nCtx, batch = 2048, 512
	types := []ggml.Type{ggml.F32, ggml.F16, ggml.Q8_0, ggml.Q4_0}
	for _, v := range archVariants {
		for _, typ := range types {
			t.Run(v.name+"/"+typ.String(), func(t *testing.T) {
				cfg := v.cfg
				cfg.NEmbd, cfg.NLayer, cfg.NHead, cfg.NHeadKV, cfg.NFF, cfg.NVocab = 256, 2, 4, 2, 768, 512
				cfg.Type, cfg.Seed, cfg.NCtx = typ, 5, cmp.Or(cfg.RopeOrigCtx*8, nCtx)
				if cfg.LongRope {
					cfg.NCtx = nCtx
				}
				path := filepath.Join(t.TempDir(), v.name+".gguf")
				if err := synth.Generate(cfg, path); err != nil {
					t.Fatal(err)
				}
				lm, err := lib.LoadModel(path, llama.ModelParams{})
				if err != nil {
					t.Fatal(err)
				}
				defer lm.Free()
				em, err := engine.Open(path, engine.Options{Numerics: engine.GGML, Threads: 2, SWAFull: v.full})
				if err != nil {
					t.Fatal(err)
				}
				defer em.Close()
				ctx, err := lm.NewContext(llama.ContextParams{NCtx: nCtx, NBatch: batch, NUBatch: batch, NSeqMax: 1, Threads: 2,
					FlashAttn: llama.FlashAttnOff, TypeK: int32(ggml.F32), TypeV: int32(ggml.F32), SWAFull: v.full})
				if err != nil {
					t.Fatal(err)
				}
				defer ctx.Free()
				tokens := longTokens(t, em, nCtx)
				s := em.NewSession(nCtx)
				positions := nCtx
				if typ != ggml.F32 {
					positions = batch
				}
				for p := 0; p < positions; p += batch {
					chunk := tokens[p : p+batch]
					if err := ctx.Decode(0, p, chunk, func(int) bool { return true }); err != nil {
						t.Fatal(err)
					}
					ours := map[int][]float32{}
					if err := s.Decode(chunk, nil, func(i int, l []float32) error { ours[i] = slices.Clone(l); return nil }); err != nil {
						t.Fatal(err)
					}
					theirs := map[int][]float32{}
					for i := range chunk {
						l, err := ctx.Logits(i)
						if err != nil {
							t.Fatal(err)
						}
						theirs[i] = slices.Clone(l)
					}
					if d := mismatch(ours, theirs); d != "" {
						t.Fatalf("positions %d..%d: %s", p, p+batch-1, d)
					}
				}
			})
		}
	}
}
