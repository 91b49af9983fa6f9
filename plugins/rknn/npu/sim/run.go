package sim

import (
	"encoding/binary"
	"math"
	"sync"
	"unsafe"

	"github.com/x448/float16"

	"github.com/evalrun/evalrun/plugins/internal/faults"
	"github.com/evalrun/evalrun/plugins/rknn/npu"
)

// The sim decodes its operands with its own code, walking each native layout
// in memory order, instead of calling the npu packers: a packer bug then
// shows up as a wrong product.

const (
	bAtomK    = 32   // K atom of native B
	bSegmentK = 8192 // native B splits K into segments of this size
)

// Element widths in bits by matmul type: A, B, C.
func widths(t npu.MatmulType) (a, b, c int) {
	switch t {
	case npu.Float16MMFloat16ToFloat32:
		return 16, 16, 32
	case npu.Float16MMFloat16ToFloat16:
		return 16, 16, 16
	case npu.Int8MMInt8ToInt32:
		return 8, 8, 32
	case npu.Int8MMInt8ToInt8:
		return 8, 8, 8
	case npu.Int4MMInt4ToInt16:
		return 4, 4, 16
	}
	panic("sim: unvalidated matmul type")
}

func isFloat(t npu.MatmulType) bool {
	return t == npu.Float16MMFloat16ToFloat32 || t == npu.Float16MMFloat16ToFloat16
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }

// workspace holds a run's decoded operands; reused to spare allocations.
type workspace struct {
	flatF, aF, bF, cF []float32 // bF is B transposed: N rows of K
	flatI, aI, bI, cI []int32
	cS                []int32 // a later K segment's partial sums (fast path)
	aB                []byte  // A as int8 values (fast path)
	aNatF             []float32
	aNatI             []int32 // a native A decoded in layout order
	bSwap             []byte  // B with its nibbles swapped (Int4BHighFirst)
}

func grow[E any](s []E, n int) []E {
	if cap(s) < n {
		return make([]E, n)
	}
	return s[:n]
}

// aLen and bLen are the element counts of A and B in their layouts,
// padding included.
func aLen(M, K int, native bool, subK int) int {
	if !native {
		return M * K
	}
	return ceilDiv(K, subK) * M * subK
}

func bLen(K, N int, layout npu.Layout, subN int) int {
	if layout != npu.LayoutNative {
		return K * N
	}
	n := 0
	for s0 := 0; s0 < K; s0 += bSegmentK {
		n += ceilDiv(N, subN) * subN * ceilDiv(min(bSegmentK, K-s0), bAtomK) * bAtomK
	}
	return n
}

// decoder decodes the len(dst) consecutive layout elements starting at
// element idx of an operand buffer.
type decoder[E float32 | int32] func(dst []E, idx int)

// gatherA decodes A from its layout into row-major M×K. A native A is
// decoded in one pass into *flat (scratch) and its atoms moved into place.
func gatherA[E float32 | int32](dec decoder[E], dst []E, M, K int, native bool, subK int, flat *[]E) {
	if !native || M == 1 { // one row: native atoms follow each other
		dec(dst[:M*K], 0)
		return
	}
	nk := ceilDiv(K, subK)
	*flat = grow(*flat, nk*M*subK)
	gatherAAtoms(dec, dst, *flat, M, K, subK, 0, nk)
}

// gatherAAtoms is gatherA of a native A with M > 1 for the K atoms [lo, hi)
// only, through flat (nk·M·subK elements; the range's part is written).
func gatherAAtoms[E float32 | int32](dec decoder[E], dst, flat []E, M, K, subK, lo, hi int) {
	idx := lo * M * subK
	dec(flat[idx:hi*M*subK], idx)
	for kb := lo; kb < hi; kb++ { // [K/subK][M][subK]
		k0 := kb * subK
		if subK == 8 && k0+8 <= K {
			for m := 0; m < M; m++ {
				*(*[8]E)(dst[m*K+k0:]) = *(*[8]E)(flat[idx:])
				idx += 8
			}
			continue
		}
		for m := 0; m < M; m++ {
			copy(dst[m*K+k0:m*K+min(k0+subK, K)], flat[idx:]) // slots past K are padding
			idx += subK
		}
	}
}

// gatherBT decodes B from its layout into N rows of K (B transposed),
// splitting the work over threads (a pure copy, so the result is the same).
func gatherBT[E float32 | int32](dec decoder[E], dst []E, K, N int, layout npu.Layout, subN, threads int) {
	switch layout {
	case npu.LayoutNorm: // [K][N]
		row := make([]E, N)
		for k := 0; k < K; k++ {
			dec(row, k*N)
			for n, v := range row {
				dst[n*K+k] = v
			}
		}
	case npu.LayoutTPNorm: // [N][K]
		parallelCols(N, threads, func(lo, hi int) { dec(dst[lo*K:hi*K], lo*K) })
	case npu.LayoutNative: // per K segment: [N/subN][K/32][subN][32]
		nBlocks := ceilDiv(N, subN)
		parallelCols(nBlocks, threads, func(lo, hi int) {
			segBase := 0
			for s0 := 0; s0 < K; s0 += bSegmentK {
				segEnd := s0 + min(bSegmentK, K-s0)
				kBlocks := ceilDiv(segEnd-s0, bAtomK)
				for nb := lo; nb < hi; nb++ {
					idx := segBase + nb*kBlocks*subN*bAtomK
					for kb := 0; kb < kBlocks; kb++ {
						k0 := s0 + kb*bAtomK
						for j := 0; j < subN; j++ {
							if n := nb*subN + j; n < N { // rows past N are padding
								dec(dst[n*K+k0:n*K+min(k0+bAtomK, segEnd)], idx)
							}
							idx += bAtomK
						}
					}
				}
				segBase += nBlocks * kBlocks * subN * bAtomK
			}
		})
	}
}

// scatterC copies row-major M×N into layout order, padding slots zero.
func scatterC[E float32 | int32](src, flat []E, M, N int, native bool, subN int) {
	if !native || M == 1 { // one row: native atoms follow each other
		clear(flat[copy(flat, src[:M*N]):])
		return
	}
	scatterCAtoms(src, flat, M, N, subN, 0, ceilDiv(N, subN))
}

// scatterCAtoms is scatterC of a native C with M > 1 for the groups of subN
// columns [lo, hi): each group is one contiguous run of C ([N/subN][M][subN]).
func scatterCAtoms[E float32 | int32](src, flat []E, M, N, subN, lo, hi int) {
	for g := lo; g < hi; g++ {
		n0, idx := g*subN, g*M*subN
		w := min(subN, N-n0)
		for m := 0; m < M; m++ {
			copy(flat[idx:idx+w], src[m*N+n0:m*N+n0+w])
			clear(flat[idx+w : idx+subN])
			idx += subN
		}
	}
}

// words32 views a 32-bit C buffer as E values where the host's byte order
// is the layout's (little-endian), so C is scattered straight into it.
func words32[E float32 | int32](buf []byte, n int) ([]E, bool) {
	if !littleEndian || n == 0 {
		return nil, false
	}
	return unsafe.Slice((*E)(unsafe.Pointer(&buf[0])), n), true
}

var littleEndian = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

func f16Decoder(buf []byte) decoder[float32] {
	return func(dst []float32, idx int) {
		src := buf[2*idx : 2*(idx+len(dst))]
		if h, ok := npu.HalvesOf(src); ok {
			npu.F16sToF32(dst, h)
			return
		}
		for i := range dst {
			dst[i] = npu.F16ToF32(binary.LittleEndian.Uint16(src[2*i:]))
		}
	}
}

// intDecoder decodes int8 or int4 (low nibble first) elements minus zp.
func intDecoder(buf []byte, bits int, zp int32) decoder[int32] {
	if bits == 8 {
		return func(dst []int32, idx int) {
			src := buf[idx : idx+len(dst)]
			for i, b := range src {
				dst[i] = int32(int8(b)) - zp
			}
		}
	}
	return func(dst []int32, idx int) {
		for i := range dst {
			e := idx + i
			b := buf[e>>1]
			if e&1 == 1 {
				b >>= 4
			}
			dst[i] = int32(int8(b<<4)>>4) - zp
		}
	}
}

// Run computes C = A·B (rknn_matmul_run, blocking).
func (c *Context) Run() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	run, err := c.begin()
	if err != nil {
		return err
	}
	c.compute()
	c.end(run)
	return nil
}

// begin checks a run (c.mu held) and starts it in the fault schedule,
// which applies the faults that strike before it computes.
func (c *Context) begin() (faults.Run, error) {
	const fn = "rknn_matmul_run"
	if err := c.alive(fn); err != nil {
		return faults.Run{}, err
	}
	for _, op := range []struct {
		name string
		m    *Mem
	}{{"A", c.a}, {"B", c.b}, {"C", c.c}} {
		if op.m == nil {
			return faults.Run{}, rkErr(fn, npu.ErrParamInvalid, "%s memory not set (call SetIOMem with io_attr.%s)", op.name, op.name)
		}
		if op.m.freed.Load() {
			return faults.Run{}, rkErr(fn, npu.ErrParamInvalid, "%s memory was destroyed", op.name)
		}
	}
	return c.drv.opts.Faults.Begin(), nil
}

// end applies the faults that corrupt a computed C and counts the run.
func (c *Context) end(run faults.Run) {
	_, _, cBits := widths(c.info.Type)
	run.Corrupt(c.c.buf, faults.Element{Bits: cBits, Float: isFloat(c.info.Type)})
	c.drv.count.Count(&c.info, &c.attrs)
}

// phase is one parallel step of a run: fn over [0, n) in ranges whose
// bounds are multiples of align (1, 2 or 4), each output computed by one
// call in a fixed order; then after, if set, on one goroutine.
type phase struct {
	n, align int
	fn       func(lo, hi int)
	after    func()
}

// compute runs the context's phases on the host's threads.
func (c *Context) compute() {
	w := c.drv.getWork()
	defer c.drv.putWork(w)
	phases, finish := c.plan(w, nil)
	inline := c.drv.small(c.work())
	for _, p := range phases {
		c.drv.parallelPhases([]phase{p}, inline)
		if p.after != nil {
			p.after()
		}
	}
	finish()
}

// work is the run's multiply-adds and the bytes of its B.
func (c *Context) work() (macs, bBytes int) {
	return int(c.info.M) * int(c.info.K) * int(c.info.N), int(c.attrs.B.Size)
}

// small reports whether runs of this much work compute on the calling
// goroutine (Options.Small).
func (d *Driver) small(macs, bBytes int) bool {
	return d.opts.Small != nil && d.opts.Small(macs, bBytes)
}

// plan decodes what a run reads into w (the fast path's A possibly taken
// from shared) and returns its parallel phases and finish, which writes C.
func (c *Context) plan(w *workspace, shared *decodedAs) (phases []phase, finish func()) {
	M, K, N := int(c.info.M), int(c.info.K), int(c.info.N)
	aBits, bBits, cBits := widths(c.info.Type)
	aNative := c.info.ACLayout == npu.LayoutNative
	subKA := 128 / aBits // A native: 16-byte K atoms
	subNB := 256 / bBits // B native: fp16 16, int8 32, int4 64
	subNC := 128 / cBits // C native: 16-byte N atoms
	nA := aLen(M, K, aNative, subKA)
	nB := bLen(K, N, c.info.BLayout, subNB)
	nC := aLen(M, N, aNative, subNC)
	threads := c.drv.opts.Threads
	b := c.b.buf
	if c.drv.opts.Int4BHighFirst && bBits == 4 && c.info.BLayout == npu.LayoutNative {
		// The device reads even elements from the high nibble: what it
		// computes with is B with each byte's nibbles swapped.
		w.bSwap = grow(w.bSwap, len(b))
		for i, v := range b {
			w.bSwap[i] = v<<4 | v>>4
		}
		b = w.bSwap
	}
	// A native float32 C of several rows: results go straight into it
	// rather than through a row-major copy written after the run.
	var cF32 []float32
	if view, ok := words32[float32](c.c.buf, nC); ok && cBits == 32 && aNative && M > 1 {
		cF32 = view
	}
	fast := c.fastType()
	if fast {
		var wroteC bool
		if phases, wroteC = c.planFast(w, b, M, K, N, aNative, shared, cF32); wroteC {
			return phases, func() {}
		}
	}

	if isFloat(c.info.Type) {
		if !fast {
			w.aF = grow(w.aF, M*K)
			w.bF = grow(w.bF, N*K)
			w.cF = grow(w.cF, M*N)
			gatherA(f16Decoder(c.a.buf[:2*nA]), w.aF, M, K, aNative, subKA, &w.aNatF)
			gatherBT(f16Decoder(b[:2*nB]), w.bF, K, N, c.info.BLayout, subNB, threads)
			mm := matmulF32
			if c.drv.opts.FP16Ideal {
				mm = matmulF64
			}
			phases = []phase{{n: N, align: 4, fn: func(lo, hi int) { mm(w.aF, w.bF, w.cF, M, K, N, lo, hi) }}}
		}
		if cF32 != nil {
			return append(phases, scatterPhase(w.cF, cF32, M, N, subNC)), func() {}
		}
		return phases, func() { c.writeCF(w, M, N, nC, aNative, subNC, cBits) }
	}
	if !fast {
		w.aI = grow(w.aI, M*K)
		w.bI = grow(w.bI, N*K)
		w.cI = grow(w.cI, M*N)
		q := c.quant
		gatherA(intDecoder(c.a.buf[:(nA*aBits+7)/8], aBits, q[0].zp), w.aI, M, K, aNative, subKA, &w.aNatI)
		gatherBT(intDecoder(b[:(nB*bBits+7)/8], bBits, q[1].zp), w.bI, K, N, c.info.BLayout, subNB, threads)
		phases = []phase{{n: N, align: 4, fn: func(lo, hi int) { matmulI32(w.aI, w.bI, w.cI, M, K, N, lo, hi) }}}
	}
	if view, ok := words32[int32](c.c.buf, nC); ok && c.info.Type == npu.Int8MMInt8ToInt32 && aNative && M > 1 {
		return append(phases, scatterPhase(w.cI, view, M, N, subNC)), func() {} // exact sums, as they are
	}
	return phases, func() { c.writeCI(w, M, N, nC, aNative, subNC, cBits) }
}

// scatterPhase writes a row-major result straight into a 32-bit native C
// with M > 1, its column groups spread over the threads (on one thread the
// scatter is a large share of a prefill's device call; measured:
// docs/design-notes.md).
func scatterPhase[E float32 | int32](src, view []E, M, N, subNC int) phase {
	return phase{n: ceilDiv(N, subNC), align: 1, fn: func(lo, hi int) { scatterCAtoms(src, view, M, N, subNC, lo, hi) }}
}

// writeCF writes the row-major float result w.cF into C.
func (c *Context) writeCF(w *workspace, M, N, nC int, aNative bool, subNC, cBits int) {
	if view, ok := words32[float32](c.c.buf, nC); ok && cBits == 32 {
		scatterC(w.cF, view, M, N, aNative, subNC)
		return
	}
	w.flatF = grow(w.flatF, nC)
	flat := w.flatF
	scatterC(w.cF, flat, M, N, aNative, subNC)
	if cBits == 32 {
		for i, v := range flat {
			binary.LittleEndian.PutUint32(c.c.buf[4*i:], math.Float32bits(v))
		}
		return
	}
	for i, v := range flat {
		binary.LittleEndian.PutUint16(c.c.buf[2*i:], float16.Fromfloat32(v).Bits()) // RNE
	}
}

// writeCI brings the exact integer sums w.cI to the output type and writes
// them into C.
func (c *Context) writeCI(w *workspace, M, N, nC int, aNative bool, subNC, cBits int) {
	q := c.quant
	w.flatI = grow(w.flatI, nC)
	switch c.info.Type {
	case npu.Int4MMInt4ToInt16:
		c.int16Out(w.cI)
	case npu.Int8MMInt8ToInt8:
		for i, v := range w.cI {
			w.cI[i] = requantize(v, q)
		}
	}
	if view, ok := words32[int32](c.c.buf, nC); ok && cBits == 32 {
		scatterC(w.cI, view, M, N, aNative, subNC)
		return
	}
	flat := w.flatI[:nC]
	scatterC(w.cI, flat, M, N, aNative, subNC)
	switch cBits {
	case 32:
		for i, v := range flat {
			binary.LittleEndian.PutUint32(c.c.buf[4*i:], uint32(v))
		}
	case 16:
		for i, v := range flat {
			binary.LittleEndian.PutUint16(c.c.buf[2*i:], uint16(v))
		}
	case 8:
		for i, v := range flat {
			c.c.buf[i] = byte(v)
		}
	}
}

// int16Out brings exact int4×int4 sums to the int16 output: saturated, or
// wrapped modulo 2^16 under Options.Int4Wrap.
func (c *Context) int16Out(sums []int32) {
	if c.drv.opts.Int4Wrap {
		for i, v := range sums {
			sums[i] = int32(int16(v))
		}
		return
	}
	for i, v := range sums {
		sums[i] = min(max(v, math.MinInt16), math.MaxInt16)
	}
}

// matmulF64 is matmulF32's "ideal" counterpart: each output summed in
// float64 in K order, rounded to float32 once.
func matmulF64(a, bT, cOut []float32, M, K, N, lo, hi int) {
	for n := lo; n < hi; n++ {
		b := bT[n*K : (n+1)*K]
		for m := 0; m < M; m++ {
			var acc float64
			for k, x := range a[m*K : (m+1)*K] {
				acc += float64(x) * float64(b[k])
			}
			cOut[m*N+n] = float32(acc)
		}
	}
}

// requantize maps the exact sum Σ(A−zpA)(B−zpB) to int8 output:
// round(sum·(sA·sB/sC)) in float64, ties away from zero, plus zpC, saturated.
func requantize(sum int32, q [3]perLayer) int32 {
	scale := float64(q[0].scale) * float64(q[1].scale) / float64(q[2].scale)
	v := math.Round(float64(sum)*scale) + float64(q[2].zp)
	return int32(min(max(v, math.MinInt8), math.MaxInt8))
}

// parallelCols splits [0,N) into column ranges (multiples of 4) over threads.
// Each output element is computed by one goroutine in a fixed order, so the
// result does not depend on the thread count.
func parallelCols(N, threads int, fn func(lo, hi int)) {
	if threads <= 1 || N < 8 {
		fn(0, N)
		return
	}
	chunk := ceilDiv(ceilDiv(N, threads), 4) * 4
	var wg sync.WaitGroup
	for lo := 0; lo < N; lo += chunk {
		hi := min(lo+chunk, N)
		wg.Go(func() { fn(lo, hi) })
	}
	wg.Wait()
}

// parallel runs fn over [0, n) in ranges aligned to align (1, 2 or 4) on
// Options.Parallel, or on Threads goroutines.
func (d *Driver) parallel(n, align int, fn func(lo, hi int)) {
	switch {
	case d.opts.Parallel != nil:
		d.opts.Parallel(n, align, fn)
	case align == 1:
		parallelGroups(n, d.opts.Threads, fn)
	default:
		parallelCols(n, d.opts.Threads, fn)
	}
}

// parallelGroups splits [0,n) into threads near-equal ranges (the fast
// path's channel groups, which need no multiple of 4): rounding ranges up
// to multiples of 4 would give one of two threads 8 of 11 groups and the
// other 3. Each output is still computed by one goroutine in a fixed order.
func parallelGroups(n, threads int, fn func(lo, hi int)) {
	threads = min(threads, n)
	if threads <= 1 {
		fn(0, n)
		return
	}
	var wg sync.WaitGroup
	for t := range threads {
		lo, hi := n*t/threads, n*(t+1)/threads
		wg.Go(func() { fn(lo, hi) })
	}
	wg.Wait()
}

// matmulF32 computes columns [lo,hi) of C = A·B with the block-32 float32
// accumulation of the package doc. bT holds N rows of K.
func matmulF32(a, bT, cOut []float32, M, K, N, lo, hi int) {
	n := lo
	for ; n+4 <= hi; n += 4 {
		b0, b1, b2, b3 := bT[n*K:(n+1)*K], bT[(n+1)*K:(n+2)*K], bT[(n+2)*K:(n+3)*K], bT[(n+3)*K:(n+4)*K]
		for m := 0; m < M; m++ {
			row := a[m*K : (m+1)*K]
			var acc0, acc1, acc2, acc3 float32
			for k0 := 0; k0 < K; k0 += bAtomK {
				end := min(k0+bAtomK, K)
				var s0, s1, s2, s3 float32
				for k := k0; k < end; k++ {
					x := row[k]
					// float32(...) forbids fusing into an FMA; the products are exact anyway.
					s0 += float32(x * b0[k])
					s1 += float32(x * b1[k])
					s2 += float32(x * b2[k])
					s3 += float32(x * b3[k])
				}
				acc0 += s0
				acc1 += s1
				acc2 += s2
				acc3 += s3
			}
			out := cOut[m*N+n : m*N+n+4]
			out[0], out[1], out[2], out[3] = acc0, acc1, acc2, acc3
		}
	}
	for ; n < hi; n++ {
		b := bT[n*K : (n+1)*K]
		for m := 0; m < M; m++ {
			row := a[m*K : (m+1)*K]
			var acc float32
			for k0 := 0; k0 < K; k0 += bAtomK {
				var s float32
				for k := k0; k < min(k0+bAtomK, K); k++ {
					s += float32(row[k] * b[k])
				}
				acc += s
			}
			cOut[m*N+n] = acc
		}
	}
}

// matmulI32 computes columns [lo,hi) exactly (|sum| < 2^31 within K ≤ 10240).
func matmulI32(a, bT, cOut []int32, M, K, N, lo, hi int) {
	for n := lo; n < hi; n++ {
		b := bT[n*K : (n+1)*K]
		for m := 0; m < M; m++ {
			row := a[m*K : (m+1)*K]
			var s int32
			for k, x := range row {
				s += x * b[k]
			}
			cOut[m*N+n] = s
		}
	}
}
