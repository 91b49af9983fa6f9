//go:build amd64

package ggml

import (
	"sync"
	"unsafe"

	"golang.org/x/sys/cpu"
)

//go:generate sh -c "cd _asm && go run . -out ../kernels_amd64.s -stubs ../kernels_amd64_stubs.go -pkg ggml"

func simdKernels() []Kernels {
	if hasAVX512() {
		return []Kernels{avx512Kernels{}}
	}
	return nil
}

// hasAVX512 reports the AVX-512 subsets the kernels use (F, BW, DQ, VL),
// with the OS saving the ZMM state (x/sys/cpu checks both).
func hasAVX512() bool {
	x := cpu.X86
	return x.HasAVX512F && x.HasAVX512BW && x.HasAVX512DQ && x.HasAVX512VL
}

// avx512Kernels runs the avo-generated kernels of kernels_amd64.s; types
// without one fall back to the generic code.
type avx512Kernels struct{}

type exactAsm struct {
	matVec  func(w []byte, rowBytes int, x []float32, out []float32)
	dequant func(src []byte, dst []float32)
}

var avx512Exact = map[Type]exactAsm{
	F32:  {matVecExactF32AVX512, dequantF32AVX512},
	F16:  {matVecExactF16AVX512, dequantF16AVX512},
	BF16: {matVecExactBF16AVX512, dequantBF16AVX512},
	Q8_0: {matVecExactQ8_0AVX512, dequantQ8_0AVX512},
	Q4_0: {matVecExactQ4_0AVX512, dequantQ4_0AVX512},
	Q4_1: {matVecExactQ4_1AVX512, dequantQ4_1AVX512},
	Q5_0: {matVecExactQ5_0AVX512, dequantQ5_0AVX512},
	Q5_1: {matVecExactQ5_1AVX512, dequantQ5_1AVX512},
	Q4_K: {matVecExactQ4_KAVX512, dequantQ4_KAVX512},
	Q5_K: {matVecExactQ5_KAVX512, dequantQ5_KAVX512},
	Q6_K: {matVecExactQ6_KAVX512, dequantQ6_KAVX512},
}

func (avx512Kernels) Name() string { return "avx512" }

func (avx512Kernels) MatVec(t Type, w []byte, x []float32, out []float32) {
	rb := checkMatrix("MatVec", t, w, len(x), len(out))
	k, ok := avx512Exact[t]
	if !ok || len(out) == 0 {
		Generic.MatVec(t, w, x, out)
		return
	}
	k.matVec(w, rb, x, out)
}

// Exact prefill: the activations of a block of rows are packed as
// [chunk of 8 elements][rows][8] so that two rows' chunks are one ZMM load;
// each group of 4 weight rows is dequantized once per block into a float32
// panel, then every tile of 8 activation rows runs gemmExact4x8AVX512 over
// the whole row length.

// packRows is how many activation rows a block packs: as many as keep the
// packed block within about 512 KiB (half the L2 of current x86 cores).
func packRows(k int) int {
	r := (512 << 10) / (4 * max(k, 1)) &^ 7
	return min(max(r, 8), 64)
}

var scratchPool sync.Pool // *[]float32

func getScratch(n int) *[]float32 {
	if p, ok := scratchPool.Get().(*[]float32); ok && cap(*p) >= n {
		*p = (*p)[:n]
		return p
	}
	s := make([]float32, n)
	return &s
}

func (avx512Kernels) MatMul(t Type, w []byte, n int, x []float32, rows int, out []float32, ldo int) {
	k := checkMatMul(t, w, n, x, rows, out, ldo)
	rb := checkMatrix("MatMul", t, w, k, n)
	kern, ok := avx512Exact[t]
	if !ok || k == 0 || n == 0 {
		Generic.MatMul(t, w, n, x, rows, out, ldo)
		return
	}
	kp := (k + 7) &^ 7
	tb := packRows(k)
	buf := getScratch(tb*kp + 4*kp)
	defer scratchPool.Put(buf)
	xp, panel := (*buf)[:tb*kp], (*buf)[tb*kp:]
	// F32 rows whose length is a multiple of 8 are a panel already.
	direct := t == F32 && k == kp && hostLittleEndian
	var tile [32]float32
	for i0 := 0; i0 < rows; i0 += tb {
		rn := min(tb, rows-i0)
		rp := (rn + 7) &^ 7
		packActivations(x[i0*k:(i0+rn)*k], rn, rp, k, xp[:rp*kp])
		for j0 := 0; j0 < n; j0 += 4 {
			jn := min(4, n-j0)
			var wp []float32
			if direct && jn == 4 {
				wp = f32Slice(w[j0*rb : (j0+4)*rb])
			} else {
				wp = panel
				for j := range 4 {
					dst := panel[j*kp : (j+1)*kp]
					if j >= jn {
						clear(dst)
						continue
					}
					kern.dequant(w[(j0+j)*rb:(j0+j+1)*rb], dst[:k])
					clear(dst[k:])
				}
			}
			for t0 := 0; t0 < rp; t0 += 8 {
				gemmExact4x8AVX512(wp, kp, xp[t0*8:rp*kp], rp*8, k, &tile)
				for ti := range min(8, rn-t0) {
					o := out[(i0+t0+ti)*ldo+j0:]
					copy(o[:jn], tile[4*ti:4*ti+jn])
				}
			}
		}
	}
}

// packActivations writes rn rows of k values into dst as [k/8][rp][8],
// zero-filling rows rn..rp-1 and the elements past k.
func packActivations(x []float32, rn, rp, k int, dst []float32) {
	kp := (k + 7) &^ 7
	for c := 0; c < kp; c += 8 {
		blk := dst[c*rp : c*rp+8*rp]
		for i := range rp {
			d := blk[8*i : 8*i+8]
			if i >= rn {
				clear(d)
				continue
			}
			src := x[i*k+c : i*k+min(c+8, k)]
			copy(d, src)
			clear(d[len(src):])
		}
	}
}

// hostLittleEndian reports whether float32 bytes in memory are in GGUF order.
var hostLittleEndian = littleEndian

// f32Slice views little-endian float32 weight bytes as floats.
func f32Slice(b []byte) []float32 {
	return unsafe.Slice((*float32)(unsafe.Pointer(&b[0])), len(b)/4)
}

func (avx512Kernels) ScoreRows(k []float32, stride int, q []float32, out []float32) {
	checkRows("ScoreRows", len(k), stride, len(q), len(out))
	if len(out) > 0 {
		scoreRowsAVX512(k, stride, q, out)
	}
}

func (avx512Kernels) WeightedColumns(v []float32, stride int, p []float32, lanes int, out []float32) {
	checkRows("WeightedColumns", len(v), stride, len(out), len(p))
	checkLanes(lanes)
	d := len(out)
	if d == 0 {
		return
	}
	buf := getScratch(lanes * d)
	defer scratchPool.Put(buf)
	acc := *buf
	clear(acc)
	if len(p) > 0 {
		laneFMAAVX512(acc, lanes, 0, v, stride, p, d)
	}
	if lanes == 64 {
		reduceLanes64AVX512(acc, d, out)
	} else {
		reduceLanes16AVX512(acc, d, out)
	}
}

func (avx512Kernels) Softmax(p []float32, scale float32) {
	if len(p) > 0 {
		softmaxAVX512(p, scale)
	}
}

func (avx512Kernels) Swiglu(dst, gate, up []float32) {
	checkSwiglu(dst, gate, up)
	full := len(gate) &^ 15
	if full > 0 {
		swigluAVX512(dst, gate, up)
	}
	swiglu(dst[full:], gate[full:], up[full:]) // the scalar rest (expf)
}
