// Package engine is evalrun's reference inference engine: the llama, qwen2,
// qwen3, gemma2, gemma3, phi3, minicpm, internlm2 and glm4 transformers
// computed in pure Go the way llama.cpp's graphs and CPU backend compute
// them.
// Every weight matmul goes through a MatMuler, so a backend can claim named
// matmuls (an NPU) while everything else stays on the CPU.
package engine

import (
	"fmt"

	"github.com/evalrun/evalrun/engine/ggml"
	"github.com/evalrun/evalrun/engine/gguf"
	"github.com/evalrun/evalrun/engine/tokenizer"
)

// Options configure a loaded model.
type Options struct {
	Numerics Numerics
	Threads  int // <= 0: one per CPU
	// KVCache is how sessions store keys and values (zero: f32).
	KVCache KVCache
	// SWAFull gives sliding-window layers a full-size cache, as libllama's
	// default context parameters do; false (the default): a cache of the
	// window plus a micro-batch that new positions overwrite as a ring, as
	// llama.cpp's tools place them (common's swa_full off: llama-cli,
	// llama-server, llama-perplexity). The two sum attention in another
	// order, and gemma's fp16 GELU table turns those last-bit differences
	// into fp16 steps: a small KLD between the two (docs/design-notes.md).
	SWAFull bool
	// Weights is how Open brings the weights into memory (zero: auto).
	Weights WeightsLoad
}

// Model is a loaded model of one of the architectures the engine computes
// (Archs): hyperparameters, weights bound by their GGUF names, and the
// matmul dispatch.
type Model struct {
	Config Config

	file     *gguf.File
	ownsFile bool
	tok      *tokenizer.Tokenizer
	pool     *Pool
	kern     ggml.Kernels
	cpu      MatMuler // the CPU matmul
	mm       MatMuler // what Decode calls: cpu, or a device wrapping it
	kv       KVCache
	kc, vc   *kvCodec // nil: f32
	swaFull  bool     // Options.SWAFull
	numerics Numerics
	rope     ropeParams // the RoPE cache's constants

	tokEmbd    *Weight
	layers     []layer
	outputNorm []float32
	output     *Weight   // token_embd when the file has no output.weight
	outputBias []float32 // nil unless the file has output.bias (qwen2)
	// ropeFreqs divides each RoPE frequency (rope_freqs.weight, RopeDim/2
	// values; Llama 3.1+); nil: none.
	ropeFreqs []float32
	// ropeLong and ropeShort are Phi-3's factors (rope_factors_long and
	// _short): a session whose context exceeds RopeOrigCtx takes the long
	// ones (llama_model::get_rope_factors); nil: none.
	ropeLong, ropeShort []float32
	ropeLongP           ropeParams // the RoPE with the long factors
	// ropeSWA is the RoPE of the sliding-window layers (their own base).
	ropeSWA ropeParams
}

// layer is one transformer block.
type layer struct {
	attnNorm     []float32
	wq, wk, wv   *Weight
	bq, bk, bv   []float32 // each nil unless the file has the bias
	wqkv         *Weight   // fused Q, K and V rows (attn_qkv); then wq, wk, wv are nil
	bqkv         []float32
	postAttnNorm []float32 // post_attention_norm (gemma, glm4); nil: none
	postFFNNorm  []float32 // post_ffw_norm
	qNorm, kNorm []float32 // per-head RMS norm weights (qwen3); nil: none
	wo           *Weight
	bo           []float32
	ffnNorm      []float32
	wGate, wUp   *Weight // wGate nil: wUp holds gate and up rows (fused)
	wDown        *Weight
	bGate, bUp   []float32
	bDown        []float32
	opNames      [nLayerOps]string // llama.cpp's node names ("Qcur-3"), made once
}

// Open maps or copies a GGUF file (opts.Weights) and loads the model from
// it. Close releases both.
func Open(path string, opts Options) (*Model, error) {
	f, err := openWeights(path, opts.Weights)
	if err != nil {
		return nil, err
	}
	m, err := LoadGGUF(f, opts)
	if err != nil {
		f.Close()
		return nil, err
	}
	m.ownsFile = true
	return m, nil
}

// LoadGGUF loads the model from an open GGUF file, which must stay open while
// the model is used (weights are views into its mapping).
func LoadGGUF(f *gguf.File, opts Options) (*Model, error) {
	cfg, err := readConfig(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", f.Path, err)
	}
	m := &Model{Config: cfg, file: f, swaFull: opts.SWAFull, numerics: opts.Numerics}
	if err := m.bindWeights(opts.Numerics); err != nil {
		return nil, fmt.Errorf("%s: %w", f.Path, err)
	}
	m.rope = newRopeParams(cfg, m.ropeFreqs)
	if m.ropeShort != nil || m.ropeLong != nil {
		m.rope = newRopeParams(cfg, m.ropeShort)
		m.ropeLongP = newRopeParams(cfg, m.ropeLong)
	}
	if cfg.NSWA > 0 {
		swa := cfg
		swa.RopeBase, swa.RopeScale = cfg.RopeBaseSWA, cfg.RopeScaleSWA
		m.ropeSWA = newRopeParams(swa, nil)
	}
	if m.tok, err = tokenizer.FromGGUF(f); err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err) // FromGGUF's errors name the file
	}
	if err := opts.KVCache.Validate(); err != nil {
		return nil, fmt.Errorf("%w %w", ErrKVCache, err)
	}
	m.kv = opts.KVCache.orF32()
	heads, d := cfg.NHeadKV, cfg.HeadDim
	if m.kc, err = newKVCodec(m.kv.Key, heads, d); err != nil {
		return nil, fmt.Errorf("%s: %w key: %w", f.Path, ErrKVCache, err)
	}
	if m.vc, err = newKVCodec(m.kv.Value, heads, d); err != nil {
		return nil, fmt.Errorf("%s: %w value: %w", f.Path, ErrKVCache, err)
	}
	// Every implementation gives the same bits; EVALRUN_KERNELS may force one.
	if m.kern, err = ggml.FromEnv(); err != nil {
		return nil, err
	}
	m.pool = NewPool(opts.Threads)
	m.cpu = NewCPUMatMul(opts.Numerics, m.pool, m.kern)
	m.mm = m.cpu
	return m, nil
}

// bindWeights looks up every tensor by its GGUF name and checks shape and
// type, as the architecture's load_arch_tensors creates them; a tensor of
// the file that none of them is refuses the model (llama.cpp's loader
// refuses a file whose tensors it did not all create, too).
func (m *Model) bindWeights(numerics Numerics) error {
	c := m.Config
	arch := archs[c.Arch]
	qDim, kvDim := c.NHead*c.HeadDim, c.NHeadKV*c.HeadDim
	b := binder{f: m.file, numerics: numerics, bound: map[string]bool{}}

	m.tokEmbd = b.matrix("token_embd.weight", c.NEmbd, c.NVocab)
	m.outputNorm = b.vector("output_norm.weight", c.NEmbd)
	if arch.needOutput && !b.has("output.weight") {
		return fmt.Errorf("tensor %q: missing (llama.cpp's %s graph does not tie it to token_embd)", "output.weight", c.Arch)
	}
	if b.has("output.weight") && !arch.noOutput {
		m.output = b.matrix("output.weight", c.NEmbd, c.NVocab)
	} else {
		m.output = m.tokEmbd // tied embeddings
	}
	if arch.outputBias {
		m.outputBias = b.optionalVector("output.bias", c.NVocab)
	}
	if arch.ropeFreqs {
		m.ropeFreqs = b.ropeFactors("rope_freqs.weight", c.RopeDim/2)
	}
	if arch.longRope {
		m.ropeLong = b.ropeFactors("rope_factors_long.weight", c.RopeDim/2)
		m.ropeShort = b.ropeFactors("rope_factors_short.weight", c.RopeDim/2)
	}
	m.layers = make([]layer, c.NLayer)
	for i := range m.layers {
		p := fmt.Sprintf("blk.%d.", i)
		l := &m.layers[i]
		l.attnNorm = b.vector(p+"attn_norm.weight", c.NEmbd)
		// create_tensor_qkv: a fused attn_qkv when the file has one, in
		// every architecture.
		if b.has(p + "attn_qkv.weight") {
			l.wqkv = b.matrix(p+"attn_qkv.weight", c.NEmbd, qDim+2*kvDim)
			l.bqkv = b.optionalVector(p+"attn_qkv.bias", qDim+2*kvDim)
		} else {
			l.wq = b.matrix(p+"attn_q.weight", c.NEmbd, qDim)
			l.wk = b.matrix(p+"attn_k.weight", c.NEmbd, kvDim)
			l.wv = b.matrix(p+"attn_v.weight", c.NEmbd, kvDim)
			l.bq = b.optionalVector(p+"attn_q.bias", qDim)
			l.bk = b.optionalVector(p+"attn_k.bias", kvDim)
			l.bv = b.optionalVector(p+"attn_v.bias", kvDim)
		}
		if arch.qkNorm {
			l.qNorm = b.vector(p+"attn_q_norm.weight", c.HeadDim)
			l.kNorm = b.vector(p+"attn_k_norm.weight", c.HeadDim)
		}
		l.wo = b.matrix(p+"attn_output.weight", qDim, c.NEmbd)
		if arch.attnOutBias {
			l.bo = b.optionalVector(p+"attn_output.bias", c.NEmbd)
		}
		if arch.postNorms {
			l.postAttnNorm = b.vector(p+"post_attention_norm.weight", c.NEmbd)
		}
		l.ffnNorm = b.vector(p+"ffn_norm.weight", c.NEmbd)
		if arch.fusedFFN {
			l.wUp = b.matrix(p+"ffn_up.weight", c.NEmbd, 2*c.NFF)
		} else {
			l.wGate = b.matrix(p+"ffn_gate.weight", c.NEmbd, c.NFF)
			l.wUp = b.matrix(p+"ffn_up.weight", c.NEmbd, c.NFF)
		}
		l.wDown = b.matrix(p+"ffn_down.weight", c.NFF, c.NEmbd)
		if arch.postNorms {
			l.postFFNNorm = b.vector(p+"post_ffw_norm.weight", c.NEmbd)
		}
		if arch.ffnBias {
			l.bGate = b.optionalVector(p+"ffn_gate.bias", c.NFF)
			l.bUp = b.optionalVector(p+"ffn_up.bias", c.NFF)
			l.bDown = b.optionalVector(p+"ffn_down.bias", c.NEmbd)
		}
		for o, name := range opNames {
			l.opNames[o] = fmt.Sprintf("%s-%d", name, i)
		}
		if b.err != nil {
			break
		}
	}
	if b.err != nil {
		return b.err
	}
	for _, ti := range m.file.Tensors {
		if b.bound[ti.Name] {
			continue
		}
		var il int
		if _, err := fmt.Sscanf(ti.Name, "blk.%d.", &il); err == nil && il >= c.NLayer {
			return fmt.Errorf("tensor %q: block %d, but %s.block_count is %d", ti.Name, il, c.Arch, c.NLayer)
		}
		return fmt.Errorf("tensor %q: not part of evalrun's %s graph (refused rather than computed without it)", ti.Name, c.Arch)
	}
	return nil
}

// Check reads a GGUF file's hyperparameters and binds every tensor as Open
// would, without a tokenizer, threads or a session: a host uses it to refuse
// a model before any backend loads it.
func Check(f *gguf.File) (Config, error) {
	cfg, err := readConfig(f)
	if err != nil {
		return cfg, fmt.Errorf("%s: %w", f.Path, err)
	}
	m := &Model{Config: cfg, file: f}
	if err := m.bindWeights(Exact); err != nil {
		return cfg, fmt.Errorf("%s: %w", f.Path, err)
	}
	return cfg, nil
}

// binder fetches tensors, keeping the first error and the names bound.
type binder struct {
	f        *gguf.File
	numerics Numerics
	err      error
	bound    map[string]bool
}

func (b *binder) has(name string) bool {
	_, ok := b.f.Tensor(name)
	return ok
}

// ropeFactors binds optional RoPE frequency factors: F32 (ggml's rope
// asserts it), each positive and finite.
func (b *binder) ropeFactors(name string, n int) []float32 {
	if !b.has(name) || b.err != nil {
		return nil
	}
	if ti, _ := b.f.Tensor(name); ti.Type != ggml.F32 {
		b.err = fmt.Errorf("tensor %q: type %s, llama.cpp's rope takes F32 frequency factors", name, ti.Type)
		return nil
	}
	v := b.vector(name, n)
	for i, x := range v {
		if !(x > 0) || x > 1e30 {
			b.err = fmt.Errorf("tensor %q: factor %d is %g, must be positive and finite", name, i, x)
			return nil
		}
	}
	return v
}

// optionalVector binds a 1-D tensor the graph applies when present; nil
// when the file has none.
func (b *binder) optionalVector(name string, n int) []float32 {
	if !b.has(name) {
		return nil
	}
	return b.vector(name, n)
}

func (b *binder) tensor(name string, want ...int) (*gguf.TensorInfo, []byte) {
	if b.err != nil {
		return nil, nil
	}
	ti, ok := b.f.Tensor(name)
	if !ok {
		b.err = fmt.Errorf("tensor %q: missing", name)
		return nil, nil
	}
	b.bound[name] = true
	if !shapeIs(ti.Dims, want) {
		b.err = fmt.Errorf("tensor %q: shape %v, want %v", name, ti.Dims, want)
		return nil, nil
	}
	rb, err := ggml.RowBytes(ti.Type, want[0])
	if err != nil {
		b.err = fmt.Errorf("tensor %q: %w", name, err)
		return nil, nil
	}
	rows := 1
	for _, d := range want[1:] {
		rows *= d
	}
	data := b.f.TensorData(ti)
	if len(data) != rb*rows {
		b.err = fmt.Errorf("tensor %q: %d bytes of data, want %d (%v %s)", name, len(data), rb*rows, want, ti.Type)
		return nil, nil
	}
	// Prove the type is computable now rather than failing mid-forward.
	if err := ggml.Dequantize(ti.Type, data[:rb], make([]float32, want[0])); err != nil {
		b.err = fmt.Errorf("tensor %q: type %s not supported: %w", name, ti.Type, err)
		return nil, nil
	}
	return ti, data
}

// matrix binds a 2-D weight of N rows of K elements.
func (b *binder) matrix(name string, k, n int) *Weight {
	ti, data := b.tensor(name, k, n)
	if ti == nil {
		return nil
	}
	w := &Weight{Name: name, Type: ti.Type, K: k, N: n, Data: data}
	if b.numerics == GGML && ti.Type != ggml.F32 {
		qt := ggml.VecDotType(ti.Type)
		qb, err := ggml.RowBytes(qt, k)
		if err == nil {
			err = ggml.QuantizeActivations(ti.Type, make([]float32, k), make([]byte, qb))
		}
		if err != nil {
			b.err = fmt.Errorf("tensor %q: ggml numerics for type %s (activations %s): %w", name, ti.Type, qt, err)
			return nil
		}
	}
	return w
}

// vector binds a 1-D tensor (norm weights, biases) as float32.
func (b *binder) vector(name string, n int) []float32 {
	ti, data := b.tensor(name, n)
	if ti == nil {
		return nil
	}
	v := make([]float32, n)
	if err := ggml.Dequantize(ti.Type, data, v); err != nil {
		b.err = fmt.Errorf("tensor %q: %w", name, err)
		return nil
	}
	return v
}

// shapeIs compares GGUF dims with the expected ones, allowing trailing 1s.
func shapeIs(dims []uint64, want []int) bool {
	if len(dims) < len(want) {
		return false
	}
	for i, d := range dims {
		if i < len(want) {
			if d != uint64(want[i]) {
				return false
			}
		} else if d != 1 {
			return false
		}
	}
	return true
}

// NParams is the number of weights in the file (every tensor's elements).
func (m *Model) NParams() int64 { return int64(m.file.NParams()) }

// Tokenizer returns the vocabulary of the model file.
func (m *Model) Tokenizer() *tokenizer.Tokenizer { return m.tok }

// File returns the GGUF file the model was loaded from.
func (m *Model) File() *gguf.File { return m.file }

// Kernels names the kernel implementation the CPU matmuls run.
func (m *Model) Kernels() ggml.Kernels { return m.kern }

// KVCache is how the model's sessions store keys and values.
func (m *Model) KVCache() KVCache { return m.kv }

// Threads is the number of threads matmuls and attention use.
func (m *Model) Threads() int { return m.pool.Threads() }

// Parallel runs fn over [0, n) in ranges aligned to align on the model's
// threads (its worker pool), for a device that computes on the host: the
// NPU simulator's runs then share the matmuls' workers instead of starting
// goroutines of their own.
func (m *Model) Parallel(n, align int, fn func(lo, hi int)) { m.pool.RunAligned(n, align, fn) }

// CPUMatMul is the model's CPU matmul, the one a device falls back to.
func (m *Model) CPUMatMul() MatMuler { return m.cpu }

// UseMatMul makes Decode run every weight matmul through mm, typically a
// device that claims some ops and hands the rest to CPUMatMul; nil restores
// the CPU. Not safe while a Decode runs.
func (m *Model) UseMatMul(mm MatMuler) {
	if mm == nil {
		mm = m.cpu
	}
	m.mm = mm
}

// MatMulOps lists every weight matmul the model runs for a batch of tokens
// that requests logits for all of them, in llama.cpp's graph order.
func (m *Model) MatMulOps(tokens int) []MatMulOp {
	return m.MatMulOpsOutputs(tokens, tokens)
}

// MatMulOpsOutputs is MatMulOps for a batch of tokens of which outputs rows
// request logits: as in llama.cpp, the last layer's FFN and the output head
// only run on those rows. The ops are the ones Decode runs (layerOps and
// outputOp build both).
func (m *Model) MatMulOpsOutputs(tokens, outputs int) []MatMulOp {
	ops := make([]MatMulOp, 0, nLayerOps*len(m.layers)+1)
	for il := range m.layers {
		for _, op := range m.layerOps(il, tokens, outputs) {
			if op.Weight != nil {
				ops = append(ops, op)
			}
		}
	}
	return append(ops, m.outputOp(outputs))
}

// The matmuls of a layer, in the node order of llama.cpp's graph
// (llama-eval-callback): Q, V, K (or the fused QKV), then the attention
// output and the FFN. A layer has either opQKV or opQ, opV and opK, and
// opFFNGate only when its FFN is not fused (then opFFNUp computes gate
// and up rows); the absent ones have no Weight.
const (
	opQKV = iota
	opQ
	opV
	opK
	opAttnOut
	opFFNGate
	opFFNUp
	opFFNDown
	nLayerOps
)

// MatMulOpNames lists the base names of every weight matmul a model may
// run (a layer's, then "result_output"), in graph order; an op's Name is
// its base name and "-" and its layer ("wqkv-3"). "wqkv" is a fused Q, K
// and V (Phi-3, files with attn_qkv); a fused FFN (Phi-3, GLM-4) computes
// gate and up rows in "ffn_up" and has no "ffn_gate".
func MatMulOpNames() []string { return append(opNames[:], "result_output") }

var opNames = [nLayerOps]string{opQKV: "wqkv", opQ: "Qcur", opV: "Vcur", opK: "Kcur", opAttnOut: "attn_out", opFFNGate: "ffn_gate", opFFNUp: "ffn_up", opFFNDown: "ffn_out"}

// layerOps are the matmuls of layer il for a batch of tokens of which
// outputs rows continue past attention in the last layer.
func (m *Model) layerOps(il, tokens, outputs int) [nLayerOps]MatMulOp {
	l := &m.layers[il]
	ffnRows := tokens
	if il == len(m.layers)-1 {
		ffnRows = outputs
	}
	op := func(o, t int, w *Weight) MatMulOp {
		if w == nil {
			return MatMulOp{}
		}
		return MatMulOp{Name: l.opNames[o], Layer: il, T: t, K: w.K, N: w.N, Weight: w}
	}
	return [nLayerOps]MatMulOp{
		opQKV:     op(opQKV, tokens, l.wqkv),
		opQ:       op(opQ, tokens, l.wq),
		opV:       op(opV, tokens, l.wv),
		opK:       op(opK, tokens, l.wk),
		opAttnOut: op(opAttnOut, tokens, l.wo),
		opFFNGate: op(opFFNGate, ffnRows, l.wGate),
		opFFNUp:   op(opFFNUp, ffnRows, l.wUp),
		opFFNDown: op(opFFNDown, ffnRows, l.wDown),
	}
}

func (m *Model) outputOp(outputs int) MatMulOp {
	return MatMulOp{Name: "result_output", Layer: -1, T: outputs, K: m.output.K, N: m.output.N, Weight: m.output}
}

// Close stops the worker threads and, for Open, unmaps the file.
func (m *Model) Close() error {
	m.pool.Close()
	if m.ownsFile {
		return m.file.Close()
	}
	return nil
}
