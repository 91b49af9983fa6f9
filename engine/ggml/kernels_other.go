//go:build !amd64 && !arm64

package ggml

// simdKernels: only the generic kernels outside amd64 and arm64.
func simdKernels() []Kernels { return nil }

// No bulk conversion or quantization kernels: the Go loops do it all.
var (
	f32ToF16Fast    func(src []float32, dst []uint16) int
	f16ToF32Fast    func(src []uint16, dst []float32)
	absMaxBitsFast  func(x []float32) uint32
	quantizeSymFast func(x []float32, scale float32, lim int32, q []int8)
	tanhFast        func(x []float32)
	gegluF32Fast    func(dst, gate, up []float32)
	gegluTableFast  func(dst, gate, up []float32, half []uint16, table *[1 << 16]float32)
)
