package engine

import (
	"fmt"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/evalrun/evalrun/engine/ggml"
	"github.com/evalrun/evalrun/engine/synth"
)

// benchModel writes a GPT-2-small-sized llama model (n_embd 768, 12 layers,
// 12 heads, n_ff 2048, vocab 32000) into the benchmark's temp dir.
func benchModel(b *testing.B, typ ggml.Type) string {
	b.Helper()
	path := filepath.Join(b.TempDir(), "bench.gguf")
	cfg := synth.Config{NEmbd: 768, NLayer: 12, NHead: 12, NFF: 2048, NVocab: 32000, Type: typ, Seed: 1, NCtx: 1024}
	if err := synth.Generate(cfg, path); err != nil {
		b.Fatal(err)
	}
	return path
}

func benchTokens(n int) []int32 {
	ids := make([]int32, n)
	for i := range ids {
		ids[i] = int32(300 + 97*i%31000)
	}
	return ids
}

var noEmit = func(int, []float32) error { return nil }

// BenchmarkPrefill: one Decode of 128 tokens, logits for the last one.
func BenchmarkPrefill(b *testing.B) {
	for _, typ := range []ggml.Type{ggml.F32, ggml.F16, ggml.Q8_0, ggml.Q4_0} {
		path := benchModel(b, typ)
		for _, threads := range []int{1, 2} {
			for _, num := range []Numerics{Exact, GGML} {
				b.Run(fmt.Sprintf("%s/%s/t%d", typ, num, threads), func(b *testing.B) {
					benchPrefill128(b, openModel(b, path, num, threads))
				})
			}
		}
	}
}

// benchPrefill128 times one Decode of 128 tokens with the logits of the
// last one, and reports tokens/s.
func benchPrefill128(b *testing.B, m *Model) {
	ids := benchTokens(128)
	last := func(i int) bool { return i == len(ids)-1 }
	s := m.NewSession(256)
	start := time.Now()
	for b.Loop() {
		s.Reset()
		if err := s.Decode(ids, last, noEmit); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*len(ids))/time.Since(start).Seconds(), "tokens/s")
}

// BenchmarkDecode: single-token decodes after a 64-token prefix.
func BenchmarkDecode(b *testing.B) {
	for _, typ := range []ggml.Type{ggml.F32, ggml.F16, ggml.Q8_0, ggml.Q4_0} {
		path := benchModel(b, typ)
		for _, threads := range []int{1, 2} {
			for _, num := range []Numerics{Exact, GGML} {
				b.Run(fmt.Sprintf("%s/%s/t%d", typ, num, threads), func(b *testing.B) {
					m := openModel(b, path, num, threads)
					s := m.NewSession(256)
					if err := s.Decode(benchTokens(64), func(int) bool { return false }, noEmit); err != nil {
						b.Fatal(err)
					}
					tok := []int32{500}
					start := time.Now()
					for b.Loop() {
						s.Truncate(64)
						if err := s.Decode(tok, nil, noEmit); err != nil {
							b.Fatal(err)
						}
					}
					b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "tokens/s")
				})
			}
		}
	}
}

// BenchmarkDecodeDeep: single-token decodes of stories260K at depth 1000,
// where attention over the KV cache is most of the work, for each KV cache
// type (f32: the default path).
func BenchmarkDecodeDeep(b *testing.B) {
	for _, kv := range []KVCache{{}, {KVF16, KVF16}, {KVQ8_0, KVQ8_0}, {KVInt8Asym, KVFP8E4M3}} {
		b.Run(kv.String(), func(b *testing.B) {
			m, err := Open(modelPath("F32"), Options{Threads: 1, KVCache: kv})
			if err != nil {
				b.Fatal(err)
			}
			defer m.Close()
			s := m.NewSession(1024)
			ids := make([]int32, 1000)
			for i := range ids {
				ids[i] = int32(3 + 97*i%500)
			}
			if err := s.Decode(ids, func(int) bool { return false }, noEmit); err != nil {
				b.Fatal(err)
			}
			tok := []int32{300}
			for b.Loop() {
				s.Truncate(1000)
				if err := s.Decode(tok, nil, noEmit); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkPrefillArch: BenchmarkPrefill's 128-token decode on Q8_0 files
// of each architecture family with ops of its own (Gemma's GEGLU, norms
// and soft caps, Qwen3's Q/K norms, Phi-3's fused matmuls), 1 thread: the
// figures to hold against llama's.
func BenchmarkPrefillArch(b *testing.B) {
	for _, arch := range []string{"llama", "gemma2", "gemma3", "qwen3", "phi3"} {
		path := filepath.Join(b.TempDir(), arch+".gguf")
		cfg := synth.Config{Arch: arch, NEmbd: 768, NLayer: 12, NHead: 12, NFF: 2048, NVocab: 32000, Type: ggml.Q8_0, Seed: 1, NCtx: 1024}
		if arch == "gemma3" || arch == "gemma2" {
			cfg.SlidingWindow = 512
		}
		if err := synth.Generate(cfg, path); err != nil {
			b.Fatal(err)
		}
		for _, num := range []Numerics{Exact, GGML} {
			b.Run(fmt.Sprintf("%s/%s", arch, num), func(b *testing.B) {
				benchPrefill128(b, openModel(b, path, num, 1))
			})
		}
	}
}

// BenchmarkDecodeAtDepth: llama-bench's tg at depth 4096 (-d 4096 -n 1) on
// the 768x12 Q8_0 file, with the f32, f16 and q8_0 caches, 1 thread:
// attention over 4096 cells is most of a step. cpu-ms/op is the process's
// CPU time per token, which a shared machine's load moves less than the
// wall time.
func BenchmarkDecodeAtDepth(b *testing.B) { benchAtDepth(b, []int32{300}) }

// BenchmarkPrefillAtDepth: pp512 @ d4096 as BenchmarkDecodeAtDepth (only
// the last row's logits).
func BenchmarkPrefillAtDepth(b *testing.B) { benchAtDepth(b, benchTokens(512)) }

func benchAtDepth(b *testing.B, batch []int32) {
	nCtx := 4096 + max(64, len(batch))
	path := filepath.Join(b.TempDir(), "deep.gguf")
	cfg := synth.Config{NEmbd: 768, NLayer: 12, NHead: 12, NFF: 2048, NVocab: 32000, Type: ggml.Q8_0, Seed: 1, NCtx: nCtx}
	if err := synth.Generate(cfg, path); err != nil {
		b.Fatal(err)
	}
	last := func(i int) bool { return i == len(batch)-1 }
	for _, kv := range []KVCache{{}, {KVF16, KVF16}, {KVQ8_0, KVQ8_0}} {
		b.Run(kv.String(), func(b *testing.B) {
			m, err := Open(path, Options{Threads: 1, KVCache: kv, Numerics: GGML})
			if err != nil {
				b.Fatal(err)
			}
			defer m.Close()
			s := m.NewSession(nCtx)
			if err := s.Decode(benchTokens(4096), func(int) bool { return false }, noEmit); err != nil {
				b.Fatal(err)
			}
			cpu0 := processCPU()
			for b.Loop() {
				s.Truncate(4096)
				if err := s.Decode(batch, last, noEmit); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N)/1e6, "cpu-ms/op")
		})
	}
}

// processCPU is the CPU time the process has used (user and system).
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
