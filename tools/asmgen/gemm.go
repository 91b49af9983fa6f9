package main

import (
	"fmt"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// genGemmExact is the register tile of the exact prefill matmul: 4 weight
// rows (a float32 panel, ldw floats apart, zero padded to a multiple of 16)
// times `rows` activation rows (k floats each, x[i*k]): every output one
// 16-lane accumulator in the exact order (dot.go), reduced by reduce16.
// out[i*ldo + j] for activation row i and weight row j.
func genGemmExact(rows int) {
	wr, xr, k := gemmParams(fmt.Sprintf("gemmExact4x%dAVX512", rows), 4, rows)
	acc := zeroAcc(rows, 4)
	full := GP64()
	MOVQ(k, full)
	ANDQ(I32(-16), full)
	l := GP64()
	XORQ(l, l)
	step := func(km Op) {
		var wv [4]VecVirtual
		for j := range wv {
			wv[j] = ZMM()
			VMOVUPS(Mem{Base: wr[j], Index: l, Scale: 4}, wv[j])
		}
		for i := range acc {
			xv := ZMM()
			if km == nil {
				VMOVUPS(Mem{Base: xr[i], Index: l, Scale: 4}, xv)
			} else {
				VMOVUPS_Z(Mem{Base: xr[i], Index: l, Scale: 4}, km, xv)
			}
			for j := range wv {
				p := ZMM()
				VMULPS(xv, wv[j], p)
				if km == nil {
					VADDPS(p, acc[i][j], acc[i][j])
				} else {
					VADDPS(p, acc[i][j], km, acc[i][j])
				}
			}
		}
	}
	Label("k")
	CMPQ(l, full)
	JAE(LabelRef("tail"))
	step(nil)
	ADDQ(U32(16), l)
	JMP(LabelRef("k"))
	Label("tail")
	CMPQ(l, k)
	JAE(LabelRef("reduce"))
	rem := GP64()
	MOVQ(k, rem)
	SUBQ(l, rem)
	km := tailMask(rem)
	step(km)
	Label("reduce")
	o := Load(Param("out").Base(), GP64())
	ldo := Load(Param("ldo"), GP64())
	SHLQ(U8(2), ldo)
	for i := range acc {
		for j := range acc[i] {
			VMOVSS(reduce16(acc[i][j]), Mem{Base: o, Disp: 4 * j})
		}
		if i+1 < rows {
			ADDQ(ldo, o)
		}
	}
	VZEROUPPER()
	RET()
}

// gemmParams starts a prefill tile kernel: func(w []float32, ldw int, x
// []float32, k int, out []float32, ldo int); it returns the pointers to the
// tile's wRows weight rows and xRows activation rows, and k.
func gemmParams(name string, wRows, xRows int) (wr, xr []Register, k Register) {
	TEXT(name, NOSPLIT, "func(w []float32, ldw int, x []float32, k int, out []float32, ldo int)")
	Pragma("noescape")
	w := Load(Param("w").Base(), GP64())
	ldw := Load(Param("ldw"), GP64())
	xp := Load(Param("x").Base(), GP64())
	k = Load(Param("k"), GP64())
	SHLQ(U8(2), ldw)
	wr = pointers(w, ldw, 1, wRows)
	xs := GP64()
	MOVQ(k, xs)
	SHLQ(U8(2), xs)
	xr = pointers(xp, xs, 1, xRows)
	return wr, xr, k
}
