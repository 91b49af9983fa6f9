//go:build !amd64

package ggml

// simdKernels: only the generic kernels outside amd64 (NEON kernels for the
// RK3588's aarch64 cores are future work).
func simdKernels() []Kernels { return nil }

var f32ToF16Fast func(src []float32, dst []uint16) int
var f16ToF32Fast func(src []uint16, dst []float32)
