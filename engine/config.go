package engine

import (
	"fmt"
	"strings"

	"github.com/evalrun/evalrun/engine/gguf"
)

// Config holds the hyperparameters of a llama-family model.
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
	RopeDim   int     // leading dimensions of each head that RoPE rotates
	RopeBase  float32 // freq_base
	RopeScale float32 // freq_scale: positions are multiplied by it (1/factor of linear scaling)
	RopeNeox  bool    // rotate pairs (i, i+RopeDim/2) instead of adjacent pairs
	RMSEps    float32
}

// supportedArchs are the architectures this engine computes, with whether
// their RoPE is the NeoX variant and whether Q/K/V carry biases.
var supportedArchs = map[string]struct{ neox, qkvBias bool }{
	"llama": {neox: false, qkvBias: false},
	"qwen2": {neox: true, qkvBias: true},
}

func supportedArchList() string { return "llama, qwen2" }

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
	traits, ok := supportedArchs[arch]
	if !ok {
		return c, fmt.Errorf("unsupported architecture %q (supported: %s)", arch, supportedArchList())
	}
	c.Arch = arch
	c.RopeNeox = traits.neox

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
	if c.RopeScale, err = readRopeScale(f, arch); err != nil {
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

// readRopeScale returns freq_scale. llama.cpp reads rope.scaling.factor as
// 1/freq_scale for linear scaling; older files store rope.scale_linear.
func readRopeScale(f *gguf.File, arch string) (float32, error) {
	typ := "linear"
	if s, ok := f.String(arch + ".rope.scaling.type"); ok {
		typ = strings.ToLower(s)
	}
	switch typ {
	case "none":
		return 1, nil
	case "linear":
	default:
		return 0, fmt.Errorf("metadata %s.rope.scaling.type %q: not supported (supported: none, linear)", arch, typ)
	}
	if v, ok := f.Float(arch + ".rope.freq_scale"); ok {
		if !(v > 0) {
			return 0, fmt.Errorf("metadata %s.rope.freq_scale: value %g must be positive", arch, v)
		}
		return float32(v), nil
	}
	for _, k := range []string{arch + ".rope.scaling.factor", arch + ".rope.scale_linear"} {
		if v, ok := f.Float(k); ok {
			if v < 0 {
				return 0, fmt.Errorf("metadata %s: value %g must not be negative", k, v)
			}
			if v == 0 {
				return 1, nil
			}
			return 1 / float32(v), nil
		}
	}
	return 1, nil
}

func hasKey(f *gguf.File, key string) bool {
	_, ok := f.Get(key)
	return ok
}
