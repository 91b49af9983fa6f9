package engine

import (
	"bufio"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"flag"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/evalrun/evalrun/engine/ggml"
	"github.com/evalrun/evalrun/engine/synth"
)

var updateVariantDigests = flag.Bool("update-variant-digests", false, "rewrite testdata/variant-digests.txt")

const variantDigests = "testdata/variant-digests.txt"

// TestVariantDigests pins the logits of every architecture variant the
// engine computes (rope_freqs, biases, a head size of its own, YaRN, Qwen3's
// Q/K norms, Gemma's windows, soft caps and GELU, Phi-3's fused matmuls and
// long factors, MiniCPM's scales, GLM-4's partial RoPE) over 512 positions, in both numerics: the digest is the same
// for 1 and 2 threads (every op on the pool) and for every kernel set (make test-avx2, and the
// generic Go kernels on arm64 under qemu), and equal to the one recorded on
// amd64, where TestArchitectures holds the same code to libllama.
func TestVariantDigests(t *testing.T) {
	everyOpOnThePool(t)
	want := map[string]string{}
	if f, err := os.Open(variantDigests); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if name, sum, ok := strings.Cut(sc.Text(), " "); ok && !strings.HasPrefix(name, "#") {
				want[name] = sum
			}
		}
		f.Close()
	} else if !*updateVariantDigests {
		t.Fatal(err)
	}
	var got []string
	type variant struct {
		name string
		cfg  synth.Config
		kv   KVCache // f32 when zero
		// single: the last positions decoded one token at a time (a
		// decode step's attention: 64 lanes for the weighted values).
		single int
	}
	for _, v := range []variant{
		{"llama3-rope-freqs", synth.Config{Arch: "llama", RopeFreqs: true, RopeBase: 500000}, KVCache{}, 0},
		{"llama-biases-head32", synth.Config{Arch: "llama", Biases: true, HeadDim: 32}, KVCache{}, 0},
		{"llama-yarn", synth.Config{Arch: "llama", RopeScaling: "yarn", RopeFactor: 4, RopeOrigCtx: 128}, KVCache{}, 0},
		{"qwen2-linear", synth.Config{Arch: "qwen2", RopeScaling: "linear", RopeFactor: 2}, KVCache{}, 0},
		{"qwen3-biases", synth.Config{Arch: "qwen3", Biases: true, RopeBase: 1000000}, KVCache{}, 0},
		{"gemma2-window40", synth.Config{Arch: "gemma2", SlidingWindow: 40}, KVCache{}, 0},
		{"gemma3-window40", synth.Config{Arch: "gemma3", SlidingWindow: 40, RopeBaseSWA: 10000, RopeBase: 1000000}, KVCache{}, 0},
		{"phi3-longrope", synth.Config{Arch: "phi3", LongRope: true, RopeOrigCtx: 64}, KVCache{}, 0},
		{"minicpm-biases", synth.Config{Arch: "minicpm", Biases: true}, KVCache{}, 0},
		{"internlm2", synth.Config{Arch: "internlm2"}, KVCache{}, 0},
		{"glm4", synth.Config{Arch: "glm4"}, KVCache{}, 0},
		// The f16 cache read in place by attention (GQA: 2 heads per KV
		// head; a window's ring of cells).
		{"llama-kv-f16", synth.Config{Arch: "llama"}, KVCache{Key: KVF16, Value: KVF16}, 0},
		{"gemma3-window40-kv-f16", synth.Config{Arch: "gemma3", SlidingWindow: 40, RopeBaseSWA: 10000, RopeBase: 1000000}, KVCache{Key: KVF16, Value: KVF16}, 0},
		// q8_0 caches (recorded when attention decoded them to float32
		// at every step): heads of whole blocks (64: steps of 64; 96: a
		// step and a run of 32; 32: the run alone), GQA, a window's ring
		// of cells, an f32 side beside a q8_0 one, and heads of 16 that
		// share a block.
		{"llama-kv-q8_0-head64", synth.Config{Arch: "llama", HeadDim: 64}, KVCache{Key: KVQ8_0, Value: KVQ8_0}, 64},
		{"gemma3-window40-kv-q8_0-head96", synth.Config{Arch: "gemma3", SlidingWindow: 40, RopeBaseSWA: 10000, RopeBase: 1000000, HeadDim: 96}, KVCache{Key: KVQ8_0, Value: KVQ8_0}, 64},
		{"llama-kv-q8_0-f32-head32", synth.Config{Arch: "llama", HeadDim: 32}, KVCache{Key: KVQ8_0, Value: KVF32}, 64},
		{"llama-kv-f32-q8_0-head32", synth.Config{Arch: "llama", HeadDim: 32}, KVCache{Key: KVF32, Value: KVQ8_0}, 64},
		{"llama-kv-q8_0-head16", synth.Config{Arch: "llama"}, KVCache{Key: KVQ8_0, Value: KVQ8_0}, 64},
	} {
		cfg := v.cfg
		cfg.NEmbd, cfg.NLayer, cfg.NHead, cfg.NHeadKV, cfg.NFF, cfg.NVocab = 64, 1, 4, 2, 128, 300
		cfg.Type, cfg.Seed, cfg.NCtx, cfg.NormNoise = ggml.Q8_0, 3, 4096, 0.2
		path := filepath.Join(t.TempDir(), v.name+".gguf")
		if err := synth.Generate(cfg, path); err != nil {
			t.Fatal(err)
		}
		for _, num := range []Numerics{Exact, GGML} {
			name := v.name + "/" + num.String()
			sums := map[int]string{}
			for _, threads := range threadCounts() {
				sums[threads] = logitsDigest(t, path, Options{Numerics: num, Threads: threads, KVCache: v.kv}, v.single)
			}
			if len(sums) > 1 && sums[1] != sums[2] {
				t.Errorf("%s: 1 thread %s, 2 threads %s", name, sums[1], sums[2])
			}
			got = append(got, name+" "+sums[1])
			if !*updateVariantDigests && want[name] != sums[1] {
				t.Errorf("%s: logits digest %s, recorded %s (kernels %s)", name, sums[1], want[name], kernelsName())
			}
		}
	}
	if *updateVariantDigests {
		text := "# sha256 of the engine's logits per variant and numerics (TestVariantDigests; -update-variant-digests rewrites)\n" + strings.Join(got, "\n") + "\n"
		if err := os.WriteFile(variantDigests, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// logitsDigest decodes 512 tokens, the first 512-single in batches of at
// most 128 and the rest one at a time, and hashes every row.
func logitsDigest(t *testing.T, path string, opts Options, single int) string {
	t.Helper()
	m, err := Open(path, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	s := m.NewSession(512)
	h := sha256.New()
	buf := make([]byte, 4)
	for p := 0; p < 512; {
		n := min(128, 512-single-p)
		if n <= 0 {
			n = 1
		}
		tokens := make([]int32, n)
		for i := range tokens {
			tokens[i] = int32(3 + (p+i)*7919%297)
		}
		err := s.Decode(tokens, nil, func(_ int, l []float32) error {
			for _, v := range l {
				binary.LittleEndian.PutUint32(buf, math.Float32bits(v))
				h.Write(buf)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		p += n
	}
	return hex.EncodeToString(h.Sum(nil))
}

// threadCounts are the thread counts TestVariantDigests compares: 1 and 2
// on amd64; 1 elsewhere, where the tests run under qemu (make test-arm64)
// and the split over threads is the same Go code as on amd64.
func threadCounts() []int {
	if runtime.GOARCH != "amd64" {
		return []int{1}
	}
	return []int{1, 2}
}

func kernelsName() string {
	k, err := ggml.FromEnv()
	if err != nil {
		return err.Error()
	}
	return k.Name()
}
