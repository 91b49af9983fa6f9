package main

import (
	"fmt"

	"github.com/mmcloughlin/avo/gotypes"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// Exact numerics (dot.go): element j of a row is multiplied with x[j], the
// product rounded to float32 and added to lane j%16 of the row's sum; the
// sixteen lanes are reduced as _mm512_reduce_add_ps (reduce16). A row's
// chunk of 16 decoded values is one register, its lanes the accumulator's.

// pfGroups is the prefetch distance in row groups.
var pfGroups = 2

// genMatVecExact: out[n] = DotRow(t, row n, x) for n < len(out); the Go
// caller checks that rowBytes = RowBytes(t, len(x)) and len(w) covers the rows.
func genMatVecExact(t qtype) {
	if q, ok := t.(*q4_0Type); ok {
		genMatVecExactQ4_0LUT(q)
		return
	}
	w, stride, x0, k, out, n := matVecParams("matVecExact" + t.name() + "AVX512")

	rowGroups(t.groupRows(), w, stride, out, n, func(R int) { matVecGroup(t, R, w, stride, x0, k, out) })
}

// genMatVecExactQ4_0LUT is the Q4_0 matvec reading each block's table from
// lut (q4_0Type.lut). The table's base takes a register, so x and its length
// are read from the arguments once per row group instead of held in two.
func genMatVecExactQ4_0LUT(t *q4_0Type) {
	TEXT("matVecExactQ4_0LUTAVX512", NOSPLIT, "func(w []byte, rowBytes int, x []float32, out []float32, lut *[1 << 20]float32)")
	Pragma("noescape")
	w := Load(Param("w").Base(), GP64())
	stride := Load(Param("rowBytes"), GP64())
	out := Load(Param("out").Base(), GP64())
	n := Load(Param("out").Len(), GP64())
	t.lut = Load(Param("lut"), GP64())
	x0, k := paramMem(Param("x").Base()), paramMem(Param("x").Len())
	rowGroups(t.groupRows(), w, stride, out, n, func(R int) { matVecGroup(t, R, w, stride, x0, k, out) })
	t.lut = nil
}

// paramMem is the stack slot of an argument.
func paramMem(c gotypes.Component) Mem {
	b, err := c.Resolve()
	if err != nil {
		panic(err)
	}
	return b.Addr
}

// rowGroups runs group(R) over the n rows at w (stride bytes apart) in
// groups of G rows, then of G/2, ..., 1 for the rest, each group's R sums to
// out; then it returns from the kernel.
func rowGroups(G int, w, stride, out, n Register, group func(R int)) {
	sizes := []int{G}
	for r := G / 2; r >= 1; r /= 2 {
		sizes = append(sizes, r)
	}
	for _, R := range sizes {
		loop, done := fmt.Sprintf("rows%d", R), fmt.Sprintf("rows%d_done", R)
		Label(loop)
		CMPQ(n, U32(R))
		JB(LabelRef(done))
		group(R)
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

// matVecParams starts a matvec kernel: func(w []byte, rowBytes int, x
// []float32, out []float32), 64 bytes of stack a row of a group at local.
func matVecParams(name string) (w, stride, x0, k, out, n Register) {
	TEXT(name, NOSPLIT, "func(w []byte, rowBytes int, x []float32, out []float32)")
	Pragma("noescape")
	local = AllocLocal(64 * 4)
	w = Load(Param("w").Base(), GP64())
	stride = Load(Param("rowBytes"), GP64())
	x0 = Load(Param("x").Base(), GP64())
	k = Load(Param("x").Len(), GP64())
	out = Load(Param("out").Base(), GP64())
	n = Load(Param("out").Len(), GP64())
	return
}

// matVecGroup computes R (4, 2 or 1) consecutive rows starting at w.
func matVecGroup(t qtype, R int, w, stride Register, x0, k Op, out Register) {
	tag := fmt.Sprintf("_r%d", R)
	rows := pointers(w, stride, 1, R)
	acc := make([]VecVirtual, R)
	for r := range acc {
		acc[r] = zeroZMM()
	}
	off := GP64() // byte offset into every row
	XORQ(off, off)
	xp := GP64()
	MOVQ(x0, xp)
	kk := GP64() // elements left
	MOVQ(k, kk)
	blk := func(r int) Mem { return Mem{Base: rows[r], Index: off, Scale: 1} }

	// The hardware prefetchers alone do not stream rows at full bandwidth
	// (R interleaved streams, short ones for the quantized types): walk a
	// later group's bytes with software prefetches, R blocks' worth per
	// block. The plain types go one row at a time, one sequential stream,
	// which decodes faster than 4 interleaved rows. Both measured:
	// docs/design-notes.md.
	var pf Register
	if pfGroups > 0 {
		pf = GP64()
		LEAQ(Mem{Base: rows[R-1], Index: stride, Scale: 1}, pf)
		for g := 1; g < pfGroups; g++ {
			for i := 0; i < R; i++ {
				ADDQ(stride, pf)
			}
		}
	}

	// step multiplies every row's decoded chunk by x's chunk and adds it to
	// the row's lanes (only the lanes of k for a partial last chunk).
	step := func(chunk func(r int) VecVirtual, xv VecVirtual, km Op) {
		for r := range acc {
			p := chunk(r)
			VMULPS(xv, p, p)
			if km == nil {
				VADDPS(p, acc[r], acc[r])
			} else {
				VADDPS(p, acc[r], km, acc[r])
			}
		}
	}

	E, B := t.blockElems(), t.blockBytes()
	body := func(loop string, ahead func(r int)) {
		if pf != nil {
			for b := 0; b < R*B; b += 64 {
				PREFETCHT0(Mem{Base: pf, Disp: b})
			}
			ADDQ(U32(R*B), pf)
		}
		for r := range rows {
			if ahead != nil {
				ahead(r)
			}
			t.begin(r, blk(r))
		}
		for c := 0; c < E/16; c++ {
			xv := ZMM()
			VMOVUPS(Mem{Base: xp, Disp: 64 * c}, xv)
			step(func(r int) VecVirtual { return t.chunk(r, blk(r), c) }, xv, nil)
		}
		ADDQ(U32(B), off)
		ADDQ(U32(4*E), xp)
		SUBQ(U32(E), kk)
		JMP(LabelRef(loop))
	}
	// A type that reads a per-block table prefetches the table of the block
	// lookAhead blocks on while that block is in the row; the last
	// lookAhead blocks go without.
	if la, ok := t.(lookAheader); ok && la.lookAhead() > 0 {
		n := la.lookAhead()
		Label("block_ahead" + tag)
		CMPQ(kk, U32(E*(n+1)))
		JB(LabelRef("block" + tag))
		body("block_ahead"+tag, func(r int) { la.prefetchTable(blk(r).Offset(n * B)) })
	}
	Label("block" + tag)
	CMPQ(kk, U32(E))
	JB(LabelRef("blocks_done" + tag))
	body("block"+tag, nil)
	Label("blocks_done" + tag)

	if t.plain() {
		bytes16 := B / 4 // bytes of 16 elements
		Label("chunk" + tag)
		CMPQ(kk, U32(16))
		JB(LabelRef("chunks_done" + tag))
		xv := ZMM()
		VMOVUPS(Mem{Base: xp}, xv)
		step(func(r int) VecVirtual { return t.chunk(r, blk(r), 0) }, xv, nil)
		ADDQ(U32(bytes16), off)
		ADDQ(U32(64), xp)
		SUBQ(U32(16), kk)
		JMP(LabelRef("chunk" + tag))
		Label("chunks_done" + tag)

		TESTQ(kk, kk)
		JZ(LabelRef("reduce" + tag))
		kl := tailMask(kk)
		xt := ZMM()
		VMOVUPS_Z(Mem{Base: xp}, kl, xt)
		step(func(r int) VecVirtual { return t.tail(blk(r), kl) }, xt, kl)
	}

	Label("reduce" + tag)
	for r := range acc {
		VMOVSS(reduce16(acc[r]), Mem{Base: out, Disp: 4 * r})
	}
}

// genDequant: dst = Dequantize(t, src) for len(dst) elements (the caller
// checks len(src) = RowBytes(t, len(dst))).
func genDequant(t qtype) {
	blk, dst, n := dequantBlocks("dequant"+t.name()+"AVX512", t, func(blk Mem, c int, dst Mem) {
		VMOVUPS(t.chunk(0, blk, c), dst)
	}, "chunks_done")
	if t.plain() {
		Label("chunks_done")
		TESTQ(n, n)
		JZ(LabelRef("done"))
		kl := tailMask(n)
		VMOVUPS(t.tail(blk, kl), kl, Mem{Base: dst})
	}
	Label("done")
	VZEROUPPER()
	RET()
}

// dequantBlocks starts a dequantization kernel, func(src []byte, dst
// []float32): whole blocks, then for plain types chunks of 16 while at
// least 16 elements are left (then on to label chunksDone). store writes
// the 16 elements of chunk c of the block at blk to dst.
func dequantBlocks(name string, t blockType, store func(blk Mem, c int, dst Mem), chunksDone string) (blk Mem, dst, n Register) {
	TEXT(name, NOSPLIT, "func(src []byte, dst []float32)")
	Pragma("noescape")
	local = AllocLocal(64 * 4)
	src := Load(Param("src").Base(), GP64())
	dst = Load(Param("dst").Base(), GP64())
	n = Load(Param("dst").Len(), GP64())
	blk = Mem{Base: src}
	E, B := t.blockElems(), t.blockBytes()
	Label("block")
	CMPQ(n, U32(E))
	JB(LabelRef("blocks_done"))
	t.begin(0, blk)
	for c := 0; c < E/16; c++ {
		store(blk, c, Mem{Base: dst, Disp: 64 * c})
	}
	ADDQ(U32(B), src)
	ADDQ(U32(4*E), dst)
	SUBQ(U32(E), n)
	JMP(LabelRef("block"))
	Label("blocks_done")
	if t.plain() {
		Label("chunk")
		CMPQ(n, U32(16))
		JB(LabelRef(chunksDone))
		store(blk, 0, Mem{Base: dst})
		ADDQ(U32(B/4), src)
		ADDQ(U32(64), dst)
		SUBQ(U32(16), n)
		JMP(LabelRef("chunk"))
	}
	return blk, dst, n
}
