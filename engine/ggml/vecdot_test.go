package ggml

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"
)

func TestVecDotType(t *testing.T) {
	want := map[Type]Type{
		F32: F32, F16: F16, BF16: BF16,
		Q4_0: Q8_0, Q5_0: Q8_0, Q8_0: Q8_0, MXFP4: Q8_0,
		Q4_1: Q8_1, Q5_1: Q8_1,
		Q4_K: Q8_K, Q5_K: Q8_K, Q6_K: Q8_K,
	}
	for w, v := range want {
		if got := VecDotType(w); got != v {
			t.Errorf("VecDotType(%s) = %s, want %s", w, got, v)
		}
	}
}

func TestVecDotQ8_0Hand(t *testing.T) {
	w := make([]byte, 68)
	x := make([]byte, 68)
	put16(w, 0, h0_5)
	put16(x, 0, h0_25)
	put16(w, 34, h1)
	put16(x, 34, h2)
	for j := 0; j < 32; j++ {
		w[2+j] = byte(int8(j - 16)) // Σ (j-16)*2 = -32, scaled by 0.5*0.25
		x[2+j] = 2
		w[36+j] = 1 // Σ 1*(-1) = -32, scaled by 1*2
		x[36+j] = 0xFF
	}
	if got := VecDot(Q8_0, w, x, 64); got != -4-64 {
		t.Errorf("VecDot(Q8_0) = %g, want -68", got)
	}
}

func TestVecDotQ4_0Hand(t *testing.T) {
	w := make([]byte, 18)
	put16(w, 0, h0_5)
	w[2] = 0x0F // elements 0 (7) and 16 (-8)
	w[3] = 0x81 // elements 1 (-7) and 17 (0)
	for j := 4; j < 18; j++ {
		w[j] = 0x88 // zeros
	}
	x := make([]byte, 34)
	put16(x, 0, h0_25)
	x[2], x[3], x[18], x[19] = 3, 5, 0xFE, 100 // 7*3 + -7*5 + -8*-2 + 0*100 = 2
	if got := VecDot(Q4_0, w, x, 32); got != 2*0.5*0.25 {
		t.Errorf("VecDot(Q4_0) = %g, want 0.25", got)
	}
}

func TestVecDotQ4_1Hand(t *testing.T) {
	w := make([]byte, 20)
	put16(w, 0, h0_5) // d
	put16(w, 2, hm1)  // m
	w[4] = 0x3A       // elements 0 (10) and 16 (3)
	x := make([]byte, 36)
	put16(x, 0, h1)
	x[4], x[20], x[5] = 2, 0xFF, 7 // Σ q*qy = 10*2 + 3*-1 + 0*7 = 17; Σ qy = 8
	put16(x, 2, F32ToF16(8))       // s = d*Σqy
	// (d_w*d_x)*17 + m*s = 0.5*17 - 8
	if got := VecDot(Q4_1, w, x, 32); got != 0.5 {
		t.Errorf("VecDot(Q4_1) = %g, want 0.5", got)
	}
}

// TestVecDotKQuantsHand uses the hand-built K-quant blocks of the
// dequantization tests against all-ones Q8_K activations (d = 1, bsums 16):
// the result must be the plain sum of the dequantized block.
func TestVecDotKQuantsHand(t *testing.T) {
	ones := make([]byte, 292)
	binary.LittleEndian.PutUint32(ones, math.Float32bits(1))
	for j := 0; j < 256; j++ {
		ones[4+j] = 1
	}
	for j := 0; j < 16; j++ {
		put16(ones, 260+2*j, 16)
	}
	q4k := make([]byte, 144)
	put16(q4k, 0, h1)
	put16(q4k, 2, h0_5)
	copy(q4k[4:16], k4Scales())
	q4k[16], q4k[16+64], q4k[16+127] = 0x79, 0x04, 0xF0
	// Σ sc*q - 16*dmin*Σm = 5*9+2*7+58*4+17*15 - 16*0.5*... (per 32 elements: 32*0.5*m)
	want := float32(5*9+2*7+58*4+17*15) - 16*float32(3+1+39+1+50)
	if got := VecDot(Q4_K, q4k, ones, 256); got != want {
		t.Errorf("VecDot(Q4_K) = %g, want %g", got, want)
	}

	q6k := make([]byte, 210)
	put16(q6k, 208, h0_5)
	copy(q6k[192:], []byte{0xFD, 0, 4, 0, 10, 0, 0xFF, 0, 0, 0, 0, 0, 0, 7})
	q6k[0], q6k[32], q6k[128] = 0x21, 0x05, 0xE4
	var sum float64
	for _, v := range dequant(t, Q6_K, q6k) {
		sum += float64(v)
	}
	if got := VecDot(Q6_K, q6k, ones, 256); float64(got) != sum {
		t.Errorf("VecDot(Q6_K) = %g, want %g", got, sum)
	}
}

// dequantActivations expands VecDotType blocks to float64 (Q8_1 as d*q).
func dequantActivations(t *testing.T, vt Type, xq []byte, n int) []float64 {
	t.Helper()
	out := make([]float64, n)
	if vt == Q8_1 {
		for ib := 0; ib < n/32; ib++ {
			d := F16ToF32(binary.LittleEndian.Uint16(xq[36*ib:]))
			for j := 0; j < 32; j++ {
				out[32*ib+j] = float64(d) * float64(int8(xq[36*ib+4+j]))
			}
		}
		return out
	}
	y := make([]float32, n)
	if err := Dequantize(vt, xq, y); err != nil {
		t.Fatal(err)
	}
	for i, v := range y {
		out[i] = float64(v)
	}
	return out
}

// TestVecDotMatchesDequantized cross-checks every weight type on random data:
// ggml's integer-block formula must agree with the float64 dot product of the
// dequantized weights and activations up to float32 rounding.
func TestVecDotMatchesDequantized(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, typ := range []Type{F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K, MXFP4} {
		for _, n := range []int{256, 4096} {
			w := randomRow(t, rng, typ, n)
			x := randVec(rng, n)
			xq := activations(t, typ, x)
			wd := make([]float32, n)
			if err := Dequantize(typ, w, wd); err != nil {
				t.Fatal(err)
			}
			xd := dequantActivations(t, VecDotType(typ), xq, n)
			var want, mag float64
			for i := range wd {
				want += float64(wd[i]) * xd[i]
				mag += math.Abs(float64(wd[i]) * xd[i])
			}
			got := VecDot(typ, w, xq, n)
			// Q8_1's s field is d*Σq rounded to f16: allow that on top of f32 rounding.
			tol := 1e-5 * mag
			if VecDotType(typ) == Q8_1 {
				tol = 2e-3 * mag
			}
			if math.Abs(float64(got)-want) > tol {
				t.Errorf("%s n=%d: VecDot = %g, dequantized dot = %g (tol %g)", typ, n, got, want, tol)
			}
		}
	}
}

func TestVecDotQ8_1UsesSField(t *testing.T) {
	// The m*s term must come from the stored s (as ggml does), not from Σq.
	w := make([]byte, 20)
	put16(w, 0, h1)
	put16(w, 2, h1) // m = 1, all quants 0
	x := make([]byte, 36)
	put16(x, 0, h1)
	put16(x, 2, h2) // s = 2 although all qs are 0
	if got := VecDot(Q4_1, w, x, 32); got != 2 {
		t.Errorf("VecDot(Q4_1) with s=2 = %g, want 2", got)
	}
}
