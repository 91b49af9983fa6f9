package engine

import (
	"fmt"
	"slices"
	"strings"

	"github.com/evalrun/evalrun/engine/gguf"
)

// archSpec is what the engine computes of one architecture: the graph of
// llama.cpp's src/models/ARCH.cpp and the tensors its load_arch_tensors
// creates (llama.cpp b10587). Every tensor of a file must be one of these
// and every ARCH.* metadata key one of archKeys, else the model is refused
// by name: a weight or setting the engine ignored would make a silently
// wrong reference.
type archSpec struct {
	neox   bool // RoPE rotates pairs (i, i+n/2) (LLAMA_ROPE_TYPE_NEOX)
	qkNorm bool // attn_q_norm/attn_k_norm: RMS norm of each Q and K head before RoPE (required)
	// Optional tensors the graph applies when the file has them. Q/K/V
	// biases are optional in every architecture (create_tensor_qkv).
	ropeFreqs   bool // rope_freqs.weight: RoPE frequency factors (Llama 3.1+)
	attnOutBias bool // blk.N.attn_output.bias
	ffnBias     bool // blk.N.ffn_{gate,up,down}.bias
	outputBias  bool // output.bias
}

var archs = map[string]archSpec{
	"llama": {ropeFreqs: true, attnOutBias: true, ffnBias: true},
	"qwen2": {neox: true, outputBias: true},
	"qwen3": {neox: true, qkNorm: true},
}

// Archs lists the architectures the engine computes.
func Archs() []string {
	names := make([]string, 0, len(archs))
	for a := range archs {
		names = append(names, a)
	}
	slices.Sort(names)
	return names
}

func supportedArchList() string { return strings.Join(Archs(), ", ") }

// keyUse says what the engine does with an ARCH.* metadata key.
type keyUse int

const (
	// keyModelled: read by readConfig and computed as llama.cpp computes it.
	keyModelled keyUse = iota
	// keyInert: llama.cpp reads it for these architectures, or a converter
	// writes it, without any effect on their logits.
	keyInert
	// keyDefaultOnly: accepted at llama.cpp's default (which the engine
	// computes), refused at any other value.
	keyDefaultOnly
)

// archKeys are the ARCH.* keys of llama.cpp's llama-arch.cpp that a llama,
// qwen2 or qwen3 file may carry. Any other ARCH.* key (sliding windows,
// softcapping, logit/residual/embedding/attention scales, per-layer
// arrays, MoE, ...) is refused by name.
var archKeys = map[string]keyUse{
	"context_length":                       keyModelled,
	"embedding_length":                     keyModelled,
	"block_count":                          keyModelled,
	"feed_forward_length":                  keyModelled,
	"vocab_size":                           keyModelled,
	"attention.head_count":                 keyModelled,
	"attention.head_count_kv":              keyModelled,
	"attention.key_length":                 keyModelled,
	"attention.value_length":               keyModelled,
	"attention.layer_norm_rms_epsilon":     keyModelled,
	"rope.dimension_count":                 keyModelled,
	"rope.freq_base":                       keyModelled,
	"rope.scaling.type":                    keyModelled,
	"rope.scaling.factor":                  keyModelled,
	"rope.scale_linear":                    keyModelled,
	"rope.scaling.attn_factor":             keyModelled,
	"rope.scaling.original_context_length": keyModelled,
	// convert_hf_to_gguf writes these for YaRN models; llama.cpp reads
	// them only for grok and mistral3 and uses its defaults (ext 1, beta
	// 32/1, the mscale of the factor) for these architectures.
	"rope.scaling.yarn_ext_factor":     keyInert,
	"rope.scaling.yarn_attn_factor":    keyInert,
	"rope.scaling.yarn_beta_fast":      keyInert,
	"rope.scaling.yarn_beta_slow":      keyInert,
	"rope.scaling.yarn_log_multiplier": keyInert, // deepseek2/mistral3 only
	"rope.scaling.finetuned":           keyInert,
	"rope.scaling.alpha":               keyInert, // hunyuan only
	"attention.layer_norm_epsilon":     keyInert, // LayerNorm architectures only
	"pooling_type":                     keyInert, // embeddings, not logits
	"expert_count":                     keyDefaultOnly,
	"expert_used_count":                keyDefaultOnly,
	"expert_group_count":               keyDefaultOnly,
	"expert_group_used_count":          keyDefaultOnly,
	"attention.causal":                 keyDefaultOnly,
}

// checkKeys refuses ARCH.* keys the engine does not model, and the
// default-only ones at another value.
func checkKeys(f *gguf.File, arch string) error {
	prefix := arch + "."
	for _, kv := range f.KVs {
		name, ok := strings.CutPrefix(kv.Key, prefix)
		if !ok {
			continue
		}
		use, known := archKeys[name]
		switch {
		case !known:
			return fmt.Errorf("metadata %s: not modelled by evalrun's %s graph (refused rather than computed without it)", kv.Key, arch)
		case use == keyDefaultOnly && !atDefault(f, kv.Key, name):
			return fmt.Errorf("metadata %s = %v: evalrun's %s graph computes only the default (%s)", kv.Key, kv.Value, arch, defaultOf(name))
		}
	}
	return nil
}

func defaultOf(name string) string {
	if name == "attention.causal" {
		return "true"
	}
	return "0"
}

func atDefault(f *gguf.File, key, name string) bool {
	if name == "attention.causal" {
		b, ok := f.Bool(key)
		return ok && b
	}
	v, ok := f.Uint(key)
	return ok && v == 0
}
