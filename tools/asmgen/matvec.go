package main

import (
	"fmt"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// Exact numerics (dot.go): element j of a row is multiplied with x[j], the
// product rounded to float32 and added to lane j%8 of the row's sum; the
// eight lanes are reduced as ((l0+l1)+(l2+l3))+((l4+l5)+(l6+l7)).
//
// A ZMM register holds the eight lanes of two rows side by side. A chunk of
// 16 products of each row is split into its elements 0..7 and 8..15, which
// are added to the lanes in that order: exactly the generic sequence.

// combinePair adds chunk products pa (row a) and pb (row b) to the pair's
// lanes acc = [a | b]. With masks, only the selected lanes are added (the
// two adds of a row's last, partial chunk).
func combinePair(acc, pa, pb VecVirtual, ka, kb Op) {
	lo, hi := ZMM(), ZMM()
	VSHUFF32X4(U8(0x44), pb, pa, lo) // [a0..7 | b0..7]
	VSHUFF32X4(U8(0xEE), pb, pa, hi) // [a8..15 | b8..15]
	if ka == nil {
		VADDPS(lo, acc, acc)
		VADDPS(hi, acc, acc)
		return
	}
	VADDPS(lo, acc, ka, acc)
	VADDPS(hi, acc, kb, acc)
}

// reducePair reduces the lanes [a | b] to the two row sums, in lane 0 of
// each returned register, in the generic order (float addition commutes, so
// lane pairs may be added either way round). EVEX instructions only: the
// register allocator may hand out Z16..Z31.
func reducePair(acc VecVirtual) (a, b Register) {
	t := ZMM()
	VSHUFPS(U8(0xB1), acc, acc, t) // swap neighbours: l0+l1, l2+l3 in every lane pair
	VADDPS(t, acc, t)
	u := ZMM()
	VSHUFPS(U8(0x4E), t, t, u) // swap halves of 128 bits: (l0+l1)+(l2+l3)
	VADDPS(u, t, t)
	VSHUFF32X4(U8(0xF5), t, t, u) // 128-bit blocks 1 and 3 onto 0 and 2
	VADDPS(u, t, t)               // lane 0: a, lane 8: b
	bx := XMM()
	VEXTRACTF32X4(U8(2), t, bx)
	return t.AsX(), bx
}

// pfGroups is the prefetch distance in row groups.
var pfGroups = 2

// genMatVecExact: out[n] = DotRow(t, row n, x) for n < len(out); the Go
// caller checks that rowBytes = RowBytes(t, len(x)) and len(w) covers the rows.
func genMatVecExact(t qtype) {
	TEXT("matVecExact"+t.name()+"AVX512", NOSPLIT, "func(w []byte, rowBytes int, x []float32, out []float32)")
	Pragma("noescape")
	local = AllocLocal(64 * 4)
	w := Load(Param("w").Base(), GP64())
	stride := Load(Param("rowBytes"), GP64())
	x0 := Load(Param("x").Base(), GP64())
	k := Load(Param("x").Len(), GP64())
	out := Load(Param("out").Base(), GP64())
	n := Load(Param("out").Len(), GP64())

	G := t.groupRows()
	sizes := []int{G}
	for r := G / 2; r >= 1; r /= 2 {
		sizes = append(sizes, r)
	}
	for _, R := range sizes {
		loop, done := fmt.Sprintf("rows%d", R), fmt.Sprintf("rows%d_done", R)
		Label(loop)
		CMPQ(n, U32(R))
		JB(LabelRef(done))
		matVecGroup(t, R, w, stride, x0, k, out)
		for i := 0; i < R; i++ {
			ADDQ(stride, w)
		}
		ADDQ(U32(4*R), out)
		SUBQ(U32(R), n)
		if R == G {
			JMP(LabelRef(loop))
		}
		Label(done)
	}
	VZEROUPPER()
	RET()
}

// matVecGroup computes R (4, 2 or 1) consecutive rows starting at w.
func matVecGroup(t qtype, R int, w, stride, x0, k, out Register) {
	tag := fmt.Sprintf("_r%d", R)
	rows := make([]Register, R)
	for i := range rows {
		rows[i] = GP64()
		if i == 0 {
			MOVQ(w, rows[i])
		} else {
			LEAQ(Mem{Base: rows[i-1], Index: stride, Scale: 1}, rows[i])
		}
	}
	npair := (R + 1) / 2
	acc := make([]VecVirtual, npair)
	for p := range acc {
		acc[p] = ZMM()
		VXORPS(acc[p], acc[p], acc[p])
	}
	off := GP64() // byte offset into every row
	XORQ(off, off)
	xp := GP64()
	MOVQ(x0, xp)
	kk := GP64() // elements left
	MOVQ(k, kk)
	blk := func(r int) Mem { return Mem{Base: rows[r], Index: off, Scale: 1} }

	// R interleaved row streams, short ones for the quantized types, keep
	// the hardware prefetchers from streaming at full bandwidth: walk a later
	// group's bytes with software prefetches, R blocks' worth per block
	// (measured: F16 24 -> 33 GB/s, Q8_0 rows more than twice as fast).
	var pf Register
	if R > 1 {
		pf = GP64()
		LEAQ(Mem{Base: rows[R-1], Index: stride, Scale: 1}, pf)
		for g := 1; g < pfGroups; g++ {
			for i := 0; i < R; i++ {
				ADDQ(stride, pf)
			}
		}
	}

	// products multiplies row r's decoded chunk by x's chunk and adds the
	// pairs; ka/kb select lanes for a partial last chunk.
	step := func(chunk func(r int) VecVirtual, xv VecVirtual, ka, kb Op) {
		p := make([]VecVirtual, R)
		for r := range p {
			p[r] = chunk(r)
			VMULPS(xv, p[r], p[r])
		}
		for i := range acc {
			a, b := p[2*i], p[2*i]
			if 2*i+1 < R {
				b = p[2*i+1]
			}
			combinePair(acc[i], a, b, ka, kb)
		}
	}

	E, B := t.blockElems(), t.blockBytes()
	Label("block" + tag)
	CMPQ(kk, U32(E))
	JB(LabelRef("blocks_done" + tag))
	if pf != nil {
		for b := 0; b < R*B; b += 64 {
			PREFETCHT0(Mem{Base: pf, Disp: b})
		}
		ADDQ(U32(R*B), pf)
	}
	for r := range rows {
		t.begin(r, blk(r))
	}
	for c := 0; c < E/16; c++ {
		xv := ZMM()
		VMOVUPS(Mem{Base: xp, Disp: 64 * c}, xv)
		step(func(r int) VecVirtual { return t.chunk(r, blk(r), c) }, xv, nil, nil)
	}
	ADDQ(U32(B), off)
	ADDQ(U32(4*E), xp)
	SUBQ(U32(E), kk)
	JMP(LabelRef("block" + tag))
	Label("blocks_done" + tag)

	if t.plain() {
		bytes16 := B / 4 // bytes of 16 elements
		Label("chunk" + tag)
		CMPQ(kk, U32(16))
		JB(LabelRef("chunks_done" + tag))
		xv := ZMM()
		VMOVUPS(Mem{Base: xp}, xv)
		step(func(r int) VecVirtual { return t.chunk(r, blk(r), 0) }, xv, nil, nil)
		ADDQ(U32(bytes16), off)
		ADDQ(U32(64), xp)
		SUBQ(U32(16), kk)
		JMP(LabelRef("chunk" + tag))
		Label("chunks_done" + tag)

		TESTQ(kk, kk)
		JZ(LabelRef("reduce" + tag))
		masks := GP64()
		LEAQ(tailMasks, masks)
		kl, ka, kb := K(), K(), K()
		KMOVW(Mem{Base: masks, Index: kk, Scale: 8}, kl)
		KMOVW(Mem{Base: masks, Index: kk, Scale: 8, Disp: 2}, ka)
		KMOVW(Mem{Base: masks, Index: kk, Scale: 8, Disp: 4}, kb)
		xt := ZMM()
		VMOVUPS_Z(Mem{Base: xp}, kl, xt)
		step(func(r int) VecVirtual { return t.tail(blk(r), kl) }, xt, ka, kb)
	}

	Label("reduce" + tag)
	for i := range acc {
		a, b := reducePair(acc[i])
		VMOVSS(a, Mem{Base: out, Disp: 8 * i})
		if 2*i+1 < R {
			VMOVSS(b, Mem{Base: out, Disp: 8*i + 4})
		}
	}
}

// genDequant: dst = Dequantize(t, src) for len(dst) elements (the caller
// checks len(src) = RowBytes(t, len(dst))).
func genDequant(t qtype) {
	TEXT("dequant"+t.name()+"AVX512", NOSPLIT, "func(src []byte, dst []float32)")
	Pragma("noescape")
	local = AllocLocal(64 * 4)
	src := Load(Param("src").Base(), GP64())
	dst := Load(Param("dst").Base(), GP64())
	n := Load(Param("dst").Len(), GP64())
	blk := Mem{Base: src}
	E, B := t.blockElems(), t.blockBytes()
	Label("block")
	CMPQ(n, U32(E))
	JB(LabelRef("blocks_done"))
	t.begin(0, blk)
	for c := 0; c < E/16; c++ {
		VMOVUPS(t.chunk(0, blk, c), Mem{Base: dst, Disp: 64 * c})
	}
	ADDQ(U32(B), src)
	ADDQ(U32(4*E), dst)
	SUBQ(U32(E), n)
	JMP(LabelRef("block"))
	Label("blocks_done")
	if t.plain() {
		Label("chunk")
		CMPQ(n, U32(16))
		JB(LabelRef("chunks_done"))
		VMOVUPS(t.chunk(0, blk, 0), Mem{Base: dst})
		ADDQ(U32(B/4), src)
		ADDQ(U32(64), dst)
		SUBQ(U32(16), n)
		JMP(LabelRef("chunk"))
		Label("chunks_done")
		TESTQ(n, n)
		JZ(LabelRef("done"))
		masks := GP64()
		LEAQ(tailMasks, masks)
		kl := K()
		KMOVW(Mem{Base: masks, Index: n, Scale: 8}, kl)
		VMOVUPS(t.tail(blk, kl), kl, Mem{Base: dst})
	}
	Label("done")
	VZEROUPPER()
	RET()
}
