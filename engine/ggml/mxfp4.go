package ggml

import "math"

// MXFP4 (OCP microscaling FP4, ggml's block_mxfp4): 32 E2M1 values and one
// shared E8M0 exponent, 17 bytes: e, then qs[16] whose low nibbles are
// elements 0..15 and high nibbles elements 16..31 (as Q4_0).
//
// ggml stores the E2M1 codes as doubled integers (kvalues_mxfp4) and halves
// the scale instead (ggml_e8m0_to_fp32_half), so every product is an exact
// small integer times a power of two.

// kvaluesMXFP4 is ggml's kvalues_mxfp4: 2×E2M1(code). Codes 8..15 are the
// negatives of 0..7 (8 is -0).
var kvaluesMXFP4 = [16]int8{0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12}

// E8M0ToF32Half is ggml_e8m0_to_fp32_half: 2^(e-128), i.e. half the E8M0
// scale 2^(e-127). e = 0 and 1 are the subnormals 2^-128 and 2^-127; 255 is
// 2^127 (ggml does not treat it as NaN).
func E8M0ToF32Half(e uint8) float32 {
	if e < 2 {
		return math.Float32frombits(0x00200000 << e)
	}
	return math.Float32frombits(uint32(e-1) << 23)
}

// decodeMXFP4: y = float32(kvalues[q]) * d with d = E8M0ToF32Half(e)
// (exact: a small integer times a power of two).
func decodeMXFP4(b []byte, y []float32) {
	d := E8M0ToF32Half(b[0])
	qs := b[1:17]
	y = y[:32]
	for j := range 16 {
		y[j] = float32(kvaluesMXFP4[qs[j]&0xF]) * d
		y[j+16] = float32(kvaluesMXFP4[qs[j]>>4]) * d
	}
}

// quantizeMXFP4 is quantize_row_mxfp4_ref: e = floor(log2(amax)) - 2 + 127
// (0 for an all-zero block), then every value takes the code whose
// kvalues·d is nearest (the first on a tie).
func quantizeMXFP4(x []float32, y []byte) {
	var amax float32
	for _, v := range x[:32] {
		amax = max(amax, float32(math.Abs(float64(v))))
	}
	var e uint8
	if amax > 0 {
		l := math.Floor(float64(float32(math.Log2(float64(amax)))))
		e = uint8(int(l) - 2 + 127)
	}
	d := E8M0ToF32Half(e)
	y[0] = e
	best := func(v float32) byte {
		bi, berr := 0, float32(math.Abs(float64(float32(kvaluesMXFP4[0])*d-v)))
		for i := 1; i < 16; i++ {
			if err := float32(math.Abs(float64(float32(kvaluesMXFP4[i])*d - v))); err < berr {
				bi, berr = i, err
			}
		}
		return byte(bi)
	}
	for j := range 16 {
		y[1+j] = best(x[j]) | best(x[j+16])<<4
	}
}

// ggml_vec_dot_mxfp4_q8_0 (the generic kernel): per block
// d = f16(dy)·E8M0ToF32Half(e), sumf += d·(sumi1+sumi2).
func vecDotMXFP4(w, xq []byte, n int) float32 {
	var sumf float32
	for ib := 0; ib < n/32; ib++ {
		x := w[17*ib : 17*ib+17 : 17*ib+17]
		y := xq[34*ib : 34*ib+34 : 34*ib+34]
		d := float32(f16At(y, 0) * E8M0ToF32Half(x[0]))
		var sumi1, sumi2 int32
		for j := range 16 {
			sumi1 += int32(int8(y[2+j])) * int32(kvaluesMXFP4[x[1+j]&0xF])
			sumi2 += int32(int8(y[18+j])) * int32(kvaluesMXFP4[x[1+j]>>4])
		}
		sumf += float32(d * float32(sumi1+sumi2))
	}
	return sumf
}
