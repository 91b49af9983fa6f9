package engine

import (
	"fmt"
	"math"
	"strings"

	"github.com/evalrun/evalrun/engine/cmath"
	"github.com/evalrun/evalrun/engine/gguf"
)

// Config holds the hyperparameters of a model the engine computes.
type Config struct {
	Arch      string
	NVocab    int
	NEmbd     int
	NLayer    int
	NHead     int
	NHeadKV   int
	HeadDim   int // per-head size of Q, K and V
	NFF       int
	NCtxTrain int
	RopeDim   int     // dimensions of each head that RoPE rotates (the whole head unless a phi3 or glm4 file says fewer)
	RopeBase  float32 // freq_base
	RopeScale float32 // freq_scale: positions are multiplied by it (1/factor of linear and YaRN scaling)
	RopeNeox  bool    // rotate pairs (i, i+RopeDim/2) instead of adjacent pairs
	RMSEps    float32
	QKNorm    bool // RMS norm of every Q and K head before RoPE (qwen3)
	// RopeScaling is rope.scaling.type: "none", "linear" or "yarn".
	RopeScaling string
	// RopeAttnFactor multiplies every cos/sin of the RoPE cache: llama.cpp's
	// yarn_attn_factor, rope.scaling.attn_factor times YaRN's magnitude
	// correction (1 unless set or YaRN).
	RopeAttnFactor float32
	// RopeOrigCtx is the context the model was trained on before scaling
	// (YaRN's ramp starts from it; Phi-3 takes its long RoPE factors for a
	// context beyond it).
	RopeOrigCtx int

	// EmbedScale multiplies the token embeddings (gemma: sqrt(n_embd),
	// minicpm: embedding_scale); 0: not scaled.
	EmbedScale float32
	// QScale multiplies Q after RoPE, and the softmax scale is then 1
	// (gemma, phi3); 0: the softmax scale is KQScale.
	QScale float32
	// KQScale is the softmax scale without QScale: 1/sqrt(head size).
	KQScale float32
	// AttnSoftcap and FinalSoftcap are gemma2's soft caps of the attention
	// scores and of the logits: x = cap·tanh(x/cap); 0: none.
	AttnSoftcap, FinalSoftcap float32
	// ResidualScale multiplies the attention and FFN outputs before their
	// residual adds, LogitScale divides the logits (minicpm); 0: none.
	ResidualScale, LogitScale float32
	// NSWA is the sliding window: layer il with SWALayer(il) attends to the
	// last NSWA positions only, through a KV cache of its own (llama.cpp's
	// iSWA cache); 0: none.
	NSWA       int
	SWAPattern int // SWALayer(il) = il % SWAPattern < SWAPattern-1
	// RopeBaseSWA and RopeScaleSWA are the sliding-window layers' RoPE.
	RopeBaseSWA, RopeScaleSWA float32
}

// SWALayer reports whether layer il attends through the sliding window.
func (c Config) SWALayer(il int) bool {
	return c.NSWA > 0 && (c.SWAPattern == 0 || il%c.SWAPattern < c.SWAPattern-1)
}

// maxDim bounds hyperparameters so a corrupt header cannot make us allocate
// absurd amounts of memory before the tensor shapes are checked.
const maxDim = 1 << 24

// readConfig reads the hyperparameters from GGUF metadata, as llama.cpp's
// llama_model::load_hparams does for the supported architectures.
func readConfig(f *gguf.File) (Config, error) {
	var c Config
	arch, ok := f.String("general.architecture")
	if !ok {
		return c, fmt.Errorf("metadata general.architecture: missing or not a string")
	}
	traits, ok := archs[arch]
	if !ok {
		return c, fmt.Errorf("unsupported architecture %q (evalrun's engine computes %s; the llamacpp plugin computes any architecture libllama loads)", arch, supportedArchList())
	}
	c.Arch = arch
	c.RopeNeox = traits.neox
	c.QKNorm = traits.qkNorm
	if err := checkKeys(f, arch); err != nil {
		return c, err
	}

	key := func(name string) string { return arch + "." + name }
	uintKey := func(name string, required bool, def int) (int, error) {
		v, ok := f.Uint(key(name))
		if !ok {
			if _, present := f.Get(key(name)); present {
				return 0, fmt.Errorf("metadata %s: not a non-negative integer", key(name))
			}
			if required {
				return 0, fmt.Errorf("metadata %s: missing", key(name))
			}
			return def, nil
		}
		if v == 0 || v > maxDim {
			return 0, fmt.Errorf("metadata %s: value %d out of range [1, %d]", key(name), v, maxDim)
		}
		return int(v), nil
	}
	floatKey := func(name string, def float32) (float32, bool, error) {
		v, ok := f.Float(key(name))
		if !ok {
			if _, present := f.Get(key(name)); present {
				return 0, false, fmt.Errorf("metadata %s: not a number", key(name))
			}
			return def, false, nil
		}
		return float32(v), true, nil
	}

	var err error
	if c.NLayer, err = uintKey("block_count", true, 0); err != nil {
		return c, err
	}
	if c.NEmbd, err = uintKey("embedding_length", true, 0); err != nil {
		return c, err
	}
	if c.NFF, err = uintKey("feed_forward_length", true, 0); err != nil {
		return c, err
	}
	if c.NHead, err = uintKey("attention.head_count", true, 0); err != nil {
		return c, err
	}
	if c.NHeadKV, err = uintKey("attention.head_count_kv", false, c.NHead); err != nil {
		return c, err
	}
	if c.NCtxTrain, err = uintKey("context_length", true, 0); err != nil {
		return c, err
	}
	if c.NEmbd%c.NHead != 0 && !hasKey(f, key("attention.key_length")) {
		return c, fmt.Errorf("metadata %s %d is not a multiple of %s %d", key("embedding_length"), c.NEmbd, key("attention.head_count"), c.NHead)
	}
	if c.HeadDim, err = uintKey("attention.key_length", false, c.NEmbd/c.NHead); err != nil {
		return c, err
	}
	vdim, err := uintKey("attention.value_length", false, c.HeadDim)
	if err != nil {
		return c, err
	}
	if vdim != c.HeadDim {
		return c, fmt.Errorf("metadata %s %d differs from %s %d (not supported)", key("attention.value_length"), vdim, key("attention.key_length"), c.HeadDim)
	}
	if c.NHead%c.NHeadKV != 0 {
		return c, fmt.Errorf("metadata %s %d is not a multiple of %s %d", key("attention.head_count"), c.NHead, key("attention.head_count_kv"), c.NHeadKV)
	}
	if c.RopeDim, err = uintKey("rope.dimension_count", false, c.HeadDim); err != nil {
		return c, err
	}
	if c.RopeDim > c.HeadDim || c.RopeDim%2 != 0 {
		return c, fmt.Errorf("metadata %s %d: must be even and at most the head size %d", key("rope.dimension_count"), c.RopeDim, c.HeadDim)
	}
	// llama.cpp's graphs rotate whole heads (GGML_ASSERT(n_embd_head ==
	// n_rot)) except phi3's (Phi-4-mini) and glm4's.
	if c.RopeDim != c.HeadDim && !traits.partialRope {
		return c, fmt.Errorf("metadata %s %d: the %s graph rotates whole heads of %d (llama.cpp refuses a partial rotation too)", key("rope.dimension_count"), c.RopeDim, arch, c.HeadDim)
	}

	eps, ok, err := floatKey("attention.layer_norm_rms_epsilon", 0)
	if err != nil {
		return c, err
	}
	if !ok {
		return c, fmt.Errorf("metadata %s: missing", key("attention.layer_norm_rms_epsilon"))
	}
	if !(eps >= 0 && eps < 1) {
		return c, fmt.Errorf("metadata %s: value %g out of range [0, 1)", key("attention.layer_norm_rms_epsilon"), eps)
	}
	c.RMSEps = eps
	if c.RopeBase, _, err = floatKey("rope.freq_base", 10000); err != nil {
		return c, err
	}
	if !(c.RopeBase > 0) {
		return c, fmt.Errorf("metadata %s: value %g must be positive", key("rope.freq_base"), c.RopeBase)
	}
	if err := readRopeScaling(f, arch, &c); err != nil {
		return c, err
	}
	if err := readArchScales(f, traits, &c, floatKey, uintKey); err != nil {
		return c, err
	}

	if v, ok := f.Uint(key("vocab_size")); ok && v > 0 && v <= maxDim {
		c.NVocab = int(v)
	} else if toks, ok := f.Strings("tokenizer.ggml.tokens"); ok && len(toks) > 0 {
		c.NVocab = len(toks)
	} else if ti, ok := f.Tensor("token_embd.weight"); ok && len(ti.Dims) >= 2 && ti.Dims[1] > 0 && ti.Dims[1] <= maxDim {
		c.NVocab = int(ti.Dims[1])
	} else {
		return c, fmt.Errorf("vocabulary size: no %s, tokenizer.ggml.tokens or token_embd.weight", key("vocab_size"))
	}
	return c, nil
}

// readRopeScaling reads the RoPE scaling as llama_model::load_hparams and
// llama_context's constructor derive it: freq_scale from
// rope.scaling.factor (or the older rope.scale_linear), 1 for type none;
// for YaRN the ramp's original context and the magnitude correction that
// llama.cpp (b10587) folds into yarn_attn_factor; rope.scaling.attn_factor
// on top for any type.
func readRopeScaling(f *gguf.File, arch string, c *Config) error {
	key := func(name string) string { return arch + ".rope.scaling." + name }
	c.RopeScaling = "linear"
	if s, ok := f.String(key("type")); ok {
		c.RopeScaling = strings.ToLower(s)
	} else if hasKey(f, key("type")) {
		return fmt.Errorf("metadata %s: not a string", key("type"))
	}
	switch c.RopeScaling {
	case "none", "linear", "yarn":
	case "longrope": // Phi-3: the factors are tensors; freq_scale as for linear
		if !archs[arch].longRope {
			return fmt.Errorf("metadata %s %q: llama.cpp's %s graph has no long RoPE factors", key("type"), c.RopeScaling, arch)
		}
	default:
		return fmt.Errorf("metadata %s %q: not modelled (evalrun computes none, linear, yarn and Phi-3's longrope; Llama 3's scaling is rope_freqs.weight)", key("type"), c.RopeScaling)
	}
	factor, factorKey := float32(0), key("factor")
	for _, k := range []string{key("factor"), arch + ".rope.scale_linear"} {
		if v, ok := f.Float(k); ok {
			factor, factorKey = float32(v), k
			break
		} else if hasKey(f, k) {
			return fmt.Errorf("metadata %s: not a number", k)
		}
	}
	if !(factor >= 0) || factor > 1e6 {
		return fmt.Errorf("metadata %s: value %g out of range [0, 1e6]", factorKey, factor)
	}
	c.RopeScale = 1
	if factor != 0 && c.RopeScaling != "none" {
		c.RopeScale = 1 / factor
	}
	attnFactor := float32(1)
	if v, ok := f.Float(key("attn_factor")); ok {
		attnFactor = float32(v)
	} else if hasKey(f, key("attn_factor")) {
		return fmt.Errorf("metadata %s: not a number", key("attn_factor"))
	}
	if !(attnFactor > 0) || attnFactor > 1e3 {
		return fmt.Errorf("metadata %s: value %g out of range (0, 1000]", key("attn_factor"), attnFactor)
	}
	c.RopeOrigCtx = c.NCtxTrain
	if v, ok := f.Uint(key("original_context_length")); ok && v > 0 {
		if v > maxDim {
			return fmt.Errorf("metadata %s: value %d out of range [1, %d]", key("original_context_length"), v, maxDim)
		}
		c.RopeOrigCtx = int(v)
	} else if hasKey(f, key("original_context_length")) && !ok {
		return fmt.Errorf("metadata %s: not a non-negative integer", key("original_context_length"))
	}
	c.RopeAttnFactor = 1
	if c.RopeScaling == "yarn" {
		c.RopeAttnFactor = yarnAttnFactor(c.RopeScale)
	}
	c.RopeAttnFactor *= attnFactor
	return nil
}

// yarnAttnFactor is llama_context's yarn_attn_factor for YaRN (ext_factor
// 1, no yarn_log_multiplier): the magnitude correction get_mscale(factor)
// divided by the one ggml's rope multiplies in again, each rounded as
// libllama (no fused multiply-add) rounds it.
func yarnAttnFactor(freqScale float32) float32 {
	factor := 1 / freqScale
	m := float32(1)
	if factor > 1 {
		m = float32(float32(0.1)*cmath.Logf(factor)) + 1
	}
	return m * (1 / (float32(float32(0.1)*cmath.Logf(factor)) + 1))
}

// readArchScales reads what the graphs beyond the llama family add, as
// their load_arch_hparams do: gemma's scales, soft caps and sliding
// windows, minicpm's scales.
func readArchScales(f *gguf.File, traits archSpec, c *Config,
	floatKey func(string, float32) (float32, bool, error), uintKey func(string, bool, int) (int, error)) error {
	c.KQScale = 1 / float32(math.Sqrt(float64(c.HeadDim)))
	key := func(name string) string { return c.Arch + "." + name }
	positive := func(name string, def float32) (float32, error) {
		v, _, err := floatKey(name, def)
		if err == nil && !(v > 0 && v < 1e6) {
			err = fmt.Errorf("metadata %s: value %g out of range (0, 1e6)", key(name), v)
		}
		return v, err
	}
	var err error
	switch {
	case traits.gemma:
		c.EmbedScale = float32(math.Sqrt(float64(c.NEmbd)))
		// gemma_pytorch's query_pre_attn_scalar: n_embd/n_head for the 27B
		// models, else the head size (llama.cpp tells them by block count).
		c.QScale = c.KQScale
		if (c.Arch == "gemma2" && c.NLayer == 46) || (c.Arch == "gemma3" && c.NLayer == 62) {
			c.QScale = 1 / float32(math.Sqrt(float64(c.NEmbd/c.NHead)))
		}
	case traits.qPreScale:
		c.QScale = c.KQScale
	case traits.granite:
		// llama.cpp's defaults for MiniCPM files that predate the keys.
		if c.EmbedScale, err = positive("embedding_scale", 12); err != nil {
			return err
		}
		if c.ResidualScale, err = positive("residual_scale", 1.4/float32(math.Sqrt(float64(c.NLayer)))); err != nil {
			return err
		}
		if c.LogitScale, err = positive("logit_scale", 256/float32(c.NEmbd)); err != nil {
			return err
		}
	}
	if _, ok := traits.keys["final_logit_softcapping"]; ok {
		// llama.cpp's default is 30; gemma3 sets 0 (none) before reading it.
		def := float32(30)
		if c.Arch == "gemma3" {
			def = 0
		}
		if c.FinalSoftcap, _, err = floatKey("final_logit_softcapping", def); err != nil {
			return err
		}
		if !(c.FinalSoftcap >= 0 && c.FinalSoftcap < 1e6) || (c.FinalSoftcap == 0 && c.Arch == "gemma2") {
			return fmt.Errorf("metadata %s: value %g out of range (0, 1e6)", key("final_logit_softcapping"), c.FinalSoftcap)
		}
	}
	switch traits.swa {
	case "gemma2":
		// Gemma 2 always has its windows: 4096 and every other layer unless
		// the file says otherwise, and soft-capped attention scores.
		if c.NSWA, err = uintKey("attention.sliding_window", false, 4096); err != nil {
			return err
		}
		if c.SWAPattern, err = uintKey("attention.sliding_window_pattern", false, 2); err != nil {
			return err
		}
		if c.AttnSoftcap, err = positive("attn_logit_softcapping", 50); err != nil {
			return err
		}
		c.RopeScaleSWA = c.RopeScale
	case "gemma3":
		if v, ok := f.Uint(key("attention.sliding_window")); ok && v > 0 {
			if c.NSWA, err = uintKey("attention.sliding_window", false, 0); err != nil {
				return err
			}
			if c.SWAPattern, err = uintKey("attention.sliding_window_pattern", false, 6); err != nil {
				return err
			}
		} else if hasKey(f, key("attention.sliding_window")) && !ok {
			return fmt.Errorf("metadata %s: not a non-negative integer", key("attention.sliding_window"))
		}
		c.RopeScaleSWA = 1 // llama.cpp's default: gemma3's local layers are not scaled
	}
	if c.NSWA > 0 {
		if c.RopeBaseSWA, err = positive("rope.freq_base_swa", 10000); err != nil {
			return err
		}
		if c.Arch == "gemma2" && !hasKey(f, key("rope.freq_base_swa")) {
			c.RopeBaseSWA = c.RopeBase
		}
	}
	return nil
}

func hasKey(f *gguf.File, key string) bool {
	_, ok := f.Get(key)
	return ok
}
