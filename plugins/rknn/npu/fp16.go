package npu

import (
	"math"

	"github.com/x448/float16"
)

// f16Table decodes every binary16 bit pattern; built from x448/float16 so it
// is exact by construction.
var f16Table = func() *[65536]float32 {
	var t [65536]float32
	for i := range t {
		t[i] = float16.Frombits(uint16(i)).Float32()
	}
	return &t
}()

// F16ToF32 decodes an IEEE binary16 value (exact).
func F16ToF32(h uint16) float32 { return f16Table[h] }

// F32ToF16 rounds to binary16, round-to-nearest-even; overflow gives ±Inf,
// NaN stays NaN.
func F32ToF16(f float32) uint16 { return float16.Fromfloat32(f).Bits() }

// BF16ToF32 decodes a bfloat16 value (exact).
func BF16ToF32(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// F32ToBF16 rounds to bfloat16, round-to-nearest-even; NaN stays a quiet NaN.
func F32ToBF16(f float32) uint16 {
	b := math.Float32bits(f)
	if b&0x7fffffff > 0x7f800000 {
		return uint16(b>>16) | 0x40
	}
	b += 0x7fff + (b>>16)&1
	return uint16(b >> 16)
}
