package ggml

import (
	"fmt"
)

// ggml numerics: a weight matmul computed the way llama.cpp's CPU backend
// (AVX-512 build) computes it. The activations are converted once per
// matmul to the weight type's vec_dot_type (PrepareGGML), then every output
// uses the kernel llama.cpp runs for that weight and batch (GGMLKernelFor).

// GGMLKernel is one of the kernels llama.cpp's CPU backend runs for a weight
// matmul.
type GGMLKernel int

const (
	GGMLVecDot   GGMLKernel = iota // the type's vec_dot (VecDot; F32/F16: ggml_vec_dot_f32/_f16)
	GGMLTinyBLAS                   // llamafile tinyBLAS<16> (F32, F16)
	GGMLQ8_0AVX                    // AVX vec_dot_q8_0_q8_0 == tinyBLAS_Q0
	GGMLQ4_0AVX                    // AVX vec_dot_q4_0_q8_0 == tinyBLAS_Q0
	GGMLQ4_0x8                     // repacked q4_0_8x8 gemv/gemm
)

// GGMLKernelFor is the kernel llama.cpp runs for weights of type t with n
// rows of k elements and a batch of rows activation rows: llamafile_sgemm
// takes batches of >= 2 rows, for F32/F16 only when its tinyBLAS<16> fits
// (k%16 == 0 and n%4 == 0, llamafile/sgemm.cpp tinyBLAS::matmul); otherwise
// the vec_dot loop runs. For the Q0 types both compute the same values.
// Q4_0 weights of a multiple of 8 rows are repacked to q4_0_8x8 at load
// (use_extra_bufts, on by default) and use its kernels at every batch size.
func GGMLKernelFor(t Type, rows, k, n int) GGMLKernel {
	switch t {
	case F32, F16:
		if rows >= 2 && k%16 == 0 && n%4 == 0 {
			return GGMLTinyBLAS
		}
		return GGMLVecDot
	case Q8_0:
		return GGMLQ8_0AVX
	case Q4_0:
		if n%8 == 0 {
			return GGMLQ4_0x8
		}
		return GGMLQ4_0AVX
	}
	return GGMLVecDot
}

// GGMLActivations are one matmul's activation rows as llama.cpp's kernels
// read them: blocks of VecDotType(Weight) (Q), or float32 values (F) for
// float weights, rounded to binary16 for F16 weights. Buffers are reused
// across calls.
type GGMLActivations struct {
	Weight  Type
	K, Rows int
	Q       []byte // Rows rows of QStride bytes
	QStride int
	F       []float32 // Rows rows of K values

	// For the multi-row kernels, per Q8_0 block of Q: side holds dy as
	// float32 bits and -8·Σy, corr -128·Σ of each dword's four y. Empty
	// when the preparation did not write them.
	side []uint32
	corr []int32
}

// FloatActivations reports whether weights of type t read float activations.
func FloatActivations(t Type) bool { return t == F32 || t == F16 }

func grow[E any](s []E, n int) []E {
	if cap(s) < n {
		return make([]E, n)
	}
	return s[:n]
}

// prepareGGML is the generic PrepareGGML.
func prepareGGML(t Type, x []float32, rows int, a *GGMLActivations) error {
	if rows <= 0 || len(x)%rows != 0 {
		return fmt.Errorf("ggml activations: %d values do not split into %d rows", len(x), rows)
	}
	k := len(x) / rows
	a.Weight, a.K, a.Rows = t, k, rows
	a.side, a.corr = a.side[:0], a.corr[:0]
	switch t {
	case F32:
		a.F = x
		return nil
	case F16:
		a.F = grow(a.F, len(x))
		for i, v := range x {
			a.F[i] = F16ToF32(F32ToF16(v))
		}
		return nil
	}
	vt := VecDotType(t)
	qb, err := RowBytes(vt, k)
	if err != nil {
		return fmt.Errorf("ggml activations for %s weights: %w", t, err)
	}
	a.QStride = qb
	a.Q = grow(a.Q, rows*qb)
	for i := range rows {
		if err := quantizeActivations(t, x[i*k:(i+1)*k], a.Q[i*qb:(i+1)*qb]); err != nil {
			return err
		}
	}
	return nil
}

// ggmlRowBlock is how many weight rows a batch streams through all its
// activation rows at a time (about 64 KiB of Q8_0 weights: they stay in L2).
func ggmlRowBlock(rb int) int { return max(16, (64<<10)/max(rb, 1)&^15) }

// matMulGGML is the generic MatMulGGML.
func matMulGGML(kern GGMLKernel, t Type, w []byte, n int, a *GGMLActivations, out []float32, ldo int) {
	k := a.K
	rb := checkMatrix("MatMulGGML", t, w, k, n)
	if a.Weight != t {
		panic(fmt.Sprintf("ggml.MatMulGGML: activations prepared for %s weights, not %s", a.Weight, t))
	}
	var wf []float32
	if FloatActivations(t) {
		wf = make([]float32, k)
	}
	for j := range n {
		row := w[j*rb : (j+1)*rb]
		if wf != nil {
			if err := Dequantize(t, row, wf); err != nil {
				panic("ggml.MatMulGGML: " + err.Error())
			}
		}
		for i := range a.Rows {
			var v float32
			switch kern {
			case GGMLTinyBLAS:
				v = TinyBLASDot(wf, a.F[i*k:(i+1)*k])
			case GGMLQ8_0AVX:
				v = VecDotQ8_0AVX(row, a.Q[i*a.QStride:(i+1)*a.QStride], k)
			case GGMLQ4_0AVX:
				v = VecDotQ4_0AVX(row, a.Q[i*a.QStride:(i+1)*a.QStride], k)
			case GGMLQ4_0x8:
				v = VecDotQ4_0Repacked(row, a.Q[i*a.QStride:(i+1)*a.QStride], k)
			default:
				switch t {
				case F32:
					v = VecDotF32(wf, a.F[i*k:(i+1)*k])
				case F16:
					v = VecDotF16(wf, a.F[i*k:(i+1)*k])
				default:
					v = vecDot(t, row, a.Q[i*a.QStride:(i+1)*a.QStride], k)
				}
			}
			out[i*ldo+j] = v
		}
	}
}
