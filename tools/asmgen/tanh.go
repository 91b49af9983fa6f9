package main

import (
	"log"
	"math"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// tanhConst holds the constants of cmath.Tanhf and its expm1f (engine/cmath/
// tanhf.go), one dword each, for broadcasts; tc names them.
var (
	tanhConst Mem
	tanhOff   = map[string]int{}
)

func genTanhConstants() {
	tanhConst = GLOBL("tanhConst", RODATA|NOPTR)
	f := math.Float32bits
	for i, c := range []struct {
		name string
		bits uint32
	}{
		{"abs", 0x7fffffff},
		{"sign", 0x80000000},
		{"quiet", 0x00400000}, // a NaN's quiet bit
		// thresholds on the magnitude's bits
		{"hInf", 0x7f800000},     // Inf/NaN
		{"h22", 0x41b00000},      // tanh: |x| >= 22
		{"h2m55", 0x24000000},    // tanh: |x| < 2^-55
		{"one", f(1)},            // tanh: |x| >= 1 (0x3f800000); also 1.0
		{"h27ln2", 0x4195b844},   // expm1: |x| >= 27·ln2
		{"hOvf", 0x42b17218},     // expm1: |x| >= 88.72
		{"hHalfLn2", 0x3eb17218}, // expm1: |x| > ln2/2
		{"h1p5Ln2", 0x3f851592},  // expm1: |x| < 1.5·ln2
		{"h2m25", 0x33000000},    // expm1: |x| < 2^-25
		// float32 constants
		{"two", f(2)},
		{"mtwo", f(-2)},
		{"half", f(0.5)},
		{"three", f(3)},
		{"six", f(6)},
		{"mquarter", f(-0.25)},
		{"mone", f(-1)},
		{"inf", f(float32(math.Inf(1)))},
		{"oThreshold", f(8.8721679688e+01)},
		{"ln2Hi", f(6.9313812256e-01)},
		{"ln2Lo", f(9.0580006145e-06)},
		{"invLn2", f(1.4426950216e+00)},
		{"q1", f(-3.3333335072e-02)},
		{"q2", f(1.5873016091e-03)},
		{"q3", f(-7.9365076090e-05)},
		{"q4", f(4.0082177293e-06)},
		{"q5", f(-2.0109921195e-07)},
		// int32 constants (k cases)
		{"i1", 1},
		{"im1", 0xffffffff},
		{"im2", 0xfffffffe},
		{"i2", 2},
		{"i23", 23},
		{"i56", 56},
		{"i0x7f", 0x7f},
		{"i1p24", 0x1000000},
	} {
		DATA(4*i, U32(c.bits))
		tanhOff[c.name] = 4 * i
	}
}

func tc(name string) Mem {
	off, ok := tanhOff[name]
	if !ok {
		log.Fatalf("tanhConst: no %q", name)
	}
	return tanhConst.Offset(off)
}

// bc returns a register holding constant name in every lane.
func bc(name string) VecVirtual {
	z := ZMM()
	VPBROADCASTD(tc(name), z)
	return z
}

// cmpd returns the mask of the lanes where the int32 lanes of a compare to
// constant name by predicate pred (0 EQ, 1 LT, 2 LE, 5 GE, 6 GT).
func cmpd(pred uint8, a VecVirtual, name string) OpmaskVirtual {
	k := K()
	VPCMPD_BCST(U8(pred), tc(name), a, k)
	return k
}

// genTanh: x[i] = cmath.Tanhf(x[i]) in place, 16 lanes at a time and a
// masked tail. Every branch of Tanhf and of its expm1f is computed in every
// lane and the lanes take their branch's result by mask, each operation
// rounded to float32 as the Go code rounds it (no fused multiply-add;
// VDIVPS for the divisions; VCVTTPS2DQ truncates as int32() does).
func genTanh() {
	TEXT("tanhfAVX512", NOSPLIT, "func(x []float32)")
	Pragma("noescape")
	p := Load(Param("x").Base(), GP64())
	n := Load(Param("x").Len(), GP64())
	forEach16(n, func(i Register, k Op) {
		at := Mem{Base: p, Index: i, Scale: 4}
		r := tanhBlock(load16(at, k))
		store16(r, k, at)
	})
	VZEROUPPER()
	RET()
}

// forEach16 runs step over n float32 elements: step(i, nil) for every whole
// chunk of 16 starting at element i, then, if n%16 != 0, step(i, k) for the
// rest with k the mask of its lanes.
func forEach16(n Register, step func(i Register, k Op)) {
	full := GP64()
	MOVQ(n, full)
	ANDQ(I32(-16), full)
	rem := GP64()
	MOVQ(n, rem)
	ANDQ(U32(15), rem)
	i := GP64()
	XORQ(i, i)
	Label("loop")
	CMPQ(i, full)
	JAE(LabelRef("tail"))
	step(i, nil)
	ADDQ(U32(16), i)
	JMP(LabelRef("loop"))
	Label("tail")
	TESTQ(rem, rem)
	JZ(LabelRef("done"))
	step(i, tailMask(rem))
	Label("done")
}

// load16 loads 16 floats at m into a new register, the lanes of mask k only
// (the others zero) when k is not nil.
func load16(m Mem, k Op) VecVirtual {
	v := ZMM()
	if k == nil {
		VMOVUPS(m, v)
	} else {
		VMOVUPS_Z(m, k, v)
	}
	return v
}

// store16 stores v's 16 lanes at m, those of mask k only when k is not nil.
func store16(v VecVirtual, k Op, m Mem) {
	if k == nil {
		VMOVUPS(v, m)
	} else {
		VMOVUPS(v, k, m)
	}
}

// tanhBlock computes Tanhf of the 16 lanes of v into a new register.
func tanhBlock(v VecVirtual) VecVirtual {
	ix := ZMM()
	VPANDD_BCST(tc("abs"), v, ix) // abs32(x), also its bits
	s := ZMM()
	VPANDD_BCST(tc("sign"), v, s)

	// expm1f's argument: 2·|x| where |x| >= 1, -2·|x| below.
	arg := ZMM()
	VMULPS_BCST(tc("two"), ix, arg)
	kl := cmpd(1, ix, "one") // |x| < 1
	VPXORD_BCST(tc("sign"), arg, kl, arg)
	t := expm1Block(arg)

	// One division per lane: 2/(t+2) where |x| >= 1, -t/(t+2) below.
	tp2 := ZMM()
	VADDPS_BCST(tc("two"), t, tp2) // t + 2
	one := bc("one")
	z := bc("two")
	kl = cmpd(1, ix, "one")
	VPXORD_BCST(tc("sign"), t, kl, z) // -t
	VDIVPS(tp2, z, z)
	kg := cmpd(5, ix, "one")
	VSUBPS(z, one, kg, z)    // |x| >= 1: 1 - 2/(t+2)
	kb := cmpd(5, ix, "h22") // |x| >= 22: 1
	VMOVAPS(one, kb, z)
	VPXORD(s, z, z) // -z where x < 0

	// |x| < 2^-55: x·(1+x)
	kt := cmpd(1, ix, "h2m55")
	op := ZMM()
	VADDPS(one, v, op)
	VMULPS(op, v, kt, z)
	// 0: x
	kz := K()
	VPTESTNMD(ix, ix, kz)
	VMOVAPS(v, kz, z)
	// ±Inf: 1/x ± 1 = ±1; NaN: 1/x ± 1 is x quieted (x86 returns a NaN
	// operand with its quiet bit set), without a division.
	kn := cmpd(5, ix, "hInf")
	VPORD(s, one, kn, z)
	kq := cmpd(6, ix, "hInf")
	VPORD_BCST(tc("quiet"), v, kq, z)
	return z
}

// expm1Block computes cmath's expm1f of the 16 lanes of x into a new
// register.
func expm1Block(x VecVirtual) VecVirtual {
	hx := ZMM()
	VPANDD_BCST(tc("abs"), x, hx)
	sgn := ZMM()
	VPANDD_BCST(tc("sign"), x, sgn)

	// Reduction, |x| >= 1.5·ln2: k = int32(float32(invLn2·x) ± 0.5),
	// hi = x - float32(t·ln2Hi), lo = float32(t·ln2Lo).
	half := ZMM()
	VPORD_BCST(tc("half"), sgn, half)
	m := ZMM()
	VMULPS_BCST(tc("invLn2"), x, m)
	VADDPS(half, m, m)
	k := ZMM()
	VCVTTPS2DQ(m, k)
	tf := ZMM()
	VCVTDQ2PS(k, tf)
	hi := ZMM()
	VMULPS_BCST(tc("ln2Hi"), tf, hi)
	VSUBPS(hi, x, hi)
	lo := ZMM()
	VMULPS_BCST(tc("ln2Lo"), tf, lo)
	// |x| < 1.5·ln2: hi = x ∓ ln2Hi, lo = ±ln2Lo, k = ±1.
	k1 := cmpd(1, hx, "h1p5Ln2")
	c := ZMM()
	VPORD_BCST(tc("ln2Hi"), sgn, c)
	VSUBPS(c, x, k1, hi)
	VPORD_BCST(tc("ln2Lo"), sgn, k1, lo)
	VPSRAD(U8(31), x, c)
	VPORD_BCST(tc("i1"), c, k1, k)
	// |x| <= ln2/2: k = 0, x itself; else x = hi - lo, c = (hi - x) - lo.
	kr := cmpd(6, hx, "hHalfLn2")
	VMOVDQA32_Z(k, kr, k)
	xr := ZMM()
	VMOVAPS(x, xr)
	VSUBPS(lo, hi, kr, xr)
	VSUBPS(xr, hi, c)
	VSUBPS(lo, c, c)

	hfx := ZMM()
	VMULPS_BCST(tc("half"), xr, hfx)
	hxs := ZMM()
	VMULPS(hfx, xr, hxs)
	p := ZMM()
	VMULPS_BCST(tc("q5"), hxs, p)
	VADDPS_BCST(tc("q4"), p, p)
	for _, q := range []string{"q3", "q2", "q1"} {
		VMULPS(p, hxs, p)
		VADDPS_BCST(tc(q), p, p)
	}
	VMULPS(p, hxs, p)
	VADDPS_BCST(tc("one"), p, p) // r1
	t := ZMM()
	VMULPS(hfx, p, t)
	three := bc("three")
	VSUBPS(t, three, t) // t = 3 - r1·hfx
	num := ZMM()
	VSUBPS(t, p, num) // r1 - t
	den := ZMM()
	VMULPS(t, xr, den)
	six := bc("six")
	VSUBPS(den, six, den) // 6 - x·t
	VDIVPS(den, num, num)
	e := ZMM()
	VMULPS(num, hxs, e)

	// k == 0: x - (x·e - hxs)
	res := ZMM()
	VMULPS(e, xr, res)
	VSUBPS(hxs, res, res)
	VSUBPS(res, xr, res)

	// e = x·(e-c) - c - hxs
	VSUBPS(c, e, e)
	VMULPS(e, xr, e)
	VSUBPS(c, e, e)
	VSUBPS(hxs, e, e)
	d := ZMM()
	VSUBPS(e, xr, d) // x - e
	em := ZMM()
	VSUBPS(xr, e, em) // e - x
	ks := ZMM()
	VPSLLD(U8(23), k, ks) // k<<23, withExp's exponent add

	// k == -1: 0.5·(x-e) - 0.5
	r := ZMM()
	VMULPS_BCST(tc("half"), d, r)
	km := cmpd(0, k, "im1")
	VSUBPS_BCST(tc("half"), r, km, res)
	// k == 1: x < -0.25 ? -2·(e - (x+0.5)) : 1 + 2·(x-e)
	VMULPS_BCST(tc("two"), d, r)
	VADDPS_BCST(tc("one"), r, r)
	kp := cmpd(0, k, "i1")
	VMOVAPS(r, kp, res)
	a := ZMM()
	VADDPS_BCST(tc("half"), xr, a)
	VSUBPS(a, e, a)
	VMULPS_BCST(tc("mtwo"), a, a)
	kq := K()
	VCMPPS_BCST(U8(0x11), tc("mquarter"), xr, kq) // x < -0.25 (LT_OQ)
	KANDW(kp, kq, kq)
	VMOVAPS(a, kq, res)
	// k <= -2 || k > 56: withExp(1 - (e - x), k) - 1
	one := bc("one")
	y := ZMM()
	VSUBPS(em, one, y)
	VPADDD(ks, y, y)
	VSUBPS(one, y, y)
	kb := cmpd(2, k, "im2")
	kh := cmpd(6, k, "i56")
	KORW(kh, kb, kb)
	VMOVAPS(y, kb, res)
	// 2 <= k < 23: withExp(bits(0x3f800000 - 0x1000000>>k) - (e - x), k)
	sh := bc("i1p24")
	VPSRLVD(k, sh, sh)
	VPSUBD(sh, one, y)
	VSUBPS(em, y, y)
	VPADDD(ks, y, y)
	k2 := cmpd(5, k, "i2")
	k23 := cmpd(1, k, "i23")
	KANDW(k2, k23, k23)
	VMOVAPS(y, k23, res)
	// 23 <= k <= 56: withExp((x - (e + bits((0x7f-k)<<23))) + 1, k)
	y2 := bc("i0x7f")
	VPSUBD(k, y2, y2)
	VPSLLD(U8(23), y2, y2)
	VADDPS(y2, e, y2)
	VSUBPS(y2, xr, y2)
	VADDPS(one, y2, y2)
	VPADDD(ks, y2, y2)
	k23 = cmpd(5, k, "i23")
	k56 := cmpd(2, k, "i56")
	KANDW(k23, k56, k56)
	VMOVAPS(y2, k56, res)

	// |x| < 2^-25: x
	kt := cmpd(1, hx, "h2m25")
	VMOVAPS(x, kt, res)
	// |x| >= 27·ln2, x < 0, not NaN: -1
	kg := cmpd(5, hx, "h27ln2")
	VPCMPD_BCST(U8(2), tc("hInf"), hx, kg, kg)
	kneg := K()
	VPMOVD2M(x, kneg)
	KANDW(kneg, kg, kg)
	VBROADCASTSS(tc("mone"), kg, res)
	// |x| >= 88.72 and x > oThreshold (+Inf too): +Inf
	ko := cmpd(5, hx, "hOvf")
	VCMPPS_BCST(U8(0x1e), tc("oThreshold"), x, ko, ko) // x > oThreshold (GT_OQ)
	VBROADCASTSS(tc("inf"), ko, res)
	// NaN: x + x
	kn := cmpd(6, hx, "hInf")
	VADDPS(x, x, kn, res)
	return res
}

// genGegluF32: ggml.GegluF32 16 lanes at a time: dst = gelu(gate)·up with
// GELU in f32, gelu(x) = (0.5x)·(1 + tanh((√(2/π)x)·fma(0.044715x, x, 1))),
// every operation rounded where the Go code rounds (tanh as tanhBlock).
func genGegluF32() {
	c := GLOBL("geluF32Const", RODATA|NOPTR)
	for i, v := range []float32{0.044715, 0.79788456080286535587989211986876, 0.5, 1} {
		DATA(4*i, U32(math.Float32bits(v)))
	}
	TEXT("gegluF32AVX512", NOSPLIT, "func(dst, gate, up []float32)")
	Pragma("noescape")
	dp := Load(Param("dst").Base(), GP64())
	gp := Load(Param("gate").Base(), GP64())
	up := Load(Param("up").Base(), GP64())
	n := Load(Param("gate").Len(), GP64())
	forEach16(n, func(i Register, k Op) {
		x := load16(Mem{Base: gp, Index: i, Scale: 4}, k)
		u := load16(Mem{Base: up, Index: i, Scale: 4}, k)
		a := ZMM()
		VMULPS_BCST(c.Offset(0), x, a)       // 0.044715x
		VFMADD213PS_BCST(c.Offset(12), x, a) // fma(0.044715x, x, 1)
		s := ZMM()
		VMULPS_BCST(c.Offset(4), x, s) // √(2/π)x
		VMULPS(a, s, s)
		t := tanhBlock(s)
		h := ZMM()
		VMULPS_BCST(c.Offset(8), x, h)  // 0.5x
		VADDPS_BCST(c.Offset(12), t, t) // 1 + tanh
		VMULPS(t, h, h)
		VMULPS(u, h, h)
		store16(h, k, Mem{Base: dp, Index: i, Scale: 4})
	})
	VZEROUPPER()
	RET()
}

// genGegluTable: ggml.Geglu's table part 16 lanes at a time, for gates
// already rounded to binary16 (half): out = table[half]·up, 0 where the
// gate is ≤ -10 and gate·up where it is ≥ 10 (ggml's GGML_GELU_FP16 path);
// table holds the fp16 GELU table's values as float32. len(gate) must be a
// multiple of 16.
func genGegluTable() {
	c := GLOBL("gegluTableConst", RODATA|NOPTR)
	DATA(0, U32(math.Float32bits(-10)))
	DATA(4, U32(math.Float32bits(10)))
	TEXT("gegluTableAVX512", NOSPLIT, "func(dst, gate, up []float32, half []uint16, table *[1 << 16]float32)")
	Pragma("noescape")
	dp := Load(Param("dst").Base(), GP64())
	gp := Load(Param("gate").Base(), GP64())
	up := Load(Param("up").Base(), GP64())
	hp := Load(Param("half").Base(), GP64())
	tab := Load(Param("table"), GP64())
	n := Load(Param("gate").Len(), GP64())
	zero := ZMM()
	VPXORD(zero, zero, zero)
	i := GP64()
	XORQ(i, i)
	Label("loop")
	CMPQ(i, n)
	JAE(LabelRef("done"))
	x, u := ZMM(), ZMM()
	VMOVUPS(Mem{Base: gp, Index: i, Scale: 4}, x)
	VMOVUPS(Mem{Base: up, Index: i, Scale: 4}, u)
	idx := ZMM()
	VPMOVZXWD(Mem{Base: hp, Index: i, Scale: 2}, idx)
	all := K()
	KXNORW(all, all, all)
	g := ZMM()
	VPXORD(g, g, g)
	VPGATHERDD(Mem{Base: tab, Index: idx, Scale: 4}, all, g)
	VMULPS(u, g, g) // gelu·up
	low, high := K(), K()
	VCMPPS_BCST(U8(2), c.Offset(0), x, low)   // x <= -10
	VCMPPS_BCST(U8(13), c.Offset(4), x, high) // x >= 10
	VMOVAPS(zero, low, g)
	VMULPS(u, x, high, g) // x·up
	VMOVUPS(g, Mem{Base: dp, Index: i, Scale: 4})
	ADDQ(U32(16), i)
	JMP(LabelRef("loop"))
	Label("done")
	VZEROUPPER()
	RET()
}
