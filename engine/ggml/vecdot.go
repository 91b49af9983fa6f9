package ggml

import (
	"encoding/binary"
	"fmt"
	"math"
)

// ggml numerics: llama.cpp's CPU backend quantizes the activations of a
// matrix product to the weight type's vec_dot_type and computes each output
// with integer block sums (ggml-cpu/quants.c *_generic kernels).

// VecDotType is the activation type ggml pairs with weight type t
// (type_traits_cpu[t].vec_dot_type); t itself for unsupported types.
func VecDotType(t Type) Type {
	switch t {
	case Q4_0, Q5_0, Q8_0, MXFP4:
		return Q8_0
	case Q4_1, Q5_1:
		return Q8_1
	case Q4_K, Q5_K, Q6_K, Q8_K:
		return Q8_K
	}
	return t
}

// quantizeActivations converts x to VecDotType(t) as llama.cpp's x86 CPU
// backend does (the from_float of that type). For Q8_0/Q8_1 that is the
// AVX/AVX2 quantize_row_q8_0/q8_1 (d = amax/127, q = round-half-even(x*127/amax)),
// which is what produced the bundled llama.cpp goldens; it can differ from the
// scalar _ref quantizer (roundf of x*(1/d)) in the last bit of a tie.
func quantizeActivations(t Type, x []float32, dst []byte) error {
	vt := VecDotType(t)
	var enc rowEncoder
	switch vt {
	case F32:
		enc = encodeF32
	case F16:
		enc = encodeF16
	case BF16:
		enc = encodeBF16
	case Q8_0:
		enc = perBlock(32, 34, quantizeQ8_0X86)
	case Q8_1:
		enc = perBlock(32, 36, quantizeQ8_1X86)
	case Q8_K:
		enc = perBlock(256, qk8K, quantizeQ8_K)
	default:
		return fmt.Errorf("quantize activations: unsupported tensor type %s", t)
	}
	if !Supported(t) {
		return fmt.Errorf("quantize activations: unsupported tensor type %s", t)
	}
	if err := checkEncode(vt, x, dst); err != nil {
		return err
	}
	enc(x, dst)
	return nil
}

// q8X86 is the body of the AVX quantize_row_q8_0/q8_1: per-element
// round-half-even of x*(127/amax), with d = amax/127.
func q8X86(x []float32, qs []byte) (d float32, sum int) {
	amax := absMax(x)
	d = amax / 127
	var id float32
	if amax != 0 {
		id = 127 / amax
	}
	for j, v := range x[:32] {
		q := nearestInt(float32(v * id)) // half to even, like _mm256_round_ps
		q = max(-128, min(127, q))       // packs_epi16 saturation
		qs[j] = byte(int8(q))
		sum += q
	}
	return d, sum
}

func quantizeQ8_0X86(x []float32, y []byte) {
	d, _ := q8X86(x, y[2:34])
	putF16(y[0:], d)
}

func quantizeQ8_1X86(x []float32, y []byte) {
	d, sum := q8X86(x, y[4:36])
	putF16(y[0:], d)
	putF16(y[2:], float32(d*float32(sum)))
}

// vecDot is ggml's vec_dot of a weight row of type t with n activations
// already in VecDotType(t) format.
func vecDot(t Type, w []byte, xq []byte, n int) float32 {
	if err := checkRowFast(t, w, n); err != nil {
		panic("ggml.VecDot: weights: " + err.Error())
	}
	vt := VecDotType(t)
	if want, _ := RowBytes(vt, n); len(xq) != want {
		panic(fmt.Sprintf("ggml.VecDot: activations: %d bytes for %d %s values, want %d", len(xq), n, vt, want))
	}
	switch t {
	case F32:
		return vecDotF32(w, xq, n)
	case F16:
		return vecDotF16(w, xq, n)
	case BF16:
		return vecDotBF16(w, xq, n)
	case Q8_0:
		return vecDotQ8_0(w, xq, n)
	case Q4_0:
		return vecDotQ4_0(w, xq, n)
	case Q5_0:
		return vecDotQ5_0(w, xq, n)
	case Q4_1:
		return vecDotQ4_1(w, xq, n)
	case Q5_1:
		return vecDotQ5_1(w, xq, n)
	case Q4_K:
		return vecDotQ4_K(w, xq, n, false)
	case Q5_K:
		return vecDotQ4_K(w, xq, n, true)
	case Q6_K:
		return vecDotQ6_K(w, xq, n)
	case Q8_K:
		return vecDotQ8_K(w, xq, n)
	case MXFP4:
		return vecDotMXFP4(w, xq, n)
	}
	panic("ggml.VecDot: unsupported tensor type " + t.String())
}

// The float types: products rounded to float32 and summed over eight lanes
// in DotF32's order (ggml's SIMD kernels also keep f32 lane accumulators).

func vecDotF32(w, xq []byte, n int) float32 {
	var s [8]float32
	for j := 0; j < n; j++ {
		a := math.Float32frombits(binary.LittleEndian.Uint32(w[4*j:]))
		b := math.Float32frombits(binary.LittleEndian.Uint32(xq[4*j:]))
		s[j&7] += float32(a * b)
	}
	return reduce8(&s)
}

func vecDotF16(w, xq []byte, n int) float32 {
	var s [8]float32
	for j := 0; j < n; j++ {
		a := f16Table[binary.LittleEndian.Uint16(w[2*j:])]
		b := f16Table[binary.LittleEndian.Uint16(xq[2*j:])]
		s[j&7] += float32(a * b)
	}
	return reduce8(&s)
}

func vecDotBF16(w, xq []byte, n int) float32 {
	var s [8]float32
	for j := 0; j < n; j++ {
		a := BF16ToF32(binary.LittleEndian.Uint16(w[2*j:]))
		b := BF16ToF32(binary.LittleEndian.Uint16(xq[2*j:]))
		s[j&7] += float32(a * b)
	}
	return reduce8(&s)
}

// ggml_vec_dot_q8_0_q8_0: sumf += sumi * (dx*dy).
func vecDotQ8_0(w, xq []byte, n int) float32 {
	var sumf float32
	for ib := 0; ib < n/32; ib++ {
		x := w[34*ib : 34*ib+34 : 34*ib+34]
		y := xq[34*ib : 34*ib+34 : 34*ib+34]
		sumi := int32(0)
		for j := 2; j < 34; j++ {
			sumi += int32(int8(x[j])) * int32(int8(y[j]))
		}
		sumf += float32(float32(sumi) * float32(f16At(x, 0)*f16At(y, 0)))
	}
	return sumf
}

// ggml_vec_dot_q4_0_q8_0: sumf += sumi*dx*dy (left to right).
func vecDotQ4_0(w, xq []byte, n int) float32 {
	var sumf float32
	for ib := 0; ib < n/32; ib++ {
		x := w[18*ib : 18*ib+18 : 18*ib+18]
		y := xq[34*ib : 34*ib+34 : 34*ib+34]
		var sumi0, sumi1 int32
		for j := 0; j < 16; j++ {
			sumi0 += (int32(x[2+j]&0xF) - 8) * int32(int8(y[2+j]))
			sumi1 += (int32(x[2+j]>>4) - 8) * int32(int8(y[18+j]))
		}
		sumf += float32(float32(float32(sumi0+sumi1)*f16At(x, 0)) * f16At(y, 0))
	}
	return sumf
}

// ggml_vec_dot_q5_0_q8_0: sumf += (dx*dy) * sumi.
func vecDotQ5_0(w, xq []byte, n int) float32 {
	var sumf float32
	for ib := 0; ib < n/32; ib++ {
		x := w[22*ib : 22*ib+22 : 22*ib+22]
		y := xq[34*ib : 34*ib+34 : 34*ib+34]
		qh := binary.LittleEndian.Uint32(x[2:])
		var sumi0, sumi1 int32
		for j := 0; j < 16; j++ {
			x0 := int32(x[6+j]&0xF|byte(qh>>j&1)<<4) - 16
			x1 := int32(x[6+j]>>4|byte(qh>>(j+16)&1)<<4) - 16
			sumi0 += x0 * int32(int8(y[2+j]))
			sumi1 += x1 * int32(int8(y[18+j]))
		}
		sumf += float32(float32(f16At(x, 0)*f16At(y, 0)) * float32(sumi0+sumi1))
	}
	return sumf
}

// ggml_vec_dot_q4_1_q8_1: sumf += (dx*dy)*sumi + m*s.
func vecDotQ4_1(w, xq []byte, n int) float32 {
	var sumf float32
	for ib := 0; ib < n/32; ib++ {
		x := w[20*ib : 20*ib+20 : 20*ib+20]
		y := xq[36*ib : 36*ib+36 : 36*ib+36]
		var sumi0, sumi1 int32
		for j := 0; j < 16; j++ {
			sumi0 += int32(x[4+j]&0xF) * int32(int8(y[4+j]))
			sumi1 += int32(x[4+j]>>4) * int32(int8(y[20+j]))
		}
		a := float32(float32(f16At(x, 0)*f16At(y, 0)) * float32(sumi0+sumi1))
		b := float32(f16At(x, 2) * f16At(y, 2))
		sumf += a + b
	}
	return sumf
}

// ggml_vec_dot_q5_1_q8_1: sumf += (dx*dy)*sumi + m*s.
func vecDotQ5_1(w, xq []byte, n int) float32 {
	var sumf float32
	for ib := 0; ib < n/32; ib++ {
		x := w[24*ib : 24*ib+24 : 24*ib+24]
		y := xq[36*ib : 36*ib+36 : 36*ib+36]
		qh := binary.LittleEndian.Uint32(x[4:])
		var sumi0, sumi1 int32
		for j := 0; j < 16; j++ {
			x0 := int32(x[8+j]&0xF | byte(qh>>j&1)<<4)
			x1 := int32(x[8+j]>>4 | byte(qh>>(j+16)&1)<<4)
			sumi0 += x0 * int32(int8(y[4+j]))
			sumi1 += x1 * int32(int8(y[20+j]))
		}
		a := float32(float32(f16At(x, 0)*f16At(y, 0)) * float32(sumi0+sumi1))
		b := float32(f16At(x, 2) * f16At(y, 2))
		sumf += a + b
	}
	return sumf
}

// q8KBlock splits a Q8_K block into its f32 scale, quants and bsums.
func q8KBlock(y []byte) (d float32, qs []byte, bsum func(j int) int32) {
	d = math.Float32frombits(binary.LittleEndian.Uint32(y))
	return d, y[4:260], func(j int) int32 { return int32(int16(binary.LittleEndian.Uint16(y[260+2*j:]))) }
}

// ggml_vec_dot_q4_K_q8_K / q5_K_q8_K: eight int32 lane sums of scale*q*q8,
// sums[l] += (dx*dy)*aux32[l] per block, sumf -= (dmin*dy)*Σ bsums*mins, and
// the eight sums added to sumf at the end.
func vecDotQ4_K(w, xq []byte, n int, fiveBit bool) float32 {
	ts := 144
	if fiveBit {
		ts = 176
	}
	var sums [8]float32
	var sumf float32
	var a [256]int32
	for ib := 0; ib < n/256; ib++ {
		x := w[ts*ib : ts*ib+ts]
		dy, q8, bsum := q8KBlock(xq[qk8K*ib : qk8K*ib+qk8K])
		scales := x[4:16]
		q4 := x[16:144]
		var qh []byte
		if fiveBit {
			qh, q4 = x[16:48], x[48:176]
		}
		for c := 0; c < 4; c++ {
			for l := 0; l < 32; l++ {
				lo, hi := int32(q4[32*c+l]&0xF), int32(q4[32*c+l]>>4)
				if fiveBit {
					if qh[l]&(1<<(2*c)) != 0 {
						lo += 16
					}
					if qh[l]&(2<<(2*c)) != 0 {
						hi += 16
					}
				}
				a[64*c+l], a[64*c+32+l] = lo, hi
			}
		}
		sumi := int32(0)
		for j := 0; j < 16; j++ {
			_, m := scaleMinK4(j/2, scales)
			sumi += bsum(j) * int32(m)
		}
		var aux32 [8]int32
		for j := 0; j < 8; j++ {
			sc, _ := scaleMinK4(j, scales)
			for k := 32 * j; k < 32*j+32; k++ {
				aux32[k&7] += int32(sc) * (int32(int8(q8[k])) * a[k])
			}
		}
		d := float32(f16At(x, 0) * dy)
		for l := range sums {
			sums[l] += float32(d * float32(aux32[l]))
		}
		dmin := float32(f16At(x, 2) * dy)
		sumf -= float32(dmin * float32(sumi))
	}
	for l := range sums {
		sumf += sums[l]
	}
	return sumf
}

// ggml_vec_dot_q6_K_q8_K: as Q4_K with signed 8-bit scales per 16 and no mins.
func vecDotQ6_K(w, xq []byte, n int) float32 {
	var sums [8]float32
	var a [256]int32
	for ib := 0; ib < n/256; ib++ {
		x := w[210*ib : 210*ib+210]
		dy, q8, _ := q8KBlock(xq[qk8K*ib : qk8K*ib+qk8K])
		for h := 0; h < 2; h++ {
			ql, qh := x[64*h:64*h+64], x[128+32*h:128+32*h+32]
			ah := a[128*h : 128*h+128]
			for l := 0; l < 32; l++ {
				ah[l] = int32(ql[l]&0xF|(qh[l]>>0&3)<<4) - 32
				ah[l+32] = int32(ql[l+32]&0xF|(qh[l]>>2&3)<<4) - 32
				ah[l+64] = int32(ql[l]>>4|(qh[l]>>4&3)<<4) - 32
				ah[l+96] = int32(ql[l+32]>>4|(qh[l]>>6&3)<<4) - 32
			}
		}
		var aux32 [8]int32
		for j := 0; j < 16; j++ {
			sc := int32(int8(x[192+j]))
			for k := 16 * j; k < 16*j+16; k++ {
				aux32[k&7] += sc * (int32(int8(q8[k])) * a[k])
			}
		}
		d := float32(f16At(x, 208) * dy)
		for l := range sums {
			sums[l] += float32(d * float32(aux32[l]))
		}
	}
	var sumf float32
	for l := range sums {
		sumf += sums[l]
	}
	return sumf
}

// Q8_K·Q8_K (not a weight format in practice; ggml has no CPU vec_dot for it):
// per block sumf += (dx*dy) * Σ qx*qy.
func vecDotQ8_K(w, xq []byte, n int) float32 {
	var sumf float32
	for ib := 0; ib < n/256; ib++ {
		dx, qx, _ := q8KBlock(w[qk8K*ib : qk8K*ib+qk8K])
		dy, qy, _ := q8KBlock(xq[qk8K*ib : qk8K*ib+qk8K])
		sumi := int32(0)
		for j := range 256 {
			sumi += int32(int8(qx[j])) * int32(int8(qy[j]))
		}
		sumf += float32(float32(dx*dy) * float32(sumi))
	}
	return sumf
}
