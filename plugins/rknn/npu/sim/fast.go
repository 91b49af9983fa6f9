package sim

import (
	"bytes"
	"sync"

	"github.com/evalrun/evalrun/plugins/rknn/npu"
)

// The fast path: contexts whose B is in the native layout (what the
// offload and the seed use) are computed by the amd64 kernels straight
// from B's buffer, with no decoded copy of B: the device reads its memory
// in its own layout, so a layout bug in the caller still gives wrong
// products, and memory stays one copy of each weight. The numerics are the
// documented ones (the generic path's): fp16 products exact, summed one
// after the other inside each 32-element K block, blocks added in K order;
// integer paths exact. Other layouts and types go through run.go.

// transposed holds *[]float32 buffers of transposed B groups.
var transposed = sync.Pool{New: func() any { return new([]float32) }}

// fastType reports whether the fast path computes this context.
func (c *Context) fastType() bool {
	if !haveKernels || c.info.BLayout != npu.LayoutNative || (c.drv.opts.FP16Ideal && isFloat(c.info.Type)) {
		return false
	}
	switch c.info.Type {
	case npu.Float16MMFloat16ToFloat32, npu.Float16MMFloat16ToFloat16, npu.Int8MMInt8ToInt32, npu.Int4MMInt4ToInt16:
		return true
	}
	return false // int8→int8 needs the quantization parameters: run.go
}

// segments calls fn for every K segment of a native B: its first k, its
// number of 32-element blocks and its byte offset in B.
func segments(K, N, subN, bBits int, fn func(k0, kBlocks, off int)) {
	off := 0
	for k0 := 0; k0 < K; k0 += bSegmentK {
		kBlocks := ceilDiv(min(bSegmentK, K-k0), bAtomK)
		fn(k0, kBlocks, off)
		off += ceilDiv(N, subN) * kBlocks * subN * bAtomK * bBits / 8
	}
}

// decodedAs are the A operands decoded so far by the runs of one RunCores
// call: the cores of a matmul, and the ops of one shared device call, read
// the same activations, each from its own buffer. A run whose A is the
// same bytes in the same type, layout and shape as an earlier one computes
// from that decoding instead of its own (the values are a function of the
// bytes, so nothing changes but the time: a prefill's Q, K and V on three
// cores would otherwise decode the same A nine times, on one thread).
type decodedAs []decodedA

type decodedA struct {
	c    *Context
	nA   int       // bytes of A read
	f32  []float32 // fp16: A as float32, row-major
	int8 []byte    // int8, int4: A as int8 values, row-major (int4 rearranged)
	// phase: A is decoded by the first phase of the run that decoded it;
	// a run taking it starts with an empty phase, so that its own begin
	// after that one (RunCores runs the runs' phases in step).
	phase bool
}

// find returns the decoding of an earlier run that read the same A as c.
func (ds *decodedAs) find(c *Context, nA int) *decodedA {
	if ds == nil {
		return nil
	}
	for i := range *ds {
		d := &(*ds)[i]
		if o := d.c; o.info.Type == c.info.Type && o.info.ACLayout == c.info.ACLayout && o.info.M == c.info.M &&
			o.info.K == c.info.K && d.nA == nA && (o.a == c.a || bytes.Equal(o.a.buf[:nA], c.a.buf[:nA])) {
			return d
		}
	}
	return nil
}

func (ds *decodedAs) add(d decodedA) {
	if ds != nil {
		*ds = append(*ds, d)
	}
}

// planFast decodes A (or takes an earlier run's decoding of the same bytes
// from shared, which may be nil) and returns the phases that fill w.cF
// (float types) or w.cI (integer types) with the row-major M×N result.
//
// cNative, if not nil, is a native 32-bit C (M > 1) the prefill kernels
// write in place; wroteC reports whether they did (decode-sized runs and
// integer types fill w.cF or w.cI).
func (c *Context) planFast(w *workspace, b []byte, M, K, N int, aNative bool, shared *decodedAs, cNative []float32) (phases []phase, wroteC bool) {
	aBits, bBits, _ := widths(c.info.Type)
	subKA := 128 / aBits
	subNB := 256 / bBits
	nA := aLen(M, K, aNative, subKA)
	nBlocks := N / subNB
	phases = make([]phase, 0, ceilDiv(K, bSegmentK))

	if isFloat(c.info.Type) {
		// Where the prefill kernels write: row-major w.cF, or C's atoms of
		// 4 channels, M·4 elements apart, group g at 16·g·M ([N/4][M][4]).
		decodeSized := M <= 4 && K <= bSegmentK
		cOut, ldc, atom, groupAt := cNative, 4, 4*M, 16*M
		if wroteC = cNative != nil && !decodeSized; !wroteC {
			w.cF = grow(w.cF, M*N)
			cOut, ldc, atom, groupAt = w.cF, N, 4, 16
		}
		var a []float32
		if d := shared.find(c, 2*nA); d != nil {
			a = d.f32
			if d.phase {
				phases = append(phases, phase{}) // computes once the first has decoded A
			}
		} else {
			w.aF = grow(w.aF, M*K)
			a = w.aF
			dec := f16Decoder(c.a.buf[:2*nA])
			d := decodedA{c: c, nA: 2 * nA, f32: a}
			if d.phase = aNative && M > 1; d.phase {
				// A prefill's A decoded by all threads, K atoms split among
				// them, as the run's first phase.
				nk := ceilDiv(K, subKA)
				w.aNatF = grow(w.aNatF, nk*M*subKA)
				flat := w.aNatF
				phases = append(phases, phase{n: nk, align: 1, fn: func(lo, hi int) { gatherAAtoms(dec, a, flat, M, K, subKA, lo, hi) }})
			} else {
				gatherA(dec, a, M, K, aNative, subKA, &w.aNatF)
			}
			shared.add(d)
		}
		segments(K, N, subNB, bBits, func(k0, kBlocks, off int) {
			blockBytes := kBlocks * 1024 // one group of 16 channels, all blocks
			if decodeSized {
				// Decode-sized: a group's blocks are transposed a pair at
				// a time into a staging buffer on the kernel's stack and
				// summed from there (tools/asmgen: genFP16Direct); B is
				// never stored as float32.
				direct := [...]func(b []byte, kBlocks int, a []float32, lda int, c []float32, ldc int){
					fp16Direct1AVX512, fp16Direct2AVX512, fp16Direct3AVX512, fp16Direct4AVX512}[M-1]
				phases = append(phases, phase{n: nBlocks, align: 1, fn: func(lo, hi int) {
					for nb := lo; nb < hi; nb++ {
						direct(b[off+nb*blockBytes:off+(nb+1)*blockBytes], kBlocks, a, K, w.cF[nb*16:], N)
					}
				}})
				return
			}
			// Ranges of whole pairs of groups, each range with a transposed
			// pair from the pool (a host pool calls fn for many small
			// ranges: allocating a fresh 2·kBlocks KB each time costs more
			// than the work).
			phases = append(phases, phase{n: nBlocks, align: 2, fn: func(lo, hi int) {
				bp := transposed.Get().(*[]float32)
				defer transposed.Put(bp)
				*bp = grow(*bp, 2*kBlocks*512)
				bt := *bp
				for nb := lo; nb < hi; nb += 2 {
					fp16TransposeAVX512(b[off+nb*blockBytes:off+(nb+1)*blockBytes], kBlocks, bt)
					if nb+1 < hi {
						fp16TransposeAVX512(b[off+(nb+1)*blockBytes:off+(nb+2)*blockBytes], kBlocks, bt[kBlocks*512:])
						fp16Accumulate2AVX512(bt, a[k0:], K, M, kBlocks, cOut[nb*groupAt:], ldc, atom, k0 == 0)
					} else {
						fp16Accumulate1AVX512(bt, a[k0:], K, M, kBlocks, cOut[nb*groupAt:], ldc, atom, k0 == 0)
					}
				}
			}})
		})
		return phases, wroteC
	}

	// Integer types: A as int8 values, row-major; int4 rows rearranged per
	// 32-element block as its 16 even then 16 odd elements, to meet B's
	// low and high nibbles.
	w.cI = grow(w.cI, M*N)
	nBytes := (nA*aBits + 7) / 8
	var a []byte
	if d := shared.find(c, nBytes); d != nil {
		a = d.int8
	} else {
		w.aI = grow(w.aI, M*K)
		gatherA(intDecoder(c.a.buf[:nBytes], aBits, 0), w.aI, M, K, aNative, subKA, &w.aNatI)
		w.aB = grow(w.aB, M*K)
		a = w.aB
		for m := range M {
			row, dst := w.aI[m*K:(m+1)*K], a[m*K:(m+1)*K]
			if aBits == 8 {
				for k, v := range row {
					dst[k] = byte(int8(v))
				}
				continue
			}
			for k0 := 0; k0 < K; k0 += 32 {
				for t := range 16 {
					dst[k0+t] = byte(int8(row[k0+2*t]))
					dst[k0+16+t] = byte(int8(row[k0+2*t+1]))
				}
			}
		}
		shared.add(decodedA{c: c, nA: nBytes, int8: a})
	}
	kernel := int8NativeAVX512
	if aBits == 4 {
		kernel = int4NativeAVX512
	}
	segments(K, N, subNB, bBits, func(k0, kBlocks, off int) {
		dst := w.cI
		p := phase{n: nBlocks, align: 1}
		if k0 > 0 { // later K segments: exact partial sums added
			w.cS = grow(w.cS, M*N)
			dst = w.cS
			p.after = func() {
				for i, v := range w.cS {
					w.cI[i] += v
				}
			}
		}
		blockBytes := kBlocks * 1024
		p.fn = func(lo, hi int) {
			for nb := lo; nb < hi; nb++ {
				kernel(a[k0:], K, M, b[off+nb*blockBytes:off+(nb+1)*blockBytes], kBlocks, dst[nb*subNB:], N)
			}
		}
		phases = append(phases, p)
	})
	return phases, false // the int16 output is writeCI's
}
