package npu

import "github.com/evalrun/evalrun/engine/ggml"

// The NPU's half-precision conversions are IEEE binary16 with
// round-to-nearest-even (and bfloat16 likewise), the same as the engine's:
// one table-driven implementation serves both.

// F16ToF32 decodes an IEEE binary16 value (exact).
func F16ToF32(h uint16) float32 { return ggml.F16ToF32(h) }

// F32ToF16 rounds to binary16, round-to-nearest-even; overflow gives ±Inf,
// NaN stays NaN.
func F32ToF16(f float32) uint16 { return ggml.F32ToF16(f) }

// BF16ToF32 decodes a bfloat16 value (exact).
func BF16ToF32(h uint16) float32 { return ggml.BF16ToF32(h) }

// F32ToBF16 rounds to bfloat16, round-to-nearest-even; NaN stays a quiet NaN.
func F32ToBF16(f float32) uint16 { return ggml.F32ToBF16(f) }
