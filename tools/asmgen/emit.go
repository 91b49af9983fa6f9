package main

import (
	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// pointers returns n registers holding base, base+step·scale,
// base+2·step·scale, ...: the rows of a matrix, each from the previous one.
func pointers(base, step Register, scale uint8, n int) []Register {
	p := make([]Register, n)
	for i := range p {
		p[i] = GP64()
		if i == 0 {
			MOVQ(base, p[i])
		} else {
			LEAQ(Mem{Base: p[i-1], Index: step, Scale: scale}, p[i])
		}
	}
	return p
}

// zeroAcc returns rows×cols accumulator registers set to 0.
func zeroAcc(rows, cols int) [][]VecVirtual {
	acc := make([][]VecVirtual, rows)
	for i := range acc {
		acc[i] = make([]VecVirtual, cols)
		for j := range acc[i] {
			acc[i][j] = zeroZMM()
		}
	}
	return acc
}

// tailMask returns the load mask of the last r < 16 elements of a row
// (tailMasks[r]).
func tailMask(r Register) OpmaskVirtual {
	masks := GP64()
	LEAQ(tailMasks, masks)
	k := K()
	KMOVW(Mem{Base: masks, Index: r, Scale: 8}, k)
	return k
}

// outRows calls store for rows 0..rows-1 of the output parameter out, ld
// (parameter ldName) float32 elements apart.
func outRows(out, ldName string, rows int, store func(i int, row Register)) {
	p := Load(Param(out).Base(), GP64())
	ld := Load(Param(ldName), GP64())
	SHLQ(U8(2), ld)
	for i := range rows {
		store(i, p)
		if i+1 < rows {
			ADDQ(ld, p)
		}
	}
}

// blocks16 emits a loop over i = 0, 16, 32, ... while i < n (n a multiple
// of 16), body handling the 16 lanes at i, then label done.
func blocks16(loop, done string, n Register, body func(i Register)) {
	i := GP64()
	XORQ(i, i)
	Label(loop)
	CMPQ(i, n)
	JAE(LabelRef(done))
	body(i)
	ADDQ(U32(16), i)
	JMP(LabelRef(loop))
	Label(done)
}

// nextRow ends one iteration of a kernel's "row" loop: the row's sum s to
// *out, on to the next output and weight row (n left), and the function's
// exit at label done.
func nextRow(s, out, stride, w, n Register) {
	VMOVSS(s, Mem{Base: out})
	ADDQ(U32(4), out)
	ADDQ(stride, w)
	DECQ(n)
	JMP(LabelRef("row"))
	Label("done")
	VZEROUPPER()
	RET()
}
