package main

import (
	"fmt"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// genGemmExact is the register tile of the exact prefill matmul: 4 weight
// rows (dequantized into a float32 panel, ldw floats apart, zero padded to a
// multiple of 8) times 8 activation rows packed as [chunk][8 rows][8]
// (chunk c at x + c*xstride floats). Accumulator (i, p) holds the lanes of
// outputs (row i, activations 2p and 2p+1); every output gets its products
// in the generic order. tile receives out[t][i] at tile[4t+i].
func genGemmExact() {
	TEXT("gemmExact4x8AVX512", NOSPLIT, "func(w []float32, ldw int, x []float32, xstride int, k int, tile *[32]float32)")
	Pragma("noescape")
	w := Load(Param("w").Base(), GP64())
	ldw := Load(Param("ldw"), GP64())
	xp := Load(Param("x").Base(), GP64())
	xs := Load(Param("xstride"), GP64())
	kk := Load(Param("k"), GP64())
	tile := Load(Param("tile"), GP64())
	SHLQ(U8(2), ldw)
	SHLQ(U8(2), xs)

	rows := [4]Register{}
	for i := range rows {
		rows[i] = GP64()
		if i == 0 {
			MOVQ(w, rows[i])
		} else {
			LEAQ(Mem{Base: rows[i-1], Index: ldw, Scale: 1}, rows[i])
		}
	}
	var acc [4][4]VecVirtual
	for i := range acc {
		for p := range acc[i] {
			acc[i][p] = ZMM()
			VXORPS(acc[i][p], acc[i][p], acc[i][p])
		}
	}
	off := GP64()
	XORQ(off, off)

	chunk := func(ka Op) {
		var xv [4]VecVirtual
		for p := range xv {
			xv[p] = ZMM()
			VMOVUPS(Mem{Base: xp, Disp: 64 * p}, xv[p])
		}
		for i := range rows {
			wv := ZMM()
			VBROADCASTF32X8(Mem{Base: rows[i], Index: off, Scale: 1}, wv)
			for p := range xv {
				t := ZMM()
				VMULPS(xv[p], wv, t)
				if ka == nil {
					VADDPS(t, acc[i][p], acc[i][p])
				} else {
					VADDPS(t, acc[i][p], ka, acc[i][p])
				}
			}
		}
		ADDQ(U32(32), off)
		ADDQ(xs, xp)
	}

	Label("loop2")
	CMPQ(kk, U32(16))
	JB(LabelRef("loop1"))
	chunk(nil)
	chunk(nil)
	SUBQ(U32(16), kk)
	JMP(LabelRef("loop2"))
	Label("loop1")
	CMPQ(kk, U32(8))
	JB(LabelRef("tail"))
	chunk(nil)
	SUBQ(U32(8), kk)
	Label("tail")
	TESTQ(kk, kk)
	JZ(LabelRef("reduce"))
	masks := GP64()
	LEAQ(tailMasks, masks)
	ka := K()
	KMOVW(Mem{Base: masks, Index: kk, Scale: 8, Disp: 2}, ka)
	chunk(ka)

	Label("reduce")
	for i := range acc {
		for p := range acc[i] {
			a, b := reducePair(acc[i][p])
			VMOVSS(a, Mem{Base: tile, Disp: 4 * (4*(2*p) + i)})
			VMOVSS(b, Mem{Base: tile, Disp: 4 * (4*(2*p+1) + i)})
		}
	}
	VZEROUPPER()
	RET()
	_ = fmt.Sprint
}
