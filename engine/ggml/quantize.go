package ggml

import (
	"encoding/binary"
	"fmt"
	"math"
)

// Quantize encodes src into dst as type t with ggml's reference weight
// quantizers (quantize_row_*_ref in ggml-quants.c): F32, F16, BF16, Q4_0,
// Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K (kquant.go), MXFP4, and the activation
// formats Q8_1 and Q8_K.
// len(dst) must be exactly RowBytes(t, len(src)).
func Quantize(t Type, src []float32, dst []byte) error {
	enc, ok := refQuantizers[t]
	if !ok {
		return fmt.Errorf("quantize: unsupported tensor type %s", t)
	}
	if err := checkEncode(t, src, dst); err != nil {
		return err
	}
	enc(src, dst)
	return nil
}

func checkEncode(t Type, src []float32, dst []byte) error {
	want, err := RowBytes(t, len(src))
	if err != nil {
		return err
	}
	if len(dst) != want {
		return fmt.Errorf("%s: %d bytes for %d elements, want %d", t, len(dst), len(src), want)
	}
	return nil
}

type rowEncoder func(x []float32, y []byte)

var refQuantizers = map[Type]rowEncoder{
	F32:   encodeF32,
	F16:   encodeF16,
	BF16:  encodeBF16,
	Q4_0:  perBlock(32, 18, quantizeQ4_0),
	Q4_1:  perBlock(32, 20, quantizeQ4_1),
	Q5_0:  perBlock(32, 22, quantizeQ5_0),
	Q5_1:  perBlock(32, 24, quantizeQ5_1),
	Q8_0:  perBlock(32, 34, quantizeQ8_0Ref),
	Q8_1:  perBlock(32, 36, quantizeQ8_1Ref),
	Q8_K:  perBlock(256, qk8K, quantizeQ8_K),
	MXFP4: perBlock(32, 17, quantizeMXFP4),
}

// perBlock lifts a one-block encoder to a row encoder.
func perBlock(bs, ts int, enc func(x []float32, y []byte)) rowEncoder {
	return func(x []float32, y []byte) {
		for i := 0; i < len(x)/bs; i++ {
			enc(x[i*bs:(i+1)*bs], y[i*ts:(i+1)*ts])
		}
	}
}

func encodeF32(x []float32, y []byte) {
	for i, v := range x {
		binary.LittleEndian.PutUint32(y[4*i:], math.Float32bits(v))
	}
}

func encodeF16(x []float32, y []byte) {
	for i, v := range x {
		binary.LittleEndian.PutUint16(y[2*i:], F32ToF16(v))
	}
}

func encodeBF16(x []float32, y []byte) {
	for i, v := range x {
		binary.LittleEndian.PutUint16(y[2*i:], F32ToBF16(v))
	}
}

func putF16(y []byte, v float32) { binary.LittleEndian.PutUint16(y, F32ToF16(v)) }

// roundf is C's roundf: halfway cases away from zero.
func roundf(v float32) float32 { return float32(math.Round(float64(v))) }

// truncInt is C's float-to-int conversion (toward zero) for values in range.
func truncInt(v float32) int { return int(v) }

// absMaxSigned returns the value with the largest magnitude (first one on ties)
// and that magnitude, as ggml's "amax/max" loops do.
func absMaxSigned(x []float32) (max, amax float32) {
	for _, v := range x {
		if a := float32(math.Abs(float64(v))); amax < a {
			amax, max = a, v
		}
	}
	return max, amax
}

// quantizeQ4_0: d = max/-8, q = min(15, trunc(x/d + 8.5)).
func quantizeQ4_0(x []float32, y []byte) {
	max, _ := absMaxSigned(x)
	d := max / -8
	var id float32
	if d != 0 {
		id = 1 / d
	}
	putF16(y[0:], d)
	for j := 0; j < 16; j++ {
		x0 := float32(x[j] * id)
		x1 := float32(x[j+16] * id)
		xi0 := min(15, truncInt(x0+8.5))
		xi1 := min(15, truncInt(x1+8.5))
		y[2+j] = byte(xi0) | byte(xi1)<<4
	}
}

// minMax is the plain min/max scan of quantize_row_q4_1_ref / q5_1_ref.
func minMax(x []float32) (lo, hi float32) {
	lo, hi = math.MaxFloat32, -math.MaxFloat32
	for _, v := range x {
		if v < lo {
			lo = v
		}
		if v > hi {
			hi = v
		}
	}
	return lo, hi
}

// quantizeQ4_1: d = (max-min)/15, m = min, q = min(15, trunc((x-min)/d + 0.5)).
func quantizeQ4_1(x []float32, y []byte) {
	lo, hi := minMax(x)
	d := (hi - lo) / 15
	var id float32
	if d != 0 {
		id = 1 / d
	}
	putF16(y[0:], d)
	putF16(y[2:], lo)
	for j := 0; j < 16; j++ {
		x0 := float32((x[j] - lo) * id)
		x1 := float32((x[j+16] - lo) * id)
		xi0 := min(15, truncInt(x0+0.5))
		xi1 := min(15, truncInt(x1+0.5))
		y[4+j] = byte(xi0) | byte(xi1)<<4
	}
}

// quantizeQ5_0: d = max/-16, q = min(31, trunc(x/d + 16.5)), bit 4 into qh.
func quantizeQ5_0(x []float32, y []byte) {
	max, _ := absMaxSigned(x)
	d := max / -16
	var id float32
	if d != 0 {
		id = 1 / d
	}
	putF16(y[0:], d)
	var qh uint32
	for j := 0; j < 16; j++ {
		x0 := float32(x[j] * id)
		x1 := float32(x[j+16] * id)
		xi0 := uint32(min(31, truncInt(x0+16.5)))
		xi1 := uint32(min(31, truncInt(x1+16.5)))
		y[6+j] = byte(xi0&0xF) | byte(xi1&0xF)<<4
		qh |= (xi0 & 0x10) >> 4 << j
		qh |= (xi1 & 0x10) >> 4 << (j + 16)
	}
	binary.LittleEndian.PutUint32(y[2:], qh)
}

// quantizeQ5_1: d = (max-min)/31, m = min, q = trunc((x-min)/d + 0.5).
func quantizeQ5_1(x []float32, y []byte) {
	lo, hi := minMax(x)
	d := (hi - lo) / 31
	var id float32
	if d != 0 {
		id = 1 / d
	}
	putF16(y[0:], d)
	putF16(y[2:], lo)
	var qh uint32
	for j := 0; j < 16; j++ {
		x0 := float32((x[j] - lo) * id)
		x1 := float32((x[j+16] - lo) * id)
		xi0 := uint32(uint8(truncInt(x0 + 0.5)))
		xi1 := uint32(uint8(truncInt(x1 + 0.5)))
		y[8+j] = byte(xi0&0xF) | byte(xi1&0xF)<<4
		qh |= (xi0 & 0x10) >> 4 << j
		qh |= (xi1 & 0x10) >> 4 << (j + 16)
	}
	binary.LittleEndian.PutUint32(y[4:], qh)
}

func absMax(x []float32) float32 {
	var amax float32
	for _, v := range x {
		if a := math.Float32frombits(math.Float32bits(v) &^ (1 << 31)); a > amax {
			amax = a
		}
	}
	return amax
}

// quantizeQ8_0Ref: d = amax/127, q = roundf(x * (1/d)).
func quantizeQ8_0Ref(x []float32, y []byte) {
	d := absMax(x) / 127
	var id float32
	if d != 0 {
		id = 1 / d
	}
	putF16(y[0:], d)
	for j, v := range x[:32] {
		y[2+j] = byte(int8(roundf(float32(v * id))))
	}
}

// quantizeQ8_1Ref: as Q8_0 plus s = fp16(d * Σq).
func quantizeQ8_1Ref(x []float32, y []byte) {
	d := absMax(x) / 127
	var id float32
	if d != 0 {
		id = 1 / d
	}
	putF16(y[0:], d)
	sum := 0
	for j, v := range x[:32] {
		q := int8(roundf(float32(v * id)))
		y[4+j] = byte(q)
		sum += int(q)
	}
	putF16(y[2:], float32(sum)*d)
}

// nearestInt is ggml's nearest_int: round to nearest, ties to even, by adding
// 1.5*2^23 in float32 (valid for |v| <= 2^22).
func nearestInt(v float32) int {
	f := float32(v + 12582912)
	return int(math.Float32bits(f)&0x007fffff) - 0x00400000
}

// quantizeQ8_K (quantize_row_q8_K_ref; also what the x86 CPU backend uses):
// iscale = -127/max (max = the signed value of largest magnitude),
// q = min(127, nearest_int(iscale*x)), d = 1/iscale, bsums = Σ of each 16.
func quantizeQ8_K(x []float32, y []byte) {
	clear(y[:qk8K])
	max, amax := absMaxSigned(x)
	if amax == 0 {
		return // d = 0, all quants and sums zero
	}
	iscale := -127 / max
	for j, v := range x[:256] {
		y[4+j] = byte(int8(min(127, nearestInt(float32(iscale*v)))))
	}
	for j := 0; j < 16; j++ {
		sum := 0
		for _, q := range y[4+16*j : 4+16*j+16] {
			sum += int(int8(q))
		}
		binary.LittleEndian.PutUint16(y[260+2*j:], uint16(int16(sum)))
	}
	binary.LittleEndian.PutUint32(y[0:], math.Float32bits(1/iscale))
}

// QuantizeSymmetric quantizes a row with one scale, as the NPU offload does
// for its int8 and int4 activations: scale = amax/qmax (0 for an all-zero
// row) and q[i] = x[i]/scale rounded half away from zero, clamped to ±qmax
// (qmax an integer ≤ 127). A NaN or Inf in x has no integer representation:
// ok is false and q is left as it was.
func QuantizeSymmetric(x []float32, qmax float32, q []int8) (scale float32, ok bool) {
	q = q[:len(x)]
	full := 0
	var amax uint32 // bits of the largest |x|: NaN and Inf order above every finite value
	if quantizeSymFast != nil {
		full = len(x) &^ 15
		if full > 0 {
			amax = absMaxBitsFast(x[:full])
		}
	}
	for _, v := range x[full:] {
		amax = max(amax, math.Float32bits(v)&^(1<<31))
	}
	if amax >= 0x7f800000 {
		return float32(math.NaN()), false
	}
	if amax == 0 {
		clear(q)
		return 0, true
	}
	scale = math.Float32frombits(amax) / qmax
	lim := int32(qmax)
	if full > 0 {
		quantizeSymFast(x[:full], scale, lim, q)
	}
	for i := full; i < len(x); i++ {
		// r is a float32 value of magnitude about qmax at most, so r ± 0.5
		// is exact in float64 and the conversion truncates it: round half
		// away from zero, as math.Round.
		r := float64(x[i] / scale)
		q[i] = int8(min(max(int32(r+math.Copysign(0.5, r)), -lim), lim))
	}
	return scale, true
}
