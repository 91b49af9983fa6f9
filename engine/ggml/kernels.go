package ggml

// Kernels holds the hot numeric functions so that an accelerated
// implementation (SIMD, assembly) can replace the generic one. Every
// implementation must keep the documented semantics bit for bit:
// DotRow(t, w, x) == DotF32(dequantized w, x), and VecDot/QuantizeActivations
// must reproduce ggml's integer block arithmetic exactly.
//
// DotF32, DotRow and VecDot panic on mismatched lengths: that is a programming
// error (row sizes are validated when a model is loaded), not bad input.
type Kernels interface {
	// Name identifies the implementation in reports ("generic", ...).
	Name() string
	DotF32(a, b []float32) float32
	DotRow(t Type, w []byte, x []float32) float32
	QuantizeActivations(t Type, x []float32, dst []byte) error
	VecDot(t Type, w []byte, xq []byte, n int) float32
}

type genericKernels struct{}

func (genericKernels) Name() string                                 { return "generic" }
func (genericKernels) DotF32(a, b []float32) float32                { return dotF32(a, b) }
func (genericKernels) DotRow(t Type, w []byte, x []float32) float32 { return dotRow(t, w, x) }
func (genericKernels) QuantizeActivations(t Type, x []float32, dst []byte) error {
	return quantizeActivations(t, x, dst)
}
func (genericKernels) VecDot(t Type, w []byte, xq []byte, n int) float32 {
	return vecDot(t, w, xq, n)
}

// Generic is the portable pure-Go implementation.
var Generic Kernels = genericKernels{}

// Default is the implementation the package-level functions (and the engine)
// use. Set it once at start-up, before any computation.
var Default Kernels = Generic

// DotF32 is Σ a[j]*b[j] in the fixed exact-mode order (see dot.go).
func DotF32(a, b []float32) float32 { return Default.DotF32(a, b) }

// DotRow is the dot product of a weight row of type t (len(x) elements) with
// x, bit-identical to DotF32 of the dequantized row.
func DotRow(t Type, w []byte, x []float32) float32 { return Default.DotRow(t, w, x) }

// QuantizeActivations converts x into VecDotType(t) blocks as ggml's CPU
// from_float does. len(dst) must be RowBytes(VecDotType(t), len(x)).
func QuantizeActivations(t Type, x []float32, dst []byte) error {
	return Default.QuantizeActivations(t, x, dst)
}

// VecDot is ggml's vec_dot of a weight row of type t with n activations in
// VecDotType(t) format.
func VecDot(t Type, w []byte, xq []byte, n int) float32 { return Default.VecDot(t, w, xq, n) }
