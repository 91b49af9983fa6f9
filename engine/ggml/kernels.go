package ggml

import (
	"fmt"
	"os"
	"slices"
	"strings"
)

// Kernels is one implementation of the loops that dominate inference time:
// whole matrix products over many weight rows, so that a SIMD
// implementation can decode several rows at once and tile activations.
//
// Every implementation computes exactly what the generic one computes, bit
// for bit: in exact numerics each output is DotRow(t, weight row, activation
// row). The generic implementation is the portable fallback and the oracle
// the others are tested against.
//
// Lengths are the caller's contract (weights are validated when a model is
// loaded); a mismatch panics.
type Kernels interface {
	// Name identifies the implementation in reports: "avx512", "avx2",
	// "neon", "generic" (KernelSets).
	Name() string
	// MatVec sets out[n] = DotRow(t, row n of w, x) for n < len(out); the
	// rows hold len(x) elements each, back to back.
	MatVec(t Type, w []byte, x []float32, out []float32)
	// MatMul sets out[i*ldo+n] = DotRow(t, row n of w, x[i*k:(i+1)*k]) for
	// i < rows and n < n, where k = len(x)/rows.
	MatMul(t Type, w []byte, n int, x []float32, rows int, out []float32, ldo int)

	// llama.cpp's attention and activation kernels (cpuops.go), used in
	// both numerics modes.

	// ScoreRows sets out[j] = VecDotF32(k[j*stride:j*stride+len(q)], q).
	ScoreRows(k []float32, stride int, q []float32, out []float32)
	// WeightedColumns sets out[i] = Σ_j v[j*stride+i]·p[j] for i <
	// len(out), in the lane order of a lanes-lane FMA dot product over j:
	// 16 is TinyBLASDot, 64 is VecDotF32 over p zero-padded to 64.
	WeightedColumns(v []float32, stride int, p []float32, lanes int, out []float32)
	// Softmax sets p = softmax(scale·p) as ggml's soft_max does.
	Softmax(p []float32, scale float32)
	// Swiglu sets dst = silu(gate)·up as ggml_vec_swiglu_f32 does.
	Swiglu(dst, gate, up []float32)
	// Rope rotates the first nDims values of one head in place as ggml's
	// ROPE does, cs holding (cos, sin) of each of the nDims/2 pairs:
	// adjacent values for llama, the two halves for NeoX.
	Rope(x, cs []float32, nDims int, neox bool)

	// ggml numerics (ggmlmm.go).

	// PrepareGGML converts rows of activations x as llama.cpp does for
	// weights of type t, into a (whose buffers are reused).
	PrepareGGML(t Type, x []float32, rows int, a *GGMLActivations) error
	// MatMulGGML sets out[i*ldo+j] for every activation row i of a and the n
	// rows j of w with kernel kern.
	MatMulGGML(kern GGMLKernel, t Type, w []byte, n int, a *GGMLActivations, out []float32, ldo int)
}

// Generic is the portable pure-Go implementation.
var Generic Kernels = genericKernels{}

type genericKernels struct{}

func (genericKernels) Name() string { return "generic" }

func (genericKernels) MatVec(t Type, w []byte, x []float32, out []float32) {
	rb := checkMatrix("MatVec", t, w, len(x), len(out))
	for n := range out {
		out[n] = dotRow(t, w[n*rb:(n+1)*rb], x)
	}
}

func (genericKernels) MatMul(t Type, w []byte, n int, x []float32, rows int, out []float32, ldo int) {
	k := checkMatMul(t, w, n, x, rows, out, ldo)
	rb := checkMatrix("MatMul", t, w, k, n)
	row := make([]float32, k)
	for j := range n {
		// DotRow(t, w, x) == DotF32(dequantized w, x): dequantize once.
		if err := Dequantize(t, w[j*rb:(j+1)*rb], row); err != nil {
			panic("ggml.MatMul: " + err.Error())
		}
		for i := range rows {
			out[i*ldo+j] = dotF32(row, x[i*k:(i+1)*k])
		}
	}
}

func (genericKernels) ScoreRows(k []float32, stride int, q []float32, out []float32) {
	checkRows("ScoreRows", len(k), stride, len(q), len(out))
	for j := range out {
		out[j] = VecDotF32(k[j*stride:j*stride+len(q)], q)
	}
}

func (genericKernels) WeightedColumns(v []float32, stride int, p []float32, lanes int, out []float32) {
	checkRows("WeightedColumns", len(v), stride, len(out), len(p))
	checkLanes(lanes)
	weightedColumns(v, stride, p, lanes, out)
}

func (genericKernels) Softmax(p []float32, scale float32) { softmax(p, scale) }

func (genericKernels) Swiglu(dst, gate, up []float32) {
	checkSwiglu(dst, gate, up)
	swiglu(dst, gate, up)
}

func (genericKernels) Rope(x, cs []float32, nDims int, neox bool) {
	checkRope(x, cs, nDims)
	rope(x, cs, nDims, neox)
}

func (genericKernels) PrepareGGML(t Type, x []float32, rows int, a *GGMLActivations) error {
	return prepareGGML(t, x, rows, a)
}

func (genericKernels) MatMulGGML(kern GGMLKernel, t Type, w []byte, n int, a *GGMLActivations, out []float32, ldo int) {
	matMulGGML(kern, t, w, n, a, out, ldo)
}

// checkRows panics unless a buffer of size elements holds rows rows of
// width values stride apart.
func checkRows(op string, size, stride, width, rows int) {
	if rows > 0 && (stride < width || size < (rows-1)*stride+width) {
		panic(fmt.Sprintf("ggml.%s: %d values cannot hold %d rows of %d with stride %d", op, size, rows, width, stride))
	}
}

func checkLanes(lanes int) {
	if lanes != 16 && lanes != 64 {
		panic(fmt.Sprintf("ggml.WeightedColumns: %d lanes (16 or 64)", lanes))
	}
}

func checkSwiglu(dst, gate, up []float32) {
	if len(up) != len(gate) || len(dst) != len(gate) {
		panic(fmt.Sprintf("ggml.Swiglu: lengths %d, %d, %d differ", len(dst), len(gate), len(up)))
	}
}

func checkRope(x, cs []float32, nDims int) {
	if nDims < 0 || nDims%2 != 0 || len(x) < nDims || len(cs) < nDims {
		panic(fmt.Sprintf("ggml.Rope: %d dimensions of %d values with %d cos/sin values", nDims, len(x), len(cs)))
	}
}

// checkMatrix panics unless w holds n rows of k elements of type t; it
// returns the row size in bytes.
func checkMatrix(op string, t Type, w []byte, k, n int) int {
	rb, err := RowBytes(t, k)
	if err == nil && !Supported(t) {
		err = fmt.Errorf("unsupported tensor type %s", t)
	}
	if err != nil {
		panic(fmt.Sprintf("ggml.%s: %v", op, err))
	}
	if len(w) != rb*n {
		panic(fmt.Sprintf("ggml.%s: %d bytes of %s weights, want %d rows of %d elements (%d bytes)", op, len(w), t, n, k, rb*n))
	}
	return rb
}

func checkMatMul(t Type, w []byte, n int, x []float32, rows int, out []float32, ldo int) int {
	if rows <= 0 || len(x)%rows != 0 {
		panic(fmt.Sprintf("ggml.MatMul: %d activations do not split into %d rows", len(x), rows))
	}
	if ldo < n || len(out) < (rows-1)*ldo+n {
		panic(fmt.Sprintf("ggml.MatMul: output of %d values with stride %d cannot hold %d×%d", len(out), ldo, rows, n))
	}
	return len(x) / rows
}

// Available lists the implementations this machine can run, best first;
// Generic is always last.
func Available() []Kernels { return append(simdKernels(), Generic) }

// Best is the fastest implementation this machine runs.
func Best() Kernels { return Available()[0] }

// KernelsEnv names the variable that forces a kernel set (engine.Load reads
// it): to compare the sets' speed, or to test one that is not the best.
const KernelsEnv = "EVALRUN_KERNELS"

// KernelSets names every set in some build, best first.
var KernelSets = []string{"avx512", "avx2", "neon", "generic"}

// Select returns the set called name, or Best() for "". A set this build
// or CPU cannot run is an error naming the sets it can.
func Select(name string) (Kernels, error) {
	if name == "" {
		return Best(), nil
	}
	var names []string
	for _, k := range Available() {
		if k.Name() == name {
			return k, nil
		}
		names = append(names, k.Name())
	}
	if !slices.Contains(KernelSets, name) {
		return nil, fmt.Errorf("%s=%s: no such kernel set (%s)", KernelsEnv, name, strings.Join(KernelSets, ", "))
	}
	return nil, fmt.Errorf("%s=%s: this machine cannot run the %s kernels (it runs %s)", KernelsEnv, name, name, strings.Join(names, ", "))
}

// FromEnv is Select of $EVALRUN_KERNELS.
func FromEnv() (Kernels, error) { return Select(os.Getenv(KernelsEnv)) }

// DotF32 is Σ a[j]*b[j] in the fixed exact-mode order (see dot.go).
func DotF32(a, b []float32) float32 { return dotF32(a, b) }

// DotRow is the dot product of a weight row of type t (len(x) elements) with
// x, bit-identical to DotF32 of the dequantized row.
func DotRow(t Type, w []byte, x []float32) float32 { return dotRow(t, w, x) }

// QuantizeActivations converts x into VecDotType(t) blocks as ggml's CPU
// from_float does. len(dst) must be RowBytes(VecDotType(t), len(x)).
func QuantizeActivations(t Type, x []float32, dst []byte) error {
	return quantizeActivations(t, x, dst)
}

// VecDot is ggml's vec_dot of a weight row of type t with n activations in
// VecDotType(t) format.
func VecDot(t Type, w []byte, xq []byte, n int) float32 { return vecDot(t, w, xq, n) }
