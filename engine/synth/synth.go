// Package synth writes GGUF models of every architecture the engine
// computes (llama, qwen2/3, gemma2/3, phi3, minicpm, internlm2, glm4) with
// random weights and a real (synthetic) SentencePiece vocabulary, laid out as
// convert_hf_to_gguf lays out real conversions: realistic shapes for speed
// work, and the variants of each architecture (Llama 3's rope_freqs,
// biases, RoPE scaling, sliding windows, fused matmuls) for checking the engine against llama.cpp.
package synth

import (
	"cmp"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync"

	"github.com/evalrun/evalrun/engine/ggml"
	"github.com/evalrun/evalrun/engine/gguf"
)

// Config describes the model to generate.
type Config struct {
	// Arch is one of Archs: "llama" (default), "qwen2" (NeoX RoPE, Q/K/V
	// biases), "qwen3" (NeoX RoPE, per-head Q/K RMS norms), "gemma2",
	// "gemma3", "phi3", "minicpm", "internlm2" or "glm4", each laid out as
	// convert_hf_to_gguf writes the real models.
	Arch    string
	NEmbd   int
	NLayer  int
	NHead   int
	NHeadKV int // 0 = NHead
	NFF     int
	NVocab  int // at least 259: <unk>, <s>, </s> and the 256 byte tokens
	Type    ggml.Type
	Seed    int64
	NCtx    int // context_length metadata; 0 = 2048

	// HeadDim is attention.key_length/value_length; 0 = NEmbd/NHead
	// (written only when it differs, as the converters do).
	HeadDim int
	// RopeBase is rope.freq_base; 0 = 10000.
	RopeBase float32
	// RopeFreqs writes rope_freqs.weight as convert_hf_to_gguf computes it
	// for Llama 3.1/3.2/3.3 ("llama3" rope type: factor 8, low 1, high 4,
	// original context 8192). llama only.
	RopeFreqs bool
	// Biases adds the biases the architecture's graph applies when present:
	// llama Q/K/V, attention output and FFN; qwen3 Q/K/V (qwen2 always has
	// Q/K/V biases).
	Biases bool
	// NormNoise draws norm weights as 1 + N(0, NormNoise) instead of all 1,
	// so a norm applied to the wrong rows or skipped shows in the logits.
	NormNoise float64
	// RopeScaling is rope.scaling.type ("", "linear", "yarn"), with
	// RopeFactor (rope.scaling.factor) and, for yarn, RopeOrigCtx
	// (rope.scaling.original_context_length).
	RopeScaling string
	RopeFactor  float32
	RopeOrigCtx int

	// SlidingWindow is gemma2/gemma3's attention.sliding_window (0: gemma2
	// 4096, gemma3 none) and SWAPattern its sliding_window_pattern (0: the
	// architecture's default, 2 for gemma2 and 6 for gemma3: every
	// SWAPattern-th layer sees the whole context). RopeBaseSWA is the
	// local layers' rope.freq_base_swa (0: not written).
	SlidingWindow int
	SWAPattern    int
	RopeBaseSWA   float32
	// LongRope writes Phi-3's rope_factors_long and _short with
	// rope.scaling.original_context_length RopeOrigCtx (default NCtx/4)
	// and its attention factor, as Phi-3-*-128k conversions do.
	LongRope bool
	// RopeDim is rope.dimension_count for glm4's partial rotation (0: half
	// the head, as GLM-4's partial_rotary_factor).
	RopeDim int
}

// Archs are the architectures Generate writes that evalrun's engine
// computes; LlamaCppArchs are layouts it writes, as real conversions lay
// them out, that only the llamacpp plugin computes (specs whose every
// backend is llamacpp run on them).
var (
	Archs         = []string{"llama", "qwen2", "qwen3", "gemma2", "gemma3", "phi3", "minicpm", "internlm2", "glm4"}
	LlamaCppArchs = []string{"granite"}
)

// Weight scale: trained transformers have weights of standard deviation
// about 0.02 and norm weights near 1.
const weightStd = 0.02

// fileTypes maps a weight type to llama.cpp's general.file_type (llama_ftype).
var fileTypes = map[ggml.Type]uint32{
	ggml.F32: 0, ggml.F16: 1, ggml.Q4_0: 2, ggml.Q4_1: 3, ggml.Q8_0: 7,
	ggml.Q5_0: 8, ggml.Q5_1: 9, ggml.BF16: 32, ggml.MXFP4: 38,
}

// Tensor data is drawn per tensor from a generator seeded by (Seed, name), so
// tensors can be generated in parallel and the file is the same every time.
type tensorSpec struct {
	name  string
	typ   ggml.Type
	dims  []uint64
	ones  bool // norm weights: all 1.0 (1 + N(0, noise) when noise > 0)
	noise float64
	data  []float32 // the values, when not drawn
	bytes []byte
}

func (c *Config) normalize() error {
	if c.Arch == "" {
		c.Arch = "llama"
	}
	if !slices.Contains(Archs, c.Arch) && !slices.Contains(LlamaCppArchs, c.Arch) {
		return fmt.Errorf("synth: unsupported architecture %q (supported: %s)", c.Arch, strings.Join(append(slices.Clone(Archs), LlamaCppArchs...), ", "))
	}
	if c.Biases && !slices.Contains([]string{"llama", "qwen2", "qwen3", "minicpm", "glm4"}, c.Arch) {
		return fmt.Errorf("synth: %s: biases are written for llama, qwen3, minicpm and glm4 (qwen2 always has them)", c.Arch)
	}
	if (c.SlidingWindow != 0 || c.SWAPattern != 0 || c.RopeBaseSWA != 0) && c.Arch != "gemma2" && c.Arch != "gemma3" {
		return fmt.Errorf("synth: sliding windows are written for gemma2 and gemma3")
	}
	if c.LongRope && c.Arch != "phi3" {
		return fmt.Errorf("synth: long RoPE factors are written for phi3")
	}
	if c.RopeDim != 0 && c.Arch != "glm4" && c.Arch != "phi3" {
		return fmt.Errorf("synth: a partial RoPE is written for glm4 and phi3 (Phi-4-mini)")
	}
	if c.SlidingWindow < 0 || c.SWAPattern < 0 || c.RopeDim < 0 || c.RopeDim%2 != 0 {
		return fmt.Errorf("synth: SlidingWindow, SWAPattern and RopeDim must be non-negative (RopeDim even)")
	}
	if c.RopeFreqs && c.Arch != "llama" {
		return fmt.Errorf("synth: rope_freqs is a llama tensor (llama.cpp's %s graph does not use it)", c.Arch)
	}
	switch c.RopeScaling {
	case "", "none":
	case "linear", "yarn":
		if !(c.RopeFactor > 0) {
			return fmt.Errorf("synth: rope scaling %q needs a positive factor", c.RopeScaling)
		}
	default:
		return fmt.Errorf("synth: rope scaling %q: supported none, linear, yarn", c.RopeScaling)
	}
	if c.RopeBase == 0 {
		c.RopeBase = 10000
	}
	if c.NormNoise < 0 || c.NormNoise > 1 {
		return fmt.Errorf("synth: NormNoise %g out of range [0, 1]", c.NormNoise)
	}
	if c.NHeadKV == 0 {
		c.NHeadKV = c.NHead
	}
	if c.NCtx == 0 {
		c.NCtx = 2048
	}
	switch {
	case c.NEmbd <= 0 || c.NLayer <= 0 || c.NHead <= 0 || c.NHeadKV <= 0 || c.NFF <= 0 || c.NCtx < 0:
		return fmt.Errorf("synth: NEmbd, NLayer, NHead, NHeadKV, NFF must be positive (got %d, %d, %d, %d, %d)", c.NEmbd, c.NLayer, c.NHead, c.NHeadKV, c.NFF)
	case c.HeadDim == 0 && c.NEmbd%c.NHead != 0:
		return fmt.Errorf("synth: NEmbd %d is not a multiple of NHead %d", c.NEmbd, c.NHead)
	case c.NHead%c.NHeadKV != 0:
		return fmt.Errorf("synth: NHead %d is not a multiple of NHeadKV %d", c.NHead, c.NHeadKV)
	case c.HeadDim < 0 || c.headDim()%2 != 0:
		return fmt.Errorf("synth: head size %d must be even for RoPE", c.headDim())
	case c.Arch == "qwen2" && c.headDim()*c.NHead != c.NEmbd:
		return fmt.Errorf("synth: qwen2's Q is NEmbd wide (llama.cpp's qwen2 graph): head size %d × %d heads must be %d", c.headDim(), c.NHead, c.NEmbd)
	case c.NVocab < specialAndByteTokens+1:
		return fmt.Errorf("synth: NVocab %d: need at least %d (3 special + 256 byte tokens + 1)", c.NVocab, specialAndByteTokens+1)
	}
	if _, ok := fileTypes[c.Type]; !ok {
		return fmt.Errorf("synth: weight type %s not supported (F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, MXFP4)", c.Type)
	}
	if c.NEmbd%c.Type.BlockSize() != 0 {
		return fmt.Errorf("synth: NEmbd %d is not a multiple of the %s block size %d", c.NEmbd, c.Type, c.Type.BlockSize())
	}
	return nil
}

// ropeDim is rope.dimension_count: the whole head, or RopeDim (glm4:
// half the head by default).
func (c *Config) ropeDim() int {
	if c.Arch == "glm4" {
		return cmp.Or(c.RopeDim, c.headDim()/2)
	}
	return cmp.Or(c.RopeDim, c.headDim())
}

func (c *Config) headDim() int {
	if c.HeadDim > 0 {
		return c.HeadDim
	}
	return c.NEmbd / c.NHead
}

// Generate writes the model described by cfg to path.
func Generate(cfg Config, path string) error {
	if err := cfg.normalize(); err != nil {
		return err
	}
	w := gguf.NewWriter()
	if err := addMetadata(w, cfg); err != nil {
		return err
	}
	specs := tensorSpecs(cfg)
	if err := fillTensors(specs, cfg); err != nil {
		return err
	}
	for _, s := range specs {
		if err := w.AddTensor(s.name, s.typ, s.dims, s.bytes); err != nil {
			return fmt.Errorf("synth: %w", err)
		}
	}
	if err := w.WriteFile(path); err != nil {
		return fmt.Errorf("synth: %w", err)
	}
	return nil
}

type keyValue struct {
	key string
	val any
}

func addMetadata(w *gguf.Writer, c Config) error {
	a := c.Arch + "."
	headDim := uint32(c.headDim())
	tokens, scores, types := vocab(c.NVocab)
	if c.Arch == "phi3" {
		// llama.cpp's vocabulary loader looks this one up in a model named
		// phi3 (Phi-3's added tokens start with it).
		tokens[len(tokens)-1], types[len(types)-1] = "<|endoftext|>", typeControl
	}
	ropeDim := uint32(c.ropeDim())
	kvs := []keyValue{
		{"general.architecture", c.Arch},
		{"general.name", fmt.Sprintf("synth-%s-%dL-%d-%s", c.Arch, c.NLayer, c.NEmbd, c.Type)},
		{"general.file_type", fileTypes[c.Type]},
		{"general.quantization_version", uint32(2)},
		{a + "context_length", uint32(c.NCtx)},
		{a + "embedding_length", uint32(c.NEmbd)},
		{a + "block_count", uint32(c.NLayer)},
		{a + "feed_forward_length", uint32(c.NFF)},
		{a + "rope.dimension_count", ropeDim},
		{a + "rope.freq_base", c.RopeBase},
		{a + "attention.head_count", uint32(c.NHead)},
		{a + "attention.head_count_kv", uint32(c.NHeadKV)},
		{a + "attention.layer_norm_rms_epsilon", float32(1e-5)},
		{a + "vocab_size", uint32(c.NVocab)},
	}
	if c.HeadDim > 0 || c.Arch == "gemma3" || c.Arch == "gemma2" {
		kvs = append(kvs, keyValue{a + "attention.key_length", headDim}, keyValue{a + "attention.value_length", headDim})
	}
	switch c.Arch {
	case "gemma2": // Gemma 2's soft caps; the window as given (else llama.cpp's 4096)
		kvs = append(kvs, keyValue{a + "attn_logit_softcapping", float32(50)}, keyValue{a + "final_logit_softcapping", float32(30)})
		if c.SlidingWindow > 0 {
			kvs = append(kvs, keyValue{a + "attention.sliding_window", uint32(c.SlidingWindow)})
		}
	case "gemma3":
		if c.SlidingWindow > 0 {
			kvs = append(kvs, keyValue{a + "attention.sliding_window", uint32(c.SlidingWindow)})
		}
	case "phi3": // Phi-3-mini-4k's window (llama.cpp b10587 ignores it)
		kvs = append(kvs, keyValue{a + "attention.sliding_window", uint32(c.NCtx - 1)})
		if c.LongRope {
			orig := cmp.Or(c.RopeOrigCtx, c.NCtx/4)
			scale := float64(c.NCtx) / float64(orig)
			kvs = append(kvs, keyValue{a + "rope.scaling.original_context_length", uint32(orig)},
				keyValue{a + "rope.scaling.attn_factor", float32(math.Sqrt(1 + math.Log(scale)/math.Log(float64(orig))))})
		}
	case "granite": // Granite 3's scales
		kvs = append(kvs, keyValue{a + "embedding_scale", float32(12)}, keyValue{a + "residual_scale", float32(0.22)},
			keyValue{a + "logit_scale", float32(8)}, keyValue{a + "attention.scale", float32(0.015625)})
	case "minicpm": // MiniCPM-2B's scales (scale_emb 12, scale_depth 1.4, dim_model_base 256)
		kvs = append(kvs, keyValue{a + "embedding_scale", float32(12)},
			keyValue{a + "residual_scale", float32(1.4 / math.Sqrt(float64(c.NLayer)))},
			keyValue{a + "logit_scale", float32(c.NEmbd) / 256})
	}
	if c.SWAPattern > 0 {
		kvs = append(kvs, keyValue{a + "attention.sliding_window_pattern", uint32(c.SWAPattern)})
	}
	if c.RopeBaseSWA > 0 {
		kvs = append(kvs, keyValue{a + "rope.freq_base_swa", c.RopeBaseSWA})
	}
	switch c.RopeScaling {
	case "linear":
		kvs = append(kvs, keyValue{a + "rope.scaling.type", "linear"}, keyValue{a + "rope.scaling.factor", c.RopeFactor})
	case "yarn":
		orig := cmp.Or(c.RopeOrigCtx, c.NCtx)
		kvs = append(kvs, keyValue{a + "rope.scaling.type", "yarn"}, keyValue{a + "rope.scaling.factor", c.RopeFactor},
			keyValue{a + "rope.scaling.original_context_length", uint32(orig)})
	}
	kvs = append(kvs,
		keyValue{"tokenizer.ggml.model", "llama"},
		keyValue{"tokenizer.ggml.tokens", tokens},
		keyValue{"tokenizer.ggml.scores", scores},
		keyValue{"tokenizer.ggml.token_type", types},
		keyValue{"tokenizer.ggml.bos_token_id", uint32(1)},
		keyValue{"tokenizer.ggml.eos_token_id", uint32(2)},
		keyValue{"tokenizer.ggml.unknown_token_id", uint32(0)},
		keyValue{"tokenizer.ggml.add_bos_token", true},
		keyValue{"tokenizer.ggml.add_eos_token", false},
	)
	for _, kv := range kvs {
		if err := w.AddKV(kv.key, kv.val); err != nil {
			return fmt.Errorf("synth: %w", err)
		}
	}
	return nil
}

// llama3RopeFactors are the frequency factors convert_hf_to_gguf writes as
// rope_freqs.weight for a "llama3" rope type (Llama 3.1's defaults).
func llama3RopeFactors(base float64, dim int) []float32 {
	const factor, low, high, oldCtx = 8.0, 1.0, 4.0, 8192.0
	lowWavelen, highWavelen := oldCtx/low, oldCtx/high
	var out []float32
	for i := 0; i < dim; i += 2 {
		freq := float64(float32(1 / math.Pow(base, float64(float32(i)/float32(dim)))))
		wavelen := 2 * math.Pi / freq
		switch {
		case wavelen < highWavelen:
			out = append(out, 1)
		case wavelen > lowWavelen:
			out = append(out, factor)
		default:
			smooth := (oldCtx/wavelen - low) / (high - low)
			out = append(out, float32(1/((1-smooth)/factor+smooth)))
		}
	}
	return out
}

// tensorSpecs lists the tensors in llama.cpp's order. A matrix whose row
// length is not a multiple of the type's block size falls back to F16, as
// llama-quantize's fallback does for ffn_down (n_ff columns).
func tensorSpecs(c Config) []*tensorSpec {
	e, f, v := uint64(c.NEmbd), uint64(c.NFF), uint64(c.NVocab)
	hd := uint64(c.headDim())
	q, kv := uint64(c.NHead)*hd, uint64(c.NHeadKV)*hd
	matrix := func(name string, k, n uint64) *tensorSpec {
		t := c.Type
		if k%uint64(t.BlockSize()) != 0 {
			t = ggml.F16
		}
		return &tensorSpec{name: name, typ: t, dims: []uint64{k, n}}
	}
	norm := func(name string, n uint64) *tensorSpec {
		return &tensorSpec{name: name, typ: ggml.F32, dims: []uint64{n}, ones: true, noise: c.NormNoise}
	}
	bias := func(name string, n uint64) *tensorSpec {
		return &tensorSpec{name: name, typ: ggml.F32, dims: []uint64{n}}
	}
	switch c.Arch {
	case "gemma2", "gemma3":
		return gemmaSpecs(c, matrix, norm)
	case "phi3":
		return phi3Specs(c, matrix, norm)
	case "glm4":
		return glm4Specs(c, matrix, norm, bias)
	}
	specs := []*tensorSpec{
		matrix("token_embd.weight", e, v),
		norm("output_norm.weight", e),
		matrix("output.weight", e, v),
	}
	if c.RopeFreqs {
		specs = append(specs, &tensorSpec{name: "rope_freqs.weight", typ: ggml.F32, dims: []uint64{hd / 2},
			data: llama3RopeFactors(float64(c.RopeBase), int(hd))})
	}
	qkvBias := c.Arch == "qwen2" || (c.Biases && c.Arch != "minicpm")
	for i := 0; i < c.NLayer; i++ {
		p := fmt.Sprintf("blk.%d.", i)
		specs = append(specs,
			norm(p+"attn_norm.weight", e),
			matrix(p+"attn_q.weight", e, q),
			matrix(p+"attn_k.weight", e, kv),
			matrix(p+"attn_v.weight", e, kv),
		)
		if qkvBias {
			specs = append(specs, bias(p+"attn_q.bias", q), bias(p+"attn_k.bias", kv), bias(p+"attn_v.bias", kv))
		}
		if c.Arch == "qwen3" {
			specs = append(specs, norm(p+"attn_k_norm.weight", hd), norm(p+"attn_q_norm.weight", hd))
		}
		specs = append(specs, matrix(p+"attn_output.weight", q, e))
		if c.Biases && (c.Arch == "llama" || c.Arch == "minicpm") {
			specs = append(specs, bias(p+"attn_output.bias", e))
		}
		specs = append(specs,
			norm(p+"ffn_norm.weight", e),
			matrix(p+"ffn_gate.weight", e, f),
			matrix(p+"ffn_up.weight", e, f),
			matrix(p+"ffn_down.weight", f, e),
		)
		if c.Biases && (c.Arch == "llama" || c.Arch == "minicpm") {
			specs = append(specs, bias(p+"ffn_gate.bias", f), bias(p+"ffn_up.bias", f), bias(p+"ffn_down.bias", e))
		}
	}
	return specs
}

// gemmaSpecs is Gemma 2's and 3's layout (llama.cpp's gemma2/gemma3
// load_arch_tensors): tied embeddings, post-attention and post-FFN norms,
// and Gemma 3's Q/K norms.
func gemmaSpecs(c Config, matrix func(string, uint64, uint64) *tensorSpec, norm func(string, uint64) *tensorSpec) []*tensorSpec {
	e, f, v := uint64(c.NEmbd), uint64(c.NFF), uint64(c.NVocab)
	hd := uint64(c.headDim())
	q, kv := uint64(c.NHead)*hd, uint64(c.NHeadKV)*hd
	specs := []*tensorSpec{matrix("token_embd.weight", e, v), norm("output_norm.weight", e)}
	for i := 0; i < c.NLayer; i++ {
		p := fmt.Sprintf("blk.%d.", i)
		specs = append(specs,
			norm(p+"attn_norm.weight", e),
			matrix(p+"attn_q.weight", e, q), matrix(p+"attn_k.weight", e, kv), matrix(p+"attn_v.weight", e, kv))
		if c.Arch == "gemma3" {
			specs = append(specs, norm(p+"attn_k_norm.weight", hd), norm(p+"attn_q_norm.weight", hd))
		}
		specs = append(specs,
			matrix(p+"attn_output.weight", q, e),
			norm(p+"post_attention_norm.weight", e),
			norm(p+"ffn_norm.weight", e),
			matrix(p+"ffn_gate.weight", e, f), matrix(p+"ffn_up.weight", e, f), matrix(p+"ffn_down.weight", f, e),
			norm(p+"post_ffw_norm.weight", e),
		)
	}
	return specs
}

// phi3Specs is Phi-3's layout: fused QKV and gate/up matmuls.
func phi3Specs(c Config, matrix func(string, uint64, uint64) *tensorSpec, norm func(string, uint64) *tensorSpec) []*tensorSpec {
	e, f, v := uint64(c.NEmbd), uint64(c.NFF), uint64(c.NVocab)
	hd := uint64(c.headDim())
	q, kv := uint64(c.NHead)*hd, uint64(c.NHeadKV)*hd
	specs := []*tensorSpec{matrix("token_embd.weight", e, v), norm("output_norm.weight", e), matrix("output.weight", e, v)}
	if c.LongRope {
		// Phi-3-128k's factors grow with the frequency index; the short ones
		// stay near 1.
		long, short := make([]float32, c.ropeDim()/2), make([]float32, c.ropeDim()/2)
		for i := range long {
			long[i] = float32(1 + 0.15*float64(i))
			short[i] = float32(1 + 0.01*float64(i%5))
		}
		specs = append(specs, &tensorSpec{name: "rope_factors_long.weight", typ: ggml.F32, dims: []uint64{uint64(len(long))}, data: long},
			&tensorSpec{name: "rope_factors_short.weight", typ: ggml.F32, dims: []uint64{uint64(len(short))}, data: short})
	}
	for i := 0; i < c.NLayer; i++ {
		p := fmt.Sprintf("blk.%d.", i)
		specs = append(specs,
			norm(p+"attn_norm.weight", e),
			matrix(p+"attn_qkv.weight", e, q+2*kv),
			matrix(p+"attn_output.weight", q, e),
			norm(p+"ffn_norm.weight", e),
			matrix(p+"ffn_up.weight", e, 2*f),
			matrix(p+"ffn_down.weight", f, e),
		)
	}
	return specs
}

// glm4Specs is GLM-4's layout (llama.cpp's glm4 load_arch_tensors): Q, K
// and V with biases, post-attention and post-FFN norms, a fused gate/up.
func glm4Specs(c Config, matrix func(string, uint64, uint64) *tensorSpec, norm, bias func(string, uint64) *tensorSpec) []*tensorSpec {
	e, f, v := uint64(c.NEmbd), uint64(c.NFF), uint64(c.NVocab)
	hd := uint64(c.headDim())
	q, kv := uint64(c.NHead)*hd, uint64(c.NHeadKV)*hd
	specs := []*tensorSpec{matrix("token_embd.weight", e, v), norm("output_norm.weight", e), matrix("output.weight", e, v)}
	for i := 0; i < c.NLayer; i++ {
		p := fmt.Sprintf("blk.%d.", i)
		specs = append(specs,
			norm(p+"attn_norm.weight", e),
			matrix(p+"attn_q.weight", e, q), matrix(p+"attn_k.weight", e, kv), matrix(p+"attn_v.weight", e, kv),
			bias(p+"attn_q.bias", q), bias(p+"attn_k.bias", kv), bias(p+"attn_v.bias", kv),
			matrix(p+"attn_output.weight", q, e),
			norm(p+"post_attention_norm.weight", e),
			norm(p+"ffn_norm.weight", e),
			matrix(p+"ffn_up.weight", e, 2*f),
			matrix(p+"ffn_down.weight", f, e),
			norm(p+"post_ffw_norm.weight", e),
		)
	}
	return specs
}

// fillTensors draws and encodes every tensor, in parallel.
func fillTensors(specs []*tensorSpec, cfg Config) error {
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
		next  = make(chan *tensorSpec)
	)
	for range max(1, runtime.NumCPU()) {
		wg.Go(func() {
			for s := range next {
				if err := s.fill(cfg.Seed); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
				}
			}
		})
	}
	for _, s := range specs {
		next <- s
	}
	close(next)
	wg.Wait()
	return first
}

func (s *tensorSpec) fill(seed int64) error {
	n := uint64(1)
	for _, d := range s.dims {
		n *= d
	}
	vals := s.data
	if vals == nil {
		vals = make([]float32, n)
		h := fnv.New64a()
		h.Write([]byte(s.name))
		rng := rand.New(rand.NewPCG(uint64(seed), h.Sum64()))
		for i := range vals {
			if s.ones {
				vals[i] = 1
				if s.noise > 0 {
					vals[i] += float32(rng.NormFloat64() * s.noise)
				}
			} else {
				vals[i] = float32(rng.NormFloat64() * weightStd)
			}
		}
	}
	size, err := ggml.RowBytes(s.typ, int(n))
	if err != nil {
		return fmt.Errorf("synth: tensor %s: %w", s.name, err)
	}
	s.bytes = make([]byte, size)
	if err := ggml.Quantize(s.typ, vals, s.bytes); err != nil {
		return fmt.Errorf("synth: tensor %s: %w", s.name, err)
	}
	return nil
}

const specialAndByteTokens = 3 + 256

// SentencePiece token types (llama.cpp llama_token_type).
const (
	typeNormal  int32 = 1
	typeUnknown int32 = 2
	typeControl int32 = 3
	typeByte    int32 = 6
)

// vocab builds an SPM vocabulary of n tokens: <unk>, <s>, </s>, the byte
// tokens <0x00>..<0xFF>, then every string over "▁a..z" by length. Every
// piece of length L splits into pieces of length L-1 and 1, so the
// tokenizer's pair merges can reach all of them; shorter pieces score higher.
func vocab(n int) (tokens []string, scores []float32, types []int32) {
	tokens = append(tokens, "<unk>", "<s>", "</s>")
	types = append(types, typeUnknown, typeControl, typeControl)
	for b := 0; b < 256; b++ {
		tokens = append(tokens, fmt.Sprintf("<0x%02X>", b))
		types = append(types, typeByte)
	}
	scores = make([]float32, len(tokens), n)
	alphabet := []string{"▁"}
	for c := 'a'; c <= 'z'; c++ {
		alphabet = append(alphabet, string(c))
	}
	level := []string{""}
	for len(tokens) < n {
		var nextLevel []string
		for _, prefix := range level {
			for _, a := range alphabet {
				nextLevel = append(nextLevel, prefix+a)
			}
		}
		for _, piece := range nextLevel {
			if len(tokens) == n {
				break
			}
			tokens = append(tokens, piece)
			scores = append(scores, -float32(len(tokens)-specialAndByteTokens))
			types = append(types, typeNormal)
		}
		level = nextLevel
	}
	return tokens, scores, types
}
