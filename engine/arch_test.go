package engine

import (
	"bufio"
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/evalrun/evalrun/engine/ggml"
	"github.com/evalrun/evalrun/engine/gguf"
	"github.com/evalrun/evalrun/engine/synth"
)

// readLines reads a testdata list, skipping # comments.
func readLines(t *testing.T, name string) []string {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); l != "" && !strings.HasPrefix(l, "#") {
			out = append(out, l)
		}
	}
	return out
}

// optionalTensors are the tensors each architecture's graph applies when a
// file has them (TestArchitectures in the oracle holds their math to
// llama.cpp); every other tensor name llama.cpp knows must be refused.
var optionalTensors = map[string][]string{
	"llama": {"rope_freqs.weight", "blk.0.attn_q.bias", "blk.0.attn_k.bias", "blk.0.attn_v.bias", "blk.0.attn_output.bias",
		"blk.0.ffn_gate.bias", "blk.0.ffn_up.bias", "blk.0.ffn_down.bias"},
	"qwen2": {"output.bias"},
	"qwen3": {"blk.0.attn_q.bias", "blk.0.attn_k.bias", "blk.0.attn_v.bias"},
	"minicpm": {"rope_freqs.weight", "blk.0.attn_q.bias", "blk.0.attn_k.bias", "blk.0.attn_v.bias", "blk.0.attn_output.bias",
		"blk.0.ffn_gate.bias", "blk.0.ffn_up.bias", "blk.0.ffn_down.bias"},
	"phi3":   {"rope_factors_long.weight", "rope_factors_short.weight", "blk.0.attn_qkv.bias"},
	"gemma3": {"output.weight"},
}

// Every architecture takes a fused attn_qkv (create_tensor_qkv) in place
// of Q, K and V, and the biases of whichever it has.
func init() {
	for arch := range archs {
		if arch != "phi3" {
			optionalTensors[arch] = append(optionalTensors[arch], "blk.0.attn_qkv.weight", "blk.0.attn_q.bias", "blk.0.attn_k.bias", "blk.0.attn_v.bias")
		} else {
			optionalTensors[arch] = append(optionalTensors[arch], "blk.0.attn_q.weight", "blk.0.attn_k.weight", "blk.0.attn_v.weight")
		}
	}
}

// TestEveryLlamaCppKeyAndTensorIsModelledOrRefused walks the metadata keys
// and tensor names of llama.cpp's llama-arch.cpp (b10587) through each
// architecture the engine computes: a key added to a file is one the
// engine models or knows to be inert for the architecture, or the load
// fails naming it; a tensor is one the architecture's graph applies, or
// the load fails naming it.
func TestEveryLlamaCppKeyAndTensorIsModelledOrRefused(t *testing.T) {
	keys := readLines(t, "llama-arch-keys.txt")
	known := map[string]bool{}
	for _, k := range keys {
		known[k] = true
	}
	for k := range archKeys {
		if !known[k] {
			t.Errorf("archKeys has %q, which llama.cpp b10587 does not define", k)
		}
	}
	for arch, spec := range archs {
		for k := range spec.keys {
			if !known[k] {
				t.Errorf("%s's keys have %q, which llama.cpp b10587 does not define", arch, k)
			}
		}
	}
	tensors := readLines(t, "llama-arch-tensors.txt")
	ones := make([]byte, 4*8)
	for i := range 8 {
		binary.LittleEndian.PutUint32(ones[4*i:], math.Float32bits(1))
	}
	for _, arch := range Archs() {
		base := filepath.Join(t.TempDir(), arch+".gguf")
		cfg := synth.Config{Arch: arch, NEmbd: 32, NLayer: 1, NHead: 4, NHeadKV: 2, NFF: 64, NVocab: 260, Type: ggml.F32, Seed: 1, NCtx: 64}
		if err := synth.Generate(cfg, base); err != nil {
			t.Fatal(err)
		}
		src, err := gguf.Open(base)
		if err != nil {
			t.Fatal(err)
		}
		check := func(add func(w *gguf.Writer) error) error {
			_, err := Check(rewriteModelInMemory(t, src, add))
			return err
		}
		accepted, refused := 0, 0
		for _, k := range keys {
			key := arch + "." + k
			if _, ok := src.Get(key); ok {
				continue
			}
			err := check(func(w *gguf.Writer) error { return w.AddKV(key, uint32(7)) })
			_, own := archs[arch].keys[k]
			if _, ok := archKeys[k]; ok || own {
				accepted++
				continue // modelled or inert: TestBadModelsAreRefusedByName and the oracle check these
			}
			refused++
			if err == nil || !strings.Contains(err.Error(), key) {
				t.Errorf("%s: key %s = 7: %v; want it refused by name", arch, key, err)
			}
		}
		for _, stem := range tensors {
			for _, suffix := range []string{"weight", "bias"} {
				name := strings.ReplaceAll(stem, "%d", "0") + "." + suffix
				if _, ok := src.Tensor(name); ok || strings.Contains(stem, "%s") {
					continue
				}
				err := check(func(w *gguf.Writer) error { return w.AddTensor(name, ggml.F32, []uint64{8}, ones) })
				optional := false
				for _, o := range optionalTensors[arch] {
					optional = optional || o == name
				}
				switch {
				case optional:
					// Bound: a vector of 8 is the wrong size for most, and
					// then the error names it.
					if err != nil && !strings.Contains(err.Error(), name) {
						t.Errorf("%s: optional tensor %s: %v", arch, name, err)
					}
				case err == nil || !strings.Contains(err.Error(), name):
					t.Errorf("%s: tensor %s: %v; want it refused by name", arch, name, err)
				}
			}
		}
		src.Close()
		t.Logf("%s: %d of llama.cpp's keys accepted (modelled or inert), %d refused by name; %d tensor names walked", arch, accepted, refused, 2*len(tensors))
	}
}
