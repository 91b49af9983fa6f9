package main

import (
	"fmt"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// ggml-numerics prefill: the Q8_0 and Q4_0 integer dots of several
// activation rows per weight block. Each output keeps exactly the
// arithmetic of the single-row kernels (vecDotQ8_0RowsAVX512,
// vecDotQ4_0x8RowsAVX512): the same integer sums, the same dx*dy products
// and fused adds in block order, the same final reduction; only the loads
// and unpacking of a weight block are shared by the activation rows.
//
// The activations' tables (quantizeQ8_0AVX512 writes them) hold per block:
// side, dy as float32 and -8·Σy (the Q4_0 nibble offset); corr, -128·Σ of
// each dword's four y (the Q8_0 byte offset, per lane).

const (
	panelBlock = 8*64 + 64 // one block of a 16-row panel: 8 dword slices, 16 scales
	q4TileRows = 8         // activation rows per Q4_0 tile
	q8TileRows = 3         // activation rows per Q8_0 tile
)

func genGGMLPrefill() {
	iota := u32s("rowIota", []uint32{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15})
	genPanel(false, iota)
	genPanel(true, iota)
	for r := 1; r <= q4TileRows; r++ {
		genQ4Tile(r)
	}
	for r := 1; r <= q8TileRows; r++ {
		genQ8Tile(r)
	}
}

// genPanel: 16 weight rows turned into a panel whose dword lane r is row r:
// per block, slice s (0..7) holds the row's elements 4s..4s+3 as unsigned
// bytes (Q4_0: the nibbles of qs dword s%4, low ones for s < 4, high ones
// after; Q8_0: qs dword s plus 128), then the 16 block scales as float32.
func genPanel(q8 bool, iota Mem) {
	name, bsize := "q4PanelAVX512", 18
	if q8 {
		name, bsize = "q8PanelAVX512", 34
	}
	TEXT(name, NOSPLIT, "func(w []byte, rowBytes int, panel []byte)")
	Pragma("noescape")
	w := Load(Param("w").Base(), GP64())
	stride := Load(Param("rowBytes"), GP64())
	dst := Load(Param("panel").Base(), GP64())
	n := Load(Param("panel").Len(), GP64())
	idx := ZMM()
	VMOVDQU32(iota, idx)
	sv := ZMM()
	VPBROADCASTD(stride.(GPVirtual).As32(), sv)
	VPMULLD(sv, idx, idx) // row r's byte offset
	Label("block")
	CMPQ(n, U32(panelBlock))
	JB(LabelRef("done"))
	for t := 0; t < 4 || q8 && t < 8; t++ {
		g := gather(w, idx, 2+4*t)
		if q8 {
			VPXORD_BCST(xor80, g, g) // x + 128, unsigned
			VMOVDQU32(g, Mem{Base: dst, Disp: 64 * t})
			continue
		}
		lo, hi := ZMM(), ZMM()
		VPANDD_BCST(nib0F, g, lo)
		VPSRLD(U8(4), g, hi)
		VPANDD_BCST(nib0F, hi, hi)
		VMOVDQU32(lo, Mem{Base: dst, Disp: 64 * t})
		VMOVDQU32(hi, Mem{Base: dst, Disp: 64 * (t + 4)})
	}
	g := gather(w, idx, 0)
	dh := YMM()
	VPMOVDW(g, dh)
	dw := ZMM()
	VCVTPH2PS(dh, dw)
	VMOVUPS(dw, Mem{Base: dst, Disp: 512})
	ADDQ(U32(bsize), w)
	ADDQ(U32(panelBlock), dst)
	SUBQ(U32(panelBlock), n)
	JMP(LabelRef("block"))
	Label("done")
	VZEROUPPER()
	RET()
}

// gather loads the dword at disp bytes past w + idx[r] into lane r.
func gather(w Register, idx VecVirtual, disp int) VecVirtual {
	all := GP32()
	MOVL(U32(0xffff), all)
	km := K() // set without reading it (KXNORW would keep it live from the entry)
	KMOVW(all, km)
	g := zeroZMM()
	VPGATHERDD(Mem{Base: w, Index: idx, Scale: 1, Disp: disp}, km, g)
	return g
}

// tileStreams are a tile kernel's per-block inputs: the panel, and the
// activation rows' data in the parameters named (y, 34 bytes a block; side,
// 8; corr, 32), each row from its own address.
type tileStreams struct {
	panel, nblk Register
	bases       [][]Register
	step        []int
	rows        []func(r int) Mem
}

func newTileStreams(rows int, params ...string) *tileStreams {
	t := &tileStreams{panel: Load(Param("panel").Base(), GP64()), nblk: Load(Param("nblk"), GP64())}
	for _, p := range params {
		step := map[string]int{"y": 34, "side": 8, "corr": 32}[p]
		stride := GP64()
		IMUL3Q(U32(step), t.nblk, stride)
		stride3 := GP64()
		LEAQ(Mem{Base: stride, Index: stride, Scale: 2}, stride3)
		b, row := rowAddresses(Load(Param(p).Base(), GP64()), stride, stride3, rows)
		t.bases, t.step, t.rows = append(t.bases, b), append(t.step, step), append(t.rows, row)
	}
	return t
}

// loop opens the block loop; it ends at label exit.
func (t *tileStreams) loop(exit string) {
	Label("block")
	TESTQ(t.nblk, t.nblk)
	JZ(LabelRef(exit))
}

// next moves every stream on by a block and closes the loop.
func (t *tileStreams) next() {
	ADDQ(U32(panelBlock), t.panel)
	for i, bases := range t.bases {
		for _, b := range bases {
			ADDQ(U32(t.step[i]), b)
		}
	}
	DECQ(t.nblk)
	JMP(LabelRef("block"))
}

// genQ4Tile: rows activation rows times one 16-row Q4_0 panel (nblk
// blocks): out[r*ldo + j] = Σ_b fma(float(isum), dx*dy) as
// vecDotQ4_0x8RowsAVX512 computes it, the block's integer sum of row j
// in lane j from eight VPDPBUSD of the panel's slices with the activation
// dwords broadcast, started at -8·Σy.
func genQ4Tile(rows int) {
	TEXT(fmt.Sprintf("q4Tile%dAVX512", rows), NOSPLIT, "func(panel []byte, nblk int, y []byte, side []uint32, out []float32, ldo int)")
	Pragma("noescape")
	ts := newTileStreams(rows, "y", "side")
	pp, yrow, srow := ts.panel, ts.rows[0], ts.rows[1]
	acc := make([]VecVirtual, rows)
	for r := range acc {
		acc[r] = zeroZMM()
	}
	ts.loop("store")
	s := make([]VecVirtual, rows)
	for r := range s {
		s[r] = ZMM()
		VPBROADCASTD(srow(r).Offset(4), s[r]) // -8·Σy
	}
	for sl := 0; sl < 8; sl++ {
		wt := ZMM()
		VMOVDQU32(Mem{Base: pp, Disp: 64 * sl}, wt)
		for r := range s {
			VPDPBUSD_BCST(yrow(r).Offset(2+4*sl), wt, s[r])
		}
	}
	dw := ZMM()
	VMOVUPS(Mem{Base: pp, Disp: 512}, dw)
	for r := range s {
		VCVTDQ2PS(s[r], s[r])
		m := ZMM()
		VMULPS_BCST(srow(r), dw, m)  // dx*dy
		VFMADD231PS(m, s[r], acc[r]) // acc = fma(float(sum), dx*dy, acc)
	}
	ts.next()
	Label("store")
	outRows("out", "ldo", rows, func(r int, o Register) {
		VMOVUPS(acc[r], Mem{Base: o})
	})
	VZEROUPPER()
	RET()
}

// genQ8Tile: rows activation rows times one 16-row Q8_0 panel (nblk
// blocks): out[r*ldo + j] as vecDotQ8_0RowsAVX512 computes it. Lane l
// (0..7) of that kernel's per-block int32 vector is here register acc[r][l]
// (row j in lane j): VPDPBUSD of panel slice l (x+128) with the activation
// dword l broadcast, started at -128·Σ of those four y (corr); acc =
// fma(dx*dy, float(lane), acc) per block; at the end hsum_float_8's order,
// ((l0+l4)+(l2+l6))+((l1+l5)+(l3+l7)), lane by lane.
func genQ8Tile(rows int) {
	TEXT(fmt.Sprintf("q8Tile%dAVX512", rows), NOSPLIT, "func(panel []byte, nblk int, y []byte, side []uint32, corr []int32, out []float32, ldo int)")
	Pragma("noescape")
	ts := newTileStreams(rows, "y", "side", "corr")
	pp, yrow, srow, crow := ts.panel, ts.rows[0], ts.rows[1], ts.rows[2]
	acc := make([][]VecVirtual, rows)
	for r := range acc {
		acc[r] = make([]VecVirtual, 8)
		for l := range acc[r] {
			acc[r][l] = zeroZMM()
		}
	}
	ts.loop("reduce")
	dw := ZMM()
	VMOVUPS(Mem{Base: pp, Disp: 512}, dw)
	m := make([]VecVirtual, rows)
	for r := range m {
		m[r] = ZMM()
		VMULPS_BCST(srow(r), dw, m[r]) // dx*dy
	}
	for l := 0; l < 8; l++ {
		wt := ZMM()
		VMOVDQU32(Mem{Base: pp, Disp: 64 * l}, wt)
		for r := range m {
			s := ZMM()
			VPBROADCASTD(crow(r).Offset(4*l), s)
			VPDPBUSD_BCST(yrow(r).Offset(2+4*l), wt, s)
			VCVTDQ2PS(s, s)
			VFMADD231PS(m[r], s, acc[r][l]) // acc = fma(dx*dy, sum, acc)
		}
	}
	ts.next()
	Label("reduce")
	outRows("out", "ldo", rows, func(r int, o Register) {
		a := acc[r]
		for l := 0; l < 4; l++ {
			VADDPS(a[l+4], a[l], a[l])
		}
		VADDPS(a[2], a[0], a[0])
		VADDPS(a[3], a[1], a[1])
		VADDPS(a[1], a[0], a[0])
		VMOVUPS(a[0], Mem{Base: o})
	})
	VZEROUPPER()
	RET()
}
