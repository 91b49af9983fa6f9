// Package synth writes llama-architecture GGUF models with random weights and
// a real (synthetic) SentencePiece vocabulary: realistic shapes for speed
// work and loader tests, loadable by evalrun's engine and by llama.cpp.
package synth

import (
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"runtime"
	"sync"

	"github.com/evalrun/evalrun/engine/ggml"
	"github.com/evalrun/evalrun/engine/gguf"
)

// Config describes the model to generate.
type Config struct {
	Arch    string // "llama" (default) or "qwen2" (NeoX RoPE, Q/K/V biases)
	NEmbd   int
	NLayer  int
	NHead   int
	NHeadKV int // 0 = NHead
	NFF     int
	NVocab  int // at least 259: <unk>, <s>, </s> and the 256 byte tokens
	Type    ggml.Type
	Seed    int64
	NCtx    int // context_length metadata; 0 = 2048
}

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
	ones  bool // norm weights: all 1.0
	bytes []byte
}

func (c *Config) normalize() error {
	if c.Arch == "" {
		c.Arch = "llama"
	}
	if c.Arch != "llama" && c.Arch != "qwen2" {
		return fmt.Errorf("synth: unsupported architecture %q (supported: llama, qwen2)", c.Arch)
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
	case c.NEmbd%c.NHead != 0:
		return fmt.Errorf("synth: NEmbd %d is not a multiple of NHead %d", c.NEmbd, c.NHead)
	case c.NHead%c.NHeadKV != 0:
		return fmt.Errorf("synth: NHead %d is not a multiple of NHeadKV %d", c.NHead, c.NHeadKV)
	case (c.NEmbd/c.NHead)%2 != 0:
		return fmt.Errorf("synth: head size %d must be even for RoPE", c.NEmbd/c.NHead)
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
	if err := fillTensors(specs, cfg.Seed); err != nil {
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

func addMetadata(w *gguf.Writer, c Config) error {
	a := c.Arch + "."
	headDim := uint32(c.NEmbd / c.NHead)
	tokens, scores, types := vocab(c.NVocab)
	kvs := []struct {
		key string
		val any
	}{
		{"general.architecture", c.Arch},
		{"general.name", fmt.Sprintf("synth-%s-%dL-%d-%s", c.Arch, c.NLayer, c.NEmbd, c.Type)},
		{"general.file_type", fileTypes[c.Type]},
		{"general.quantization_version", uint32(2)},
		{a + "context_length", uint32(c.NCtx)},
		{a + "embedding_length", uint32(c.NEmbd)},
		{a + "block_count", uint32(c.NLayer)},
		{a + "feed_forward_length", uint32(c.NFF)},
		{a + "rope.dimension_count", headDim},
		{a + "rope.freq_base", float32(10000)},
		{a + "attention.head_count", uint32(c.NHead)},
		{a + "attention.head_count_kv", uint32(c.NHeadKV)},
		{a + "attention.layer_norm_rms_epsilon", float32(1e-5)},
		{a + "vocab_size", uint32(c.NVocab)},
		{"tokenizer.ggml.model", "llama"},
		{"tokenizer.ggml.tokens", tokens},
		{"tokenizer.ggml.scores", scores},
		{"tokenizer.ggml.token_type", types},
		{"tokenizer.ggml.bos_token_id", uint32(1)},
		{"tokenizer.ggml.eos_token_id", uint32(2)},
		{"tokenizer.ggml.unknown_token_id", uint32(0)},
		{"tokenizer.ggml.add_bos_token", true},
		{"tokenizer.ggml.add_eos_token", false},
	}
	for _, kv := range kvs {
		if err := w.AddKV(kv.key, kv.val); err != nil {
			return fmt.Errorf("synth: %w", err)
		}
	}
	return nil
}

// tensorSpecs lists the tensors in llama.cpp's order. A matrix whose row
// length is not a multiple of the type's block size falls back to F16, as
// llama-quantize's fallback does for ffn_down (n_ff columns).
func tensorSpecs(c Config) []*tensorSpec {
	e, f, v := uint64(c.NEmbd), uint64(c.NFF), uint64(c.NVocab)
	hd := uint64(c.NEmbd / c.NHead)
	q, kv := uint64(c.NHead)*hd, uint64(c.NHeadKV)*hd
	matrix := func(name string, k, n uint64) *tensorSpec {
		t := c.Type
		if k%uint64(t.BlockSize()) != 0 {
			t = ggml.F16
		}
		return &tensorSpec{name: name, typ: t, dims: []uint64{k, n}}
	}
	vector := func(name string, n uint64, ones bool) *tensorSpec {
		return &tensorSpec{name: name, typ: ggml.F32, dims: []uint64{n}, ones: ones}
	}
	specs := []*tensorSpec{
		matrix("token_embd.weight", e, v),
		vector("output_norm.weight", e, true),
		matrix("output.weight", e, v),
	}
	for i := 0; i < c.NLayer; i++ {
		p := fmt.Sprintf("blk.%d.", i)
		specs = append(specs,
			vector(p+"attn_norm.weight", e, true),
			matrix(p+"attn_q.weight", e, q),
			matrix(p+"attn_k.weight", e, kv),
			matrix(p+"attn_v.weight", e, kv),
		)
		if c.Arch == "qwen2" {
			specs = append(specs,
				vector(p+"attn_q.bias", q, false),
				vector(p+"attn_k.bias", kv, false),
				vector(p+"attn_v.bias", kv, false),
			)
		}
		specs = append(specs,
			matrix(p+"attn_output.weight", q, e),
			vector(p+"ffn_norm.weight", e, true),
			matrix(p+"ffn_gate.weight", e, f),
			matrix(p+"ffn_up.weight", e, f),
			matrix(p+"ffn_down.weight", f, e),
		)
	}
	return specs
}

// fillTensors draws and encodes every tensor, in parallel.
func fillTensors(specs []*tensorSpec, seed int64) error {
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
		next  = make(chan *tensorSpec)
	)
	for range max(1, runtime.NumCPU()) {
		wg.Go(func() {
			for s := range next {
				if err := s.fill(seed); err != nil {
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
	vals := make([]float32, n)
	if s.ones {
		for i := range vals {
			vals[i] = 1
		}
	} else {
		h := fnv.New64a()
		h.Write([]byte(s.name))
		rng := rand.New(rand.NewPCG(uint64(seed), h.Sum64()))
		for i := range vals {
			vals[i] = float32(rng.NormFloat64() * weightStd)
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
