package ggml_test

import (
	"bytes"
	"encoding/binary"
	"math"
	"testing"

	"github.com/evalrun/evalrun/engine/ggml"
	"github.com/evalrun/evalrun/engine/gguf"
)

const modelDir = "../../models/"

func openModel(t *testing.T, name string) *gguf.File {
	t.Helper()
	f, err := gguf.Open(modelDir + name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func dequantTensor(t *testing.T, f *gguf.File, ti *gguf.TensorInfo) []float32 {
	t.Helper()
	y := make([]float32, ti.NElements())
	if err := ggml.Dequantize(ti.Type, f.TensorData(ti), y); err != nil {
		t.Fatalf("%s: %s: %v", f.Path, ti.Name, err)
	}
	return y
}

// TestModelTensorsMatchF32 dequantizes every tensor of the bundled quantized
// models and compares it with the same tensor of the F32 model: F16 must be
// the RNE rounding, quantized values must lie within one step of their block,
// and re-quantizing the F32 weights with our reference quantizers must give
// exactly the bytes llama-quantize wrote.
func TestModelTensorsMatchF32(t *testing.T) {
	ref := openModel(t, "stories260K.gguf")
	for _, file := range []string{"stories260K-f16.gguf", "stories260K-q8_0.gguf", "stories260K-q4_0.gguf", "stories260K-q4_k_m.gguf"} {
		model := openModel(t, file)
		requantized := 0
		for i := range model.Tensors {
			tq := &model.Tensors[i]
			tf, ok := ref.Tensor(tq.Name)
			if !ok || tf.Type != ggml.F32 {
				t.Fatalf("%s: %s missing from the F32 model", file, tq.Name)
			}
			f32 := dequantTensor(t, ref, tf)
			got := dequantTensor(t, model, tq)
			checkWithinStep(t, file+": "+tq.Name, tq.Type, model.TensorData(tq), f32, got)

			data := model.TensorData(tq)
			requant := make([]byte, len(data))
			if err := ggml.Quantize(tq.Type, f32, requant); err != nil {
				continue // no reference quantizer for this type
			}
			if !bytes.Equal(requant, data) {
				t.Errorf("%s: %s: Quantize(%s) of the F32 weights differs from the file's bytes", file, tq.Name, tq.Type)
			}
			requantized++
		}
		t.Logf("%s: %d tensors within one step, %d re-quantized byte for byte", file, len(model.Tensors), requantized)
	}
}

// checkWithinStep asserts |got - want| <= one quantization step of the block
// (the 0-types may clamp one extreme by a whole step) plus the f16 rounding.
func checkWithinStep(t *testing.T, what string, typ ggml.Type, data []byte, want, got []float32) {
	t.Helper()
	for i := range want {
		var bound float64
		switch typ {
		case ggml.F32:
			bound = 0
		case ggml.F16:
			bound = math.Max(math.Abs(float64(want[i]))*math.Ldexp(1, -11), math.Ldexp(1, -25)) // subnormals: half of 2^-24
		case ggml.Q8_0, ggml.Q4_0, ggml.Q5_0, ggml.Q4_1, ggml.Q5_1:
			d := math.Abs(float64(ggml.F16ToF32(binary.LittleEndian.Uint16(data[i/32*typ.TypeSize():]))))
			bound = d + 1e-7
		default:
			t.Fatalf("%s: no bound for %s", what, typ)
		}
		if e := math.Abs(float64(got[i] - want[i])); e > bound {
			t.Fatalf("%s: element %d: %s gives %g, F32 model has %g (|diff| %g > %g)", what, i, typ, got[i], want[i], e, bound)
		}
	}
}

// TestModelQ8_0TokenEmbd: the Q8_0 token_embd.weight dequantized is within
// half a Q8_0 step (plus the f16 rounding of d) of the F32 model's tensor.
func TestModelQ8_0TokenEmbd(t *testing.T) {
	ref, q8 := openModel(t, "stories260K.gguf"), openModel(t, "stories260K-q8_0.gguf")
	tf, _ := ref.Tensor("token_embd.weight")
	tq, ok := q8.Tensor("token_embd.weight")
	if !ok || tq.Type != ggml.Q8_0 || len(tq.Dims) != 2 || tq.Dims[0] != 64 || tq.Dims[1] != 512 {
		t.Fatalf("unexpected token_embd.weight: %+v", tq)
	}
	want, got := dequantTensor(t, ref, tf), dequantTensor(t, q8, tq)
	data := q8.TensorData(tq)
	var maxSteps float64
	for ib := 0; ib < len(want)/32; ib++ {
		d := float64(ggml.F16ToF32(binary.LittleEndian.Uint16(data[34*ib:])))
		for j := 32 * ib; j < 32*ib+32; j++ {
			e := math.Abs(float64(got[j] - want[j]))
			// 127*d differs from amax by at most 127 half-ulps of f16(d).
			if bound := d/2 + 127*d*math.Ldexp(1, -11); e > bound {
				t.Fatalf("block %d element %d: %g vs %g, |diff| %g > %g", ib, j, got[j], want[j], e, bound)
			}
			if d > 0 {
				maxSteps = math.Max(maxSteps, e/d)
			}
		}
	}
	t.Logf("token_embd Q8_0 vs F32: max |diff| = %.4f steps", maxSteps)
}
