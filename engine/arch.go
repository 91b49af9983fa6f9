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
// and every ARCH.* metadata key one of archKeys or of the architecture's
// keys, else the model is refused by name: a weight or setting the engine
// ignored would make a silently wrong reference.
type archSpec struct {
	neox   bool // RoPE rotates pairs (i, i+n/2) (LLAMA_ROPE_TYPE_NEOX)
	qkNorm bool // attn_q_norm/attn_k_norm: RMS norm of each Q and K head before RoPE (required)
	// Optional tensors the graph applies when the file has them. Q/K/V
	// biases are optional in every architecture (create_tensor_qkv).
	ropeFreqs   bool // rope_freqs.weight: RoPE frequency factors (Llama 3.1+)
	attnOutBias bool // blk.N.attn_output.bias
	ffnBias     bool // blk.N.ffn_{gate,up,down}.bias
	outputBias  bool // output.bias

	// The graphs beyond the llama family.
	fusedFFN    bool   // ffn_up holds gate and up (2·n_ff rows), split by SWIGLU (phi3, glm4); no ffn_gate
	postNorms   bool   // post_attention_norm and post_ffw_norm on the attention and FFN outputs (gemma2/3, glm4)
	gelu        bool   // GEGLU FFN: ggml's fp16-table GELU of the gate times up (gemma)
	gemma       bool   // embeddings scaled by sqrt(n_embd); Q pre-scaled, softmax scale 1
	swa         string // sliding windows: "gemma2" (always, pattern 2), "gemma3" (when set, pattern 6)
	qPreScale   bool   // Q multiplied by 1/sqrt(head) after RoPE, softmax scale 1 (phi3)
	longRope    bool   // rope_factors_long/short (phi3)
	partialRope bool   // RoPE may rotate the first rope.dimension_count values of a head only (glm4)
	granite     bool   // embedding, residual and logit scales (minicpm: llama.cpp's granite graph)
	noOutput    bool   // the output matmul is always token_embd (gemma2 creates no output.weight)
	needOutput  bool   // output.weight is required (internlm2)
	// keys are ARCH.* keys of this architecture beyond archKeys.
	keys map[string]keyUse
}

var archs = map[string]archSpec{
	"llama": {ropeFreqs: true, attnOutBias: true, ffnBias: true},
	"qwen2": {neox: true, outputBias: true},
	"qwen3": {neox: true, qkNorm: true},
	"gemma2": {neox: true, postNorms: true, gelu: true, gemma: true, swa: "gemma2", noOutput: true,
		keys: map[string]keyUse{"attention.sliding_window": keyModelled, "attention.sliding_window_pattern": keyModelled,
			"rope.freq_base_swa": keyModelled, "attn_logit_softcapping": keyModelled, "final_logit_softcapping": keyModelled}},
	"gemma3": {neox: true, qkNorm: true, postNorms: true, gelu: true, gemma: true, swa: "gemma3",
		keys: map[string]keyUse{"attention.sliding_window": keyModelled, "attention.sliding_window_pattern": keyModelled,
			"rope.freq_base_swa": keyModelled, "final_logit_softcapping": keyModelled}},
	// llama.cpp b10587 disables Phi-3's sliding window ("Phi SWA is
	// currently disabled"): the key is read and has no effect.
	"phi3": {neox: true, fusedFFN: true, qPreScale: true, longRope: true, partialRope: true, // Phi-4-mini rotates 3/4 of each head
		keys: map[string]keyUse{"attention.sliding_window": keyInert}},
	"minicpm": {ffnBias: true, attnOutBias: true, ropeFreqs: true, granite: true,
		keys: map[string]keyUse{"embedding_scale": keyModelled, "residual_scale": keyModelled, "logit_scale": keyModelled}},
	"internlm2": {needOutput: true},
	"glm4": {fusedFFN: true, postNorms: true, partialRope: true,
		keys: map[string]keyUse{"rope.dimension_sections": keyDefaultOnly, "nextn_predict_layers": keyDefaultOnly}},
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

// archKeys are the ARCH.* keys of llama.cpp's llama-arch.cpp that a file of
// any architecture the engine computes may carry; an architecture's own
// keys (gemma's sliding windows and soft caps, minicpm's scales, ...) are
// in its archSpec.keys. Any other ARCH.* key (a sliding window, soft cap or
// scale where the graph has none, per-layer arrays, MoE, ...) is refused by
// name.
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
		if u, ok := archs[arch].keys[name]; ok {
			use, known = u, true
		}
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
	switch name {
	case "attention.causal":
		return "true"
	case "rope.dimension_sections":
		return "all 0: no M-RoPE"
	}
	return "0"
}

func atDefault(f *gguf.File, key, name string) bool {
	switch name {
	case "attention.causal":
		b, ok := f.Bool(key)
		return ok && b
	case "rope.dimension_sections":
		vals, ok := f.Int32s(key)
		return ok && !slices.ContainsFunc(vals, func(v int32) bool { return v != 0 })
	}
	v, ok := f.Uint(key)
	return ok && v == 0
}
