package npu

import (
	"unsafe"

	"github.com/evalrun/evalrun/engine/ggml"
)

// The NPU's half-precision conversions are IEEE binary16 with
// round-to-nearest-even (and bfloat16 likewise), the same as the engine's:
// one implementation (VCVTPS2PH/VCVTPH2PS on amd64) serves both.

// F16ToF32 decodes an IEEE binary16 value (exact).
func F16ToF32(h uint16) float32 { return ggml.F16ToF32(h) }

// F32ToF16 rounds to binary16, round-to-nearest-even; overflow gives ±Inf,
// NaN stays NaN.
func F32ToF16(f float32) uint16 { return ggml.F32ToF16(f) }

// BF16ToF32 decodes a bfloat16 value (exact).
func BF16ToF32(h uint16) float32 { return ggml.BF16ToF32(h) }

// F32ToBF16 rounds to bfloat16, round-to-nearest-even; NaN stays a quiet NaN.
func F32ToBF16(f float32) uint16 { return ggml.F32ToBF16(f) }

// F16sToF32 converts a slice of IEEE half bits, as F16ToF32 does.
func F16sToF32(dst []float32, src []uint16) { ggml.F16sToF32(dst, src) }

// F32sToF16 converts a slice to IEEE half bits, as F32ToF16 does.
func F32sToF16(dst []uint16, src []float32) { ggml.F32sToF16(dst, src) }

// HalvesOf views the bytes of little-endian 16-bit values (an even count,
// at an even address) as uint16s on a little-endian host; ok is false on a
// big-endian one.
func HalvesOf(b []byte) (h []uint16, ok bool) {
	if !littleEndian {
		return nil, false
	}
	if len(b) < 2 {
		return nil, true
	}
	return unsafe.Slice((*uint16)(unsafe.Pointer(&b[0])), len(b)/2), true
}
