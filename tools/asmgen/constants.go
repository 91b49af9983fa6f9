package main

import (
	"math"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// Read-only tables the ggml kernels load from memory (dword0 is every set's).
var (
	iotaM8  Mem // float32 -8..7: Q4_0 values q-8
	iota0   Mem // float32 0..15
	iota16  Mem // float32 16..31
	iotaM16 Mem // float32 -16..-1: Q5_0 values q-16 for q < 16

	dword0, dword3, dword15, dword16, dword32 Mem // one uint32 each, for broadcasts

	// tailMasks[r] (8 bytes each) for the last r < 16 elements of a row of a
	// plain type: the load mask (bits 0..r-1), which the kernels read; then
	// those of the r lanes that fall in lanes 0..7 and in lanes 8..15, each
	// as an 8-bit mask in both bytes, and a zero word, which no kernel reads.
	tailMasks Mem

	// Q4_K/Q5_K scale unpacking (see kScales).
	kScaleIdxA, kScaleIdxB, kScaleShift, kScaleAnd, kScaleHiMask Mem

	// bitBytes[i] = 1<<i, for byte broadcasts (Q5_K high bits).
	bitBytes Mem
)

func f32s(name string, v []float32) Mem {
	m := GLOBL(name, RODATA|NOPTR)
	for i, x := range v {
		DATA(4*i, U32(math.Float32bits(x)))
	}
	return m
}

func u32s(name string, v []uint32) Mem {
	m := GLOBL(name, RODATA|NOPTR)
	for i, x := range v {
		DATA(4*i, U32(x))
	}
	return m
}

func seq(from float32) []float32 {
	v := make([]float32, 16)
	for i := range v {
		v[i] = from + float32(i)
	}
	return v
}

func genConstants() {
	iotaM8 = f32s("iotaM8", seq(-8))
	iota0 = f32s("iota0", seq(0))
	iota16 = f32s("iota16", seq(16))
	iotaM16 = f32s("iotaM16", seq(-16))
	dword0 = genDword0()
	dword3 = u32s("dword3", []uint32{3})
	dword15 = u32s("dword15", []uint32{15})
	dword16 = u32s("dword16", []uint32{16})
	dword32 = u32s("dword32", []uint32{32})

	tailMasks = GLOBL("tailMasks", RODATA|NOPTR)
	for r := 0; r < 16; r++ {
		load := uint16(1)<<r - 1
		a := uint16(1)<<min(r, 8) - 1
		b := uint16(1)<<max(r-8, 0) - 1
		DATA(8*r, U16(load))
		DATA(8*r+2, U16(a|a<<8))
		DATA(8*r+4, U16(b|b<<8))
		DATA(8*r+6, U16(0))
	}

	// The 12 scale bytes s0..s11 of a Q4_K/Q5_K block, zero-extended to
	// dwords, give sc0..7 in lanes 0..7 and m0..7 in lanes 8..15:
	//   lanes 0-3:   s0..3 & 63            lanes 8-11:  s4..7 & 63
	//   lanes 4-7:   s8..11&15 | s0..3>>6<<4   lanes 12-15: s8..11>>4 | s4..7>>6<<4
	kScaleIdxA = u32s("kScaleIdxA", []uint32{0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 6, 7, 8, 9, 10, 11})
	kScaleIdxB = u32s("kScaleIdxB", []uint32{0, 0, 0, 0, 0, 1, 2, 3, 0, 0, 0, 0, 4, 5, 6, 7})
	kScaleShift = u32s("kScaleShift", []uint32{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 4, 4, 4, 4})
	kScaleAnd = u32s("kScaleAnd", []uint32{63, 63, 63, 63, 15, 15, 15, 15, 63, 63, 63, 63, 15, 15, 15, 15})
	kScaleHiMask = u32s("kScaleHiMask", []uint32{0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff})

	bitBytes = GLOBL("bitBytes", RODATA|NOPTR)
	for i := 0; i < 8; i++ {
		DATA(i, U8(1<<i))
	}
}

// genDword0 emits the zero every set's zeroZMM broadcasts.
func genDword0() Mem { return u32s("dword0", []uint32{0}) }

// zeroZMM returns a register set to 0 without reading it: XOR of a register
// with itself reads it, which makes avo's liveness analysis keep it alive
// from the function's entry (or a loop's head) and can exhaust the registers.
func zeroZMM() VecVirtual {
	z := ZMM()
	VPBROADCASTD(dword0, z)
	return z
}
