#include "textflag.h"

// The NEON kernel set (kernels_neon_arm64.go), hand-written: Go's assembler
// lacks most AdvSIMD arithmetic, so those instructions are WORDs whose
// comment is the instruction; tools/neonasm.sh assembles the comments and
// writes the WORDs (edit the comment, then run it).
//
// Registers: R0-R15 general; F/V0-V31 (F<n> is lane 0 of V<n>). Every
// kernel computes exactly the generic Go code's operations in its order
// (see each kernel's comment): integer sums in any order (exact), float
// operations one by one as the Go code does them.

// hsum8 of acc lanes 0-3 in V16 and 4-7 in V17 into F18:
// q = acc[4:8] + acc[0:4]; (q0+q2) + (q1+q3).
#define HSUM8_V16_V17 \
	WORD	$0x4e30d632	/* fadd v18.4s, v17.4s, v16.4s */ \
	WORD	$0x6e124253	/* ext v19.16b, v18.16b, v18.16b, #8 */ \
	WORD	$0x0e33d652	/* fadd v18.2s, v18.2s, v19.2s */ \
	WORD	$0x7e30da52	/* faddp s18, v18.2s */

// func vecDotQ8_0RowsNEON(w []byte, rowBytes int, y []byte, tab *[65536]float32, out []float32)
// out[j] = VecDotQ8_0AVX(row j of w, y): per block, eight int32 lanes of
// four byte products (SDOT), acc[l] = fma(dx*dy, float32(lane l), acc[l]),
// then hsum8.
TEXT ·vecDotQ8_0RowsNEON(SB), NOSPLIT, $0-88
	MOVD	w_base+0(FP), R0
	MOVD	rowBytes+24(FP), R1
	MOVD	y_base+32(FP), R2
	MOVD	y_len+40(FP), R3
	MOVD	tab+56(FP), R6
	MOVD	out_base+64(FP), R4
	MOVD	out_len+72(FP), R5
	MOVD	$34, R7
	UDIV	R7, R3, R3 // blocks
q8row:
	CBZ	R5, q8done
	CBZ	R3, q8empty
	MOVD	R0, R8
	MOVD	R2, R9
	MOVD	R3, R10
	VEOR	V16.B16, V16.B16, V16.B16
	VEOR	V17.B16, V17.B16, V17.B16
q8blk:
	MOVHU.P	2(R8), R11
	MOVHU.P	2(R9), R12
	FMOVS	(R6)(R11<<2), F24
	FMOVS	(R6)(R12<<2), F25
	FMULS	F25, F24, F26 // d = dx*dy
	VLD1.P	32(R8), [V4.B16, V5.B16]
	VLD1.P	32(R9), [V6.B16, V7.B16]
	VEOR	V18.B16, V18.B16, V18.B16
	VEOR	V19.B16, V19.B16, V19.B16
	WORD	$0x4e869492	// sdot v18.4s, v4.16b, v6.16b
	WORD	$0x4e8794b3	// sdot v19.4s, v5.16b, v7.16b
	WORD	$0x4e21da52	// scvtf v18.4s, v18.4s
	WORD	$0x4e21da73	// scvtf v19.4s, v19.4s
	WORD	$0x4f9a1250	// fmla v16.4s, v18.4s, v26.s[0]
	WORD	$0x4f9a1271	// fmla v17.4s, v19.4s, v26.s[0]
	SUBS	$1, R10, R10
	BNE	q8blk
	HSUM8_V16_V17
	FMOVS.P	F18, 4(R4)
	ADD	R1, R0, R0
	SUB	$1, R5, R5
	B	q8row
q8empty:
	MOVW	ZR, (R4)
	ADD	$4, R4, R4
	SUB	$1, R5, R5
	B	q8row
q8done:
	RET

// Q4_0 unpacking: V4 = 16 bytes of nibbles -> V5 = low nibbles - 8
// (elements 0-15), V4 = high nibbles - 8 (elements 16-31), as int8;
// V28 = 0x0f bytes, V29 = 8 bytes.
#define Q4_UNPACK_V4 \
	WORD	$0x4e3c1c85	/* and v5.16b, v4.16b, v28.16b */ \
	WORD	$0x6f0c0484	/* ushr v4.16b, v4.16b, #4 */ \
	WORD	$0x6e3d84a5	/* sub v5.16b, v5.16b, v29.16b */ \
	WORD	$0x6e3d8484	/* sub v4.16b, v4.16b, v29.16b */

// func vecDotQ4_0RowsNEON(w []byte, rowBytes int, y []byte, tab *[65536]float32, out []float32)
// out[j] = VecDotQ4_0AVX(row j of w, y): Q8_0's lanes over the unpacked
// nibbles (lanes 0-3 the low ones, 4-7 the high ones).
TEXT ·vecDotQ4_0RowsNEON(SB), NOSPLIT, $0-88
	MOVD	w_base+0(FP), R0
	MOVD	rowBytes+24(FP), R1
	MOVD	y_base+32(FP), R2
	MOVD	y_len+40(FP), R3
	MOVD	tab+56(FP), R6
	MOVD	out_base+64(FP), R4
	MOVD	out_len+72(FP), R5
	MOVD	$34, R7
	UDIV	R7, R3, R3 // blocks
	VMOVI	$15, V28.B16
	VMOVI	$8, V29.B16
q4row:
	CBZ	R5, q4done
	CBZ	R3, q4empty
	MOVD	R0, R8
	MOVD	R2, R9
	MOVD	R3, R10
	VEOR	V16.B16, V16.B16, V16.B16
	VEOR	V17.B16, V17.B16, V17.B16
q4blk:
	MOVHU.P	2(R8), R11
	MOVHU.P	2(R9), R12
	FMOVS	(R6)(R11<<2), F24
	FMOVS	(R6)(R12<<2), F25
	FMULS	F25, F24, F26 // d = dx*dy
	VLD1.P	16(R8), [V4.B16]
	VLD1.P	32(R9), [V6.B16, V7.B16]
	Q4_UNPACK_V4
	VEOR	V18.B16, V18.B16, V18.B16
	VEOR	V19.B16, V19.B16, V19.B16
	WORD	$0x4e8694b2	// sdot v18.4s, v5.16b, v6.16b
	WORD	$0x4e879493	// sdot v19.4s, v4.16b, v7.16b
	WORD	$0x4e21da52	// scvtf v18.4s, v18.4s
	WORD	$0x4e21da73	// scvtf v19.4s, v19.4s
	WORD	$0x4f9a1250	// fmla v16.4s, v18.4s, v26.s[0]
	WORD	$0x4f9a1271	// fmla v17.4s, v19.4s, v26.s[0]
	SUBS	$1, R10, R10
	BNE	q4blk
	HSUM8_V16_V17
	FMOVS.P	F18, 4(R4)
	ADD	R1, R0, R0
	SUB	$1, R5, R5
	B	q4row
q4empty:
	MOVW	ZR, (R4)
	ADD	$4, R4, R4
	SUB	$1, R5, R5
	B	q4row
q4done:
	RET

// func vecDotQ4_0RepRowsNEON(w []byte, rowBytes int, y []byte, tab *[65536]float32, out []float32)
// out[j] = VecDotQ4_0Repacked(row j of w, y): per block the whole integer
// sum s, acc = fma(float32(s), dx*dy, acc).
TEXT ·vecDotQ4_0RepRowsNEON(SB), NOSPLIT, $0-88
	MOVD	w_base+0(FP), R0
	MOVD	rowBytes+24(FP), R1
	MOVD	y_base+32(FP), R2
	MOVD	y_len+40(FP), R3
	MOVD	tab+56(FP), R6
	MOVD	out_base+64(FP), R4
	MOVD	out_len+72(FP), R5
	MOVD	$34, R7
	UDIV	R7, R3, R3 // blocks
	VMOVI	$15, V28.B16
	VMOVI	$8, V29.B16
q4rrow:
	CBZ	R5, q4rdone
	MOVD	R0, R8
	MOVD	R2, R9
	MOVD	R3, R10
	VEOR	V16.B16, V16.B16, V16.B16
	CBZ	R10, q4rstore
q4rblk:
	MOVHU.P	2(R8), R11
	MOVHU.P	2(R9), R12
	FMOVS	(R6)(R11<<2), F24
	FMOVS	(R6)(R12<<2), F25
	FMULS	F25, F24, F26 // d = dx*dy
	VLD1.P	16(R8), [V4.B16]
	VLD1.P	32(R9), [V6.B16, V7.B16]
	Q4_UNPACK_V4
	VEOR	V18.B16, V18.B16, V18.B16
	WORD	$0x4e8694b2	// sdot v18.4s, v5.16b, v6.16b
	WORD	$0x4e879492	// sdot v18.4s, v4.16b, v7.16b
	WORD	$0x4eb1ba52	// addv s18, v18.4s
	WORD	$0x5e21da52	// scvtf s18, s18
	WORD	$0x1f1a4250	// fmadd s16, s18, s26, s16
	SUBS	$1, R10, R10
	BNE	q4rblk
q4rstore:
	FMOVS.P	F16, 4(R4)
	ADD	R1, R0, R0
	SUB	$1, R5, R5
	B	q4rrow
q4rdone:
	RET
