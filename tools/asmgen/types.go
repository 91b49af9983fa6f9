package main

import (
	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// A qtype decodes the weight rows of one ggml type, 16 elements (a chunk)
// at a time, into float32 values computed with exactly the operations of the
// generic decoder in dequant.go (dot.go for the plain types).
type qtype interface {
	blockType
	// chunk decodes chunk c (elements 16c..16c+15) of row r's block.
	chunk(r int, blk Mem, c int) VecVirtual
	// tail decodes the first elements of a plain type's chunk selected by
	// the load mask k (the others are 0), without touching memory beyond them.
	tail(blk Mem, k Op) VecVirtual
}

// blockType is a type's geometry, as both SIMD sets' kernels walk it.
type blockType interface {
	name() string
	// plain types (F32, F16, BF16) take any row length: blocks of 64
	// elements, then single chunks, then a masked tail. Quantized rows are a
	// whole number of blocks.
	plain() bool
	blockElems() int
	blockBytes() int
	// groupRows is how many rows the matvec kernel decodes together: 4 for
	// the quantized types (2 where per-row state would exhaust the
	// registers), 1 for the plain ones (see matVecGroup).
	groupRows() int
	// begin prepares row r's block at blk (scales, tables) for its chunks.
	begin(r int, blk Mem)
}

func exactTypes() []qtype {
	return []qtype{
		&f32Type{}, &f16Type{}, &bf16Type{},
		&q8_0Type{}, &q4_0Type{}, &q4_1Type{}, newQ5_0(), newQ5_1(),
		&q4KType{}, &q5KType{}, &q6KType{},
	}
}

// f16Bcast broadcasts the binary16 at m to 16 float32 lanes.
func f16Bcast(m Mem) VecVirtual {
	h := YMM()
	VPBROADCASTW(m, h)
	z := ZMM()
	VCVTPH2PS(h, z)
	return z
}

// f16Scalar converts the binary16 at m to a float32 at dst and returns dst,
// for an instruction to broadcast from memory: a 128-bit VCVTPH2PS from
// memory and a store are one ALU micro-op where VPBROADCASTW and a 512-bit
// VCVTPH2PS (f16Bcast) are three, on the two ports that run 512-bit
// arithmetic (the exact legacy-quant kernels are bound by them). It reads 8
// bytes at m.
func f16Scalar(m, dst Mem) Mem {
	h := XMM()
	VCVTPH2PS(m, h)
	VMOVSS(h, dst)
	return dst
}

// f16Pair is f16Scalar for the two binary16 at m (a block's d and m): their
// float32 values at dst and dst+4.
func f16Pair(m, dst Mem) (Mem, Mem) {
	h := XMM()
	VCVTPH2PS(m, h)
	VMOVSD(h, dst)
	return dst, dst.Offset(4)
}

// bcastMul returns tab·s, s broadcast from memory (f16Scalar).
func bcastMul(tab, s Mem) VecVirtual {
	z := ZMM()
	VMOVUPS(tab, z)
	VMULPS_BCST(s, z, z)
	return z
}

// local is a kernel's stack area for per-row scale vectors (64 bytes a row).
var local Mem

// ---- plain types ----

type f32Type struct{}

func (f32Type) name() string    { return "F32" }
func (f32Type) plain() bool     { return true }
func (f32Type) blockElems() int { return 64 }
func (f32Type) blockBytes() int { return 256 }
func (f32Type) groupRows() int  { return 1 }
func (f32Type) begin(int, Mem)  {}
func (f32Type) chunk(_ int, blk Mem, c int) VecVirtual {
	z := ZMM()
	VMOVUPS(blk.Offset(64*c), z)
	return z
}
func (f32Type) tail(blk Mem, k Op) VecVirtual {
	z := ZMM()
	VMOVUPS_Z(blk, k, z)
	return z
}

type f16Type struct{}

func (f16Type) name() string    { return "F16" }
func (f16Type) plain() bool     { return true }
func (f16Type) blockElems() int { return 64 }
func (f16Type) blockBytes() int { return 128 }
func (f16Type) groupRows() int  { return 1 }
func (f16Type) begin(int, Mem)  {}
func (f16Type) chunk(_ int, blk Mem, c int) VecVirtual {
	z := ZMM()
	VCVTPH2PS(blk.Offset(32*c), z)
	return z
}
func (f16Type) tail(blk Mem, k Op) VecVirtual {
	h := YMM()
	VMOVDQU16_Z(blk, k, h)
	z := ZMM()
	VCVTPH2PS(h, z)
	return z
}

type bf16Type struct{}

func (bf16Type) name() string    { return "BF16" }
func (bf16Type) plain() bool     { return true }
func (bf16Type) blockElems() int { return 64 }
func (bf16Type) blockBytes() int { return 128 }
func (bf16Type) groupRows() int  { return 1 }
func (bf16Type) begin(int, Mem)  {}
func (bf16Type) chunk(_ int, blk Mem, c int) VecVirtual {
	z := ZMM()
	VPMOVZXWD(blk.Offset(32*c), z)
	VPSLLD(U8(16), z, z)
	return z
}
func (bf16Type) tail(blk Mem, k Op) VecVirtual {
	h := YMM()
	VMOVDQU16_Z(blk, k, h)
	z := ZMM()
	VPMOVZXWD(h, z)
	VPSLLD(U8(16), z, z)
	return z
}

// ---- legacy 32-element quants ----

type noTail struct{}

func (noTail) plain() bool { return false }
func (noTail) tail(Mem, Op) VecVirtual {
	panic("quantized rows have no tail")
}

// q8_0: d, int8 qs[32]; y = float32(q) * d (exact).
type q8_0Type struct {
	noTail
	d [4]Mem // each row's scale as a float32 on the stack
}

func (*q8_0Type) name() string    { return "Q8_0" }
func (*q8_0Type) blockElems() int { return 32 }
func (*q8_0Type) blockBytes() int { return 34 }
func (*q8_0Type) groupRows() int  { return 4 }
func (t *q8_0Type) begin(r int, blk Mem) {
	t.d[r] = f16Scalar(blk, local.Offset(64*r))
}
func (t *q8_0Type) chunk(r int, blk Mem, c int) VecVirtual {
	z := ZMM()
	VPMOVSXBD(blk.Offset(2+16*c), z)
	VCVTDQ2PS(z, z)
	VMULPS_BCST(t.d[r], z, z)
	return z
}

// q4_0Type is Q4_0, the first of the legacy nibble quants (q4_1Type,
// q5Type): the 16 (or 32) values a block can hold are computed once per
// block into a table, and each chunk is a permutation of it by the quants
// (VPERMPS uses the low 4 index bits, VPERMI2PS the low 5).
type q4_0Type struct {
	noTail
	tab, q [4]VecVirtual
	// lut, when set, holds the address of q4_0Tables (engine/ggml): the
	// 16-entry table of every binary16 d, 64 bytes each, so a block's table
	// is one load instead of a conversion and a multiply (two of the ten
	// 512-bit micro-ops a row's block costs on the two ports that run them).
	lut Register
}

func (*q4_0Type) name() string    { return "Q4_0" }
func (*q4_0Type) blockElems() int { return 32 }
func (*q4_0Type) blockBytes() int { return 18 }
func (*q4_0Type) groupRows() int  { return 4 }

// begin: table[q] = float32(q-8) * d; the quants' bytes zero-extended.
func (t *q4_0Type) begin(r int, blk Mem) {
	if t.lut != nil {
		d := GP64()
		MOVWQZX(blk, d)
		SHLQ(U8(6), d)
		t.tab[r] = ZMM()
		VMOVUPS(Mem{Base: t.lut, Index: d, Scale: 1}, t.tab[r])
	} else {
		t.tab[r] = bcastMul(iotaM8, f16Scalar(blk, local.Offset(64*r)))
	}
	t.q[r] = ZMM()
	VPMOVZXBD(blk.Offset(2), t.q[r])
}

// lookAheader is a type whose blocks read a table the kernel can prefetch.
type lookAheader interface {
	lookAhead() int // how many blocks ahead, 0 for none
	prefetchTable(blk Mem)
}

// Q4_0's tables: a tensor's few thousand scales spread over L2, not L1.
func (t *q4_0Type) lookAhead() int {
	if t.lut == nil {
		return 0
	}
	return 3
}

func (t *q4_0Type) prefetchTable(blk Mem) {
	d := GP64()
	MOVWQZX(blk, d)
	SHLQ(U8(6), d)
	PREFETCHT0(Mem{Base: t.lut, Index: d, Scale: 1})
}

// chunk 0 holds the low nibbles (elements 0..15), chunk 1 the high ones.
func (t *q4_0Type) chunk(r int, _ Mem, c int) VecVirtual {
	return permute16(t.tab[r], t.q[r], c == 1)
}

// permute16 looks the low (or high) nibbles of q's bytes up in tab.
func permute16(tab, q VecVirtual, high bool) VecVirtual {
	z := ZMM()
	if high {
		VPSRLD(U8(4), q, z)
		VPERMPS(tab, z, z)
	} else {
		VPERMPS(tab, q, z)
	}
	return z
}

// q4_1: d, m, qs[16]; y = float32(q*d) + m (two roundings).
type q4_1Type struct {
	noTail
	tab, q [4]VecVirtual
}

func (*q4_1Type) name() string    { return "Q4_1" }
func (*q4_1Type) blockElems() int { return 32 }
func (*q4_1Type) blockBytes() int { return 20 }
func (*q4_1Type) groupRows() int  { return 4 }
func (t *q4_1Type) begin(r int, blk Mem) {
	d, m := f16Pair(blk, local.Offset(64*r))
	tab := bcastMul(iota0, d)
	VADDPS_BCST(m, tab, tab)
	t.tab[r] = tab
	t.q[r] = ZMM()
	VPMOVZXBD(blk.Offset(4), t.q[r])
}
func (t *q4_1Type) chunk(r int, _ Mem, c int) VecVirtual {
	return permute16(t.tab[r], t.q[r], c == 1)
}

// Five-bit quants: the fifth bit of element j is bit j of the 32-bit qh,
// loaded straight into an opmask; the index is nibble | 16 where it is set.
type q5Type struct {
	noTail
	legacy           bool // Q5_0 (q-16)*d, else Q5_1 float32(q*d)+m
	lo, hi, q        [2]VecVirtual
	qh               [2]Op
	qhOff, qsOff, sz int
}

func (t *q5Type) blockElems() int { return 32 }
func (t *q5Type) blockBytes() int { return t.sz }

// Two rows a group: two 32-entry tables a row.
func (t *q5Type) groupRows() int { return 2 }
func (t *q5Type) begin(r int, blk Mem) {
	var lo, hi VecVirtual
	if t.legacy {
		d := f16Scalar(blk, local.Offset(64*r))
		lo, hi = bcastMul(iotaM16, d), bcastMul(iota0, d)
	} else {
		d, m := f16Pair(blk, local.Offset(64*r))
		lo, hi = bcastMul(iota0, d), bcastMul(iota16, d)
		VADDPS_BCST(m, lo, lo)
		VADDPS_BCST(m, hi, hi)
	}
	t.lo[r], t.hi[r] = lo, hi
	t.q[r] = ZMM()
	VPMOVZXBD(blk.Offset(t.qsOff), t.q[r])
	k := K()
	KMOVD(blk.Offset(t.qhOff), k)
	t.qh[r] = k
}
func (t *q5Type) chunk(r int, _ Mem, c int) VecVirtual {
	z := ZMM()
	if c == 0 {
		VPANDD_BCST(dword15, t.q[r], z)
	} else {
		VPSRLD(U8(4), t.q[r], z)
		KSHIFTRD(U8(16), t.qh[r], t.qh[r])
	}
	VPORD_BCST(dword16, z, t.qh[r], z)
	VPERMI2PS(t.hi[r], t.lo[r], z)
	return z
}

type q5_0Type struct{ q5Type }

func (*q5_0Type) name() string { return "Q5_0" }

type q5_1Type struct{ q5Type }

func (*q5_1Type) name() string { return "Q5_1" }

func newQ5_0() *q5_0Type {
	return &q5_0Type{q5Type{legacy: true, qhOff: 2, qsOff: 6, sz: 22}}
}

func newQ5_1() *q5_1Type {
	return &q5_1Type{q5Type{legacy: false, qhOff: 4, qsOff: 8, sz: 24}}
}

// ---- K-quants (256-element super-blocks) ----

// kScales unpacks a Q4_K/Q5_K block's d, dmin and 6-bit scales into
// float32(d*sc_s) in lanes 0..7 and float32(dmin*m_s) in lanes 8..15, and
// stores them at dst (64 bytes).
func kScales(blk Mem, dst Mem) {
	s := ZMM()
	VPMOVZXBD(blk.Offset(4), s)
	idx := ZMM()
	VMOVDQU32(kScaleIdxA, idx)
	a := ZMM()
	VPERMD(s, idx, a)
	VPSRLVD(kScaleShift, a, a)
	VPANDD(kScaleAnd, a, a)
	VMOVDQU32(kScaleIdxB, idx)
	b := ZMM()
	VPERMD(s, idx, b)
	VPSRLD(U8(6), b, b)
	VPSLLD(U8(4), b, b)
	VPANDD(kScaleHiMask, b, b)
	VPORD(b, a, a)
	VCVTDQ2PS(a, a)
	hd, hm := XMM(), XMM()
	VPBROADCASTW(blk, hd)
	VPBROADCASTW(blk.Offset(2), hm)
	dd := ZMM()
	VCVTPH2PS(hd, dd.AsY())
	dm := YMM()
	VCVTPH2PS(hm, dm)
	VINSERTF32X8(U8(1), dm, dd, dd)
	VMULPS(dd, a, a)
	VMOVUPS(a, dst)
}

// kTable is float32(float32(d_s*q) - m_s) for q = base..base+15 of sub-block s.
func kTable(scales Mem, s int, base Mem) VecVirtual {
	d, m := ZMM(), ZMM()
	VBROADCASTSS(scales.Offset(4*s), d)
	VBROADCASTSS(scales.Offset(32+4*s), m)
	VMULPS(base, d, d)
	VSUBPS(m, d, d)
	return d
}

// q4_K: chunk 4c+p (p = 0, 1) holds the low nibbles of q[32c+16p ..], with
// sub-block 2c; chunk 4c+2+p the high nibbles with sub-block 2c+1.
type q4KType struct {
	noTail
	tab    [4]VecVirtual
	q0, q1 [4]VecVirtual
}

func (*q4KType) name() string    { return "Q4_K" }
func (*q4KType) blockElems() int { return 256 }
func (*q4KType) blockBytes() int { return 144 }
func (*q4KType) groupRows() int  { return 4 }
func (t *q4KType) begin(r int, blk Mem) {
	kScales(blk, local.Offset(64*r))
}
func (t *q4KType) chunk(r int, blk Mem, c int) VecVirtual {
	g, p := c/4, c%4
	sc := local.Offset(64 * r)
	switch p {
	case 0:
		t.q0[r], t.q1[r] = ZMM(), ZMM()
		VPMOVZXBD(blk.Offset(16+32*g), t.q0[r])
		VPMOVZXBD(blk.Offset(16+32*g+16), t.q1[r])
		t.tab[r] = kTable(sc, 2*g, iota0)
	case 2:
		t.tab[r] = kTable(sc, 2*g+1, iota0)
	}
	q := t.q0[r]
	if p%2 == 1 {
		q = t.q1[r]
	}
	return permute16(t.tab[r], q, p >= 2)
}

// q5_K: as Q4_K plus a fifth bit: bit 2c of qh[l] for the low nibble of
// q[32c+l], bit 2c+1 for the high one.
type q5KType struct {
	noTail
	lo, hi [2]VecVirtual
	q0, q1 [2]VecVirtual
	qh     [2]VecVirtual
}

func (*q5KType) name() string    { return "Q5_K" }
func (*q5KType) blockElems() int { return 256 }
func (*q5KType) blockBytes() int { return 176 }
func (*q5KType) groupRows() int  { return 2 }
func (t *q5KType) begin(r int, blk Mem) {
	kScales(blk, local.Offset(64*r))
	t.qh[r] = YMM()
	VMOVDQU8(blk.Offset(16), t.qh[r])
}
func (t *q5KType) chunk(r int, blk Mem, c int) VecVirtual {
	g, p := c/4, c%4
	sc := local.Offset(64 * r)
	switch p {
	case 0:
		t.q0[r], t.q1[r] = ZMM(), ZMM()
		VPMOVZXBD(blk.Offset(48+32*g), t.q0[r])
		VPMOVZXBD(blk.Offset(48+32*g+16), t.q1[r])
		t.lo[r] = kTable(sc, 2*g, iota0)
		t.hi[r] = kTable(sc, 2*g, iota16)
	case 2:
		t.lo[r] = kTable(sc, 2*g+1, iota0)
		t.hi[r] = kTable(sc, 2*g+1, iota16)
	}
	q := t.q0[r]
	if p%2 == 1 {
		q = t.q1[r]
	}
	z := ZMM()
	if p >= 2 {
		VPSRLD(U8(4), q, z)
	} else {
		VPANDD_BCST(dword15, q, z)
	}
	bit := 2 * g
	if p >= 2 {
		bit++
	}
	b := YMM()
	VPBROADCASTB(bitBytes.Offset(bit), b)
	k := K()
	VPTESTMB(b, t.qh[r], k)
	if p%2 == 1 {
		KSHIFTRD(U8(16), k, k)
	}
	VPORD_BCST(dword16, z, k, z)
	VPERMI2PS(t.hi[r], t.lo[r], z)
	return z
}

// q6_K: ql[128], qh[64], int8 scales[16], d. Chunk c = 8h+2g+p holds
// elements 128h+32g+16p..+15: the low (g < 2) or high nibbles of
// ql[64h+32(g&1)+16p ..] with bits 2g..2g+1 of qh[32h+16p ..] above them,
// minus 32, times float32(d*sc[8h+2g+p]).
type q6KType struct {
	noTail
	qh [4][2]VecVirtual
}

func (*q6KType) name() string    { return "Q6_K" }
func (*q6KType) blockElems() int { return 256 }
func (*q6KType) blockBytes() int { return 210 }
func (*q6KType) groupRows() int  { return 4 }
func (t *q6KType) begin(r int, blk Mem) {
	d := f16Bcast(blk.Offset(208))
	s := ZMM()
	VPMOVSXBD(blk.Offset(192), s)
	VCVTDQ2PS(s, s)
	VMULPS(d, s, s)
	VMOVUPS(s, local.Offset(64*r))
}
func (t *q6KType) chunk(r int, blk Mem, c int) VecVirtual {
	h, g, p := c/8, c%8/2, c%2
	if g == 0 {
		t.qh[r][p] = ZMM()
		VPMOVZXBD(blk.Offset(128+32*h+16*p), t.qh[r][p])
	}
	q := ZMM()
	VPMOVZXBD(blk.Offset(64*h+32*(g&1)+16*p), q)
	if g < 2 {
		VPANDD_BCST(dword15, q, q)
	} else {
		VPSRLD(U8(4), q, q)
	}
	hb := ZMM()
	VPSRLD(U8(2*g), t.qh[r][p], hb)
	VPANDD_BCST(dword3, hb, hb)
	VPSLLD(U8(4), hb, hb)
	VPORD(hb, q, q)
	VPSUBD_BCST(dword32, q, q)
	VCVTDQ2PS(q, q)
	s := ZMM()
	VBROADCASTSS(local.Offset(64*r+4*(8*h+2*g+p)), s)
	VMULPS(s, q, q)
	return q
}
