package main

import (
	"fmt"
	"math"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// ggml numerics: the kernels llama.cpp's CPU backend runs, reproduced
// instruction for instruction where the order of floating-point operations
// matters (engine/ggml/ggmlmm.go and cpuops.go hold the generic versions).

var c127, absMask, nib0F, nib08, xor80, bytes01, dword18, f64Sign, f64Half Mem

func genGGMLNumerics() {
	c127 = f32s("c127", []float32{127})
	absMask = u32s("absMask", []uint32{0x7fffffff})
	nib0F = u32s("nib0F", []uint32{0x0f0f0f0f})
	nib08 = u32s("nib08", []uint32{0x08080808})
	xor80 = u32s("xor80", []uint32{0x80808080})
	bytes01 = u32s("bytes01", []uint32{0x01010101})
	dword18 = u32s("dword18", []uint32{18})
	f64Sign = u64s("f64Sign", 1<<63)
	f64Half = u64s("f64Half", math.Float64bits(0.5))
	genQuantizeQ8_0()
	genRoundF16()
	genVecDotQ8_0Rows()
	genVecDotQ4_0x8Rows()
	genGGMLPrefill()
	genVecDotFloatRows(false)
	genVecDotFloatRows(true)
	for rows := 1; rows <= 4; rows++ {
		genTinyBLAS(false, rows)
		genTinyBLAS(true, rows)
	}
	genF16Convert()
	genF16ToF32()
	genQuantizeSym()
}

// u64s is one 8-byte constant (float64 data must be written as its bits).
func u64s(name string, v uint64) Mem {
	m := GLOBL(name, RODATA|NOPTR)
	DATA(0, U64(v))
	return m
}

// hmax16 is the maximum of a register's 16 lanes, in lane 0.
func hmax16(a VecVirtual) Register {
	h := YMM()
	VEXTRACTF32X8(U8(1), a, h)
	VMAXPS(a.AsY(), h, h)
	q := XMM()
	VEXTRACTF32X4(U8(1), h, q)
	VMAXPS(h.AsX(), q, q)
	t := XMM()
	VSHUFPS(U8(0x0E), q, q, t)
	VMAXPS(t, q, q)
	VSHUFPS(U8(0x01), q, q, t)
	VMAXPS(t, q, q)
	return q
}

// genQuantizeQ8_0: x86 quantize_row_q8_0 (AVX): per 32 values d = amax/127
// stored as binary16 (round to nearest even), id = 127/amax (0 when amax is
// 0), q = int8(round-half-even(x*id)).
func genQuantizeQ8_0() {
	TEXT("quantizeQ8_0AVX512", NOSPLIT, "func(x []float32, dst []byte, side []uint32, corr []int32)")
	Pragma("noescape")
	xp := Load(Param("x").Base(), GP64())
	n := Load(Param("x").Len(), GP64())
	dp := Load(Param("dst").Base(), GP64())
	sp := Load(Param("side").Base(), GP64())
	cp := Load(Param("corr").Base(), GP64())
	Label("block")
	CMPQ(n, U32(32))
	JB(LabelRef("done"))
	v0, v1 := ZMM(), ZMM()
	VMOVUPS(Mem{Base: xp}, v0)
	VMOVUPS(Mem{Base: xp, Disp: 64}, v1)
	a0, a1 := ZMM(), ZMM()
	VANDPS_BCST(absMask, v0, a0)
	VANDPS_BCST(absMask, v1, a1)
	VMAXPS(a1, a0, a0)
	amax := hmax16(a0)
	d := XMM()
	VDIVSS(c127, amax, d) // amax / 127
	id := XMM()
	VMOVSS(c127, id)
	VDIVSS(amax, id, id) // 127 / amax
	zero := XMM()
	VXORPS(zero, zero, zero)
	k := K()
	VCMPSS(U8(0x00), zero, amax, k) // amax == 0
	VMOVSS(zero, zero, k, id)       // then id = 0
	iv := ZMM()
	VBROADCASTSS(id, iv)
	qb := make([]VecVirtual, 2)
	for i, v := range []VecVirtual{v0, v1} {
		VMULPS(iv, v, v)
		VCVTPS2DQ(v, v) // MXCSR rounding: to nearest even
		qb[i] = XMM()
		VPMOVSDB(v, qb[i])
		VMOVDQU(qb[i], Mem{Base: dp, Disp: 2 + 16*i})
	}
	h := XMM()
	VCVTPS2PH(U8(0), d, h) // round to nearest even
	r := GP32()
	VMOVD(h, r)
	MOVW(r.As16(), Mem{Base: dp})
	CMPQ(Load(Param("side").Len(), GP64()), U8(0))
	JE(LabelRef("next"))
	// The multi-row kernels' tables (ggmlprefill.go), when side is not
	// empty (a single row has no use for them): dy as float32, then -8·Σq
	// from the stored bytes: Σ(q+128) by VPSADBW, minus 32·128.
	VCVTPH2PS(h, h)
	VMOVSS(h, Mem{Base: sp})
	qy := YMM()
	VINSERTI128(U8(1), qb[1], qb[0].AsY(), qy)
	// corr: -128·Σ of each dword's four q (the Q8_0 prefill's lane offsets).
	ones := ZMM()
	VPBROADCASTD(bytes01, ones)
	c := zeroZMM().AsY()
	VPDPBUSD(qy, ones.AsY(), c) // q signed, ones unsigned
	VPSLLD(U8(7), c, c)
	cz := zeroZMM().AsY()
	VPSUBD(c, cz, c)
	VMOVDQU32(c, Mem{Base: cp})
	ADDQ(U32(32), cp)
	VPXORD_BCST(xor80, qy, qy)
	zy := zeroZMM().AsY()
	VPSADBW(zy, qy, qy)
	qh := XMM()
	VEXTRACTI128(U8(1), qy, qh)
	VPADDQ(qy.AsX(), qh, qh)
	qt := XMM()
	VPSHUFD(U8(0x4E), qh, qt)
	VPADDQ(qt, qh, qh)
	sum := GP32()
	VMOVD(qh, sum)
	SHLL(U8(3), sum)
	NEGL(sum)
	ADDL(U32(8*32*128), sum)
	MOVL(sum, Mem{Base: sp, Disp: 4})
	ADDQ(U32(8), sp)
	Label("next")
	ADDQ(U32(128), xp)
	ADDQ(U32(34), dp)
	SUBQ(U32(32), n)
	JMP(LabelRef("block"))
	Label("done")
	VZEROUPPER()
	RET()
}

// genRoundF16: dst[i] = float32(binary16(x[i])), rounding to nearest even:
// the activations of an F16 weight as llama.cpp's kernels see them.
func genRoundF16() {
	TEXT("roundF16AVX512", NOSPLIT, "func(x []float32, dst []float32)")
	Pragma("noescape")
	xp := Load(Param("x").Base(), GP64())
	n := Load(Param("x").Len(), GP64())
	dp := Load(Param("dst").Base(), GP64())
	Label("loop")
	CMPQ(n, U32(16))
	JB(LabelRef("tail"))
	v := ZMM()
	VMOVUPS(Mem{Base: xp}, v)
	h := YMM()
	VCVTPS2PH(U8(0), v, h)
	VCVTPH2PS(h, v)
	VMOVUPS(v, Mem{Base: dp})
	ADDQ(U32(64), xp)
	ADDQ(U32(64), dp)
	SUBQ(U32(16), n)
	JMP(LabelRef("loop"))
	Label("tail")
	TESTQ(n, n)
	JZ(LabelRef("done"))
	kt := tailMask(n)
	vt := ZMM()
	VMOVUPS_Z(Mem{Base: xp}, kt, vt)
	ht := YMM()
	VCVTPS2PH(U8(0), vt, ht)
	VCVTPH2PS(ht, vt)
	VMOVUPS(vt, kt, Mem{Base: dp})
	Label("done")
	VZEROUPPER()
	RET()
}

// hsum8Pair is hsum_float_8 of both 8-lane halves of [a | b]: lane 0 holds
// a's, lane 0 of the second returned register b's.
func hsum8Pair(acc VecVirtual) (a, b Register) {
	t := ZMM()
	VSHUFF32X4(U8(0xB1), acc, acc, t) // swap the 128-bit blocks of each half
	VADDPS(t, acc, t)                 // q_i = x[i] + x[i+4]
	u := ZMM()
	VSHUFPS(U8(0x4E), t, t, u)
	VADDPS(u, t, t) // q0+q2, q1+q3
	VSHUFPS(U8(0xB1), t, t, u)
	VADDPS(u, t, t) // (q0+q2)+(q1+q3)
	bx := XMM()
	VEXTRACTF32X4(U8(2), t, bx)
	return t.AsX(), bx
}

// genVecDotQ8_0Rows: out[n] = the AVX vec_dot_q8_0_q8_0 of Q8_0 weight row n
// with the Q8_0 activation row y: per block, eight int32 lanes of four
// byte products, acc = fma(dx*dy, float(lane), acc), then hsum_float_8.
// Two rows share a register ([a | b]); the integer sums use VPDPBUSD on
// (x+128) and subtract 128·Σy.
func genVecDotQ8_0Rows() {
	TEXT("vecDotQ8_0RowsAVX512", NOSPLIT, "func(w []byte, rowBytes int, y []byte, out []float32)")
	Pragma("noescape")
	w := Load(Param("w").Base(), GP64())
	stride := Load(Param("rowBytes"), GP64())
	out := Load(Param("out").Base(), GP64())
	n := Load(Param("out").Len(), GP64())
	for _, R := range []int{8, 4, 2, 1} {
		loop, done := fmt.Sprintf("rows%d", R), fmt.Sprintf("rows%d_done", R)
		Label(loop)
		CMPQ(n, U32(R))
		JB(LabelRef(done))
		q8Group(R, w, stride, out)
		for i := 0; i < R; i++ {
			ADDQ(stride, w)
		}
		ADDQ(U32(4*R), out)
		SUBQ(U32(R), n)
		if R == 8 {
			JMP(LabelRef(loop))
		}
		Label(done)
	}
	VZEROUPPER()
	RET()
}

// rowAddresses addresses rows 0..rows-1 of stride bytes from w: rows 4j..4j+3
// from one base register each (returned, for the caller to advance), the
// stride multiples (stride3 = 3·stride) as the index, which keeps the
// general registers few.
func rowAddresses(w, stride, stride3 Register, rows int) ([]Register, func(r int) Mem) {
	bases := pointers(w, stride, 4, (rows+3)/4)
	return bases, func(r int) Mem {
		b := bases[r/4]
		switch r % 4 {
		case 1:
			return Mem{Base: b, Index: stride, Scale: 1}
		case 2:
			return Mem{Base: b, Index: stride, Scale: 2}
		case 3:
			return Mem{Base: b, Index: stride3, Scale: 1}
		}
		return Mem{Base: b}
	}
}

func q8Group(R int, w, stride, out Register) {
	tag := fmt.Sprintf("_%d", R)
	stride3 := GP64()
	LEAQ(Mem{Base: stride, Index: stride, Scale: 2}, stride3)
	bases, row := rowAddresses(w, stride, stride3, R)
	var pf Register
	if R > 1 {
		pf = GP64()
		MOVQ(stride, pf)
		IMUL3Q(U32(2*R), pf, pf) // two groups ahead
		ADDQ(w, pf)
	}
	npair := (R + 1) / 2
	acc := make([]VecVirtual, npair)
	for i := range acc {
		acc[i] = zeroZMM()
	}
	yp := Load(Param("y").Base(), GP64())
	nb := Load(Param("y").Len(), GP64())
	c80 := ZMM()
	VPBROADCASTD(xor80, c80)
	Label("block" + tag)
	CMPQ(nb, U32(34))
	JB(LabelRef("reduce" + tag))
	if pf != nil {
		for b := 0; b < R*34; b += 64 {
			PREFETCHT0(Mem{Base: pf, Disp: b})
		}
		ADDQ(U32(R*34), pf)
	}
	yq := ZMM()
	VBROADCASTI64X4(Mem{Base: yp, Disp: 2}, yq)
	corr := zeroZMM()
	VPDPBUSD(yq, c80, corr) // 128·Σy per lane
	dy := f16Bcast(Mem{Base: yp})
	for p := range acc {
		a := row(2 * p)
		b := a
		if 2*p+1 < R {
			b = row(2*p + 1)
		}
		wv := ZMM()
		VMOVDQU8(a.Offset(2), wv.AsY())
		VINSERTI64X4(U8(1), b.Offset(2), wv, wv)
		VPXORD(c80, wv, wv) // x + 128, unsigned
		s := zeroZMM()
		VPDPBUSD(yq, wv, s)
		VPSUBD(corr, s, s)
		VCVTDQ2PS(s, s)
		ha, hb := XMM(), XMM()
		VPBROADCASTW(a, ha)
		VPBROADCASTW(b, hb)
		dd := ZMM()
		VINSERTI32X4(U8(1), hb, ha.AsY(), dd.AsY())
		VCVTPH2PS(dd.AsY(), dd)
		VMULPS(dy, dd, dd)         // dx*dy
		VFMADD231PS(s, dd, acc[p]) // acc = fma(dx*dy, sum, acc)
	}
	for _, b := range bases {
		ADDQ(U32(34), b)
	}
	ADDQ(U32(34), yp)
	SUBQ(U32(34), nb)
	JMP(LabelRef("block" + tag))
	Label("reduce" + tag)
	for p := range acc {
		a, b := hsum8Pair(acc[p])
		VMOVSS(a, Mem{Base: out, Disp: 8 * p})
		if 2*p+1 < R {
			VMOVSS(b, Mem{Base: out, Disp: 8*p + 4})
		}
	}
}

// genVecDotQ4_0x8Rows: out[n] for 16 rows at a time of Q4_0 weights that
// llama.cpp repacks (q4_0_8x8): per output, per block, the block's whole
// integer sum, acc = fma(float(sum), dx*dy, acc), blocks in order. Rows are
// computed in pairs with VPDPBUSD (nibbles unsigned, minus 8·Σy), the 8
// partial sums of every row folded by a reduction network into one lane per
// row; the block scales are gathered in that lane order. len(out) must be a
// multiple of 16.
func genVecDotQ4_0x8Rows() {
	in := make([]tracked, 8)
	for i := range in {
		var l lanes
		for j := range l {
			l[j] = 2*i + j/8
		}
		in[i] = tracked{l: l}
	}
	order := reduceInt(in, 8, false)[0].l // lane -> row
	rowOf := make([]uint32, 16)
	laneOf := make([]uint32, 16)
	for lane, r := range order {
		rowOf[lane] = uint32(r)
		laneOf[r] = uint32(lane)
	}
	rowOfM := u32s("q4x8RowOf", rowOf)
	laneOfM := u32s("q4x8LaneOf", laneOf)
	// Word shift counts: 0 in the 128-bit blocks of low nibbles (0, 2),
	// 4 in those of high nibbles (1, 3).
	shifts := make([]uint32, 16)
	for i := range shifts {
		if i/4%2 == 1 {
			shifts[i] = 4<<16 | 4
		}
	}
	shiftM := u32s("q4x8NibbleShift", shifts)

	TEXT("vecDotQ4_0x8RowsAVX512", NOSPLIT, "func(w []byte, rowBytes int, y []byte, out []float32)")
	Pragma("noescape")
	w := Load(Param("w").Base(), GP64())
	stride := Load(Param("rowBytes"), GP64())
	out := Load(Param("out").Base(), GP64())
	n := Load(Param("out").Len(), GP64())
	// The rows' byte offsets in lane order, for the scale gather.
	idxBase := ZMM()
	VMOVDQU32(rowOfM, idxBase)
	sv := ZMM()
	VPBROADCASTD(stride.(GPVirtual).As32(), sv)
	VPMULLD(sv, idxBase, idxBase)
	stride3 := GP64()
	LEAQ(Mem{Base: stride, Index: stride, Scale: 2}, stride3)

	Label("group")
	CMPQ(n, U32(16))
	JB(LabelRef("done"))
	base, row := rowAddresses(w, stride, stride3, 16)
	// Sixteen short rows are sixteen streams too short for the hardware
	// prefetchers: walk the group two ahead, 16 blocks' bytes per block.
	pf := GP64()
	MOVQ(stride, pf)
	SHLQ(U8(5), pf)
	ADDQ(w, pf)
	acc := zeroZMM()
	boff := zeroZMM() // block byte offset, in every lane
	yp := Load(Param("y").Base(), GP64())
	nb := Load(Param("y").Len(), GP64())
	c08 := ZMM()
	VPBROADCASTD(nib08, c08)
	shift := ZMM()
	VMOVDQU32(shiftM, shift)
	kHi := K() // the dwords of blocks 2 and 3
	hiBlocks := GP32()
	MOVL(U32(0xFF00), hiBlocks)
	KMOVW(hiBlocks, kHi)
	Label("block")
	CMPQ(nb, U32(34))
	JB(LabelRef("reduce"))
	for b := 0; b < 16*18; b += 64 {
		PREFETCHT0(Mem{Base: pf, Disp: b})
	}
	ADDQ(U32(16*18), pf)
	yq := ZMM()
	VBROADCASTI64X4(Mem{Base: yp, Disp: 2}, yq)
	corr := zeroZMM()
	VPDPBUSD(yq, c08, corr) // 8·Σy per lane
	negCorr := ZMM()
	VPXORD(negCorr, negCorr, negCorr)
	VPSUBD(corr, negCorr, negCorr)
	parts := make([]tracked, 8)
	for p := range parts {
		// [a a b b] by two broadcast loads (no shuffle: the 512-bit
		// shuffles were the loop's bottleneck), then [a.lo a.hi b.lo
		// b.hi] by a shift per block.
		nib := ZMM()
		VBROADCASTI32X4(row(2*p).Offset(2), nib)
		VBROADCASTI32X4(row(2*p+1).Offset(2), kHi, nib)
		VPSRLVW(shift, nib, nib)
		VPANDD_BCST(nib0F, nib, nib)
		// Σ x·(y+...) - 8·Σy, in int32 (wrapping: any order is exact).
		s := ZMM()
		VMOVDQA64(negCorr, s)
		VPDPBUSD(yq, nib, s)
		parts[p] = tracked{v: s, l: in[p].l}
	}
	sum := reduceInt(parts, 8, true)[0].v
	VCVTDQ2PS(sum, sum)
	idx := ZMM()
	VPADDD(boff, idxBase, idx)
	km := K()
	KXNORW(km, km, km)
	g := ZMM()
	VPXORD(g, g, g)
	VPGATHERDD(Mem{Base: w, Index: idx, Scale: 1}, km, g)
	dh := YMM()
	VPMOVDW(g, dh)
	dw := ZMM()
	VCVTPH2PS(dh, dw)
	dy := f16Bcast(Mem{Base: yp})
	VMULPS(dy, dw, dw)        // dx*dy
	VFMADD231PS(dw, sum, acc) // acc = fma(float(sum), dx*dy, acc)
	VPADDD_BCST(dword18, boff, boff)
	for j := range base {
		ADDQ(U32(18), base[j])
	}
	ADDQ(U32(34), yp)
	SUBQ(U32(34), nb)
	JMP(LabelRef("block"))
	Label("reduce")
	pm := ZMM()
	VMOVDQU32(laneOfM, pm)
	VPERMPS(acc, pm, acc)
	VMOVUPS(acc, Mem{Base: out})
	MOVQ(stride, base[0])
	SHLQ(U8(4), base[0])
	ADDQ(base[0], w)
	ADDQ(U32(64), out)
	SUBQ(U32(16), n)
	JMP(LabelRef("group"))
	Label("done")
	VZEROUPPER()
	RET()
}

// genVecDotFloatRows: out[n] = ggml_vec_dot_f32 (or _f16 on binary16
// weights) of weight row n with x: four 16-lane FMA accumulators over steps
// of 64, (x0+x2)+(x1+x3), _mm512_reduce_add_ps, then the leftovers: for F32
// as GCC's AVX-512 code adds them (see leftoversF32), for F16 in double.
func genVecDotFloatRows(f16 bool) {
	name := "vecDotF32RowsAVX512"
	if f16 {
		name = "vecDotF16RowsAVX512"
	}
	TEXT(name, NOSPLIT, "func(w []byte, rowBytes int, x []float32, out []float32)")
	Pragma("noescape")
	local = AllocLocal(64)
	w := Load(Param("w").Base(), GP64())
	stride := Load(Param("rowBytes"), GP64())
	xp := Load(Param("x").Base(), GP64())
	k := Load(Param("x").Len(), GP64())
	out := Load(Param("out").Base(), GP64())
	n := Load(Param("out").Len(), GP64())
	np := GP64()
	MOVQ(k, np)
	ANDQ(I32(-64), np)
	esz := 4
	if f16 {
		esz = 2
	}
	load := func(m Mem, dst VecVirtual) {
		if f16 {
			VCVTPH2PS(m, dst)
		} else {
			VMOVUPS(m, dst)
		}
	}
	Label("row")
	TESTQ(n, n)
	JZ(LabelRef("done"))
	var acc [4]VecVirtual
	for a := range acc {
		acc[a] = zeroZMM()
	}
	i := GP64()
	XORQ(i, i)
	Label("step")
	CMPQ(i, np)
	JAE(LabelRef("fold"))
	for a := range acc {
		v := ZMM()
		load(Mem{Base: w, Index: i, Scale: uint8(esz), Disp: 16 * esz * a}, v)
		VFMADD231PS(Mem{Base: xp, Index: i, Scale: 4, Disp: 64 * a}, v, acc[a])
	}
	ADDQ(U32(64), i)
	JMP(LabelRef("step"))
	Label("fold")
	VADDPS(acc[2], acc[0], acc[0])
	VADDPS(acc[3], acc[1], acc[1])
	VADDPS(acc[1], acc[0], acc[0])
	s := reduce16(acc[0])
	if f16 {
		// leftovers in double: sumf += (double)(x*y)
		d := XMM()
		VCVTSS2SD(s, d, d)
		Label("left")
		CMPQ(i, k)
		JAE(LabelRef("store"))
		h := GP32()
		MOVWLZX(Mem{Base: w, Index: i, Scale: 2}, h)
		hx := XMM()
		VMOVD(h, hx)
		VCVTPH2PS(hx, hx)
		VMULSS(Mem{Base: xp, Index: i, Scale: 4}, hx, hx)
		VCVTSS2SD(hx, hx, hx)
		VADDSD(hx, d, d)
		INCQ(i)
		JMP(LabelRef("left"))
		Label("store")
		VCVTSD2SS(d, s, s)
	} else {
		leftoversF32(w, xp, i, k, s, false)
		Label("store")
	}
	nextRow(s, out, stride, w, n)
}

// genTinyBLAS: one tile of llamafile's tinyBLAS<16> for F32 or F16 weights:
// 4 weight rows × rows activation rows, each output one 16-lane FMA
// accumulator over k (a multiple of 16), reduced by _mm512_reduce_add_ps.
// out[i*ldo + j] for activation row i, weight row j.
func genTinyBLAS(f16 bool, rows int) {
	t := "F32"
	if f16 {
		t = "F16"
	}
	TEXT(fmt.Sprintf("tinyBLAS%sx%dAVX512", t, rows), NOSPLIT, "func(w []byte, rowBytes int, x []float32, k int, out []float32, ldo int)")
	Pragma("noescape")
	w := Load(Param("w").Base(), GP64())
	stride := Load(Param("rowBytes"), GP64())
	xp := Load(Param("x").Base(), GP64())
	k := Load(Param("k"), GP64())
	esz := 4
	if f16 {
		esz = 2
	}
	wr := pointers(w, stride, 1, 4)
	xs := GP64() // bytes between activation rows
	MOVQ(k, xs)
	SHLQ(U8(2), xs)
	xr := pointers(xp, xs, 1, rows)
	acc := zeroAcc(rows, 4)
	l := GP64()
	XORQ(l, l)
	Label("k")
	CMPQ(l, k)
	JAE(LabelRef("reduce"))
	var wv [4]VecVirtual
	for j := range wv {
		wv[j] = ZMM()
		if f16 {
			VCVTPH2PS(Mem{Base: wr[j], Index: l, Scale: uint8(esz)}, wv[j])
		} else {
			VMOVUPS(Mem{Base: wr[j], Index: l, Scale: uint8(esz)}, wv[j])
		}
	}
	for i := range acc {
		xv := ZMM()
		VMOVUPS(Mem{Base: xr[i], Index: l, Scale: 4}, xv)
		for j := range wv {
			VFMADD231PS(xv, wv[j], acc[i][j]) // madd(A, B, C)
		}
	}
	ADDQ(U32(16), l)
	JMP(LabelRef("k"))
	Label("reduce")
	outRows("out", "ldo", rows, func(i int, o Register) {
		for j := range acc[i] {
			s := reduce16(acc[i][j])
			VMOVSS(s, Mem{Base: o, Disp: 4 * j})
		}
	})
	VZEROUPPER()
	RET()
}

// genF16Convert: the bulk float32 -> IEEE half conversion (VCVTPS2PH,
// round to nearest even). It returns how many leading elements it
// converted: it stops before the first 16-element chunk holding a NaN,
// whose payload rule the Go caller owns.
func genF16Convert() {
	TEXT("f32ToF16AVX512", NOSPLIT, "func(src []float32, dst []uint16) int")
	Pragma("noescape")
	sp := Load(Param("src").Base(), GP64())
	n := Load(Param("src").Len(), GP64())
	dp := Load(Param("dst").Base(), GP64())
	done := GP64()
	XORQ(done, done)
	Label("f2h_loop")
	CMPQ(n, U32(16))
	JB(LabelRef("f2h_tail"))
	v := ZMM()
	VMOVUPS(Mem{Base: sp}, v)
	kn := K()
	VCMPPS(U8(3), v, v, kn) // unordered: NaN lanes
	KORTESTW(kn, kn)
	JNZ(LabelRef("f2h_out"))
	h := YMM()
	VCVTPS2PH(U8(0), v, h)
	VMOVDQU16(h, Mem{Base: dp})
	ADDQ(U32(64), sp)
	ADDQ(U32(32), dp)
	ADDQ(U32(16), done)
	SUBQ(U32(16), n)
	JMP(LabelRef("f2h_loop"))
	Label("f2h_tail")
	TESTQ(n, n)
	JZ(LabelRef("f2h_out"))
	kt := tailMask(n)
	vt := ZMM()
	VMOVUPS_Z(Mem{Base: sp}, kt, vt)
	kq := K()
	VCMPPS(U8(3), vt, vt, kq)
	KORTESTW(kq, kq)
	JNZ(LabelRef("f2h_out"))
	ht := YMM()
	VCVTPS2PH(U8(0), vt, ht)
	VMOVDQU16(ht, kt, Mem{Base: dp})
	ADDQ(n, done)
	Label("f2h_out")
	Store(done, ReturnIndex(0))
	VZEROUPPER()
	RET()
}

// genF16ToF32: the bulk IEEE half -> float32 conversion (VCVTPH2PS, exact;
// NaNs quieted as x448/float16 does).
func genF16ToF32() {
	TEXT("f16ToF32AVX512", NOSPLIT, "func(src []uint16, dst []float32)")
	Pragma("noescape")
	sp := Load(Param("src").Base(), GP64())
	n := Load(Param("src").Len(), GP64())
	dp := Load(Param("dst").Base(), GP64())
	Label("h2f_loop")
	CMPQ(n, U32(16))
	JB(LabelRef("h2f_tail"))
	w := ZMM()
	VCVTPH2PS(Mem{Base: sp}, w)
	VMOVUPS(w, Mem{Base: dp})
	ADDQ(U32(32), sp)
	ADDQ(U32(64), dp)
	SUBQ(U32(16), n)
	JMP(LabelRef("h2f_loop"))
	Label("h2f_tail")
	TESTQ(n, n)
	JZ(LabelRef("h2f_done"))
	k := tailMask(n)
	hv := YMM()
	VMOVDQU16_Z(Mem{Base: sp}, k, hv)
	wt := ZMM()
	VCVTPH2PS(hv, wt)
	VMOVUPS(wt, k, Mem{Base: dp})
	Label("h2f_done")
	VZEROUPPER()
	RET()
}

// genQuantizeSym: the NPU offload's per-row symmetric quantization
// (ggml.QuantizeSymmetric): absMaxBits returns the largest |x| of the
// leading 16-element chunks as float32 bits (integer max of the sign-cleared
// bits: NaN and Inf compare above every finite value, so the caller sees
// them); quantizeSym writes int8(clamp(roundHalfAway(float64(x/scale)),
// ±lim)) for the leading chunks, in float64 as the Go code does.
func genQuantizeSym() {
	TEXT("absMaxBitsAVX512", NOSPLIT, "func(x []float32) uint32")
	Pragma("noescape")
	xp := Load(Param("x").Base(), GP64())
	n := Load(Param("x").Len(), GP64())
	acc := zeroZMM()
	Label("amax_loop")
	CMPQ(n, U32(16))
	JB(LabelRef("amax_done"))
	v := ZMM()
	VMOVDQU32(Mem{Base: xp}, v)
	VPANDD_BCST(absMask, v, v)
	VPMAXUD(v, acc, acc)
	ADDQ(U32(64), xp)
	SUBQ(U32(16), n)
	JMP(LabelRef("amax_loop"))
	Label("amax_done")
	hi := YMM()
	VEXTRACTI64X4(U8(1), acc, hi)
	VPMAXUD(hi, acc.AsY(), hi)
	x4 := XMM()
	VEXTRACTI32X4(U8(1), hi, x4)
	VPMAXUD(x4, hi.AsX(), x4)
	t := XMM()
	VPSHUFD(U8(0x4e), x4, t)
	VPMAXUD(t, x4, x4)
	VPSHUFD(U8(0xb1), x4, t)
	VPMAXUD(t, x4, x4)
	r := GP32()
	VMOVD(x4, r)
	Store(r, ReturnIndex(0))
	VZEROUPPER()
	RET()

	TEXT("quantizeSymAVX512", NOSPLIT, "func(x []float32, scale float32, lim int32, q []int8)")
	Pragma("noescape")
	xp = Load(Param("x").Base(), GP64())
	n = Load(Param("x").Len(), GP64())
	qp := Load(Param("q").Base(), GP64())
	sc := ZMM()
	VBROADCASTSS(Load(Param("scale"), XMM()), sc)
	hiLim, loLim := YMM(), YMM()
	VPBROADCASTD(Load(Param("lim"), GP32()), hiLim)
	VPXORD(loLim, loLim, loLim)
	VPSUBD(hiLim, loLim, loLim)
	Label("q_loop")
	CMPQ(n, U32(16))
	JB(LabelRef("q_done"))
	w := ZMM()
	VMOVUPS(Mem{Base: xp}, w)
	VDIVPS(sc, w, w) // x / scale
	upper := YMM()
	VEXTRACTF32X8(U8(1), w, upper)
	halves := []Op{w.AsY(), upper}
	for i, h := range halves {
		d := ZMM()
		VCVTPS2PD(h, d)
		half := ZMM()
		VPANDQ_BCST(f64Sign, d, half)
		VPORQ_BCST(f64Half, half, half) // ±0.5 with r's sign
		VADDPD(half, d, d)
		iv := YMM()
		VCVTTPD2DQ(d, iv) // truncate
		VPMINSD(hiLim, iv, iv)
		VPMAXSD(loLim, iv, iv)
		VPMOVSDB(iv, Mem{Base: qp, Disp: 8 * i})
	}
	ADDQ(U32(64), xp)
	ADDQ(U32(16), qp)
	SUBQ(U32(16), n)
	JMP(LabelRef("q_loop"))
	Label("q_done")
	VZEROUPPER()
	RET()
}
