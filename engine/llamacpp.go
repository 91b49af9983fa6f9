package engine

import (
	"encoding/binary"
	"math"
	"math/big"

	"github.com/evalrun/evalrun/engine/ggml"
)

// The float kernels of llama.cpp's CPU backend as built for an x86-64 AVX512
// machine (the build that made our goldens): lane structure, FMA and
// reduction order are reproduced element for element, so that values match
// bit for bit and activation quantization rounds the same way. Sources:
// ggml-cpu vec.cpp/vec.h (ggml_vec_dot_f32/_f16, ggml_v_expf, soft_max,
// swiglu), quants.c (AVX vec_dot_q8_0/q4_0, hsum_float_8) and
// llamafile/sgemm.cpp (tinyBLAS, used for batches of >= 2 rows).

// fma32 is a float32 fused multiply-add (one rounding), as vfmadd*ps.
func fma32(a, b, c float32) float32 {
	r := math.FMA(float64(a), float64(b), float64(c))
	// Rounding the float64 result again to float32 is only wrong when it
	// landed exactly halfway between two float32 values: redo those exactly.
	if math.Float64bits(r)&(1<<29-1) == 1<<28 {
		x := new(big.Float).SetPrec(256).SetFloat64(float64(a))
		x.Mul(x, new(big.Float).SetFloat64(float64(b)))
		x.Add(x, new(big.Float).SetFloat64(float64(c)))
		f, _ := x.Float32()
		return f
	}
	return float32(r)
}

// reduce16 is _mm512_reduce_add_ps: halves folded 8, 4, 2, 1.
func reduce16(a *[16]float32) float32 {
	var h [8]float32
	for i := range h {
		h[i] = a[i+8] + a[i]
	}
	var q [4]float32
	for i := range q {
		q[i] = h[i+4] + h[i]
	}
	return (q[0] + q[2]) + (q[1] + q[3])
}

// hsum8 is hsum_float_8 (and tinyBLAS_Q0's hsum) of a __m256.
func hsum8(a *[8]float32) float32 {
	var q [4]float32
	for i := range q {
		q[i] = a[i+4] + a[i]
	}
	return (q[0] + q[2]) + (q[1] + q[3])
}

// vecDotF32AVX512 is ggml_vec_dot_f32 (f16 false) or ggml_vec_dot_f16 on
// converted values (f16 true): four 16-lane FMA accumulators over steps of
// 64, folded; the leftovers are added in float with FMA (f32) or in double.
func vecDotF32AVX512(a, b []float32, f16 bool) float32 {
	n := len(a)
	np := n &^ 63
	var sum [4][16]float32
	for i := 0; i < np; i += 64 {
		for j := range 4 {
			aj, bj, sj := a[i+16*j:i+16*j+16], b[i+16*j:i+16*j+16], &sum[j]
			for l := range 16 {
				sj[l] = fma32(aj[l], bj[l], sj[l])
			}
		}
	}
	for l := range 16 {
		sum[0][l] += sum[2][l]
		sum[1][l] += sum[3][l]
	}
	for l := range 16 {
		sum[0][l] += sum[1][l]
	}
	s := reduce16(&sum[0])
	if f16 {
		d := float64(s)
		for i := np; i < n; i++ {
			d += float64(a[i] * b[i])
		}
		return float32(d)
	}
	for i := np; i < n; i++ {
		s = fma32(a[i], b[i], s)
	}
	return s
}

// tinyBLASDot is one output element of llamafile's tinyBLAS<16, __m512>
// (F32 and F16): one 16-lane FMA accumulator over k, the k%16 tail into
// lanes 0.., then _mm512_reduce_add_ps.
func tinyBLASDot(a, b []float32) float32 {
	var acc [16]float32
	n := len(a)
	full := n &^ 15
	for l := 0; l < full; l += 16 {
		al, bl := a[l:l+16], b[l:l+16]
		for i := range 16 {
			acc[i] = fma32(al[i], bl[i], acc[i])
		}
	}
	for i := 0; i < n-full; i++ {
		acc[i] = fma32(a[full+i], b[full+i], acc[i])
	}
	return reduce16(&acc)
}

func f16At(b []byte, i int) float32 { return ggml.F16ToF32(binary.LittleEndian.Uint16(b[2*i:])) }

// vecDotQ8_0AVX is the AVX2/AVX512 ggml_vec_dot_q8_0_q8_0 and tinyBLAS_Q0
// (they agree): per block, eight int32 lanes of four byte products each,
// acc = fma(dx*dy, lane, acc), then hsum_float_8.
func vecDotQ8_0AVX(w, xq []byte, n int) float32 {
	var acc [8]float32
	for ib := 0; ib < n/32; ib++ {
		x, y := w[34*ib:34*ib+34], xq[34*ib:34*ib+34]
		d := f16At(x, 0) * f16At(y, 0)
		for l := range 8 {
			s := int32(0)
			for j := 2 + 4*l; j < 6+4*l; j++ {
				s += int32(int8(x[j])) * int32(int8(y[j]))
			}
			acc[l] = fma32(d, float32(s), acc[l])
		}
	}
	return hsum8(&acc)
}

// vecDotQ4_0AVX is the AVX ggml_vec_dot_q4_0_q8_0 / tinyBLAS_Q0 for Q4_0:
// as Q8_0 with the nibbles unpacked (low nibbles = values 0..15) minus 8.
func vecDotQ4_0AVX(w, xq []byte, n int) float32 {
	var acc [8]float32
	var q [32]int32
	for ib := 0; ib < n/32; ib++ {
		x, y := w[18*ib:18*ib+18], xq[34*ib:34*ib+34]
		for j := range 16 {
			q[j] = int32(x[2+j]&0xF) - 8
			q[j+16] = int32(x[2+j]>>4) - 8
		}
		d := f16At(x, 0) * f16At(y, 0)
		for l := range 8 {
			s := int32(0)
			for j := 4 * l; j < 4*l+4; j++ {
				s += q[j] * int32(int8(y[2+j]))
			}
			acc[l] = fma32(d, float32(s), acc[l])
		}
	}
	return hsum8(&acc)
}

// ggml_v_expf (AVX512 build), one lane: exp via 2^n·p(b) with FMA steps;
// flushes to 0 / +Inf when |n| > 192.
func vExpf(x float32) float32 {
	const r = 0x1.8p23
	z := fma32(x, 0x1.715476p+0, r)
	n := z - r
	b := fma32(-n, 0x1.7f7d1cp-20, fma32(-n, 0x1.62e4p-1, x))
	if math.Abs(float64(n)) > 192 {
		if n <= 0 {
			return 0
		}
		return float32(math.Inf(1))
	}
	u := b * b
	j := fma32(fma32(fma32(0x1.0e4020p-7, b, 0x1.573e2ep-5), u, fma32(0x1.555e66p-3, b, 0x1.fffdb6p-2)), u, fma32(0x1.ffffecp-1, b, 1))
	return float32(math.Ldexp(float64(j), int(n))) // _mm512_scalef_ps
}

// expf is the C library's expf (correctly rounded for practical purposes).
func expf(x float32) float32 { return float32(math.Exp(float64(x))) }
