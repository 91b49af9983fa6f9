package offload

import (
	"fmt"
	"strings"

	"github.com/evalrun/evalrun/plugins/rknn/npu"
)

// Type is the number format the NPU computes in.
type Type int

const (
	// FP16: weights and activations rounded to fp16 (RNE), fp32 result.
	FP16 Type = iota
	// Int8: symmetric int8, per-output-channel weight scales and per-row
	// activation scales (amax/127), exact int32 result.
	Int8
	// Int4: as Int8 with amax/7 and an int16 result.
	Int4
)

// ParseType maps "fp16", "int8" or "int4" (any case) to its Type.
func ParseType(s string) (Type, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "fp16", "f16", "float16":
		return FP16, nil
	case "int8", "i8":
		return Int8, nil
	case "int4", "i4":
		return Int4, nil
	}
	return 0, fmt.Errorf("unknown type %q (want fp16, int8 or int4)", s)
}

func (t Type) String() string {
	switch t {
	case FP16:
		return "fp16"
	case Int8:
		return "int8"
	case Int4:
		return "int4"
	}
	return fmt.Sprintf("Type(%d)", int(t))
}

// MatmulType is the rknn_matmul_type the offload creates.
func (t Type) MatmulType() npu.MatmulType {
	switch t {
	case Int8:
		return npu.Int8MMInt8ToInt32
	case Int4:
		return npu.Int4MMInt4ToInt16
	}
	return npu.Float16MMFloat16ToFloat32
}

// NAlign is the N a core's slice is padded to (with zero columns): the
// RK3588's alignment from rknn_matmul_api.h (fp16 16, int8 32, int4 64),
// except fp16, which the seed pads to 32 like every other dimension
// (mat_info's pad_col: at least 32, rounded up to 32).
func (t Type) NAlign() int {
	if t == Int4 {
		return 64
	}
	return 32
}

// qmax is the symmetric integer range: values are clamped to ±qmax.
func (t Type) qmax() float32 {
	if t == Int4 {
		return 7
	}
	return 127
}

// roundUp rounds n up to a multiple of m.
func roundUp(n, m int) int { return (n + m - 1) / m * m }

// SplitUnit is the granularity of the N split across cores.
const SplitUnit = 32

// Range is core Core's share of the output columns, [Lo, Hi).
type Range struct{ Core, Lo, Hi int }

// SplitN divides N output columns over cores (1..3) as the llama.cpp RKNN
// backend (the seed, ggml-rknn.cpp) does:
//
//	split_B_col = B.col / 32 / 3 * 32;                               // every core
//	if (i == n_threads - 1) split_B_col = B.col - (n_threads - 1) * split_B_col; // the last
//
// (with the core count in place of the literal 3, which is the seed's
// n_threads on an RK3588), so every core but the last gets
// floor(N/32/cores)·32 columns and the last takes the remainder. A core left
// with nothing (N < 32·cores: all but the last) is skipped. N=172 on 3 cores gives [0,32)
// [32,64) [64,172); N=8192 gives 2720, 2720, 2752. Each slice is then padded
// to the type's N alignment on its own (see Type.NAlign).
func SplitN(N, cores int) []Range {
	cores = max(cores, 1)
	per := N / SplitUnit / cores * SplitUnit
	var rs []Range
	for c, lo := 0, 0; c < cores && lo < N; c++ {
		hi := min(lo+per, N)
		if c == cores-1 {
			hi = N
		}
		if hi > lo {
			rs = append(rs, Range{c, lo, hi})
		}
		lo = hi
	}
	return rs
}
