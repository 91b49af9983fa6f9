//go:build arm64

package ggml

import "golang.org/x/sys/cpu"

// arm64Features are the CPU features the NEON set's choice depends on.
type arm64Features struct {
	ASIMD   bool // AdvSIMD (NEON): every ARMv8-A core
	DotProd bool // SDOT (FEAT_DotProd, ARMv8.2; Cortex-A76/A55, Apple M1 on)
}

// hostFeatures are this CPU's, as the OS reports them (x/sys/cpu: HWCAP on
// Linux, sysctl on macOS).
func hostFeatures() arm64Features {
	return arm64Features{ASIMD: cpu.ARM64.HasASIMD, DotProd: cpu.ARM64.HasASIMDDP}
}

// neonSets are the SIMD sets a CPU with features f runs: the NEON set
// needs AdvSIMD; without SDOT its ggml-numerics integer dots run the
// generic code.
func neonSets(f arm64Features) []Kernels {
	if !f.ASIMD {
		return nil
	}
	return []Kernels{neonKernels{dot: f.DotProd}}
}

func simdKernels() []Kernels { return neonSets(hostFeatures()) }

// No bulk conversion or quantization kernels on arm64: FCVTL and FCVTN
// would quiet signalling NaNs, which the table lookups keep.
var (
	f32ToF16Fast    func(src []float32, dst []uint16) int
	f16ToF32Fast    func(src []uint16, dst []float32)
	absMaxBitsFast  func(x []float32) uint32
	quantizeSymFast func(x []float32, scale float32, lim int32, q []int8)
	tanhFast        func(x []float32)
	gegluF32Fast    func(dst, gate, up []float32)
	gegluTableFast  func(dst, gate, up []float32, half []uint16, table *[1 << 16]float32)
)
