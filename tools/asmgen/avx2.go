package main

import (
	"fmt"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// The AVX2 set (-set avx2): the exact-numerics matvec, dequantization and
// prefill tile for CPUs with AVX2 and F16C but not AVX-512 (AMD Zen 1-3,
// Intel client cores). The 16 lanes of exact numerics' accumulator (dot.go)
// are two YMM registers: lanes 0..7 and 8..15, each lane receiving the same
// products in the same order as the AVX-512 kernels' one ZMM register, and
// reduced as Reduce16 does. No fused multiply-add, no opmasks: the Go side
// sends plain rows whose length is not a multiple of 16 to the generic code.
// Only VEX instructions on Y0..Y15 (engine/ggml's tests check the file).

// avx2Type decodes one ggml type 8 elements (a half chunk) at a time with
// exactly the operations of the generic decoder (dequant.go, dot.go); its
// begin stores row r's block scales as broadcast vectors on the stack.
type avx2Type interface {
	blockType
	// half decodes elements 8h..8h+7 of row r's block.
	half(r int, blk Mem, h int) VecVirtual
}

func avx2Types() []avx2Type {
	return []avx2Type{
		avx2F32{}, avx2F16{}, avx2BF16{},
		avx2Q8_0{}, avx2Q4_0{}, avx2Q4_1{},
		avx2Q5{legacy: true, qhOff: 2, qsOff: 6, sz: 22}, avx2Q5{qhOff: 4, qsOff: 8, sz: 24},
		avx2QK{}, avx2QK{fiveBit: true}, avx2Q6K{},
	}
}

// The AVX2 set's read-only vectors (32 bytes each unless said).
var (
	y2Zero, y2Nibble, y2Eight, y2Sixteen, y2One Mem
	y2Shift                                     Mem // uint32 0..31: Q5 element j's bit of qh (4 vectors)
	y2Three, y2ThirtyTwo                        Mem
	// Q4_K/Q5_K scale unpacking (see kScalesAVX2).
	y2Idx0123, y2K63x15, y2KHigh, y2KShift Mem
)

func genAVX2Constants() {
	fill := func(name string, v uint32) Mem {
		return u32s(name, []uint32{v, v, v, v, v, v, v, v})
	}
	y2Zero = fill("y2Zero", 0)
	y2Nibble = fill("y2Nibble", 15)
	y2Eight = fill("y2Eight", 8)
	y2Sixteen = fill("y2Sixteen", 16)
	y2One = fill("y2One", 1)
	shifts := make([]uint32, 32)
	for i := range shifts {
		shifts[i] = uint32(i)
	}
	y2Shift = u32s("y2Shift", shifts)
	y2Three = fill("y2Three", 3)
	y2ThirtyTwo = fill("y2ThirtyTwo", 32)
	y2Idx0123 = u32s("y2Idx0123", []uint32{0, 1, 2, 3, 0, 1, 2, 3})
	y2K63x15 = u32s("y2K63x15", []uint32{63, 63, 63, 63, 15, 15, 15, 15})
	y2KHigh = u32s("y2KHigh", []uint32{0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff})
	y2KShift = u32s("y2KShift", []uint32{0, 0, 0, 0, 4, 4, 4, 4})
}

func genAVX2() {
	genAVX2Constants()
	for _, t := range avx2Types() {
		genMatVecAVX2(t)
		genDequantAVX2(t)
	}
	for rows := 1; rows <= 3; rows++ {
		genGemmAVX2(rows)
	}
}

// zeroYMM sets a register to 0 without reading it (see zeroZMM).
func zeroYMM() VecVirtual {
	y := YMM()
	VMOVUPS(y2Zero, y)
	return y
}

// reduce16Y is reduce16 of the 16 lanes lo (0..7) and hi (8..15).
func reduce16Y(lo, hi VecVirtual) Register {
	h := YMM()
	VADDPS(lo, hi, h) // h[i] = a[i+8] + a[i]
	q := XMM()
	VEXTRACTF128(U8(1), h, q)
	VADDPS(h.AsX(), q, q)
	return reduce4(q)
}

// genMatVecAVX2 is genMatVecExact with two YMM accumulators a row. The Go
// caller checks the geometry and, for plain types, that len(x)%16 == 0.
func genMatVecAVX2(t avx2Type) {
	w, stride, x0, k, out, n := matVecParams("matVecExact" + t.name() + "AVX2")
	rowGroups(t.groupRows(), w, stride, out, n, func(R int) { matVecGroupAVX2(t, R, w, stride, x0, k, out) })
}

func matVecGroupAVX2(t avx2Type, R int, w, stride, x0, k, out Register) {
	tag := fmt.Sprintf("_r%d", R)
	rows := pointers(w, stride, 1, R)
	acc := make([][2]VecVirtual, R)
	for r := range acc {
		acc[r] = [2]VecVirtual{zeroYMM(), zeroYMM()}
	}
	off := GP64()
	XORQ(off, off)
	xp := GP64()
	MOVQ(x0, xp)
	kk := GP64()
	MOVQ(k, kk)
	blk := func(r int) Mem { return Mem{Base: rows[r], Index: off, Scale: 1} }
	// Software prefetch of a later group, as matVecGroup does.
	pf := GP64()
	LEAQ(Mem{Base: rows[R-1], Index: stride, Scale: 1}, pf)
	for g := 1; g < pfGroups; g++ {
		for i := 0; i < R; i++ {
			ADDQ(stride, pf)
		}
	}
	// halves adds the products of halves [0, nh) of every row's block.
	halves := func(nh int) {
		for h := 0; h < nh; h++ {
			for r := range acc {
				p := t.half(r, blk(r), h)
				VMULPS(Mem{Base: xp, Disp: 32 * h}, p, p)
				VADDPS(p, acc[r][h%2], acc[r][h%2])
			}
		}
	}
	E, B := t.blockElems(), t.blockBytes()
	Label("block" + tag)
	CMPQ(kk, U32(E))
	JB(LabelRef("blocks_done" + tag))
	for b := 0; b < R*B; b += 64 {
		PREFETCHT0(Mem{Base: pf, Disp: b})
	}
	ADDQ(U32(R*B), pf)
	for r := range rows {
		t.begin(r, blk(r))
	}
	halves(E / 8)
	ADDQ(U32(B), off)
	ADDQ(U32(4*E), xp)
	SUBQ(U32(E), kk)
	JMP(LabelRef("block" + tag))
	Label("blocks_done" + tag)
	if t.plain() { // chunks of 16 (len(x)%16 == 0)
		Label("chunk" + tag)
		CMPQ(kk, U32(16))
		JB(LabelRef("reduce" + tag))
		halves(2)
		ADDQ(U32(B/4), off)
		ADDQ(U32(64), xp)
		SUBQ(U32(16), kk)
		JMP(LabelRef("chunk" + tag))
	}
	Label("reduce" + tag)
	for r := range acc {
		VMOVSS(reduce16Y(acc[r][0], acc[r][1]), Mem{Base: out, Disp: 4 * r})
	}
}

// genDequantAVX2: dst = Dequantize(t, src); len(dst) a multiple of 16 for
// plain types (the caller checks).
func genDequantAVX2(t avx2Type) {
	dequantBlocks("dequant"+t.name()+"AVX2", t, func(blk Mem, c int, dst Mem) {
		VMOVUPS(t.half(0, blk, 2*c), dst)
		VMOVUPS(t.half(0, blk, 2*c+1), dst.Offset(32))
	}, "done")
	Label("done")
	VZEROUPPER()
	RET()
}

// genGemmAVX2 is the AVX2 prefill tile: 2 weight rows of a float32 panel
// (ldw floats apart, k a multiple of 16) times `rows` activation rows,
// every output two YMM accumulators in the exact order: 6 outputs take 12 of
// the 16 registers.
func genGemmAVX2(rows int) {
	wr, xr, k := gemmParams(fmt.Sprintf("gemmExact2x%dAVX2", rows), 2, rows)
	acc := make([][2][2]VecVirtual, rows) // [act row][weight row][half]
	for i := range acc {
		for j := range acc[i] {
			acc[i][j] = [2]VecVirtual{zeroYMM(), zeroYMM()}
		}
	}
	l := GP64()
	XORQ(l, l)
	Label("k")
	CMPQ(l, k)
	JAE(LabelRef("reduce"))
	for h := 0; h < 2; h++ {
		var wv [2]VecVirtual
		for j := range wv {
			wv[j] = YMM()
			VMOVUPS(Mem{Base: wr[j], Index: l, Scale: 4, Disp: 32 * h}, wv[j])
		}
		for i := range acc {
			xv := Mem{Base: xr[i], Index: l, Scale: 4, Disp: 32 * h}
			for j := range wv {
				p := YMM()
				VMULPS(xv, wv[j], p)
				VADDPS(p, acc[i][j][h], acc[i][j][h])
			}
		}
	}
	ADDQ(U32(16), l)
	JMP(LabelRef("k"))
	Label("reduce")
	outRows("out", "ldo", rows, func(i int, o Register) {
		for j := range acc[i] {
			VMOVSS(reduce16Y(acc[i][j][0], acc[i][j][1]), Mem{Base: o, Disp: 4 * j})
		}
	})
	VZEROUPPER()
	RET()
}

// ---- types ----

type avx2Plain struct{}

func (avx2Plain) plain() bool     { return true }
func (avx2Plain) blockElems() int { return 64 }
func (avx2Plain) groupRows() int  { return 1 }
func (avx2Plain) begin(int, Mem)  {}

type avx2F32 struct{ avx2Plain }

func (avx2F32) name() string    { return "F32" }
func (avx2F32) blockBytes() int { return 256 }
func (avx2F32) half(_ int, blk Mem, h int) VecVirtual {
	y := YMM()
	VMOVUPS(blk.Offset(32*h), y)
	return y
}

type avx2F16 struct{ avx2Plain }

func (avx2F16) name() string    { return "F16" }
func (avx2F16) blockBytes() int { return 128 }
func (avx2F16) half(_ int, blk Mem, h int) VecVirtual {
	y := YMM()
	VCVTPH2PS(blk.Offset(16*h), y)
	return y
}

type avx2BF16 struct{ avx2Plain }

func (avx2BF16) name() string    { return "BF16" }
func (avx2BF16) blockBytes() int { return 128 }
func (avx2BF16) half(_ int, blk Mem, h int) VecVirtual {
	y := YMM()
	VPMOVZXWD(blk.Offset(16*h), y)
	VPSLLD(U8(16), y, y)
	return y
}

// avx2Scales stores a block's binary16 d (and m, at +2) as float32 vectors
// at local+64r (and +32).
func avx2Scales(r int, blk Mem, withMin bool) {
	h := XMM()
	VCVTPH2PS(blk, h) // reads 8 bytes
	d := YMM()
	VBROADCASTSS(h, d)
	VMOVUPS(d, local.Offset(64*r))
	if withMin {
		m := YMM()
		VPSRLQ(U8(32), h, h)
		VBROADCASTSS(h, m)
		VMOVUPS(m, local.Offset(64*r+32))
	}
}

func scaleD(r int) Mem { return local.Offset(64 * r) }
func scaleM(r int) Mem { return local.Offset(64*r + 32) }

type avx2Quant struct{}

func (avx2Quant) plain() bool     { return false }
func (avx2Quant) blockElems() int { return 32 }
func (avx2Quant) groupRows() int  { return 4 }

// q8_0: y = float32(q) * d.
type avx2Q8_0 struct{ avx2Quant }

func (avx2Q8_0) name() string         { return "Q8_0" }
func (avx2Q8_0) blockBytes() int      { return 34 }
func (avx2Q8_0) begin(r int, blk Mem) { avx2Scales(r, blk, false) }
func (avx2Q8_0) half(r int, blk Mem, h int) VecVirtual {
	y := YMM()
	VPMOVSXBD(blk.Offset(2+8*h), y)
	VCVTDQ2PS(y, y)
	VMULPS(scaleD(r), y, y)
	return y
}

// nibbles returns the 8 nibbles of half h of a block whose 16 quant bytes
// are at qs: halves 0, 1 the low nibbles of bytes 0..7, 8..15; halves 2, 3
// the high ones.
func nibbles(qs Mem, h int) VecVirtual {
	y := YMM()
	VPMOVZXBD(qs.Offset(8*(h%2)), y)
	if h >= 2 {
		VPSRLD(U8(4), y, y)
	} else {
		VPAND(y2Nibble, y, y)
	}
	return y
}

// q4_0: y = float32(q-8) * d.
type avx2Q4_0 struct{ avx2Quant }

func (avx2Q4_0) name() string         { return "Q4_0" }
func (avx2Q4_0) blockBytes() int      { return 18 }
func (avx2Q4_0) begin(r int, blk Mem) { avx2Scales(r, blk, false) }
func (avx2Q4_0) half(r int, blk Mem, h int) VecVirtual {
	y := nibbles(blk.Offset(2), h)
	VPSUBD(y2Eight, y, y)
	VCVTDQ2PS(y, y)
	VMULPS(scaleD(r), y, y)
	return y
}

// q4_1: y = float32(q*d) + m.
type avx2Q4_1 struct{ avx2Quant }

func (avx2Q4_1) name() string         { return "Q4_1" }
func (avx2Q4_1) blockBytes() int      { return 20 }
func (avx2Q4_1) begin(r int, blk Mem) { avx2Scales(r, blk, true) }
func (avx2Q4_1) half(r int, blk Mem, h int) VecVirtual {
	y := nibbles(blk.Offset(4), h)
	VCVTDQ2PS(y, y)
	VMULPS(scaleD(r), y, y)
	VADDPS(scaleM(r), y, y)
	return y
}

// Five-bit quants: the fifth bit of element j is bit j of the 32-bit qh.
type avx2Q5 struct {
	avx2Quant
	legacy           bool // Q5_0 float32(q-16)*d, else Q5_1 float32(q*d)+m
	qhOff, qsOff, sz int
}

func (t avx2Q5) name() string {
	if t.legacy {
		return "Q5_0"
	}
	return "Q5_1"
}
func (t avx2Q5) blockBytes() int      { return t.sz }
func (t avx2Q5) groupRows() int       { return 2 }
func (t avx2Q5) begin(r int, blk Mem) { avx2Scales(r, blk, !t.legacy) }
func (t avx2Q5) half(r int, blk Mem, h int) VecVirtual {
	y := nibbles(blk.Offset(t.qsOff), h)
	b := YMM()
	VPBROADCASTD(blk.Offset(t.qhOff), b)
	VPSRLVD(y2Shift.Offset(32*h), b, b) // elements 8h..8h+7
	VPAND(y2One, b, b)
	VPSLLD(U8(4), b, b)
	VPOR(b, y, y)
	if t.legacy {
		VPSUBD(y2Sixteen, y, y)
		VCVTDQ2PS(y, y)
		VMULPS(scaleD(r), y, y)
	} else {
		VCVTDQ2PS(y, y)
		VMULPS(scaleD(r), y, y)
		VADDPS(scaleM(r), y, y)
	}
	return y
}

// ---- K-quants (256-element super-blocks: 32 halves) ----

// kScalesAVX2 is kScales with two YMM registers: float32(d*sc_s) for
// s = 0..7 at dst and float32(dmin*m_s) at dst+32. With A the scale bytes
// s0..s7 and B s4..s11 as dwords (scaleMinK4):
//
//	sc: lanes 0-3 A[j]&63, lanes 4-7 B[j]&15 | A[j-4]>>6<<4
//	m:  lanes 0-3 B[j]&63, lanes 4-7 B[j]>>4 | A[j]>>6<<4
func kScalesAVX2(blk Mem, dst Mem) {
	a, b := YMM(), YMM()
	VPMOVZXBD(blk.Offset(4), a)
	VPMOVZXBD(blk.Offset(8), b)
	// hi6 is A[j']>>6<<4 in lanes 4-7 (0 elsewhere) for A' = A permuted by idx.
	hi6 := func(src VecVirtual) VecVirtual {
		t := YMM()
		VPSRLD(U8(6), src, t)
		VPSLLD(U8(4), t, t)
		VPAND(y2KHigh, t, t)
		return t
	}
	a4 := YMM() // A[j%4]
	VMOVDQU(y2Idx0123, a4)
	VPERMD(a, a4, a4)
	sc := YMM()
	VPBLENDD(U8(0xF0), b, a4, sc)
	VPAND(y2K63x15, sc, sc)
	VPOR(hi6(a4), sc, sc)
	m := YMM()
	VPSRLVD(y2KShift, b, m)
	VPAND(y2K63x15, m, m)
	VPOR(hi6(a), m, m)
	h := XMM()
	VCVTPH2PS(blk, h) // d, dmin (reads 8 bytes)
	d := YMM()
	VBROADCASTSS(h, d)
	VCVTDQ2PS(sc, sc)
	VMULPS(d, sc, sc)
	VMOVUPS(sc, dst)
	VPSRLQ(U8(32), h, h)
	VBROADCASTSS(h, d)
	VCVTDQ2PS(m, m)
	VMULPS(d, m, m)
	VMOVUPS(m, dst.Offset(32))
}

// avx2QK is Q4_K (and Q5_K): half hh holds elements 8hh.. of chunk
// c = hh/8: the low nibbles of q[32c+8p ..] (p = hh%8 < 4, sub-block 2c) or
// the high ones (p >= 4, sub-block 2c+1); y = float32(d_s*q) - m_s. Q5_K's
// fifth bit is bit 2c (low) or 2c+1 (high) of qh[8(p%4) ..].
type avx2QK struct {
	avx2Quant
	fiveBit bool
}

func (t avx2QK) name() string {
	if t.fiveBit {
		return "Q5_K"
	}
	return "Q4_K"
}
func (avx2QK) blockElems() int { return 256 }
func (t avx2QK) blockBytes() int {
	if t.fiveBit {
		return 176
	}
	return 144
}
func (avx2QK) begin(r int, blk Mem) { kScalesAVX2(blk, local.Offset(64*r)) }
func (t avx2QK) half(r int, blk Mem, hh int) VecVirtual {
	c, p := hh/8, hh%8
	qs := 16
	if t.fiveBit {
		qs = 48
	}
	y := nibbles(blk.Offset(qs+32*c+8*(p%4)), 2*(p/4)) // halves 0 / 2: low / high nibbles
	s := 2*c + p/4
	if t.fiveBit {
		b := YMM()
		VPMOVZXBD(blk.Offset(16+8*(p%4)), b)
		VPSRLD(U8(s), b, b)
		VPAND(y2One, b, b)
		VPSLLD(U8(4), b, b)
		VPOR(b, y, y)
	}
	VCVTDQ2PS(y, y)
	d := YMM()
	VBROADCASTSS(local.Offset(64*r+4*s), d)
	VMULPS(d, y, y)
	VBROADCASTSS(local.Offset(64*r+32+4*s), d)
	VSUBPS(d, y, y)
	return y
}

// avx2Q6K: half hh holds elements 8hh.. = 128h + 32g + l (l = 8i, i < 4):
// ql[64h+32(g&1)+l ..] low (g < 2) or high nibbles, bits 2g..2g+1 of
// qh[32h+l ..] above them, minus 32, times float32(d*sc[8h+2g+l/16]).
type avx2Q6K struct{ avx2Quant }

func (avx2Q6K) name() string    { return "Q6_K" }
func (avx2Q6K) blockElems() int { return 256 }
func (avx2Q6K) blockBytes() int { return 210 }
func (avx2Q6K) begin(r int, blk Mem) {
	h := XMM()
	VPBROADCASTW(blk.Offset(208), h)
	d := YMM()
	VCVTPH2PS(h, d)
	for i := range 2 {
		s := YMM()
		VPMOVSXBD(blk.Offset(192+8*i), s)
		VCVTDQ2PS(s, s)
		VMULPS(d, s, s)
		VMOVUPS(s, local.Offset(64*r+32*i))
	}
}
func (avx2Q6K) half(r int, blk Mem, hh int) VecVirtual {
	h, g, l := hh/16, hh%16/4, 8*(hh%4)
	y := YMM()
	VPMOVZXBD(blk.Offset(64*h+32*(g&1)+l), y)
	if g < 2 {
		VPAND(y2Nibble, y, y)
	} else {
		VPSRLD(U8(4), y, y)
	}
	b := YMM()
	VPMOVZXBD(blk.Offset(128+32*h+l), b)
	VPSRLD(U8(2*g), b, b)
	VPAND(y2Three, b, b)
	VPSLLD(U8(4), b, b)
	VPOR(b, y, y)
	VPSUBD(y2ThirtyTwo, y, y)
	VCVTDQ2PS(y, y)
	s := YMM()
	VBROADCASTSS(local.Offset(64*r+4*(8*h+2*g+l/16)), s)
	VMULPS(s, y, y)
	return y
}
