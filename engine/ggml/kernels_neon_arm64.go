package ggml

import "fmt"

// The NEON set for arm64 (the RK3588's Cortex-A76 and A55 cores, Apple
// silicon): hand-written kernels of kernels_neon_arm64.s, each computing
// the generic Go code's operations in its order, so every output is
// bit-identical to it. What has no kernel runs the generic code (the
// embedded genericKernels).
type neonKernels struct {
	genericKernels
	dot bool // SDOT: the ggml integer dots
}

func (neonKernels) Name() string { return "neon" }

//go:noescape
func vecDotQ8_0RowsNEON(w []byte, rowBytes int, y []byte, tab *[1 << 16]float32, out []float32)

//go:noescape
func vecDotQ4_0RowsNEON(w []byte, rowBytes int, y []byte, tab *[1 << 16]float32, out []float32)

//go:noescape
func vecDotQ4_0RepRowsNEON(w []byte, rowBytes int, y []byte, tab *[1 << 16]float32, out []float32)

func (k neonKernels) MatMulGGML(kern GGMLKernel, t Type, w []byte, n int, a *GGMLActivations, out []float32, ldo int) {
	K := a.K
	if n == 0 || a.Rows == 0 || K == 0 {
		return
	}
	rb := checkMatrix("MatMulGGML", t, w, K, n)
	if a.Weight != t {
		panic(fmt.Sprintf("ggml.MatMulGGML: activations prepared for %s weights, not %s", a.Weight, t))
	}
	if ldo < n || len(out) < (a.Rows-1)*ldo+n {
		panic(fmt.Sprintf("ggml.MatMulGGML: output of %d values with stride %d cannot hold %d×%d", len(out), ldo, a.Rows, n))
	}
	var rows func(w []byte, rowBytes int, y []byte, tab *[1 << 16]float32, out []float32)
	switch {
	case !k.dot:
	case kern == GGMLQ8_0AVX && t == Q8_0:
		rows = vecDotQ8_0RowsNEON
	case kern == GGMLQ4_0AVX && t == Q4_0:
		rows = vecDotQ4_0RowsNEON
	case kern == GGMLQ4_0x8 && t == Q4_0:
		rows = vecDotQ4_0RepRowsNEON
	}
	if rows == nil {
		matMulGGML(kern, t, w, n, a, out, ldo)
		return
	}
	// A block of weight rows (about 64 KiB: it stays in L2) through
	// every activation row.
	blk := ggmlRowBlock(rb)
	qs := a.QStride
	for b0 := 0; b0 < n; b0 += blk {
		b1 := min(b0+blk, n)
		for i := range a.Rows {
			rows(w[b0*rb:b1*rb], rb, a.Q[i*qs:(i+1)*qs], f16Table, out[i*ldo+b0:i*ldo+b1])
		}
	}
}
