package engine

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/evalrun/evalrun/engine/ggml"
	"github.com/evalrun/evalrun/engine/gguf"
	"github.com/evalrun/evalrun/engine/synth"
)

// FuzzCheck feeds mutated model files of every architecture through what
// a host and a plugin run on an untrusted GGUF: the parser, Check (the
// hyperparameters, keys and tensors of the architecture's graph) and, for
// a file that passes and is small, a load and a decode across a sliding
// window. None may panic; a file Check accepts must load.
func FuzzCheck(f *testing.F) {
	dir := f.TempDir()
	for _, cfg := range []synth.Config{
		{Arch: "llama", RopeFreqs: true},
		{Arch: "qwen2"},
		{Arch: "gemma2", SlidingWindow: 4},
		{Arch: "gemma3", SlidingWindow: 4, SWAPattern: 2, RopeBaseSWA: 10000},
		{Arch: "phi3", LongRope: true, RopeOrigCtx: 8},
		{Arch: "minicpm", Biases: true},
		{Arch: "glm4"},
	} {
		cfg.NEmbd, cfg.NLayer, cfg.NHead, cfg.NHeadKV, cfg.NFF, cfg.NVocab = 32, 2, 2, 1, 32, 260
		cfg.Type, cfg.Seed, cfg.NCtx = ggml.F32, 1, 64
		path := filepath.Join(dir, cfg.Arch+".gguf")
		if err := synth.Generate(cfg, path); err != nil {
			f.Fatal(err)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := gguf.Parse(data, "fuzz.gguf")
		if err != nil {
			return
		}
		cfg, err := Check(file)
		if err != nil {
			return
		}
		if cfg.NEmbd*cfg.NLayer > 1<<12 || cfg.NVocab > 1<<12 || cfg.NFF > 1<<12 || cfg.HeadDim*cfg.NHead > 1<<12 {
			return // a decode of a large model is not what this looks for
		}
		m, err := LoadGGUF(file, Options{Threads: 1})
		if err != nil {
			return // the tokenizer may refuse what Check does not read
		}
		defer m.Close()
		s := m.NewSession(16)
		tokens := make([]int32, 12)
		for i := range tokens {
			tokens[i] = int32(i % cfg.NVocab)
		}
		if err := s.Decode(tokens[:8], nil, func(int, []float32) error { return nil }); err != nil {
			t.Fatalf("decode of a model Check and Load accepted: %v", err)
		}
		s.Truncate(5)
		if err := s.Decode(tokens[:4], nil, func(int, []float32) error { return nil }); err != nil {
			t.Fatalf("decode after a rewind: %v", err)
		}
	})
}
