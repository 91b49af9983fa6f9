package ggml

import (
	"math"
	"math/big"

	"github.com/evalrun/evalrun/engine/cmath"
)

// llama.cpp's float kernels as its x86-64 AVX-512 CPU backend computes them
// (the build that made the goldens): lane structure, fused multiply-adds and
// reduction order are reproduced element for element, so that values match
// bit for bit. Sources: ggml-cpu vec.cpp/vec.h (ggml_vec_dot_f32/_f16,
// ggml_v_expf, soft_max, swiglu), quants.c (AVX vec_dot_q8_0/q4_0,
// hsum_float_8) and llamafile/sgemm.cpp (tinyBLAS, used for batches of >= 2
// rows). These generic versions are the oracle of the SIMD kernels.

// FMA32 is a float32 fused multiply-add (one rounding), as vfmadd*ps.
func FMA32(a, b, c float32) float32 {
	r := math.FMA(float64(a), float64(b), float64(c))
	// Rounding the float64 result again to float32 is only wrong when it
	// landed exactly halfway between two float32 values (rounding is
	// monotonic and the halfway points are float64 values): for a normal
	// result, 29 low bits of 1 followed by zeros; for a subnormal one, an
	// odd multiple of 2^-150. Redo those exactly: a·b+c spans at most 427
	// bits (256 would round some products near the float32 maximum).
	bits := math.Float64bits(r)
	if bits&(1<<29-1) == 1<<28 || (bits&^(1<<63)-1 < subnormal32Bits-1 && oddMultiple(math.Abs(r)*0x1p150)) {
		x := new(big.Float).SetPrec(512).SetFloat64(float64(a))
		x.Mul(x, new(big.Float).SetFloat64(float64(b)))
		x.Add(x, new(big.Float).SetFloat64(float64(c)))
		f, _ := x.Float32()
		return f
	}
	return float32(r)
}

// subnormal32Bits is the float64 bits of 2^-126, the smallest normal float32.
const subnormal32Bits = 0x3810000000000000

// oddMultiple reports whether t (< 2^24) is an odd integer.
func oddMultiple(t float64) bool { return t == math.Trunc(t) && uint64(t)&1 == 1 }

// Reduce16 is _mm512_reduce_add_ps as GCC emits it: halves folded 8, 4,
// then (q0+q2)+(q1+q3).
func Reduce16(a *[16]float32) float32 {
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

// VecDotF32 is ggml_vec_dot_f32: four 16-lane FMA accumulators over steps
// of 64 (element j to accumulator j/16%4, lane j%16), folded (x0+x2)+(x1+x3),
// reduced by Reduce16, then the n%64 leftovers added in order the way GCC
// compiles `sumf += x[i]*y[i]` for AVX-512 (the zen4/skylakex/icelake
// builds, objdump of ggml_vec_dot_f32): runs of 16, then one run of 8, have
// their products rounded first (vmulps) and added one by one; the last < 8
// are fused multiply-adds.
func VecDotF32(a, b []float32) float32 { return vecDotF32Lanes(a, b, false) }

// VecDotF16 is ggml_vec_dot_f16 on values already converted from binary16:
// as VecDotF32, but the leftovers are summed in double.
func VecDotF16(a, b []float32) float32 { return vecDotF32Lanes(a, b, true) }

func vecDotF32Lanes(a, b []float32, f16 bool) float32 {
	n := len(a)
	np := n &^ 63
	var sum [4][16]float32
	for i := 0; i < np; i += 64 {
		for j := range 4 {
			aj, bj, sj := a[i+16*j:i+16*j+16], b[i+16*j:i+16*j+16], &sum[j]
			for l := range 16 {
				sj[l] = FMA32(aj[l], bj[l], sj[l])
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
	return vecDotLeftovers(a[np:n], b[np:n], Reduce16(&sum[0]), f16)
}

// vecDotLeftovers adds the n%64 leftovers a·b to s, the reduced body of
// VecDotF32 (f16 false) or VecDotF16.
func vecDotLeftovers(a, b []float32, s float32, f16 bool) float32 {
	if f16 {
		d := float64(s)
		for i := range a {
			d += float64(a[i] * b[i])
		}
		return float32(d)
	}
	return leftoversF32(a, b, s)
}

// leftoversF32 adds Σ a[i]*b[i] to s as GCC's AVX-512 code for the scalar
// leftover loop of ggml_vec_dot_f32 does (see VecDotF32).
func leftoversF32(a, b []float32, s float32) float32 {
	i, n := 0, len(a)
	for ; n-i >= 16; i += 16 {
		for j := i; j < i+16; j++ {
			s += float32(a[j] * b[j])
		}
	}
	if n-i >= 8 {
		for j := i; j < i+8; j++ {
			s += float32(a[j] * b[j])
		}
		i += 8
	}
	for ; i < n; i++ {
		s = FMA32(a[i], b[i], s)
	}
	return s
}

// TinyBLASDot is one output element of llamafile's tinyBLAS<16, __m512>
// (F32 and F16): one 16-lane FMA accumulator over k, the k%16 tail into
// lanes 0.., then Reduce16.
func TinyBLASDot(a, b []float32) float32 {
	var acc [16]float32
	n := len(a)
	full := n &^ 15
	for l := 0; l < full; l += 16 {
		al, bl := a[l:l+16], b[l:l+16]
		for i := range 16 {
			acc[i] = FMA32(al[i], bl[i], acc[i])
		}
	}
	for i := 0; i < n-full; i++ {
		acc[i] = FMA32(a[full+i], b[full+i], acc[i])
	}
	return Reduce16(&acc)
}

// VecDotQ8_0AVX is the AVX2/AVX512 ggml_vec_dot_q8_0_q8_0 and tinyBLAS_Q0
// (they agree): per block, eight int32 lanes of four byte products each,
// acc = fma(dx*dy, lane, acc), then hsum_float_8.
func VecDotQ8_0AVX(w, xq []byte, n int) float32 {
	var acc [8]float32
	for ib := 0; ib < n/32; ib++ {
		x, y := w[34*ib:34*ib+34], xq[34*ib:34*ib+34]
		d := f16At(x, 0) * f16At(y, 0)
		for l := range 8 {
			s := int32(0)
			for j := 2 + 4*l; j < 6+4*l; j++ {
				s += int32(int8(x[j])) * int32(int8(y[j]))
			}
			acc[l] = FMA32(d, float32(s), acc[l])
		}
	}
	return hsum8(&acc)
}

// VecDotQ4_0AVX is the AVX ggml_vec_dot_q4_0_q8_0 / tinyBLAS_Q0 for Q4_0:
// as Q8_0 with the nibbles unpacked (low nibbles = values 0..15) minus 8.
func VecDotQ4_0AVX(w, xq []byte, n int) float32 {
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
			acc[l] = FMA32(d, float32(s), acc[l])
		}
	}
	return hsum8(&acc)
}

// VecDotQ4_0Repacked is what llama.cpp computes for a Q4_0 weight it has
// repacked to q4_0_8x8 (x86 with AVX2, weights of a multiple of 8 rows:
// ggml_repack_get_optimal_repack_type): its gemv and gemm keep one output
// per lane, with the block's whole integer sum, and fold the blocks in
// order: acc = fma(float(Σ q·q8), dx*dy, acc) (arch/x86/repack.cpp
// gemv/gemm_q4_b32_8x8_q8_0_lut_avx).
func VecDotQ4_0Repacked(w, xq []byte, n int) float32 {
	var acc float32
	for ib := 0; ib < n/32; ib++ {
		x, y := w[18*ib:18*ib+18], xq[34*ib:34*ib+34]
		s := int32(0)
		for j := range 16 {
			s += (int32(x[2+j]&0xF) - 8) * int32(int8(y[2+j]))
			s += (int32(x[2+j]>>4) - 8) * int32(int8(y[18+j]))
		}
		acc = FMA32(float32(s), f16At(x, 0)*f16At(y, 0), acc)
	}
	return acc
}

// VExpf is ggml_v_expf (AVX-512 build), one lane: exp via 2^n·p(b) with FMA
// steps; flushes to 0 / +Inf when |n| > 192.
func VExpf(x float32) float32 {
	const r = 0x1.8p23
	z := FMA32(x, 0x1.715476p+0, r)
	n := z - r
	b := FMA32(-n, 0x1.7f7d1cp-20, FMA32(-n, 0x1.62e4p-1, x))
	if math.Abs(float64(n)) > 192 {
		if n <= 0 {
			return 0
		}
		return float32(math.Inf(1))
	}
	u := b * b
	j := FMA32(FMA32(FMA32(0x1.0e4020p-7, b, 0x1.573e2ep-5), u, FMA32(0x1.555e66p-3, b, 0x1.fffdb6p-2)), u, FMA32(0x1.ffffecp-1, b, 1))
	return float32(math.Ldexp(float64(j), int(n))) // _mm512_scalef_ps
}

// Expf is the C library's expf, which llama.cpp calls on the elements after
// the last whole 16-lane block (it is not always correctly rounded).
func Expf(x float32) float32 { return cmath.Expf(x) }

// softmax turns scores into softmax(scale·scores) in place, as ggml's
// soft_max with a causal mask on an AVX-512 build: max subtraction,
// ggml_v_expf over 16-lane blocks (masked positions contribute 0), each
// block summed by Reduce16 into a double, then one float multiplication by
// 1/sum.
func softmax(p []float32, scale float32) {
	maxv := float32(math.Inf(-1))
	for i, v := range p {
		v *= scale
		p[i] = v
		if v > maxv {
			maxv = v
		}
	}
	var sum float64
	var block [16]float32
	for i := 0; i < len(p); i += 16 {
		block = [16]float32{}
		for l := 0; l < 16 && i+l < len(p); l++ {
			e := VExpf(p[i+l] - maxv)
			p[i+l] = e
			block[l] = e
		}
		sum += float64(Reduce16(&block))
	}
	inv := float32(1.0 / sum)
	for i := range p {
		p[i] *= inv
	}
}

// rope rotates the first nDims values of one head in place: adjacent pairs
// (x[i], x[i+1]) for llama, or halves (x[i/2], x[i/2+nDims/2]) for NeoX.
// ggml's rotate_pairs computes x0*cos - x1*sin and x0*sin + x1*cos, which
// GCC contracts into fma(x0, cos, -(x1*sin)) and fma(x0, sin, x1*cos)
// (checked against llama.cpp's ROPE nodes).
func rope(x, cs []float32, nDims int, neox bool) {
	RopePairs(x, cs, nDims, neox, func(x0, x1, c, s float32) (float32, float32) {
		return FMA32(x0, c, -float32(x1*s)), FMA32(x0, s, float32(x1*c))
	})
}

// RopePairs rotates the first nDims values of one head in place, pairing
// them as rope does, with rotate computing each pair from the pair and its
// (cos, sin): a device's own rounding of the rotation.
func RopePairs(x []float32, cs []float32, nDims int, neox bool, rotate func(x0, x1, c, s float32) (float32, float32)) {
	for i := 0; i < nDims; i += 2 {
		a, b := i, i+1
		if neox {
			a, b = i/2, i/2+nDims/2
		}
		x[a], x[b] = rotate(x[a], x[b], cs[i], cs[i+1])
	}
}

// swiglu writes silu(gate)·up to dst for one row, like ggml_vec_swiglu_f32
// (AVX-512): ggml_v_silu x/(1+v_expf(-x)) on 16-element blocks, the scalar
// x/(1+expf(-x)) on the rest.
func swiglu(dst, gate, up []float32) {
	n := len(gate)
	full := n &^ 15
	for i, g := range gate {
		var e float32
		if i < full {
			e = VExpf(0 - g)
		} else {
			e = Expf(-g)
		}
		silu := g / (1 + e)
		dst[i] = silu * up[i]
	}
}

// weightedColumns sets out[i] = Σ_j v[j*stride+i]·p[j] for i < len(out) in
// the lane order of a `lanes`-lane FMA dot product over j: 16 is tinyBLAS
// (TinyBLASDot), 64 is ggml_vec_dot_f32 over p zero-padded to a multiple of
// 64 (as llama.cpp's KV cells beyond the sequence hold probability 0).
func weightedColumns(v []float32, stride int, p []float32, lanes int, out []float32) {
	n := len(p)
	m := n
	if lanes == 64 {
		m = (n + 63) &^ 63
	}
	col := make([]float32, m)
	pp := make([]float32, m)
	copy(pp, p)
	for i := range out {
		for j := range n {
			col[j] = v[j*stride+i]
		}
		if lanes == 64 {
			out[i] = VecDotF32(col, pp)
		} else {
			out[i] = TinyBLASDot(col, pp)
		}
	}
}
