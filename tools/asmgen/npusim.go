package main

import (
	"fmt"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// The simulated RK3588 NPU's matmuls straight from the native B layout
// (plugins/rknn/npu/sim/fast.go has the Go side and the layouts):
//
//   - fp16: B blocks of 16 output channels × 32 K values are converted and
//     transposed once per call, then every output keeps the documented
//     order: products summed one after the other inside each 32-block,
//     blocks added in K order (16 outputs a vector, 8 dependency chains).
//   - int8 / int4: exact integer dot products, in any order: VPDPBUSD on
//     (a + 128) and B, minus 128·ΣB per channel.

func genNPUSim() {
	genNPUConstants()
	genFP16Transpose()
	for rows := 1; rows <= 4; rows++ {
		genFP16Direct(rows)
	}
	genFP16Accumulate(1)
	genFP16Accumulate(2)
	genIntNative(8)
	genIntNative(4)
}

var byte80, byte0F, byte08 Mem

func genNPUConstants() {
	dword0 = genDword0()
	byte80 = u32s("byte80", []uint32{0x80808080})
	byte0F = u32s("byte0F", []uint32{0x0f0f0f0f})
	byte08 = u32s("byte08", []uint32{0x08080808})
}

// transpose16 transposes 16 vectors of 16 lanes (r[j][k] → out[k][j]).
func transpose16(r []VecVirtual) []VecVirtual {
	t := make([]VecVirtual, 16)
	for i := 0; i < 16; i += 2 {
		t[i], t[i+1] = ZMM(), ZMM()
		VUNPCKLPS(r[i+1], r[i], t[i])
		VUNPCKHPS(r[i+1], r[i], t[i+1])
	}
	u := make([]VecVirtual, 16)
	for i := 0; i < 16; i += 4 {
		for j, imm := range []uint8{0x44, 0xEE} {
			u[i+j], u[i+2+j] = ZMM(), ZMM()
			VSHUFPS(U8(imm), t[i+2], t[i], u[i+j])
			VSHUFPS(U8(imm), t[i+3], t[i+1], u[i+2+j])
		}
	}
	v := make([]VecVirtual, 16)
	for g := 0; g < 16; g += 8 {
		for i := 0; i < 4; i++ {
			v[g+i], v[g+4+i] = ZMM(), ZMM()
			VSHUFF32X4(U8(0x88), u[g+4+i], u[g+i], v[g+i])
			VSHUFF32X4(U8(0xDD), u[g+4+i], u[g+i], v[g+4+i])
		}
	}
	w := make([]VecVirtual, 16)
	for i := 0; i < 8; i++ {
		w[i], w[i+8] = ZMM(), ZMM()
		VSHUFF32X4(U8(0x88), v[i+8], v[i], w[i])
		VSHUFF32X4(U8(0xDD), v[i+8], v[i], w[i+8])
	}
	return w
}

// fp16PrefetchBlocks is how far ahead the fp16 kernel prefetches B.
var fp16PrefetchBlocks = 8

// genFP16Transpose: bt[kb][k][j] = float32(B[j][32kb+k]) for the kBlocks
// native blocks of one group of 16 output channels (1024 bytes each).
func genFP16Transpose() {
	TEXT("fp16TransposeAVX512", NOSPLIT, "func(b []byte, kBlocks int, bt []float32)")
	Pragma("noescape")
	bp := Load(Param("b").Base(), GP64())
	n := Load(Param("kBlocks"), GP64())
	out := Load(Param("bt").Base(), GP64())
	Label("block")
	TESTQ(n, n)
	JZ(LabelRef("done"))
	// B streams from memory once per call: prefetch a few blocks ahead
	// (the hardware prefetchers alone leave this kernel far below the
	// memory bandwidth; measured: docs/design-notes.md).
	for off := 0; off < 1024; off += 64 {
		PREFETCHT0(Mem{Base: bp, Disp: fp16PrefetchBlocks*1024 + off})
	}
	for h := 0; h < 2; h++ {
		r := make([]VecVirtual, 16)
		for j := range r {
			r[j] = ZMM()
			VCVTPH2PS(Mem{Base: bp, Disp: 64*j + 32*h}, r[j])
		}
		c := transpose16(r)
		for k := range c {
			VMOVUPS(c[k], Mem{Base: out, Disp: 64 * (16*h + k)})
		}
	}
	ADDQ(U32(1024), bp)
	ADDQ(U32(2048), out)
	DECQ(n)
	JMP(LabelRef("block"))
	Label("done")
	VZEROUPPER()
	RET()
}

// genFP16Accumulate: for nb (1 or 2) groups of 16 output channels whose
// transposed blocks are in bt ([nb][kBlocks][32][16]):
//
//	c[m][16j+l] = acc + Σ_kb (Σ_k a[m][32kb+k]·B[j][l][k] in k order)
//
// with acc = 0 (init) or the value c holds (a later K segment); the
// products are exact (fp16 inputs), so each one-rounding FMA is s + p.
// Row m of c starts m·ldc elements in; its 4-channel atoms are atom
// elements apart: row-major c has atom 4, the device's native C
// ([N/4][M][4]) ldc 4 and atom 4·M, so the run writes C in place.
func genFP16Accumulate(nb int) {
	TEXT(fmt.Sprintf("fp16Accumulate%dAVX512", nb), NOSPLIT, "func(bt []float32, a []float32, lda int, rows int, kBlocks int, c []float32, ldc int, atom int, init bool)")
	Pragma("noescape")
	// Few general registers stay live across groups; the rest is reloaded
	// from the arguments where needed.
	ap := Load(Param("a").Base(), GP64())
	rows := Load(Param("rows"), GP64())
	cp := Load(Param("c").Base(), GP64())

	for gi, G := range []int{6, 4, 2, 1} {
		loop, done := fmt.Sprintf("m%d", G), fmt.Sprintf("m%d_done", G)
		Label(loop)
		CMPQ(rows, U32(G))
		JB(LabelRef(done))
		fp16Group(G, nb, ap, cp)
		lda := Load(Param("lda"), GP64())
		ldc := Load(Param("ldc"), GP64())
		SHLQ(U8(2), lda)
		SHLQ(U8(2), ldc)
		for i := 0; i < G; i++ {
			ADDQ(lda, ap)
			ADDQ(ldc, cp)
		}
		SUBQ(U32(G), rows)
		if gi == 0 {
			JMP(LabelRef(loop))
		}
		Label(done)
	}
	VZEROUPPER()
	RET()
}

func fp16Group(G, nb int, ap, cp Register) {
	tag := fmt.Sprintf("_%d", G)
	acc := make([][]VecVirtual, G)
	for i := range acc {
		acc[i] = make([]VecVirtual, nb)
		for j := range acc[i] {
			acc[i][j] = ZMM()
		}
	}
	// c rows: cp + i*ldc; f gets the row's atoms one after the other (4
	// per vector of 16 channels).
	crow := func(i int, f func(atom int, m Mem)) {
		ldc := Load(Param("ldc"), GP64())
		SHLQ(U8(2), ldc)
		r := GP64()
		MOVQ(cp, r)
		for range i {
			ADDQ(ldc, r)
		}
		step := Load(Param("atom"), GP64())
		SHLQ(U8(2), step)
		for t := 0; t < 4*nb; t++ {
			if t > 0 {
				ADDQ(step, r)
			}
			f(t, Mem{Base: r})
		}
	}
	initp := Load(Param("init"), GP8())
	TESTB(initp, initp)
	JZ(LabelRef("load" + tag))
	for i := range acc {
		for j := range acc[i] {
			VPBROADCASTD(dword0, acc[i][j])
		}
	}
	JMP(LabelRef("loaded" + tag))
	Label("load" + tag)
	for i := range acc {
		for _, v := range acc[i] {
			VXORPS(v, v, v)
		}
		crow(i, func(t int, m Mem) { VINSERTF32X4(U8(t%4), m, acc[i][t/4], acc[i][t/4]) })
	}
	Label("loaded" + tag)
	lda := Load(Param("lda"), GP64())
	SHLQ(U8(2), lda)
	arow := pointers(ap, lda, 1, G)
	kb := Load(Param("kBlocks"), GP64())
	bj := make([]Register, nb)
	for j := range bj {
		bj[j] = GP64()
		if j == 0 {
			Load(Param("bt").Base(), bj[j])
		} else {
			MOVQ(kb, bj[j])
			SHLQ(U8(11), bj[j]) // kBlocks*2048 bytes a group
			ADDQ(bj[0], bj[j])
		}
	}
	Label("kb" + tag)
	TESTQ(kb, kb)
	JZ(LabelRef("kb_done" + tag))
	s := zeroAcc(G, nb)
	// B's vectors for k are loaded once and used by every row: G×nb
	// multiply-adds per nb loads and G broadcasts (memory operands would
	// read B G times and make L2 the limit).
	for k := 0; k < 32; k++ {
		bv := make([]VecVirtual, nb)
		for j := range bv {
			bv[j] = ZMM()
			VMOVUPS(Mem{Base: bj[j], Disp: 64 * k}, bv[j])
		}
		for i := range s {
			av := ZMM()
			VBROADCASTSS(Mem{Base: arow[i], Disp: 4 * k}, av)
			for j := range s[i] {
				VFMADD231PS(bv[j], av, s[i][j])
			}
		}
	}
	for i := range s {
		for j := range s[i] {
			VADDPS(s[i][j], acc[i][j], acc[i][j])
		}
	}
	for j := range bj {
		ADDQ(U32(2048), bj[j])
	}
	for i := range arow {
		ADDQ(U32(128), arow[i])
	}
	DECQ(kb)
	JMP(LabelRef("kb" + tag))
	Label("kb_done" + tag)
	for i := range acc {
		crow(i, func(t int, m Mem) { VEXTRACTF32X4(U8(t%4), acc[i][t/4], m) })
	}
}

// lanes tracks, for a reduction network, which output every lane of a
// vector belongs to (-1: several, an error), so that the generator can emit
// the final permutation and check the network.
type lanes [16]int

func shuf128(a, b lanes, imm uint8) lanes { // VSHUFI32X4/VSHUFF32X4: src1 a, src2 b
	var r lanes
	for blk := 0; blk < 4; blk++ {
		src := a
		if blk >= 2 {
			src = b
		}
		sel := int(imm>>(2*blk)) & 3
		copy(r[4*blk:4*blk+4], src[4*sel:4*sel+4])
	}
	return r
}

func shufps(a, b lanes, imm uint8) lanes { // VSHUFPS: per 128 bits, 2 from a then 2 from b
	var r lanes
	for blk := 0; blk < 4; blk++ {
		for e := 0; e < 4; e++ {
			src := a
			if e >= 2 {
				src = b
			}
			r[4*blk+e] = src[4*blk+int(imm>>(2*e))&3]
		}
	}
	return r
}

func addLanes(a, b lanes) lanes {
	var r lanes
	for i := range r {
		r[i] = a[i]
		if a[i] != b[i] {
			r[i] = -1
		}
	}
	return r
}

type tracked struct {
	v VecVirtual
	l lanes
}

// reduceInt sums vectors of int32 partial sums per output (every lane of
// in[i] belongs to output in[i].l[lane]) down to vectors holding one full
// sum per lane: pairs of vectors are merged with 128-bit block shuffles
// while 2-lane... groups remain, then with in-lane shuffles.
func reduceInt(in []tracked, perLane int, emitCode bool) []tracked {
	for perLane > 1 {
		var next []tracked
		for i := 0; i < len(in); i += 2 {
			a, b := in[i], in[i+1]
			var lo, hi uint8
			var f func(a, b lanes, imm uint8) lanes
			var emit func(imm uint8, b, a, d Op)
			switch perLane {
			case 8:
				lo, hi, f = 0x88, 0xDD, shuf128
				emit = func(imm uint8, b, a, d Op) { VSHUFI32X4(U8(imm), b, a, d) }
			case 4:
				lo, hi, f = 0x44, 0xEE, shufps
				emit = func(imm uint8, b, a, d Op) { VSHUFPS(U8(imm), b, a, d) }
			case 2:
				lo, hi, f = 0x88, 0xDD, shufps
				emit = func(imm uint8, b, a, d Op) { VSHUFPS(U8(imm), b, a, d) }
			default:
				panic("reduceInt: lanes per output")
			}
			var u VecVirtual
			if emitCode {
				u = ZMM()
				v := ZMM()
				emit(lo, b.v, a.v, u)
				emit(hi, b.v, a.v, v)
				VPADDD(v, u, u)
			}
			l := addLanes(f(a.l, b.l, lo), f(a.l, b.l, hi))
			for _, o := range l {
				if o < 0 {
					panic("reduceInt: network mixes outputs")
				}
			}
			next = append(next, tracked{u, l})
		}
		in = next
		if perLane == 8 {
			perLane = 4
		} else {
			perLane /= 2
		}
	}
	return in
}

// genIntNative: exact int32 dot products of int8 (bits 8) or int4 (bits 4)
// A rows with one native B group (32 int8 or 64 int4 output channels, all
// K blocks): c[m][n] = Σ_k a[m][k]·B[n][k]. a holds int8 values, row-major
// (lda bytes per row); for int4 each 32-chunk is rearranged as the 16 even
// then the 16 odd k, matching B's low and high nibbles.
func genIntNative(bits int) {
	per, lanesPer := 2, 8 // int8: two channels of 32 bytes a 64-byte load
	if bits == 4 {
		per, lanesPer = 4, 4 // int4: four channels of 16 bytes (32 nibbles)
	}
	label := func(o int) lanes {
		var l lanes
		for i := range l {
			l[i] = o*per + i/lanesPer
		}
		return l
	}
	// The permutations that put the reduced sums in channel order.
	var perms []Mem
	{
		in := make([]tracked, 16)
		for i := range in {
			in[i] = tracked{l: label(i)}
		}
		for q, t := range reduceInt(in, lanesPer, false) {
			idx := make([]uint32, 16)
			for lane, o := range t.l {
				if o/16 != q {
					panic(fmt.Sprintf("reduction: vector %d holds output %d", q, o))
				}
				idx[o-16*q] = uint32(lane)
			}
			perms = append(perms, u32s(fmt.Sprintf("perm%d_%d", bits, q), idx))
		}
	}
	TEXT(fmt.Sprintf("int%dNativeAVX512", bits), NOSPLIT, "func(a []byte, lda int, rows int, b []byte, kBlocks int, c []int32, ldc int)")
	Pragma("noescape")
	local = AllocLocal(64 * 4)
	ap := Load(Param("a").Base(), GP64())
	lda := Load(Param("lda"), GP64())
	rows := Load(Param("rows"), GP64())
	bp := Load(Param("b").Base(), GP64())
	kBlocks := Load(Param("kBlocks"), GP64())
	cp := Load(Param("c").Base(), GP64())
	ldc := Load(Param("ldc"), GP64())
	SHLQ(U8(2), ldc)

	// nibbles unpacks 64 bytes of int4 into low and high sign-extended bytes.
	nibbles := func(m Mem) (lo, hi VecVirtual) {
		x := ZMM()
		VMOVDQU8(m, x)
		lo, hi = ZMM(), ZMM()
		e8 := ZMM()
		VPBROADCASTD(byte08, e8)
		VPANDD_BCST(byte0F, x, lo)
		VPSRLW(U8(4), x, hi)
		VPANDD_BCST(byte0F, hi, hi)
		for _, v := range []VecVirtual{lo, hi} {
			VPXORD(e8, v, v)
			VPSUBB(e8, v, v) // (q ^ 8) - 8: the signed nibble
		}
		return lo, hi
	}
	reduceStore := func(acc []VecVirtual, dst Mem, sub []Mem) {
		in := make([]tracked, len(acc))
		for i := range acc {
			in[i] = tracked{acc[i], label(i)}
		}
		out := reduceInt(in, lanesPer, true)
		for q, t := range out {
			iv := ZMM()
			VMOVDQU32(perms[q], iv)
			VPERMD(t.v, iv, t.v)
			if sub != nil {
				VPSUBD(sub[q], t.v, t.v)
			}
			VMOVDQU32(t.v, dst.Offset(64*q))
		}
	}
	nacc := 16

	// 128·ΣB per channel, once: VPDPBUSD with a vector of 0x80 bytes.
	corrDst := local
	{
		acc := zeroAcc(1, nacc)[0]
		c80 := ZMM()
		VPBROADCASTD(byte80, c80)
		blockLoop("corr", bp, kBlocks, func(b Register) {
			for i := range acc {
				if bits == 8 {
					VPDPBUSD(Mem{Base: b, Disp: 64 * i}, c80, acc[i])
				} else {
					lo, hi := nibbles(Mem{Base: b, Disp: 64 * i})
					VPDPBUSD(lo, c80, acc[i])
					VPDPBUSD(hi, c80, acc[i])
				}
			}
		})
		reduceStore(acc, corrDst, nil)
	}
	nOut := 16 * per // channels in the group: 32 (int8) or 64 (int4)
	sub := make([]Mem, nOut/16)
	for q := range sub {
		sub[q] = corrDst.Offset(64 * q)
	}

	Label("row")
	TESTQ(rows, rows)
	JZ(LabelRef("done"))
	acc := zeroAcc(1, nacc)[0]
	ar := GP64()
	MOVQ(ap, ar)
	blockLoop("k", bp, kBlocks, func(b Register) {
		if bits == 8 {
			au := ZMM()
			VBROADCASTI32X8(Mem{Base: ar}, au)
			VPXORD_BCST(byte80, au, au) // a + 128 as unsigned bytes
			for i := range acc {
				VPDPBUSD(Mem{Base: b, Disp: 64 * i}, au, acc[i])
			}
		} else {
			ae, ao := ZMM(), ZMM()
			VBROADCASTI32X4(Mem{Base: ar}, ae)
			VBROADCASTI32X4(Mem{Base: ar, Disp: 16}, ao)
			VPXORD_BCST(byte80, ae, ae)
			VPXORD_BCST(byte80, ao, ao)
			for i := range acc {
				lo, hi := nibbles(Mem{Base: b, Disp: 64 * i})
				VPDPBUSD(lo, ae, acc[i])
				VPDPBUSD(hi, ao, acc[i])
			}
		}
		ADDQ(U32(32), ar)
	})
	reduceStore(acc, Mem{Base: cp}, sub)
	ADDQ(lda, ap)
	ADDQ(ldc, cp)
	DECQ(rows)
	JMP(LabelRef("row"))
	Label("done")
	VZEROUPPER()
	RET()
}

// blockLoop emits a loop over the kBlocks 1024-byte native blocks from bp:
// body reads the block at b.
func blockLoop(name string, bp, kBlocks Register, body func(b Register)) {
	b := GP64()
	MOVQ(bp, b)
	n := GP64()
	MOVQ(kBlocks, n)
	Label(name)
	TESTQ(n, n)
	JZ(LabelRef(name + "_done"))
	body(b)
	ADDQ(U32(1024), b)
	DECQ(n)
	JMP(LabelRef(name))
	Label(name + "_done")
}

// genFP16Direct is the few-row (decode) form of transpose + accumulate for
// one group of 16 output channels, with the numerics of fp16Accumulate
// (init = true): B is read once and never stored as float32. Two blocks at
// a time are transposed in 16-bit units into a staging buffer (three
// rounds of in-lane unpacks, 96 per block: each 128-bit lane of the result
// is 8 channels at one k), converted from there in K order, and their sums
// are four independent chains per row (2 blocks × 2 halves of the
// channels). An odd last block is computed twice and counted once.
//
// Software-pipelined: the next pair's transposition goes into the other of
// two staging buffers while this pair's sums are computed, its
// instructions spread between the sum steps, so that the unpacks (ports 1
// and 5) run beside the conversions and FMAs (ports 0 and 1) instead of
// taking turns with them; and the sums are a loop (fp16PairSums), so the
// code stays small. Both are faster than the order "transpose, then sum"
// written out, in cache and streaming from memory (measured, with the
// forms tried and not kept: docs/design-notes.md). With 3 and 4 rows the
// sums alone hold 12 and 16 registers and the transposition's beside them
// do not fit the 32 (avo fails to allocate them), so the next pair is
// transposed before the sums instead of between.
//
// Everything is 256 bits wide: with no 512-bit operation in flight port 1
// runs vector operations too; 512-bit unpacks and conversions run on port
// 5 alone.
func genFP16Direct(rows int) {
	// Not NOSPLIT: the 4 KB staging frame needs the stack check.
	name := fmt.Sprintf("fp16Direct%dAVX512", rows)
	TEXT(name, 0, "func(b []byte, kBlocks int, a []float32, lda int, c []float32, ldc int)")
	Pragma("noescape")
	interleave := rows <= 2
	stage := AllocLocal(2*2048 + 64)
	bp := Load(Param("b").Base(), GP64())
	n := Load(Param("kBlocks"), GP64())
	ap := Load(Param("a").Base(), GP64())
	lda := Load(Param("lda"), GP64())
	SHLQ(U8(2), lda)
	arow := pointers(ap, lda, 1, rows)
	cur, next := GP64(), GP64()
	LEAQ(stage.Offset(63), cur)
	ANDQ(I32(-64), cur)
	LEAQ(Mem{Base: cur, Disp: 2048}, next)
	// acc[s][i]: row i's channels 8s..8s+7.
	acc := make([][]VecVirtual, 2)
	for h := range acc {
		acc[h] = make([]VecVirtual, rows)
		for i := range acc[h] {
			acc[h][i] = YMM()
			VPBROADCASTD(dword0, acc[h][i])
		}
	}
	// A pair's second block is bstep bytes of B and astep of A after its
	// first, and its sums are added under mask second. An odd last block
	// is paired with itself (steps 0) and its copy's sums dropped.
	bstep, astep := GP64(), GP64()
	second := K()
	label := func(s string) string { return name + "_" + s }
	// pairSteps sets, for a pair with m blocks from its first one on, the
	// step registers given and, if mask, second.
	pairSteps := func(m, bs, as Register, mask bool, tag string) {
		ones := GP32()
		MOVL(U32(0xff), ones)
		if bs != nil {
			MOVQ(U32(1024), bs)
		}
		if as != nil {
			MOVQ(U32(128), as)
		}
		CMPQ(m, U32(2))
		JAE(LabelRef(label(tag)))
		for _, r := range []Register{bs, as} {
			if r != nil {
				XORQ(r, r)
			}
		}
		XORL(ones, ones)
		Label(label(tag))
		if mask {
			KMOVW(ones, second)
		}
	}
	TESTQ(n, n)
	JLE(LabelRef(label("done")))
	pairSteps(n, bstep, astep, true, "first")
	for _, op := range stagePair(bp, bstep, cur) {
		op()
	}
	m := GP64() // blocks after the pair being summed
	Label(label("pair"))
	MOVQ(n, m)
	SUBQ(U32(2), m)
	JLE(LabelRef(label("last")))
	ADDQ(U32(2048), bp)
	pairSteps(m, bstep, nil, false, "next")
	if interleave {
		fp16PairSums(rows, arow, astep, cur, acc, second, &staging{bp, bstep, next}, label("next_"))
	} else {
		for _, op := range stagePair(bp, bstep, next) {
			op()
		}
		fp16PairSums(rows, arow, astep, cur, acc, second, nil, label("sum_"))
	}
	for i := range rows {
		ADDQ(U32(256), arow[i])
	}
	MOVQ(m, n)
	pairSteps(n, nil, astep, true, "then")
	XCHGQ(cur, next)
	JMP(LabelRef(label("pair")))
	Label(label("last"))
	fp16PairSums(rows, arow, astep, cur, acc, second, nil, label("last_"))
	Label(label("done"))
	outRows("c", "ldc", rows, func(i int, cp Register) {
		VMOVUPS(acc[0][i], Mem{Base: cp})
		VMOVUPS(acc[1][i], Mem{Base: cp, Disp: 32})
	})
	VZEROUPPER()
	RET()
}

// staging is where fp16PairSums transposes the next pair while it sums:
// blocks at bp and bp+bstep into the buffer at buf.
type staging struct{ bp, bstep, buf Register }

// fp16PairSums adds the sums of the pair staged at buf to acc (the second
// block's under mask second), as a loop over four quarters of K: quarter
// (h, l) is k 16h+8l..16h+8l+7 of both blocks (8 channels × 2 halves ×
// 2 blocks: four chains per row), and, with next, the transposition of
// rows 8l..8l+7 of block h of the next pair, spread between its steps. A
// loop, not 64 steps written out: the summing code is 4 times smaller (the
// whole 1-row kernel half as long), and the kernel faster for it, from
// memory and in cache (measured: docs/design-notes.md).
func fp16PairSums(rows int, arow []Register, astep, buf Register, acc [][]VecVirtual, second Register, next *staging, lbl string) {
	sums := make([][][]VecVirtual, 2) // [block][s][row]
	for j := range sums {
		sums[j] = make([][]VecVirtual, 2)
		for s := range sums[j] {
			sums[j][s] = make([]VecVirtual, rows)
			for i := range rows {
				sums[j][s][i] = YMM()
				VPBROADCASTD(dword0, sums[j][s][i])
			}
		}
	}
	// Quarter (h, l) of the staged pair: channels 8s..8s+7 of block j at
	// k 16h+8l+u in the 16 bytes at kq + 1024j + 512s + 32u, kq = buf +
	// 256h + 16l.
	kq := GP64()
	MOVQ(buf, kq)
	var src, dst Register
	if next != nil {
		src, dst = GP64(), GP64()
		MOVQ(next.bp, src)
		MOVQ(next.buf, dst)
	}
	h, l := GP64(), GP64()
	MOVQ(U32(2), h)
	Label(lbl + "h")
	MOVQ(U32(2), l)
	Label(lbl + "l")
	var other []func()
	if next != nil {
		// Rows 8l..8l+7 of block h at src, into dst.
		for off := 0; off < 512; off += 64 {
			other = append(other, func() { PREFETCHT0(Mem{Base: src, Disp: fp16PrefetchBlocks*1024 + off}) })
		}
		for kh := range 2 {
			other = append(other, transposeWords8(Mem{Base: src, Disp: 32 * kh}, func(i int) Mem {
				return Mem{Base: dst, Disp: 256*kh + 32*i}
			})...)
		}
	}
	aVec := func(j, i, u int) Mem {
		if j == 0 {
			return Mem{Base: arow[i], Disp: 4 * u}
		}
		return Mem{Base: arow[i], Index: astep, Scale: 1, Disp: 4 * u}
	}
	step, emitted := 0, 0
	for u := range 8 {
		for j := range 2 {
			var v [2]VecVirtual
			for s := range 2 {
				v[s] = YMM()
				VCVTPH2PS(Mem{Base: kq, Disp: 1024*j + 512*s + 32*u}, v[s])
			}
			for i := range rows {
				x := YMM()
				VBROADCASTSS(aVec(j, i, u), x)
				for s := range 2 {
					VFMADD231PS(x, v[s], sums[j][s][i])
				}
			}
			step++
			for ; emitted < len(other)*step/16; emitted++ {
				other[emitted]()
			}
		}
	}
	ADDQ(U32(16), kq)
	for i := range rows {
		ADDQ(U32(32), arow[i])
	}
	if next != nil {
		ADDQ(U32(512), src)
		ADDQ(U32(512), dst)
	}
	DECQ(l)
	JNZ(LabelRef(lbl + "l"))
	ADDQ(U32(256-32), kq)
	if next != nil {
		SUBQ(U32(1024), src)
		ADDQ(next.bstep, src)
	}
	DECQ(h)
	JNZ(LabelRef(lbl + "h"))
	for i := range rows {
		SUBQ(U32(128), arow[i])
	}
	for s := range 2 {
		for i := range rows {
			VADDPS(sums[0][s][i], acc[s][i], acc[s][i])
			VADDPS(sums[1][s][i], acc[s][i], second, acc[s][i])
		}
	}
}

// stagePair returns, one instruction per function, the prefetch of what
// follows the pair at bp and bp+bstep and its transposition into buf.
func stagePair(bp, bstep, buf Register) []func() {
	var ops []func()
	for off := 0; off < 2048; off += 64 {
		ops = append(ops, func() { PREFETCHT0(Mem{Base: bp, Disp: fp16PrefetchBlocks*1024 + off}) })
	}
	for j, blk := range []Mem{{Base: bp}, {Base: bp, Index: bstep, Scale: 1}} {
		for s := range 2 {
			for h := range 2 {
				ops = append(ops, transposeWords8(blk.Offset(512*s+32*h), func(i int) Mem {
					return Mem{Base: buf, Disp: 1024*j + 512*s + 256*h + 32*i}
				})...)
			}
		}
	}
	return ops
}

// transposeWords8 returns, one instruction per function, the transposition
// of the 8 channel rows × 16 K values (fp16) at blk, blk+64, ... blk+448
// (one half of 8 rows of a native block) in 16-bit units within 128-bit
// lanes, and the store of x[i] to dst(i): lane l of x[i] holds the 8
// channels at k 8l+i. Three rounds of 8 unpacks.
func transposeWords8(blk Mem, dst func(i int) Mem) []func() {
	var ops []func()
	// Rows 2p and 2p+1: dword t of lane l = both rows at k 8l+4h+t.
	var a [2][4]VecVirtual
	for p := range 4 {
		r := YMM()
		a[0][p], a[1][p] = YMM(), YMM()
		ops = append(ops,
			func() { VMOVDQU64(blk.Offset(128*p), r) },
			func() { VPUNPCKLWD(blk.Offset(128*p+64), r, a[0][p]) },
			func() { VPUNPCKHWD(blk.Offset(128*p+64), r, a[1][p]) })
	}
	// Rows 4r..4r+3: qword u of lane l at k 8l+4h+2e+u.
	var b [2][2][2]VecVirtual
	for r := range 2 {
		for h := range 2 {
			b[r][h][0], b[r][h][1] = YMM(), YMM()
			ops = append(ops,
				func() { VPUNPCKLDQ(a[h][2*r+1], a[h][2*r], b[r][h][0]) },
				func() { VPUNPCKHDQ(a[h][2*r+1], a[h][2*r], b[r][h][1]) })
		}
	}
	// Rows 0..7: lane l of x[i] at k 8l+i.
	for h := range 2 {
		for e := range 2 {
			i := 4*h + 2*e
			x0, x1 := YMM(), YMM()
			ops = append(ops,
				func() { VPUNPCKLQDQ(b[1][h][e], b[0][h][e], x0) },
				func() { VPUNPCKHQDQ(b[1][h][e], b[0][h][e], x1) },
				func() { VMOVDQU64(x0, dst(i)) },
				func() { VMOVDQU64(x1, dst(i+1)) })
		}
	}
	return ops
}
