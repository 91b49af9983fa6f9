package main

import (
	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// A q8_0 KV cache read in place (engine/ggml q8rows.go): rows of Q8_0
// blocks, each 16-value half of a block dequantized as the exact matvec
// kernel does it (q8_0Type.chunk: VPMOVSXBD, VCVTDQ2PS, VMULPS by the
// block's scale, exact), then the f32 kernels' arithmetic on it.

// q8Chunk dequantizes values 16c..16c+15 of the Q8_0 block at blk, whose
// scale f16Scalar has put at d (as a float32).
func q8Chunk(blk Mem, c int, d Mem) VecVirtual {
	t := &q8_0Type{}
	t.d[0] = d
	return t.chunk(0, blk, c)
}

// genScoreRowsQ8_0: out[j] = ggml_vec_dot_f32(dequantized row j, q), row j
// the len(q)/32 blocks at k[j*stride:] (stride in bytes; len(q) a multiple
// of 32): genScoreRows' steps of 64 (two blocks, one accumulator per half
// block), then the one block left when len(q)%64 = 32, as leftoversF32's
// two runs of 16 (products rounded, then added one by one).
func genScoreRowsQ8_0() {
	TEXT("scoreRowsQ8_0AVX512", NOSPLIT, "func(k []byte, stride int, q []float32, out []float32)")
	Pragma("noescape")
	local = AllocLocal(64 + 8)
	scale := local.Offset(64)
	kp := Load(Param("k").Base(), GP64())
	stride := Load(Param("stride"), GP64())
	qp := Load(Param("q").Base(), GP64())
	n := Load(Param("q").Len(), GP64())
	out := Load(Param("out").Base(), GP64())
	rows := Load(Param("out").Len(), GP64())
	np := GP64()
	MOVQ(n, np)
	ANDQ(I32(-64), np)

	Label("row")
	TESTQ(rows, rows)
	JZ(LabelRef("done"))
	var acc [4]VecVirtual
	for i := range acc {
		acc[i] = ZMM()
		VXORPS(acc[i], acc[i], acc[i])
	}
	i := GP64()
	XORQ(i, i)
	bp := GP64() // the next block
	MOVQ(kp, bp)
	Label("step")
	CMPQ(i, np)
	JAE(LabelRef("reduce"))
	for b := range 2 {
		blk := Mem{Base: bp, Disp: 34 * b}
		d := f16Scalar(blk, scale)
		for c := range 2 {
			a := 2*b + c
			x := q8Chunk(blk, c, d)
			VFMADD231PS(Mem{Base: qp, Index: i, Scale: 4, Disp: 64 * a}, x, acc[a])
		}
	}
	ADDQ(U32(64), i)
	ADDQ(U32(68), bp)
	JMP(LabelRef("step"))
	Label("reduce")
	VADDPS(acc[2], acc[0], acc[0])
	VADDPS(acc[3], acc[1], acc[1])
	VADDPS(acc[1], acc[0], acc[0])
	s := reduce16(acc[0])
	CMPQ(i, n)
	JAE(LabelRef("store"))
	blk := Mem{Base: bp}
	d := f16Scalar(blk, scale)
	for c := range 2 {
		x := q8Chunk(blk, c, d)
		VMULPS(Mem{Base: qp, Index: i, Scale: 4, Disp: 64 * c}, x, x)
		VMOVUPS(x, local)
		for l := range 16 {
			VADDSS(local.Offset(4*l), s, s)
		}
	}
	Label("store")
	nextRow(s, out, stride, kp, rows)
}

// genLaneFMAQ8_0 is genLaneFMA over rows of Q8_0 blocks (d a multiple of
// 32, so no tail): for every row j < len(p) and i < d,
//
//	acc[(j%lanes)*d + i] = fma(dequantized v row j [i], p[j], acc[(j%lanes)*d + i])
//
// with row j the d/32 blocks at v[j*stride:] (stride in bytes).
func genLaneFMAQ8_0() {
	TEXT("laneFMAQ8_0AVX512", NOSPLIT, "func(acc []float32, lanes int, j0 int, v []byte, stride int, p []float32, d int)")
	Pragma("noescape")
	local = AllocLocal(8)
	scale := local
	accp := Load(Param("acc").Base(), GP64())
	lanes := Load(Param("lanes"), GP64())
	lane := Load(Param("j0"), GP64())
	vp := Load(Param("v").Base(), GP64())
	stride := Load(Param("stride"), GP64())
	pp := Load(Param("p").Base(), GP64())
	rows := Load(Param("p").Len(), GP64())
	d := Load(Param("d"), GP64())
	rowBytes := GP64()
	MOVQ(d, rowBytes)
	SHLQ(U8(2), rowBytes)
	SHRQ(U8(5), d) // blocks per row

	Label("row")
	TESTQ(rows, rows)
	JZ(LabelRef("done"))
	a := GP64() // this row's accumulators: acc + lane*d*4
	MOVQ(lane, a)
	IMULQ(rowBytes, a)
	ADDQ(accp, a)
	pj := ZMM()
	VBROADCASTSS(Mem{Base: pp}, pj)
	bp, nb := GP64(), GP64()
	MOVQ(vp, bp)
	MOVQ(d, nb)
	Label("block")
	TESTQ(nb, nb)
	JZ(LabelRef("next"))
	blk := Mem{Base: bp}
	ds := f16Scalar(blk, scale)
	for c := range 2 {
		x := q8Chunk(blk, c, ds)
		s := ZMM()
		VMOVUPS(Mem{Base: a, Disp: 64 * c}, s)
		VFMADD231PS(pj, x, s)
		VMOVUPS(s, Mem{Base: a, Disp: 64 * c})
	}
	ADDQ(U32(34), bp)
	ADDQ(U32(128), a)
	DECQ(nb)
	JMP(LabelRef("block"))
	Label("next")
	ADDQ(stride, vp)
	ADDQ(U32(4), pp)
	INCQ(lane)
	CMPQ(lane, lanes)
	JB(LabelRef("lane_ok"))
	XORQ(lane, lane)
	Label("lane_ok")
	DECQ(rows)
	JMP(LabelRef("row"))
	Label("done")
	VZEROUPPER()
	RET()
}
