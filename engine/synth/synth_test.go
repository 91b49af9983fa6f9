package synth

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/evalrun/evalrun/engine"
	"github.com/evalrun/evalrun/engine/ggml"
	"github.com/evalrun/evalrun/engine/gguf"
)

func tiny(typ ggml.Type) Config {
	return Config{NEmbd: 64, NLayer: 2, NHead: 4, NHeadKV: 2, NFF: 172, NVocab: 300, Type: typ, Seed: 7, NCtx: 256}
}

// TestGenerateLoadsAndDecodes: a generated model has the metadata, tensor
// shapes and types llama.cpp expects, and the engine decodes it to finite
// logits.
func TestGenerateLoadsAndDecodes(t *testing.T) {
	for _, typ := range []ggml.Type{ggml.F32, ggml.Q8_0, ggml.Q4_0, ggml.F16} {
		t.Run(typ.String(), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "m.gguf")
			if err := Generate(tiny(typ), path); err != nil {
				t.Fatal(err)
			}
			f, err := gguf.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			for key, want := range map[string]uint64{"llama.embedding_length": 64, "llama.block_count": 2,
				"llama.attention.head_count": 4, "llama.attention.head_count_kv": 2, "llama.feed_forward_length": 172,
				"llama.context_length": 256, "general.file_type": uint64(fileTypes[typ]), "tokenizer.ggml.bos_token_id": 1} {
				if got, ok := f.Uint(key); !ok || got != want {
					t.Errorf("%s = %d, %v; want %d", key, got, ok, want)
				}
			}
			if s, _ := f.String("tokenizer.ggml.model"); s != "llama" {
				t.Errorf("tokenizer.ggml.model = %q", s)
			}
			toks, _ := f.Strings("tokenizer.ggml.tokens")
			scores, _ := f.Float32s("tokenizer.ggml.scores")
			types, _ := f.Int32s("tokenizer.ggml.token_type")
			if len(toks) != 300 || len(scores) != 300 || len(types) != 300 {
				t.Fatalf("vocab arrays: %d tokens, %d scores, %d types", len(toks), len(scores), len(types))
			}
			if toks[0] != "<unk>" || toks[1] != "<s>" || toks[2] != "</s>" || toks[3] != "<0x00>" || toks[258] != "<0xFF>" || toks[259] != "▁" {
				t.Errorf("unexpected tokens %q %q %q %q %q %q", toks[0], toks[1], toks[2], toks[3], toks[258], toks[259])
			}
			wantType := func(name string) ggml.Type {
				switch {
				case strings.HasSuffix(name, "norm.weight"):
					return ggml.F32
				case strings.HasSuffix(name, "ffn_down.weight") && typ.BlockSize() > 1:
					return ggml.F16 // 172 columns: not whole blocks
				}
				return typ
			}
			if len(f.Tensors) != 3+9*2 {
				t.Errorf("%d tensors, want %d", len(f.Tensors), 3+9*2)
			}
			for _, ti := range f.Tensors {
				if ti.Type != wantType(ti.Name) {
					t.Errorf("%s: type %s, want %s", ti.Name, ti.Type, wantType(ti.Name))
				}
			}
			if ti, ok := f.Tensor("blk.1.attn_k.weight"); !ok || len(ti.Dims) != 2 || ti.Dims[0] != 64 || ti.Dims[1] != 32 {
				t.Errorf("blk.1.attn_k.weight dims %v", ti.Dims)
			}

			m, err := engine.Open(path, engine.Options{Threads: 2, Numerics: engine.GGML})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			if m.Config.NVocab != 300 || m.Config.HeadDim != 16 || m.Tokenizer().VocabSize() != 300 {
				t.Errorf("config %+v, tokenizer vocab %d", m.Config, m.Tokenizer().VocabSize())
			}
			ids := m.Tokenizer().Encode("hello world", true)
			if len(ids) < 3 || ids[0] != 1 {
				t.Fatalf("Encode = %v", ids)
			}
			rows := 0
			err = m.NewSession(0).Decode(ids, nil, func(i int, logits []float32) error {
				rows++
				var spread float64
				for _, v := range logits {
					if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
						t.Fatalf("row %d: non-finite logit %v", i, v)
					}
					spread = max(spread, math.Abs(float64(v-logits[0])))
				}
				if spread == 0 {
					t.Errorf("row %d: all logits equal", i)
				}
				return nil
			})
			if err != nil || rows != len(ids) {
				t.Fatalf("decode: %v, %d rows", err, rows)
			}
		})
	}
}

func TestGenerateIsDeterministic(t *testing.T) {
	dir := t.TempDir()
	a, b, c := filepath.Join(dir, "a"), filepath.Join(dir, "b"), filepath.Join(dir, "c")
	cfg := tiny(ggml.Q8_0)
	for _, p := range []string{a, b} {
		if err := Generate(cfg, p); err != nil {
			t.Fatal(err)
		}
	}
	cfg.Seed++
	if err := Generate(cfg, c); err != nil {
		t.Fatal(err)
	}
	da, _ := os.ReadFile(a)
	db, _ := os.ReadFile(b)
	dc, _ := os.ReadFile(c)
	if !bytes.Equal(da, db) {
		t.Error("same seed gave different files")
	}
	if bytes.Equal(da, dc) {
		t.Error("different seeds gave the same file")
	}
}

func TestGenerateRejectsBadConfig(t *testing.T) {
	for _, c := range []struct {
		edit func(*Config)
		want string
	}{
		{func(c *Config) { c.Arch = "falcon" }, `unsupported architecture "falcon"`},
		{func(c *Config) { c.Arch = "phi3"; c.SlidingWindow = 64 }, "sliding windows are written for gemma2 and gemma3"},
		{func(c *Config) { c.Arch = "gemma3"; c.Biases = true }, "gemma3: biases are written for"},
		{func(c *Config) { c.Arch = "qwen2"; c.RopeFreqs = true }, "rope_freqs is a llama tensor"},
		{func(c *Config) { c.RopeScaling = "longrope"; c.RopeFactor = 2 }, `rope scaling "longrope"`},
		{func(c *Config) { c.RopeScaling = "yarn" }, "needs a positive factor"},
		{func(c *Config) { c.Arch = "qwen2"; c.HeadDim = 32 }, "qwen2's Q is NEmbd wide"},
		{func(c *Config) { c.NVocab = 100 }, "NVocab 100"},
		{func(c *Config) { c.NHeadKV = 3 }, "not a multiple of NHeadKV 3"},
		{func(c *Config) { c.Type = ggml.Q4_K }, "Q4_K not supported"},
		{func(c *Config) { c.NEmbd = 48 }, "not a multiple of the Q8_0 block size"},
	} {
		cfg := tiny(ggml.Q8_0)
		c.edit(&cfg)
		err := Generate(cfg, filepath.Join(t.TempDir(), "x.gguf"))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("err = %v, want it to contain %q", err, c.want)
		}
	}
}

// TestQwen2: the qwen2 variant has Q/K/V biases and loads with NeoX RoPE.
func TestQwen2(t *testing.T) {
	cfg := tiny(ggml.F32)
	cfg.Arch = "qwen2"
	path := filepath.Join(t.TempDir(), "q.gguf")
	if err := Generate(cfg, path); err != nil {
		t.Fatal(err)
	}
	m, err := engine.Open(path, engine.Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if m.Config.Arch != "qwen2" || !m.Config.RopeNeox {
		t.Errorf("config %+v", m.Config)
	}
	if _, ok := m.File().Tensor("blk.1.attn_v.bias"); !ok {
		t.Error("no blk.1.attn_v.bias")
	}
}

// Every variant of the engine's architectures loads and decodes, its
// optional tensors and keys where the converters put them; the layouts
// only llama.cpp computes are refused by the engine, naming the
// architecture.
func TestVariants(t *testing.T) {
	for _, c := range []struct {
		name    string
		edit    func(*Config)
		tensors []string
		check   func(engine.Config) bool
		refused string
	}{
		{"qwen3", func(c *Config) { c.Arch = "qwen3" }, []string{"blk.0.attn_q_norm.weight", "blk.1.attn_k_norm.weight"},
			func(e engine.Config) bool { return e.QKNorm && e.RopeNeox }, ""},
		{"llama rope_freqs", func(c *Config) { c.RopeFreqs = true; c.RopeBase = 500000 }, []string{"rope_freqs.weight"},
			func(e engine.Config) bool { return e.RopeBase == 500000 }, ""},
		{"llama biases, head 16", func(c *Config) { c.Biases = true; c.HeadDim = 16 },
			[]string{"blk.0.attn_q.bias", "blk.0.attn_output.bias", "blk.1.ffn_down.bias"},
			func(e engine.Config) bool { return e.HeadDim == 16 }, ""},
		{"yarn", func(c *Config) { c.RopeScaling, c.RopeFactor, c.RopeOrigCtx = "yarn", 4, 128 }, nil,
			func(e engine.Config) bool {
				return e.RopeScaling == "yarn" && e.RopeScale == 0.25 && e.RopeOrigCtx == 128
			}, ""},
		{"gemma3", func(c *Config) { c.Arch, c.SlidingWindow, c.SWAPattern, c.RopeBaseSWA = "gemma3", 64, 2, 10000 },
			[]string{"blk.0.post_ffw_norm.weight", "blk.0.attn_q_norm.weight"},
			func(e engine.Config) bool {
				return e.NSWA == 64 && e.SWALayer(0) && !e.SWALayer(1) && e.RopeBaseSWA == 10000 && e.EmbedScale == 8 && e.FinalSoftcap == 0
			}, ""},
		{"gemma2", func(c *Config) { c.Arch = "gemma2" }, []string{"blk.0.post_attention_norm.weight"},
			func(e engine.Config) bool { return e.NSWA == 4096 && e.AttnSoftcap == 50 && e.FinalSoftcap == 30 }, ""},
		{"phi3 long rope", func(c *Config) { c.Arch, c.LongRope = "phi3", true }, []string{"blk.0.attn_qkv.weight", "rope_factors_long.weight"},
			func(e engine.Config) bool { return e.RopeOrigCtx == 64 && e.RopeAttnFactor > 1 && e.QScale != 0 }, ""},
		{"minicpm", func(c *Config) { c.Arch = "minicpm" }, nil,
			func(e engine.Config) bool { return e.EmbedScale == 12 && e.LogitScale == 0.25 && e.ResidualScale > 0 }, ""},
		{"glm4", func(c *Config) { c.Arch = "glm4" }, []string{"blk.0.post_ffw_norm.weight", "blk.0.attn_q.bias"},
			func(e engine.Config) bool { return e.RopeDim == e.HeadDim/2 }, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := tiny(ggml.Q8_0)
			cfg.NormNoise = 0.1
			c.edit(&cfg)
			path := filepath.Join(t.TempDir(), "m.gguf")
			if err := Generate(cfg, path); err != nil {
				t.Fatal(err)
			}
			m, err := engine.Open(path, engine.Options{Threads: 1})
			if c.refused != "" {
				if err == nil || !strings.Contains(err.Error(), c.refused) {
					t.Fatalf("engine.Open: %v, want %q", err, c.refused)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			for _, name := range c.tensors {
				if _, ok := m.File().Tensor(name); !ok {
					t.Errorf("no %s", name)
				}
			}
			if !c.check(m.Config) {
				t.Errorf("config %+v", m.Config)
			}
			s := m.NewSession(0)
			if err := s.Decode([]int32{1, 260, 261, 262}, nil, func(int, []float32) error { return nil }); err != nil {
				t.Fatal(err)
			}
		})
	}
}
