package main

import (
	"fmt"
	"math"
	"slices"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// llama.cpp's float kernels as its AVX-512 build computes them (ggml-cpu
// vec.h/vec.cpp): the generic Go versions are in cpuops.go, these are the
// same instructions.

var (
	expConst Mem // ggml_v_expf's constants, 4 bytes each (see vexpf)
	one64    Mem // float64 1
)

func genOpsConstants() {
	expConst = GLOBL("expConst", RODATA|NOPTR)
	for i, v := range []float32{
		0x1.8p23,       // 0  r
		0x1.715476p+0,  // 4  log2(e)
		0x1.62e4p-1,    // 8  ln2 high
		0x1.7f7d1cp-20, // 12 ln2 low
		0x1.0e4020p-7,  // 16
		0x1.573e2ep-5,  // 20
		0x1.555e66p-3,  // 24
		0x1.fffdb6p-2,  // 28
		0x1.ffffecp-1,  // 32
		1,              // 36
		192,            // 40
	} {
		DATA(4*i, U32(math.Float32bits(v)))
	}
	DATA(44, U32(0x7fffffff))                              // abs mask
	DATA(48, U32(math.Float32bits(float32(math.Inf(1)))))  // +Inf
	DATA(52, U32(math.Float32bits(float32(math.Inf(-1))))) // -Inf
	one64 = GLOBL("one64", RODATA|NOPTR)
	DATA(0, U64(math.Float64bits(1)))
}

func expc(off int) Mem { return expConst.Offset(off) }

// vexpf computes ggml_v_expf(x) (16 lanes) into a new register.
func vexpf(x VecVirtual) VecVirtual {
	z := ZMM()
	VBROADCASTSS(expc(0), z)
	r := ZMM()
	VMOVAPS(z, r)
	VFMADD231PS_BCST(expc(4), x, z) // z = x*log2(e) + r
	n := ZMM()
	VSUBPS(r, z, n) // n = z - r
	b := ZMM()
	VMOVAPS(x, b)
	VFNMADD231PS_BCST(expc(8), n, b)  // x - n*c
	VFNMADD231PS_BCST(expc(12), n, b) // - n*c'
	d := K()
	an := ZMM()
	VANDPS_BCST(expc(44), n, an)
	VCMPPS_BCST(U8(0x1e), expc(40), an, d) // |n| > 192 (GT_OQ)
	u := ZMM()
	VMULPS(b, b, u)
	t1 := ZMM()
	VBROADCASTSS(expc(20), t1)
	VFMADD231PS_BCST(expc(16), b, t1) // c4*b + c5
	t2 := ZMM()
	VBROADCASTSS(expc(28), t2)
	VFMADD231PS_BCST(expc(24), b, t2) // c6*b + c7
	VFMADD213PS(t2, u, t1)            // t1*u + t2
	t3 := ZMM()
	VBROADCASTSS(expc(36), t3)
	VFMADD231PS_BCST(expc(32), b, t3) // c8*b + 1
	VFMADD213PS(t3, u, t1)            // t1*u + t3
	res := ZMM()
	VSCALEFPS(n, t1, res)
	// Lanes with |n| > 192: +Inf if n > 0, else 0.
	le := K()
	zero := ZMM()
	VXORPS(zero, zero, zero)
	VCMPPS(U8(0x12), zero, n, le) // n <= 0 (LE_OQ)
	alt := ZMM()
	VBROADCASTSS(expc(48), alt)
	VMOVAPS(zero, le, alt) // 0 where n <= 0
	VMOVAPS(alt, d, res)
	return res
}

// genScoreRows: out[j] = ggml_vec_dot_f32(k[j*stride : j*stride+len(q)], q).
// With f16, k holds binary16 values (an f16 KV cache read in place),
// converted exactly to float32 as they are loaded: the same sums as over
// the converted rows.
func genScoreRows(f16 bool) {
	name, ktype, esize := "scoreRowsAVX512", "[]float32", 4
	if f16 {
		name, ktype, esize = "scoreRowsF16AVX512", "[]uint16", 2
	}
	TEXT(name, NOSPLIT, "func(k "+ktype+", stride int, q []float32, out []float32)")
	Pragma("noescape")
	local = AllocLocal(64)
	kp := Load(Param("k").Base(), GP64())
	stride := Load(Param("stride"), GP64())
	qp := Load(Param("q").Base(), GP64())
	n := Load(Param("q").Len(), GP64())
	out := Load(Param("out").Base(), GP64())
	rows := Load(Param("out").Len(), GP64())
	if f16 {
		SHLQ(U8(1), stride)
	} else {
		SHLQ(U8(2), stride)
	}
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
	Label("step")
	CMPQ(i, np)
	JAE(LabelRef("reduce"))
	for a := range acc {
		v := ZMM()
		if f16 {
			VCVTPH2PS(Mem{Base: kp, Index: i, Scale: uint8(esize), Disp: 32 * a}, v)
		} else {
			VMOVUPS(Mem{Base: kp, Index: i, Scale: 4, Disp: 64 * a}, v)
		}
		VFMADD231PS(Mem{Base: qp, Index: i, Scale: 4, Disp: 64 * a}, v, acc[a])
	}
	ADDQ(U32(64), i)
	JMP(LabelRef("step"))
	Label("reduce")
	VADDPS(acc[2], acc[0], acc[0])
	VADDPS(acc[3], acc[1], acc[1])
	VADDPS(acc[1], acc[0], acc[0])
	s := reduce16(acc[0])
	leftoversF32(kp, qp, i, n, s, f16)
	Label("store")
	nextRow(s, out, stride, kp, rows)
}

// leftoversF32 adds Σ w[j]·x[j] for j in [i, n) to s as GCC compiles
// ggml's scalar loop for AVX-512: runs of 16, then one of 8, multiplied
// first (rounded) and added in order; the last < 8 with fused
// multiply-adds (engine/ggml's leftoversF32). With f16, w holds binary16
// values. It uses local's 64 bytes and the labels left16, left8 and left1.
func leftoversF32(w, x, i, n, s Register, f16 bool) {
	wmem := Mem{Base: w, Index: i, Scale: 4}
	if f16 {
		wmem.Scale = 2
	}
	left := GP64()
	Label("left16")
	MOVQ(n, left)
	SUBQ(i, left)
	CMPQ(left, U32(16))
	JB(LabelRef("left8"))
	p16 := ZMM()
	if f16 {
		VCVTPH2PS(wmem, p16)
	} else {
		VMOVUPS(wmem, p16)
	}
	VMULPS(Mem{Base: x, Index: i, Scale: 4}, p16, p16)
	VMOVUPS(p16, local)
	for l := 0; l < 16; l++ {
		VADDSS(local.Offset(4*l), s, s)
	}
	ADDQ(U32(16), i)
	JMP(LabelRef("left16"))
	Label("left8")
	CMPQ(left, U32(8))
	JB(LabelRef("left1"))
	p8 := YMM()
	if f16 {
		VCVTPH2PS(wmem, p8)
	} else {
		VMOVUPS(wmem, p8)
	}
	VMULPS(Mem{Base: x, Index: i, Scale: 4}, p8, p8)
	VMOVUPS(p8, local)
	for l := 0; l < 8; l++ {
		VADDSS(local.Offset(4*l), s, s)
	}
	ADDQ(U32(8), i)
	Label("left1")
	CMPQ(i, n)
	JAE(LabelRef("store"))
	x1 := XMM()
	if f16 {
		h := GP32()
		MOVWLZX(wmem, h)
		VMOVD(h, x1)
		VCVTPH2PS(x1, x1)
	} else {
		VMOVSS(wmem, x1)
	}
	VFMADD231SS(Mem{Base: x, Index: i, Scale: 4}, x1, s)
	INCQ(i)
	JMP(LabelRef("left1"))
}

// reduce16 is _mm512_reduce_add_ps as GCC emits it: the 256-bit halves
// added, then the 128-bit halves, then (q0+q2)+(q1+q3). The sum is in lane
// 0 of the returned register.
func reduce16(a VecVirtual) Register {
	h := YMM()
	VEXTRACTF32X8(U8(1), a, h)
	VADDPS(a.AsY(), h, h)
	q := XMM()
	VEXTRACTF32X4(U8(1), h, q)
	VADDPS(h.AsX(), q, q) // q0..3
	return reduce4(q)
}

// reduce4 is (q0+q2)+(q1+q3) of q's four lanes, in lane 0 of q.
func reduce4(q VecVirtual) Register {
	t := XMM()
	VSHUFPS(U8(0x0E), q, q, t) // [q2, q3, ..]
	VADDPS(t, q, q)            // [q0+q2, q1+q3, ..]
	VSHUFPS(U8(0x01), q, q, t) // [q1+q3, ..]
	VADDPS(t, q, q)
	return q
}

// genLaneFMA: for every row j < len(p):
//
//	acc[(j%lanes)*d + i] = fma(v[j*stride+i], p[j], acc[(j%lanes)*d + i]), i < d
//
// the accumulators of a dot product over j with `lanes` lanes (16 for
// tinyBLAS, 64 = 4 accumulators of 16 for ggml_vec_dot_f32), for d columns
// of v at once. j0 is the lane of row 0 (p is a window of a longer vector).
// With f16, v holds binary16 values, converted exactly as they are loaded.
func genLaneFMA(f16 bool) {
	name, vtype := "laneFMAAVX512", "[]float32"
	if f16 {
		name, vtype = "laneFMAF16AVX512", "[]uint16"
	}
	TEXT(name, NOSPLIT, "func(acc []float32, lanes int, j0 int, v "+vtype+", stride int, p []float32, d int)")
	Pragma("noescape")
	accp := Load(Param("acc").Base(), GP64())
	lanes := Load(Param("lanes"), GP64())
	lane := Load(Param("j0"), GP64())
	vp := Load(Param("v").Base(), GP64())
	stride := Load(Param("stride"), GP64())
	pp := Load(Param("p").Base(), GP64())
	rows := Load(Param("p").Len(), GP64())
	d := Load(Param("d"), GP64())
	vscale := uint8(4)
	if f16 {
		vscale = 2
		SHLQ(U8(1), stride)
	} else {
		SHLQ(U8(2), stride)
	}
	rowBytes := GP64()
	MOVQ(d, rowBytes)
	SHLQ(U8(2), rowBytes)
	// tail mask for d % 16
	masks := GP64()
	LEAQ(tailMasks, masks)
	rem := GP64()
	MOVQ(d, rem)
	ANDQ(U32(15), rem)
	kt := K()
	KMOVW(Mem{Base: masks, Index: rem, Scale: 8}, kt)
	full := GP64()
	MOVQ(d, full)
	ANDQ(I32(-16), full)

	Label("row")
	TESTQ(rows, rows)
	JZ(LabelRef("done"))
	a := GP64() // this row's accumulators: acc + lane*d*4
	MOVQ(lane, a)
	IMULQ(rowBytes, a)
	ADDQ(accp, a)
	pj := ZMM()
	VBROADCASTSS(Mem{Base: pp}, pj)
	i := GP64()
	XORQ(i, i)
	Label("col")
	CMPQ(i, full)
	JAE(LabelRef("coltail"))
	x := ZMM()
	if f16 {
		VCVTPH2PS(Mem{Base: vp, Index: i, Scale: vscale}, x)
	} else {
		VMOVUPS(Mem{Base: vp, Index: i, Scale: 4}, x)
	}
	s := ZMM()
	VMOVUPS(Mem{Base: a, Index: i, Scale: 4}, s)
	VFMADD231PS(pj, x, s)
	VMOVUPS(s, Mem{Base: a, Index: i, Scale: 4})
	ADDQ(U32(16), i)
	JMP(LabelRef("col"))
	Label("coltail")
	TESTQ(rem, rem)
	JZ(LabelRef("next"))
	xt, st := ZMM(), ZMM()
	if f16 {
		// A masked 16-bit load (no fault past the row), then convert.
		ht := YMM()
		VMOVDQU16_Z(Mem{Base: vp, Index: i, Scale: vscale}, kt, ht)
		VCVTPH2PS(ht, xt)
	} else {
		VMOVUPS_Z(Mem{Base: vp, Index: i, Scale: 4}, kt, xt)
	}
	VMOVUPS_Z(Mem{Base: a, Index: i, Scale: 4}, kt, st)
	VFMADD231PS(pj, xt, st)
	VMOVUPS(st, kt, Mem{Base: a, Index: i, Scale: 4})
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

// genReduceLanes: out[i] = the reduction of the lanes acc[l*d + i] of
// column i: for 64 lanes, ggml_vec_dot_f32's (x0+x2)+(x1+x3) of its four
// 16-lane accumulators, then _mm512_reduce_add_ps over the 16 lanes; for 16
// lanes (tinyBLAS) the latter only. Vectorized over 16 columns at a time.
func genReduceLanes(lanes int) {
	TEXT(fmt.Sprintf("reduceLanes%dAVX512", lanes), NOSPLIT, "func(acc []float32, d int, out []float32)")
	Pragma("noescape")
	accp := Load(Param("acc").Base(), GP64())
	d := Load(Param("d"), GP64())
	out := Load(Param("out").Base(), GP64())
	rowBytes := GP64()
	MOVQ(d, rowBytes)
	SHLQ(U8(2), rowBytes)
	masks := GP64()
	LEAQ(tailMasks, masks)
	k := K()
	Label("col")
	TESTQ(d, d)
	JZ(LabelRef("done"))
	CMPQ(d, U32(16))
	JB(LabelRef("partial"))
	KXNORW(k, k, k)
	JMP(LabelRef("go"))
	Label("partial")
	KMOVW(Mem{Base: masks, Index: d, Scale: 8}, k)
	Label("go")
	base := make([]Register, lanes/16)
	for q := range base {
		base[q] = GP64()
		MOVQ(U32(uint32(16*q)), base[q])
		IMULQ(rowBytes, base[q])
		ADDQ(accp, base[q])
	}
	lo := GP64()
	XORQ(lo, lo)
	load := func(q int) VecVirtual {
		z := ZMM()
		VMOVUPS_Z(Mem{Base: base[q], Index: lo, Scale: 1}, k, z)
		return z
	}
	var s [16]VecVirtual
	for l := range 16 {
		if lanes == 64 {
			a, b := load(0), load(2)
			VADDPS(b, a, a)
			c, e := load(1), load(3)
			VADDPS(e, c, c)
			VADDPS(c, a, a)
			s[l] = a
		} else {
			s[l] = load(0)
		}
		ADDQ(rowBytes, lo)
	}
	for i := 0; i < 8; i++ {
		VADDPS(s[i+8], s[i], s[i])
	}
	for i := 0; i < 4; i++ {
		VADDPS(s[i+4], s[i], s[i])
	}
	VADDPS(s[2], s[0], s[0])
	VADDPS(s[3], s[1], s[1])
	VADDPS(s[1], s[0], s[0])
	VMOVUPS(s[0], k, Mem{Base: out})
	ADDQ(U32(64), out)
	ADDQ(U32(64), accp)
	CMPQ(d, U32(16))
	JB(LabelRef("done"))
	SUBQ(U32(16), d)
	JMP(LabelRef("col"))
	Label("done")
	VZEROUPPER()
	RET()
}

// genSoftmax: p = softmax(scale·p) in place, as ggml's soft_max on an
// AVX-512 build (see softmax in cpuops.go): scale and max, then ggml_v_expf
// over 16-lane blocks (lanes past the end contribute 0), every block's
// _mm512_reduce_add_ps summed in double, then a multiplication by
// float32(1/sum).
func genSoftmax() {
	TEXT("softmaxAVX512", NOSPLIT, "func(p []float32, scale float32)")
	Pragma("noescape")
	pp := Load(Param("p").Base(), GP64())
	n := Load(Param("p").Len(), GP64())
	scx := Load(Param("scale"), XMM())
	sc := ZMM()
	VBROADCASTSS(scx, sc)
	masks := GP64()
	LEAQ(tailMasks, masks)
	full := GP64()
	MOVQ(n, full)
	ANDQ(I32(-16), full)
	rem := GP64()
	MOVQ(n, rem)
	ANDQ(U32(15), rem)
	kt := K()
	KMOVW(Mem{Base: masks, Index: rem, Scale: 8}, kt)

	// pass 1: scale, max
	mx := ZMM()
	VBROADCASTSS(expc(52), mx)
	i := GP64()
	XORQ(i, i)
	Label("scale")
	CMPQ(i, full)
	JAE(LabelRef("scale_tail"))
	x := ZMM()
	VMULPS(Mem{Base: pp, Index: i, Scale: 4}, sc, x)
	VMOVUPS(x, Mem{Base: pp, Index: i, Scale: 4})
	VMAXPS(x, mx, mx)
	ADDQ(U32(16), i)
	JMP(LabelRef("scale"))
	Label("scale_tail")
	TESTQ(rem, rem)
	JZ(LabelRef("max"))
	xt := ZMM()
	VMOVUPS_Z(Mem{Base: pp, Index: i, Scale: 4}, kt, xt)
	VMULPS(sc, xt, xt)
	VMOVUPS(xt, kt, Mem{Base: pp, Index: i, Scale: 4})
	VMAXPS(xt, mx, kt, mx)
	Label("max")
	h := YMM()
	VEXTRACTF32X8(U8(1), mx, h)
	VMAXPS(mx.AsY(), h, h)
	q := XMM()
	VEXTRACTF32X4(U8(1), h, q)
	VMAXPS(h.AsX(), q, q)
	t := XMM()
	VSHUFPS(U8(0x0E), q, q, t)
	VMAXPS(t, q, q)
	VSHUFPS(U8(0x01), q, q, t)
	VMAXPS(t, q, q)
	m := ZMM()
	VBROADCASTSS(q, m)

	// pass 2: exponentials and their sum in double
	sum := XMM()
	VXORPD(sum, sum, sum)
	XORQ(i, i)
	block := func(k Op) {
		v := ZMM()
		if k == nil {
			VMOVUPS(Mem{Base: pp, Index: i, Scale: 4}, v)
		} else {
			VMOVUPS_Z(Mem{Base: pp, Index: i, Scale: 4}, k, v)
		}
		VSUBPS(m, v, v)
		e := vexpf(v)
		if k == nil {
			VMOVUPS(e, Mem{Base: pp, Index: i, Scale: 4})
		} else {
			VMOVUPS_Z(e, k, e)
			VMOVUPS(e, k, Mem{Base: pp, Index: i, Scale: 4})
		}
		r := reduce16(e)
		d := XMM()
		VCVTSS2SD(r, d, d)
		VADDSD(d, sum, sum)
	}
	Label("exp")
	CMPQ(i, full)
	JAE(LabelRef("exp_tail"))
	block(nil)
	ADDQ(U32(16), i)
	JMP(LabelRef("exp"))
	Label("exp_tail")
	TESTQ(rem, rem)
	JZ(LabelRef("norm"))
	block(kt)

	// pass 3: multiply by float32(1/sum)
	Label("norm")
	inv := XMM()
	VMOVSD(one64, inv)
	VDIVSD(sum, inv, inv)
	VCVTSD2SS(inv, inv, inv)
	iv := ZMM()
	VBROADCASTSS(inv, iv)
	XORQ(i, i)
	Label("mul")
	CMPQ(i, full)
	JAE(LabelRef("mul_tail"))
	y := ZMM()
	VMULPS(Mem{Base: pp, Index: i, Scale: 4}, iv, y)
	VMOVUPS(y, Mem{Base: pp, Index: i, Scale: 4})
	ADDQ(U32(16), i)
	JMP(LabelRef("mul"))
	Label("mul_tail")
	TESTQ(rem, rem)
	JZ(LabelRef("done"))
	yt := ZMM()
	VMOVUPS_Z(Mem{Base: pp, Index: i, Scale: 4}, kt, yt)
	VMULPS(iv, yt, yt)
	VMOVUPS(yt, kt, Mem{Base: pp, Index: i, Scale: 4})
	Label("done")
	VZEROUPPER()
	RET()
}

// genSwiglu: dst[i] = silu(gate[i])·up[i] for the whole 16-element blocks
// of gate, as ggml_vec_swiglu_f32's AVX-512 loop: x/(1+ggml_v_expf(0-x)),
// then the product. The caller does the scalar rest.
func genSwiglu() {
	TEXT("swigluAVX512", NOSPLIT, "func(dst, gate, up []float32)")
	Pragma("noescape")
	dp := Load(Param("dst").Base(), GP64())
	gp := Load(Param("gate").Base(), GP64())
	up := Load(Param("up").Base(), GP64())
	n := Load(Param("gate").Len(), GP64())
	ANDQ(I32(-16), n)
	blocks16("loop", "done", n, func(i Register) {
		x := ZMM()
		VMOVUPS(Mem{Base: gp, Index: i, Scale: 4}, x)
		neg := ZMM()
		VXORPS(neg, neg, neg)
		VSUBPS(x, neg, neg) // 0 - x
		e := vexpf(neg)
		VADDPS_BCST(expc(36), e, e) // 1 + e
		VDIVPS(e, x, x)             // x / (1+e)
		VMULPS(Mem{Base: up, Index: i, Scale: 4}, x, x)
		VMOVUPS(x, Mem{Base: dp, Index: i, Scale: 4})
	})
	VZEROUPPER()
	RET()
}

// genRope: ggml's rope of one head, rotate_pairs as GCC compiles it (one
// fused multiply-add per output, the other product rounded first):
// x0' = fma(x0, cos, -(x1·sin)), x1' = fma(x0, sin, x1·cos), the
// instruction's single rounding being FMA32's. ropeAVX512 pairs adjacent
// values over the first len(x)&^15 (llama); ropeNeoxAVX512 pairs x[i] with
// x[i+h], h = len(x)/2, over whole blocks of 16 of each half (NeoX). cs
// holds (cos, sin) per pair.
func genRope() {
	// Lanes holding a pair's first value take -(x1·sin).
	evenSign := u32s("ropeEvenSign", slices.Repeat([]uint32{1 << 31, 0}, 8))
	TEXT("ropeAVX512", NOSPLIT, "func(x, cs []float32)")
	Pragma("noescape")
	xp := Load(Param("x").Base(), GP64())
	cp := Load(Param("cs").Base(), GP64())
	n := Load(Param("x").Len(), GP64())
	ANDQ(I32(-16), n)
	sign := ZMM()
	VMOVUPS(evenSign, sign)
	blocks16("loop", "done", n, func(i Register) {
		x, c := ZMM(), ZMM()
		VMOVUPS(Mem{Base: xp, Index: i, Scale: 4}, x)
		VMOVUPS(Mem{Base: cp, Index: i, Scale: 4}, c)
		x0, x1, p := ZMM(), ZMM(), ZMM()
		VMOVSLDUP(x, x0)          // (x0, x0)
		VMOVSHDUP(x, x1)          // (x1, x1)
		VPERMILPS(U8(0xb1), c, p) // (sin, cos)
		VMULPS(p, x1, p)          // (x1·sin, x1·cos)
		VXORPS(sign, p, p)        // (-(x1·sin), x1·cos)
		VFMADD231PS(c, x0, p)     // x0·(cos, sin) + p
		VMOVUPS(p, Mem{Base: xp, Index: i, Scale: 4})
	})
	VZEROUPPER()
	RET()

	even := u32s("ropeEvenIdx", []uint32{0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30})
	allSign := u32s("ropeSign", slices.Repeat([]uint32{1 << 31}, 16))
	odd := u32s("ropeOddIdx", []uint32{1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31})
	TEXT("ropeNeoxAVX512", NOSPLIT, "func(x, cs []float32)")
	Pragma("noescape")
	xp = Load(Param("x").Base(), GP64())
	cp = Load(Param("cs").Base(), GP64())
	h := Load(Param("x").Len(), GP64())
	SHRQ(U8(1), h)
	hb := GP64() // the half's bytes: x1 = x0's address + hb
	MOVQ(h, hb)
	SHLQ(U8(2), hb)
	ANDQ(I32(-16), h)
	ie, io, neg := ZMM(), ZMM(), ZMM()
	VMOVUPS(even, ie)
	VMOVUPS(odd, io)
	VMOVUPS(allSign, neg)
	blocks16("nloop", "ndone", h, func(i Register) {
		a := GP64() // &x[i]
		LEAQ(Mem{Base: xp, Index: i, Scale: 4}, a)
		xa, xb := ZMM(), ZMM()
		VMOVUPS(Mem{Base: a}, xa)
		VMOVUPS(Mem{Base: a, Index: hb, Scale: 1}, xb)
		cos, sin, hi := ZMM(), ZMM(), ZMM()
		VMOVUPS(Mem{Base: cp, Index: i, Scale: 8}, cos)
		VMOVUPS(Mem{Base: cp, Index: i, Scale: 8, Disp: 64}, hi)
		VMOVAPS(cos, sin)
		VPERMT2PS(hi, ie, cos) // cs's even values: cos
		VPERMT2PS(hi, io, sin) // odd: sin
		p0, p1 := ZMM(), ZMM()
		VMULPS(sin, xb, p0)      // x1·sin
		VXORPS(neg, p0, p0)      // -(x1·sin): the sign flipped, of a NaN too, as Go's negation
		VMULPS(cos, xb, p1)      // x1·cos
		VFMADD231PS(cos, xa, p0) // x0·cos - x1·sin
		VFMADD231PS(sin, xa, p1) // x0·sin + x1·cos
		VMOVUPS(p0, Mem{Base: a})
		VMOVUPS(p1, Mem{Base: a, Index: hb, Scale: 1})
	})
	VZEROUPPER()
	RET()
}

// genAddZero: x[i] += 0 for every i (a -0 becomes +0, as the generic
// code's zero padding of a partial 64-row chunk makes it), 16 lanes a step.
func genAddZero() {
	TEXT("addZeroAVX512", NOSPLIT, "func(x []float32)")
	Pragma("noescape")
	p := Load(Param("x").Base(), GP64())
	n := Load(Param("x").Len(), GP64())
	zero := ZMM()
	VPXORD(zero, zero, zero)
	forEach16(n, func(i Register, k Op) {
		at := Mem{Base: p, Index: i, Scale: 4}
		v := load16(at, k)
		VADDPS(v, zero, v)
		store16(v, k, at)
	})
	VZEROUPPER()
	RET()
}
