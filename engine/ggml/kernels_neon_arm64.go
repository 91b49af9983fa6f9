package ggml

import (
	"encoding/binary"
	"fmt"
	"math"
	"unsafe"
)

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
		if !ggmlFloat(kern, t, w, rb, n, a, out, ldo) {
			matMulGGML(kern, t, w, n, a, out, ldo)
		}
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

// The float rows kernels (see kernels_neon_arm64.s): out[i*ostride] = the
// dot product of k values at w[i*wstride:] (bytes: float32 or binary16
// values) and x[i*xstride:], for i < n. dot*: exact numerics' DotF32
// (k%16 == 0); tiny*: TinyBLASDot (k%16 == 0); vecDot*: VecDotF32 of the
// first k&^63 values, without the leftovers.

//go:noescape
func dotF32RowsNEON(w []byte, wstride int, x []float32, xstride int, k int, n int, out []float32, ostride int)

//go:noescape
func dotF16RowsNEON(w []byte, wstride int, x []float32, xstride int, k int, n int, out []float32, ostride int)

//go:noescape
func tinyF32RowsNEON(w []byte, wstride int, x []float32, xstride int, k int, n int, out []float32, ostride int)

//go:noescape
func tinyF16RowsNEON(w []byte, wstride int, x []float32, xstride int, k int, n int, out []float32, ostride int)

//go:noescape
func vecDotF32RowsNEON(w []byte, wstride int, x []float32, xstride int, k int, n int, out []float32, ostride int)

//go:noescape
func vecDotF16RowsNEON(w []byte, wstride int, x []float32, xstride int, k int, n int, out []float32, ostride int)

type floatRows func(w []byte, wstride int, x []float32, xstride int, k int, n int, out []float32, ostride int)

// exactRows is t's exact-numerics kernel for rows of k elements, if any.
func exactRows(t Type, k int) floatRows {
	if k == 0 || k%16 != 0 {
		return nil
	}
	switch t {
	case F32:
		return dotF32RowsNEON
	case F16:
		return dotF16RowsNEON
	}
	return nil
}

func (neonKernels) MatVec(t Type, w []byte, x []float32, out []float32) {
	rb := checkMatrix("MatVec", t, w, len(x), len(out))
	f := exactRows(t, len(x))
	if f == nil || len(out) == 0 {
		Generic.MatVec(t, w, x, out)
		return
	}
	f(w, rb, x, 0, len(x), len(out), out, 1)
}

// matMulActRows is how many activation rows (up to 256 KiB of them) a
// weight row meets before the next weight row is read.
func matMulActRows(k int) int { return max(1, (256<<10)/(4*max(k, 1))) }

func (neonKernels) MatMul(t Type, w []byte, n int, x []float32, rows int, out []float32, ldo int) {
	k := checkMatMul(t, w, n, x, rows, out, ldo)
	rb := checkMatrix("MatMul", t, w, k, n)
	f := exactRows(t, k)
	if f == nil || n == 0 {
		Generic.MatMul(t, w, n, x, rows, out, ldo)
		return
	}
	tb := matMulActRows(k)
	for i0 := 0; i0 < rows; i0 += tb {
		i1 := min(i0+tb, rows)
		for j := range n {
			f(w[j*rb:(j+1)*rb], 0, x[i0*k:i1*k], k, k, i1-i0, out[i0*ldo+j:], ldo)
		}
	}
}

// ggmlFloat runs the ggml F32/F16 kernels kern (GGMLVecDot or GGMLTinyBLAS)
// for weights of type t, if there is one for it; it reports whether it did.
func ggmlFloat(kern GGMLKernel, t Type, w []byte, rb, n int, a *GGMLActivations, out []float32, ldo int) bool {
	k := a.K
	f16 := t == F16
	var f floatRows
	switch {
	case t != F32 && !f16:
		return false
	case kern == GGMLTinyBLAS && k%16 == 0:
		f = tinyF32RowsNEON
		if f16 {
			f = tinyF16RowsNEON
		}
	case kern == GGMLVecDot && k >= 64:
		f = vecDotF32RowsNEON
		if f16 {
			f = vecDotF16RowsNEON
		}
	default:
		return false
	}
	blk := ggmlRowBlock(rb)
	for b0 := 0; b0 < n; b0 += blk {
		b1 := min(b0+blk, n)
		for i := range a.Rows {
			f(w[b0*rb:b1*rb], rb, a.F[i*k:(i+1)*k], 0, k, b1-b0, out[i*ldo+b0:], 1)
		}
	}
	if kern == GGMLVecDot && k%64 != 0 {
		// The leftovers of every output, as VecDotF32/VecDotF16 add them.
		np := k &^ 63
		wt := make([]float32, k-np)
		for j := range n {
			row := w[j*rb : (j+1)*rb]
			for e := range wt {
				if f16 {
					wt[e] = f16At(row, 2*(np+e))
				} else {
					wt[e] = math.Float32frombits(binary.LittleEndian.Uint32(row[4*(np+e):]))
				}
			}
			for i := range a.Rows {
				o := &out[i*ldo+j]
				*o = vecDotLeftovers(wt, a.F[i*k+np:(i+1)*k], *o, f16)
			}
		}
	}
	return true
}

// f32Bytes views float32 values as their bytes (little-endian: GGUF's).
func f32Bytes(f []float32) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(f))), 4*len(f))
}

// u16Bytes views binary16 values as their bytes.
func u16Bytes(h []uint16) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(h))), 2*len(h))
}

func (neonKernels) ScoreRows(k []float32, stride int, q []float32, out []float32) {
	checkRows("ScoreRows", len(k), stride, len(q), len(out))
	d := len(q)
	if d < 64 || len(out) == 0 {
		Generic.ScoreRows(k, stride, q, out)
		return
	}
	vecDotF32RowsNEON(f32Bytes(k), 4*stride, q, 0, d, len(out), out, 1)
	if np := d &^ 63; np < d {
		for j := range out {
			out[j] = leftoversF32(k[j*stride+np:j*stride+d], q[np:], out[j])
		}
	}
}

// scoreRowsF16 (f16Rows): ScoreRows of binary16 rows.
func (nk neonKernels) scoreRowsF16(k []uint16, stride int, q []float32, out []float32) {
	d := len(q)
	if d < 64 {
		scoreRowsF16Generic(nk, k, stride, q, out)
		return
	}
	vecDotF16RowsNEON(u16Bytes(k), 2*stride, q, 0, d, len(out), out, 1)
	if np := d &^ 63; np < d {
		var wt [63]float32
		for j := range out {
			F16sToF32(wt[:d-np], k[j*stride+np:j*stride+d])
			out[j] = leftoversF32(wt[:d-np], q[np:], out[j])
		}
	}
}

//go:noescape
func laneFMANEON(acc []float32, lanes int, v []byte, stride int, p []float32, d int, dp int)

//go:noescape
func laneFMAF16NEON(acc []float32, lanes int, v []byte, stride int, p []float32, d int, dp int)

//go:noescape
func reduceLanes64NEON(acc []float32, dp int, out []float32)

//go:noescape
func reduceLanes16NEON(acc []float32, dp int, out []float32)

//go:noescape
func addZeroNEON(x []float32)

func (neonKernels) WeightedColumns(v []float32, stride int, p []float32, lanes int, out []float32) {
	checkRows("WeightedColumns", len(v), stride, len(out), len(p))
	checkLanes(lanes)
	weightedLanesNEON(lanes, len(p), out, func(acc []float32, dp int) {
		laneFMANEON(acc, lanes, f32Bytes(v), 4*stride, p, len(out), dp)
	})
}

// weightedColumnsF16 (f16Rows): WeightedColumns of binary16 rows.
func (neonKernels) weightedColumnsF16(v []uint16, stride int, p []float32, lanes int, out []float32) {
	weightedLanesNEON(lanes, len(p), out, func(acc []float32, dp int) {
		laneFMAF16NEON(acc, lanes, u16Bytes(v), 2*stride, p, len(out), dp)
	})
}

// weightedLanesNEON sums rows rows of weighted columns into out: fma
// accumulates them in lanes rows of dp (len(out) rounded up to 4) zeroed
// accumulators, which are then reduced in the lane order.
func weightedLanesNEON(lanes, rows int, out []float32, fma func(acc []float32, dp int)) {
	d := len(out)
	if d == 0 {
		return
	}
	dp := (d + 3) &^ 3
	buf := getScratch(lanes*dp + dp)
	defer scratchPool.Put(buf)
	acc, res := (*buf)[:lanes*dp], (*buf)[lanes*dp:]
	clear(acc)
	if rows > 0 {
		fma(acc, dp)
	}
	if lanes == 64 {
		// The generic code's p is zero-padded to a multiple of 64: the
		// padding's fma(0, 0, acc) adds +0 to the lanes past the last row.
		if r := rows % 64; r != 0 && rows > 64 {
			addZeroNEON(acc[r*dp:])
		}
		reduceLanes64NEON(acc, dp, res)
	} else {
		reduceLanes16NEON(acc, dp, res)
	}
	copy(out, res[:d])
}
