package htp

import (
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/evalrun/evalrun/engine"
	"github.com/evalrun/evalrun/engine/ggml"
	"github.com/evalrun/evalrun/engine/gguf"
	"github.com/evalrun/evalrun/engine/synth"
	"github.com/evalrun/evalrun/plugins/internal/faults"
)

var tokens = []int32{1, 403, 407, 261, 378, 430, 312, 410, 300, 265}

func modelPath(variant string) string {
	p, _ := filepath.Abs("../../../models/stories260K" + variant + ".gguf")
	return p
}

func open(t *testing.T, variant string, numerics engine.Numerics) *engine.Model {
	t.Helper()
	m, err := engine.Open(modelPath(variant), engine.Options{Numerics: numerics, Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

func attach(t *testing.T, m *engine.Model, cfg Config) *Device {
	t.Helper()
	d, err := New(m, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	m.UseMatMul(d)
	return d
}

func decode(t *testing.T, m *engine.Model) [][]float32 {
	t.Helper()
	var rows [][]float32
	err := m.NewSession(64).Decode(tokens, nil, func(_ int, l []float32) error {
		rows = append(rows, append([]float32(nil), l...))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

// TestMatMulModeIsGGMLNumerics: with the activations quantized to Q8_0 (or
// rounded to binary16 for F16 weights) as ggml does and the engine's
// kernels, the HTP's matmuls give the CPU's ggml numerics bit for bit,
// although they read their weights from the repacked layout: a layout bug
// shows here.
func TestMatMulModeIsGGMLNumerics(t *testing.T) {
	for _, variant := range []string{"-q8_0", "-q4_0", "", "-f16"} {
		want := decode(t, open(t, variant, engine.GGML))
		m := open(t, variant, engine.Exact)
		d := attach(t, m, Config{Sessions: 1})
		if !strings.HasPrefix(d.Summary(), "36 of 36 matmuls on the HTP") {
			t.Errorf("%s: %s", variant, d.Summary())
		}
		got := decode(t, m)
		for i := range want {
			for j := range want[i] {
				if math.Float32bits(got[i][j]) != math.Float32bits(want[i][j]) {
					t.Fatalf("stories260K%s: row %d logit %d = %g, CPU ggml numerics %g", variant, i, j, got[i][j], want[i][j])
				}
			}
		}
	}
}

func counts(s *Session) map[string]int64 {
	out := map[string]int64{}
	for _, c := range s.Counts() {
		out[c.Op] = c.N
	}
	return out
}

// TestSessionsSplitLayers: 2 sessions over 5 layers hold layers 0-2 and
// 3-4 (+ the output head), and the matmuls ran where the plan says.
func TestSessionsSplitLayers(t *testing.T) {
	m := open(t, "-q8_0", engine.Exact)
	d := attach(t, m, Config{Sessions: 2})
	want := "36 of 36 matmuls on the HTP, 2 session(s) (HTP0: layers 0-2, 21 MUL_MAT; HTP1: layers 3-4 + output, 15 MUL_MAT)"
	if d.Summary() != want {
		t.Errorf("summary %q, want %q", d.Summary(), want)
	}
	decode(t, m) // one Decode: every matmul once
	s := d.Sessions()
	if c := counts(s[0]); c["MUL_MAT"] != 21 || len(c) != 1 {
		t.Errorf("HTP0 ran %v, want 21 MUL_MAT only", c)
	}
	if c := counts(s[1]); c["MUL_MAT"] != 15 {
		t.Errorf("HTP1 ran %v, want 15 MUL_MAT", c)
	}
	if _, err := New(m, Config{Sessions: 6}, nil); err == nil || !strings.Contains(err.Error(), "sessions 6: want 1..5") {
		t.Errorf("6 sessions on 5 layers: %v", err)
	}
}

// TestLayerOps: with ops: layer the norms, RoPE, softmax, SwiGLU and adds
// run on the sessions too, with the HTP's numerics: close to the CPU's,
// not equal. (F32 weights: with Q8_0 activations the last-bit differences
// mostly vanish in the quantization.)
func TestLayerOps(t *testing.T) {
	m := open(t, "", engine.Exact)
	d := attach(t, m, Config{Sessions: 2})
	ref := decode(t, m)
	m2 := open(t, "", engine.Exact)
	d2 := attach(t, m2, Config{Sessions: 2, Layer: true})
	got := decode(t, m2)
	var maxd float64
	for i := range ref {
		for j := range ref[i] {
			maxd = max(maxd, math.Abs(float64(got[i][j]-ref[i][j])))
		}
		if argmax(got[i]) != argmax(ref[i]) {
			t.Errorf("row %d: top token %d, matmul-only %d", i, argmax(got[i]), argmax(ref[i]))
		}
	}
	if maxd == 0 || maxd > 0.05 {
		t.Errorf("layer ops vs CPU ops: max |Δlogit| %g, want small but nonzero", maxd)
	}
	T := int64(len(tokens))
	c0 := counts(d2.Sessions()[0])
	// 3 layers × T rows: 2 norms, 2 adds, 1 swiglu; RoPE per head (8 Q + 4 K);
	// softmax per head and row.
	want := map[string]int64{"MUL_MAT": 21, "RMS_NORM": 6 * T, "MUL": 6 * T, "ADD": 6 * T, "SWIGLU": 3 * T, "ROPE": 36 * T, "SOFT_MAX": 24 * T}
	for op, n := range want {
		if c0[op] != n {
			t.Errorf("HTP0 %s: %d, want %d (all: %v)", op, c0[op], n, c0)
		}
	}
	if c := counts(d.Sessions()[0]); len(c) != 1 {
		t.Errorf("ops: matmul ran %v on HTP0, want MUL_MAT only", c)
	}
}

func argmax(x []float32) int {
	b := 0
	for i, v := range x {
		if v > x[b] {
			b = i
		}
	}
	return b
}

// TestFaults: the injector sees every HTP matmul as a device run, from
// Arm on; its output faults reach the logits (what faults does to a run is
// the faults package's test).
func TestFaults(t *testing.T) {
	one := 1
	m := open(t, "-q8_0", engine.Exact)
	f := faults.New(&faults.Options{NaNAfter: &one})
	attach(t, m, Config{Sessions: 1, Faults: f})
	if rows := decode(t, m); math.IsNaN(float64(rows[0][0])) {
		t.Fatal("NaN before Arm")
	}
	f.Arm()
	rows := decode(t, m) // the second matmul's output element 0 is NaN
	nan := 0
	for _, v := range rows[0] {
		if math.IsNaN(float64(v)) {
			nan++
		}
	}
	if nan == 0 {
		t.Error("faults.nan_after 1: no NaN in the logits")
	}
}

// mxfp4Model writes stories260K with its matrices of whole 32-blocks
// quantized to MXFP4.
func mxfp4Model(t *testing.T) string {
	t.Helper()
	f, err := gguf.Open(modelPath(""))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w := gguf.NewWriter()
	for _, kv := range f.KVs {
		if kv.Key != "general.alignment" {
			if err := w.AddKV(kv.Key, kv.Value); err != nil {
				t.Fatal(err)
			}
		}
	}
	for i := range f.Tensors {
		ti := &f.Tensors[i]
		typ, data := ti.Type, f.TensorData(ti)
		if len(ti.Dims) == 2 && ti.Dims[0]%32 == 0 {
			x := make([]float32, ti.Dims[0]*ti.Dims[1])
			if err := ggml.Dequantize(typ, data, x); err != nil {
				t.Fatal(err)
			}
			rb, _ := ggml.RowBytes(ggml.MXFP4, len(x))
			typ, data = ggml.MXFP4, make([]byte, rb)
			if err := ggml.Quantize(ggml.MXFP4, x, data); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.AddTensor(ti.Name, typ, ti.Dims, data); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(t.TempDir(), "stories260K-mxfp4.gguf")
	if err := w.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestMXFP4Weights: MXFP4 weights run on the HTP from their repacked
// layout and give the CPU's ggml numerics (vec_dot_mxfp4_q8_0).
func TestMXFP4Weights(t *testing.T) {
	path := mxfp4Model(t)
	openAt := func(numerics engine.Numerics) *engine.Model {
		m, err := engine.Open(path, engine.Options{Numerics: numerics, Threads: 2})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { m.Close() })
		return m
	}
	want := decode(t, openAt(engine.GGML))
	m := openAt(engine.Exact)
	d := attach(t, m, Config{Sessions: 1})
	if n := len(d.weights); n != 36 { // MXFP4, and ffn_down (K=172) F32: all 36 on the HTP
		t.Errorf("%d weights on the HTP, want 36", n)
	}
	got := decode(t, m)
	for i := range want {
		for j := range want[i] {
			if math.Float32bits(got[i][j]) != math.Float32bits(want[i][j]) {
				t.Fatalf("row %d logit %d = %g, CPU ggml numerics %g", i, j, got[i][j], want[i][j])
			}
		}
	}
}

// TestLayerOpsOnGemma3: the HTP runs a Gemma 3 layout's layers (GEGLU,
// post norms, Q/K norms) with a quantized KV cache through a sliding
// window that the sequence crosses several times in a ring cache: every
// logit is finite, the top tokens are the CPU's in nearly every row, and
// the HTP counts its GEGLUs.
func TestLayerOpsOnGemma3(t *testing.T) {
	path := filepath.Join(t.TempDir(), "gemma3.gguf")
	cfg := synth.Config{Arch: "gemma3", NEmbd: 64, NLayer: 2, NHead: 4, NHeadKV: 2, NFF: 128, NVocab: 300, Type: ggml.Q8_0,
		Seed: 3, NCtx: 1024, SlidingWindow: 16, SWAPattern: 2, NormNoise: 0.2}
	if err := synth.Generate(cfg, path); err != nil {
		t.Fatal(err)
	}
	var ids []int32
	for i := range 600 {
		ids = append(ids, int32(3+(i*37)%290))
	}
	run := func(opts engine.Options, layer bool) [][]float32 {
		m, err := engine.Open(path, opts)
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		var d *Device
		if layer {
			d = attach(t, m, Config{Sessions: 2, Layer: true})
		}
		var rows [][]float32
		s := m.NewSession(1024)
		for lo := 0; lo < len(ids); lo += 200 {
			if err := s.Decode(ids[lo:lo+200], nil, func(_ int, l []float32) error {
				rows = append(rows, append([]float32(nil), l...))
				return nil
			}); err != nil {
				t.Fatal(err)
			}
		}
		if d != nil {
			if n := counts(d.Sessions()[0])["GEGLU"]; n != int64(len(ids)) {
				t.Errorf("HTP0 ran %d GEGLUs, want one per row of layer 0 (%d)", n, len(ids))
			}
		}
		return rows
	}
	ref := run(engine.Options{Numerics: engine.Exact, Threads: 2}, false)
	got := run(engine.Options{Numerics: engine.Exact, Threads: 2, KVCache: engine.KVCache{Key: engine.KVQ8_0, Value: engine.KVQ8_0}}, true)
	moved := 0
	for i := range ref {
		for _, v := range got[i] {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				t.Fatalf("row %d: logit %v", i, v)
			}
		}
		if argmax(got[i]) != argmax(ref[i]) {
			moved++
		}
	}
	if moved > len(ref)/20 {
		t.Errorf("top token moved in %d of %d rows, want at most 5 %%", moved, len(ref))
	}
}
