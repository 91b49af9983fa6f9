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
