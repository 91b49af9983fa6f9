package engine

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/evalrun/evalrun/engine/ggml"
	"github.com/evalrun/evalrun/engine/gguf"
)

func TestConfigFromStories260K(t *testing.T) {
	m := openModel(t, modelPath("Q4_0"), Exact, 1)
	want := Config{Arch: "llama", NVocab: 512, NEmbd: 64, NLayer: 5, NHead: 8, NHeadKV: 4, HeadDim: 8, NFF: 172,
		NCtxTrain: 2048, RopeDim: 8, RopeBase: 10000, RopeScale: 1, RopeNeox: false, RMSEps: 1e-5,
		RopeScaling: "linear", RopeAttnFactor: 1, RopeOrigCtx: 2048, KQScale: 1 / float32(math.Sqrt(8))}
	if m.Config != want {
		t.Errorf("Config = %+v\nwant     %+v", m.Config, want)
	}
	// 48 tensors; llama-bench reports about 0.29 M parameters.
	if n := m.NParams(); n < 280_000 || n > 300_000 {
		t.Errorf("NParams = %d, want about 0.29 M", n)
	}
	if m.Tokenizer() == nil || m.File() == nil {
		t.Error("Tokenizer or File is nil")
	}
	if got := m.layers[0].wDown.Type; got != ggml.F16 {
		t.Errorf("blk.0.ffn_down type %s, want F16", got)
	}
	if got := m.output.Type; got != ggml.Q8_0 {
		t.Errorf("output type %s, want Q8_0", got)
	}
}

// recorder is a MatMuler that logs every op and can alter one op's result,
// as an offloading backend would.
type recorder struct {
	cpu   MatMuler
	mu    sync.Mutex
	ops   []MatMulOp
	bumps map[string]float32
}

func (r *recorder) MatMul(op *MatMulOp, x, out []float32) error {
	r.mu.Lock()
	r.ops = append(r.ops, *op)
	r.mu.Unlock()
	if err := r.cpu.MatMul(op, x, out); err != nil {
		return err
	}
	if b, ok := r.bumps[op.Name]; ok {
		for i := range out[:op.T*op.N] {
			out[i] += b
		}
	}
	return nil
}

// TestMatMulDispatch: every weight matmul goes through the MatMuler
// UseMatMul attaches, with llama.cpp's names and shapes, in the order
// MatMulOps lists, and a backend's results are what the model uses.
func TestMatMulDispatch(t *testing.T) {
	m, err := Open(modelPath("F32"), Options{Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	rec := &recorder{cpu: m.CPUMatMul(), bumps: map[string]float32{"result_output": 1}}
	m.UseMatMul(rec)
	ref := openModel(t, modelPath("F32"), Exact, 1)
	ids := loadLogitsGolden(t, "p2", "F32").TokenIDs

	want := decodeAll(t, ref, ids)
	s := m.NewSession(0)
	last := len(ids) - 1
	err = s.Decode(ids, func(i int) bool { return i == last }, func(i int, l []float32) error {
		for j := range l {
			if l[j] != want[i][j]+1 {
				return fmt.Errorf("logit %d = %v, want CPU %v + 1 from the backend", j, l[j], want[i][j])
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	plan := m.MatMulOpsOutputs(len(ids), 1)
	if len(rec.ops) != len(plan) || len(plan) != 7*5+1 {
		t.Fatalf("ran %d matmuls, MatMulOps lists %d, want %d", len(rec.ops), len(plan), 7*5+1)
	}
	for i := range plan {
		g, w := rec.ops[i], plan[i]
		if g.Name != w.Name || g.Layer != w.Layer || g.T != w.T || g.K != w.K || g.N != w.N || g.Weight != w.Weight {
			t.Errorf("op %d: ran %s L%d T%d K%d N%d, listed %s L%d T%d K%d N%d", i, g.Name, g.Layer, g.T, g.K, g.N, w.Name, w.Layer, w.T, w.K, w.N)
		}
	}
	T := len(ids)
	shapes := map[string][4]int{ // T, K, N, layer
		"Qcur-0": {T, 64, 64, 0}, "Vcur-0": {T, 64, 32, 0}, "Kcur-0": {T, 64, 32, 0}, "attn_out-0": {T, 64, 64, 0},
		"ffn_gate-0": {T, 64, 172, 0}, "ffn_up-0": {T, 64, 172, 0}, "ffn_out-0": {T, 172, 64, 0},
		"ffn_gate-4": {1, 64, 172, 4}, "ffn_out-4": {1, 172, 64, 4}, "attn_out-4": {T, 64, 64, 4},
		"result_output": {1, 64, 512, -1},
	}
	for _, op := range plan {
		if s, ok := shapes[op.Name]; ok && (s != [4]int{op.T, op.K, op.N, op.Layer}) {
			t.Errorf("%s: T,K,N,layer = %d,%d,%d,%d, want %v", op.Name, op.T, op.K, op.N, op.Layer, s)
		}
	}
	names := []string{}
	for _, op := range plan[:7] {
		names = append(names, op.Name)
	}
	if !slices.Equal(names, []string{"Qcur-0", "Vcur-0", "Kcur-0", "attn_out-0", "ffn_gate-0", "ffn_up-0", "ffn_out-0"}) {
		t.Errorf("layer 0 order %v", names)
	}
	if all := m.MatMulOps(3); all[len(all)-2].T != 3 || all[len(all)-1].T != 3 {
		t.Errorf("MatMulOps(3) should output all 3 rows: %+v", all[len(all)-1])
	}
}

// TestUseMatMulAfterOpen: a device attached to a loaded model (as a plugin
// does once it has planned) gets every matmul; nil restores the CPU.
func TestUseMatMulAfterOpen(t *testing.T) {
	m := openModel(t, modelPath("F32"), Exact, 1)
	ids := []int32{1, 2, 3}
	want := decodeAll(t, m, ids)
	rec := &recorder{cpu: m.CPUMatMul(), bumps: map[string]float32{"result_output": 1}}
	m.UseMatMul(rec)
	got := decodeAll(t, m, ids)
	if len(rec.ops) != len(m.MatMulOps(3)) || got[2][0] != want[2][0]+1 {
		t.Fatalf("device ran %d ops (want %d), logit %v (want %v)", len(rec.ops), len(m.MatMulOps(3)), got[2][0], want[2][0]+1)
	}
	m.UseMatMul(nil)
	if again := decodeAll(t, m, ids); again[2][0] != want[2][0] {
		t.Fatalf("after UseMatMul(nil): %v, want the CPU's %v", again[2][0], want[2][0])
	}
}

// rewriteModel copies a GGUF file, letting edit change or drop KVs and tensors.
func rewriteModel(t *testing.T, src string, editKV func(kv *gguf.KV) bool, editTensor func(name string, typ *ggml.Type, dims *[]uint64, data *[]byte) bool, add ...func(w *gguf.Writer) error) string {
	t.Helper()
	f, err := gguf.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	path := filepath.Join(t.TempDir(), "edited.gguf")
	if err := rewrittenModel(t, f, editKV, editTensor, add...).WriteFile(path); err != nil {
		t.Fatal(err)
	}
	return path
}

// rewriteModelInMemory is rewriteModel without a file: for tests that
// check thousands of edits (a file each is fsync-bound, minutes on a busy
// disk).
func rewriteModelInMemory(t *testing.T, f *gguf.File, add ...func(w *gguf.Writer) error) *gguf.File {
	t.Helper()
	var buf bytes.Buffer
	if _, err := rewrittenModel(t, f, nil, nil, add...).WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	edited, err := gguf.Parse(buf.Bytes(), "edited.gguf")
	if err != nil {
		t.Fatal(err)
	}
	return edited
}

// rewrittenModel is a writer holding f's keys and tensors, edited.
func rewrittenModel(t *testing.T, f *gguf.File, editKV func(kv *gguf.KV) bool, editTensor func(name string, typ *ggml.Type, dims *[]uint64, data *[]byte) bool, add ...func(w *gguf.Writer) error) *gguf.Writer {
	t.Helper()
	w := gguf.NewWriter()
	for _, kv := range f.KVs {
		if kv.Key == "general.alignment" || (editKV != nil && !editKV(&kv)) {
			continue
		}
		if err := w.AddKV(kv.Key, kv.Value); err != nil {
			t.Fatal(err)
		}
	}
	for i := range f.Tensors {
		ti := &f.Tensors[i]
		typ, dims, data := ti.Type, slices.Clone(ti.Dims), f.TensorData(ti)
		if editTensor != nil && !editTensor(ti.Name, &typ, &dims, &data) {
			continue
		}
		if err := w.AddTensor(ti.Name, typ, dims, data); err != nil {
			t.Fatal(err)
		}
	}
	for _, a := range add {
		if err := a(w); err != nil {
			t.Fatal(err)
		}
	}
	return w
}

// setKV is a KV edit for rewriteModel that sets key to v.
func setKV(key string, v any) func(kv *gguf.KV) bool {
	return func(kv *gguf.KV) bool {
		if kv.Key == key {
			kv.Value = v
		}
		return true
	}
}

// TestBadModelsAreRefusedByName: load errors name the architecture, tensor
// or key at fault, and never panic.
func TestBadModelsAreRefusedByName(t *testing.T) {
	src := modelPath("Q8_0")
	cases := []struct {
		name   string
		kv     func(kv *gguf.KV) bool
		tensor func(name string, typ *ggml.Type, dims *[]uint64, data *[]byte) bool
		add    func(w *gguf.Writer) error
		want   []string
	}{
		{name: "unchanged copy loads"},
		{name: "falcon", kv: setKV("general.architecture", "falcon"), want: []string{`unsupported architecture "falcon" (evalrun's engine computes gemma2, gemma3, glm4, internlm2, llama, minicpm, phi3, qwen2, qwen3;`}},
		{name: "missing tensor", tensor: func(name string, _ *ggml.Type, _ *[]uint64, _ *[]byte) bool {
			return name != "blk.0.attn_q.weight"
		}, want: []string{`tensor "blk.0.attn_q.weight": missing`}},
		{name: "wrong shape", tensor: func(name string, _ *ggml.Type, dims *[]uint64, _ *[]byte) bool {
			if name == "blk.1.attn_k.weight" {
				*dims = []uint64{32, 64} // transposed: same bytes for F32
			}
			return true
		}, want: []string{`tensor "blk.1.attn_k.weight"`, "shape [32 64], want [64 32]"}},
		{name: "unsupported type", tensor: func(name string, typ *ggml.Type, dims *[]uint64, data *[]byte) bool {
			if name == "blk.2.attn_q.weight" {
				// 64 rows of 64 IQ4_NL values: 2 blocks of 18 bytes each.
				*typ, *data = ggml.IQ4_NL, make([]byte, 64*2*18)
			}
			return true
		}, want: []string{`tensor "blk.2.attn_q.weight"`, "IQ4_NL"}},
		{name: "missing hyperparameter", kv: func(kv *gguf.KV) bool {
			return kv.Key != "llama.attention.layer_norm_rms_epsilon"
		}, want: []string{"llama.attention.layer_norm_rms_epsilon: missing"}},
		{name: "head count not dividing", kv: setKV("llama.attention.head_count_kv", uint32(3)), want: []string{"head_count 8 is not a multiple of llama.attention.head_count_kv 3"}},
		{name: "head count 0", kv: setKV("llama.attention.head_count", uint32(0)), want: []string{"llama.attention.head_count: value 0 out of range"}},
		// RoPE rotates pairs of a head's leading dimensions: at least one
		// pair (a decode's cos/sin rows are RopeDim values a position), and
		// whole pairs within the head.
		{name: "rope dimension 0", kv: setKV("llama.rope.dimension_count", uint32(0)), want: []string{"llama.rope.dimension_count: value 0 out of range"}},
		{name: "odd rope dimension", kv: setKV("llama.rope.dimension_count", uint32(7)), want: []string{"llama.rope.dimension_count 7: must be even and at most the head size 8"}},
		{name: "rope dimension past the head", kv: setKV("llama.rope.dimension_count", uint32(10)), want: []string{"llama.rope.dimension_count 10: must be even and at most the head size 8"}},
		// llama.cpp's llama graph throws "invalid n_rot" (qwen2 and qwen3 assert).
		{name: "rope dimension within the head", kv: setKV("llama.rope.dimension_count", uint32(4)), want: []string{"llama.rope.dimension_count 4: the llama graph rotates whole heads of 8"}},
		// Every tensor is bound or the model is refused by name.
		{name: "Q norm in a llama file", add: addF32("blk.0.attn_q_norm.weight", 8), want: []string{`tensor "blk.0.attn_q_norm.weight": not part of evalrun's llama graph`}},
		// create_tensor_qkv takes the fused tensor and leaves Q, K, V unused.
		{name: "fused QKV beside Q, K and V", add: addF32("blk.1.attn_qkv.weight", 64, 128), want: []string{`tensor "blk.1.attn_k.weight": not part of evalrun's llama graph`}},
		{name: "output bias in a llama file (qwen2 only)", add: addF32("output.bias", 512), want: []string{`tensor "output.bias": not part of evalrun's llama graph`}},
		{name: "llama biases load", add: func(w *gguf.Writer) error {
			for _, b := range []struct {
				name string
				n    uint64
			}{{"blk.0.attn_q.bias", 64}, {"blk.0.attn_k.bias", 32}, {"blk.0.attn_v.bias", 32}, {"blk.0.attn_output.bias", 64},
				{"blk.4.ffn_gate.bias", 172}, {"blk.4.ffn_up.bias", 172}, {"blk.4.ffn_down.bias", 64}} {
				if err := addF32(b.name, b.n)(w); err != nil {
					return err
				}
			}
			return nil
		}},
		{name: "bias of the wrong size", add: addF32("blk.2.attn_output.bias", 63), want: []string{`tensor "blk.2.attn_output.bias": shape [63], want [64]`}},
		{name: "rope_freqs loads", add: addF32("rope_freqs.weight", 4)},
		{name: "rope_freqs of the wrong size", add: addF32("rope_freqs.weight", 8), want: []string{`tensor "rope_freqs.weight": shape [8], want [4]`}},
		{name: "rope_freqs in F16", add: func(w *gguf.Writer) error {
			return w.AddTensor("rope_freqs.weight", ggml.F16, []uint64{4}, make([]byte, 8))
		}, want: []string{`tensor "rope_freqs.weight": type F16`}},
		{name: "rope_freqs of zero", add: func(w *gguf.Writer) error {
			return w.AddTensor("rope_freqs.weight", ggml.F32, []uint64{4}, make([]byte, 16))
		}, want: []string{`tensor "rope_freqs.weight": factor 0 is 0`}},
		// Every llama.* key is modelled, inert in llama.cpp, or refused by name.
		{name: "attention softcap", add: addKV("llama.attn_logit_softcapping", float32(50)), want: []string{"metadata llama.attn_logit_softcapping: not modelled by evalrun's llama graph"}},
		{name: "sliding window", add: addKV("llama.attention.sliding_window", uint32(4096)), want: []string{"metadata llama.attention.sliding_window: not modelled"}},
		{name: "per-layer head counts", kv: setKV("llama.attention.head_count_kv", []int32{4, 4, 4, 4, 2}), want: []string{"llama.attention.head_count_kv: not a non-negative integer"}},
		{name: "experts", add: addKV("llama.expert_count", uint32(8)), want: []string{"metadata llama.expert_count = 8: evalrun's llama graph computes only the default (0)"}},
		{name: "no experts loads", add: addKV("llama.expert_count", uint32(0))},
		{name: "non-causal attention", add: addKV("llama.attention.causal", false), want: []string{"metadata llama.attention.causal = false"}},
		{name: "YaRN betas (inert in llama.cpp's llama) load", add: addKV("llama.rope.scaling.yarn_beta_fast", float32(16))},
		{name: "longrope", add: addKV("llama.rope.scaling.type", "longrope"), want: []string{`metadata llama.rope.scaling.type "longrope": llama.cpp's llama graph has no long RoPE factors`}},
		{name: "YaRN loads", add: func(w *gguf.Writer) error {
			return errors.Join(w.AddKV("llama.rope.scaling.type", "yarn"), w.AddKV("llama.rope.scaling.factor", float32(4)),
				w.AddKV("llama.rope.scaling.original_context_length", uint32(512)))
		}},
		{name: "negative scaling factor", add: addKV("llama.rope.scaling.factor", float32(-2)), want: []string{"metadata llama.rope.scaling.factor: value -2 out of range"}},
		{name: "block count below the tensors", kv: setKV("llama.block_count", uint32(4)), want: []string{`tensor "blk.4.`, "block 4, but llama.block_count is 4"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := src
			if c.kv != nil || c.tensor != nil || c.add != nil {
				var add []func(*gguf.Writer) error
				if c.add != nil {
					add = append(add, c.add)
				}
				path = rewriteModel(t, src, c.kv, c.tensor, add...)
			}
			// Check (what the host runs before any plugin) agrees with Open.
			f, err := gguf.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			_, checkErr := Check(f)
			f.Close()
			if (checkErr == nil) != (c.want == nil) {
				t.Errorf("Check: %v", checkErr)
			}
			m, err := Open(path, Options{Threads: 1})
			if err != nil && checkErr != nil && err.Error() != checkErr.Error() {
				t.Errorf("Check says %q, Open %q", checkErr, err)
			}
			if c.want == nil {
				if err != nil {
					t.Fatal(err)
				}
				m.Close()
				return
			}
			if err == nil {
				m.Close()
				t.Fatalf("loaded; want an error containing %q", c.want)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

// addF32 appends an F32 tensor of the given shape (values 1) to a rewritten model.
func addF32(name string, dims ...uint64) func(w *gguf.Writer) error {
	return func(w *gguf.Writer) error {
		n := uint64(1)
		for _, d := range dims {
			n *= d
		}
		data := make([]byte, 4*n)
		for i := range n {
			binary.LittleEndian.PutUint32(data[4*i:], math.Float32bits(1))
		}
		return w.AddTensor(name, ggml.F32, dims, data)
	}
}

// addKV appends a metadata key to a rewritten model.
func addKV(key string, v any) func(w *gguf.Writer) error {
	return func(w *gguf.Writer) error { return w.AddKV(key, v) }
}

func TestParseNumerics(t *testing.T) {
	for s, want := range map[string]Numerics{"exact": Exact, "GGML": GGML, " ggml ": GGML} {
		if got, err := ParseNumerics(s); err != nil || got != want {
			t.Errorf("ParseNumerics(%q) = %v, %v", s, got, err)
		}
	}
	if _, err := ParseNumerics("fast"); err == nil || !strings.Contains(err.Error(), `"fast"`) {
		t.Errorf("ParseNumerics(fast) err = %v", err)
	}
}
