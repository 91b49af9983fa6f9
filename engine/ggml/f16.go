package ggml

import (
	"math"

	"github.com/x448/float16"
)

// f16Table maps every binary16 bit pattern to its float32 value. It is built
// from x448/float16 (exhaustively tested) so it is bit-exact by construction,
// and a lookup is cheaper than converting bit by bit on the fly.
var f16Table = func() *[1 << 16]float32 {
	var t [1 << 16]float32
	for h := range t {
		t[h] = float16.Frombits(uint16(h)).Float32()
	}
	return &t
}()

// F16ToF32 converts IEEE binary16 bits to float32 (exact; subnormals, Inf and
// NaN included).
func F16ToF32(h uint16) float32 { return f16Table[h] }

// F32ToF16 converts a float32 to IEEE binary16 bits, rounding to nearest with
// ties to even; values beyond the largest half (65504 + half an ulp) become Inf.
func F32ToF16(f float32) uint16 { return float16.Fromfloat32(f).Bits() }

// BF16ToF32 converts bfloat16 bits (the upper half of a float32) to float32.
func BF16ToF32(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// F32ToBF16 rounds a float32 to bfloat16 bits as ggml does
// (ggml_compute_fp32_to_bf16): ties to even, NaN kept quiet.
func F32ToBF16(f float32) uint16 {
	u := math.Float32bits(f)
	if u&0x7fffffff > 0x7f800000 { // NaN: force quiet
		return uint16(u>>16) | 64
	}
	return uint16((u + (0x7fff + (u>>16)&1)) >> 16)
}

// F32sToF16 converts src to IEEE binary16 bits in dst[:len(src)], exactly as
// F32ToF16 does element by element (VCVTPS2PH where the CPU has it).
func F32sToF16(dst []uint16, src []float32) {
	dst = dst[:len(src)]
	done := 0
	if f32ToF16Fast != nil && len(src) > 0 {
		done = f32ToF16Fast(src, dst)
	}
	for i := done; i < len(src); i++ {
		dst[i] = F32ToF16(src[i])
	}
}

// F16sToF32 converts IEEE binary16 bits to float32, as F16ToF32 does
// (VCVTPH2PS where the CPU has it).
func F16sToF32(dst []float32, src []uint16) {
	dst = dst[:len(src)]
	if f16ToF32Fast != nil && len(src) > 0 {
		f16ToF32Fast(src, dst)
		return
	}
	for i, h := range src {
		dst[i] = f16Table[h]
	}
}
