package ggml

import (
	"bytes"
	"encoding/binary"
	"math"
	"testing"
)

const modelDir = "../../models/"

// TestModelTensorsMatchF32 dequantizes real tensors of the bundled quantized
// models and compares them with the same tensors of the F32 model: F16 must be
// the RNE rounding, quantized blocks must lie within their quantization step,
// and re-quantizing the F32 weights with our reference quantizers must give the
// bytes llama-quantize wrote.
func TestModelTensorsMatchF32(t *testing.T) {
	ref := readTestModel(t, modelDir+"stories260K.gguf")
	files := []string{"stories260K-f16.gguf", "stories260K-q8_0.gguf", "stories260K-q4_0.gguf", "stories260K-q4_k_m.gguf"}
	for _, file := range files {
		model := readTestModel(t, modelDir+file)
		checked := 0
		for name, tq := range model {
			tf, ok := ref[name]
			if !ok || tf.typ != F32 {
				t.Fatalf("%s: %s missing from the F32 model", file, name)
			}
			n := len(tf.data) / 4
			f32 := make([]float32, n)
			if err := Dequantize(F32, tf.data, f32); err != nil {
				t.Fatal(err)
			}
			got := make([]float32, n)
			if err := Dequantize(tq.typ, tq.data, got); err != nil {
				t.Fatalf("%s: %s: %v", file, name, err)
			}
			checkWithinStep(t, file+": "+name, tq.typ, tq.data, f32, got)

			if _, ok := refQuantizers[tq.typ]; ok {
				requant := make([]byte, len(tq.data))
				if err := Quantize(tq.typ, f32, requant); err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(requant, tq.data) {
					t.Errorf("%s: %s: Quantize(%s) of the F32 weights differs from the file's bytes", file, name, tq.typ)
				}
			}
			checked++
		}
		t.Logf("%s: %d tensors checked", file, checked)
	}
}

// checkWithinStep asserts |got - want| <= the block's quantization step
// (half a step for the rounding types plus the f16 rounding of the scales).
func checkWithinStep(t *testing.T, what string, typ Type, data []byte, want, got []float32) {
	t.Helper()
	for i := range want {
		var bound float64
		switch typ {
		case F32:
			bound = 0
		case F16:
			bound = math.Max(math.Abs(float64(want[i]))*math.Ldexp(1, -11), math.Ldexp(1, -25)) // subnormals: half of 2^-24
		case Q8_0, Q4_0, Q5_0, Q4_1, Q5_1:
			ts := typ.TypeSize()
			d := math.Abs(float64(F16ToF32(binary.LittleEndian.Uint16(data[i/32*ts:]))))
			bound = d + 1e-7
		default:
			t.Fatalf("%s: no bound for %s", what, typ)
		}
		if e := math.Abs(float64(got[i] - want[i])); e > bound {
			t.Fatalf("%s: element %d: %s gives %g, F32 model has %g (|diff| %g > %g)", what, i, typ, got[i], want[i], e, bound)
		}
	}
}

// TestModelQ8_0TokenEmbd is the headline check of the task: the Q8_0
// token_embd.weight dequantized is within half a Q8_0 step (plus the f16
// rounding of d) of the F32 model's tensor.
func TestModelQ8_0TokenEmbd(t *testing.T) {
	f := readTestModel(t, modelDir+"stories260K.gguf")["token_embd.weight"]
	q := readTestModel(t, modelDir+"stories260K-q8_0.gguf")["token_embd.weight"]
	if q.typ != Q8_0 || len(q.dims) != 2 || q.dims[0] != 64 || q.dims[1] != 512 {
		t.Fatalf("unexpected token_embd.weight: %s %v", q.typ, q.dims)
	}
	want := make([]float32, 64*512)
	got := make([]float32, 64*512)
	if err := Dequantize(F32, f.data, want); err != nil {
		t.Fatal(err)
	}
	if err := Dequantize(Q8_0, q.data, got); err != nil {
		t.Fatal(err)
	}
	var maxRatio float64
	for ib := 0; ib < len(want)/32; ib++ {
		d := float64(F16ToF32(binary.LittleEndian.Uint16(q.data[34*ib:])))
		for j := 32 * ib; j < 32*ib+32; j++ {
			e := math.Abs(float64(got[j] - want[j]))
			// 127*d differs from amax by at most 127 half-ulps of f16(d).
			if bound := d/2 + 127*d*math.Ldexp(1, -11); e > bound {
				t.Fatalf("block %d element %d: %g vs %g, |diff| %g > %g", ib, j, got[j], want[j], e, bound)
			}
			if d > 0 {
				maxRatio = math.Max(maxRatio, e/d)
			}
		}
	}
	t.Logf("token_embd Q8_0 vs F32: max |diff| = %.4f steps", maxRatio)
}
