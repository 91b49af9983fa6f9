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

// Q4_0 unpacking: V4 = 16 bytes of nibbles -> V5 = low nibbles - 8
// (elements 0-15), V4 = high nibbles - 8 (elements 16-31), as int8;
// V28 = 0x0f bytes, V29 = 8 bytes.
#define Q4_UNPACK_V4 \
	WORD	$0x4e3c1c85	/* and v5.16b, v4.16b, v28.16b */ \
	WORD	$0x6f0c0484	/* ushr v4.16b, v4.16b, #4 */ \
	WORD	$0x6e3d84a5	/* sub v5.16b, v5.16b, v29.16b */ \
	WORD	$0x6e3d8484	/* sub v4.16b, v4.16b, v29.16b */

// Float rows. The kernels below share one frame:
//
//	func(w []byte, wstride int, x []float32, xstride int, k int, n int, out []float32, ostride int)
//
// out[i*ostride] = the dot product of the k values at w + i*wstride (bytes;
// float32, or binary16 in the F16 kernels, converted exactly by FCVTL) and
// the k float32 at x + i*xstride (elements), for i < n. k is a multiple of
// the kernel's step (16, or 64 for the vecDot ones).

// Reduce16 of lanes 0-15 in V16-V19 into F20: h = a[8:16] + a[0:8],
// q = h[4:8] + h[0:4], (q0+q2) + (q1+q3).
#define REDUCE16 \
	WORD	$0x4e30d654	/* fadd v20.4s, v18.4s, v16.4s */ \
	WORD	$0x4e31d675	/* fadd v21.4s, v19.4s, v17.4s */ \
	WORD	$0x4e34d6b4	/* fadd v20.4s, v21.4s, v20.4s */ \
	WORD	$0x6e144295	/* ext v21.16b, v20.16b, v20.16b, #8 */ \
	WORD	$0x0e35d694	/* fadd v20.2s, v20.2s, v21.2s */ \
	WORD	$0x7e30da94	/* faddp s20, v20.2s */

// 16 weights at (R8) into V0-V3, R8 advanced.
#define LOADW_F32 \
	VLD1.P	64(R8), [V0.S4, V1.S4, V2.S4, V3.S4]

#define LOADW_F16 \
	VLD1.P	32(R8), [V0.H8, V1.H8] \
	WORD	$0x4e217823	/* fcvtl2 v3.4s, v1.8h */ \
	WORD	$0x0e217822	/* fcvtl v2.4s, v1.4h */ \
	WORD	$0x4e217801	/* fcvtl2 v1.4s, v0.8h */ \
	WORD	$0x0e217800	/* fcvtl v0.4s, v0.4h */

// 16 activations at (R9) into V4-V7, R9 advanced.
#define LOADX \
	VLD1.P	64(R9), [V4.S4, V5.S4, V6.S4, V7.S4]

#define ZERO_V16_V19 \
	VEOR	V16.B16, V16.B16, V16.B16 \
	VEOR	V17.B16, V17.B16, V17.B16 \
	VEOR	V18.B16, V18.B16, V18.B16 \
	VEOR	V19.B16, V19.B16, V19.B16

// The arguments: R0 w, R1 wstride (bytes), R2 x, R3 xstride (bytes), R5
// k in steps of 1<<stepshift values, R6 n, R4 out, R7 ostride (bytes).
#define ROWS_ARGS(stepshift) \
	MOVD	w_base+0(FP), R0 \
	MOVD	wstride+24(FP), R1 \
	MOVD	x_base+32(FP), R2 \
	MOVD	xstride+56(FP), R3 \
	LSL	$2, R3, R3 \
	MOVD	k+64(FP), R5 \
	LSR	$stepshift, R5, R5 \
	MOVD	n+72(FP), R6 \
	MOVD	out_base+80(FP), R4 \
	MOVD	ostride+104(FP), R7 \
	LSL	$2, R7, R7

// One output done: store F20, next row.
#define ROWS_NEXT \
	FMOVS	F20, (R4) \
	ADD	R7, R4, R4 \
	ADD	R1, R0, R0 \
	ADD	R3, R2, R2 \
	SUB	$1, R6, R6

// Exact numerics' DotF32 (dot.go): element j to lane j%16, the product
// rounded (FMUL) then added (FADD); then Reduce16.
#define EXACT_MULADD \
	WORD	$0x6e24dc00	/* fmul v0.4s, v0.4s, v4.4s */ \
	WORD	$0x6e25dc21	/* fmul v1.4s, v1.4s, v5.4s */ \
	WORD	$0x6e26dc42	/* fmul v2.4s, v2.4s, v6.4s */ \
	WORD	$0x6e27dc63	/* fmul v3.4s, v3.4s, v7.4s */ \
	WORD	$0x4e20d610	/* fadd v16.4s, v16.4s, v0.4s */ \
	WORD	$0x4e21d631	/* fadd v17.4s, v17.4s, v1.4s */ \
	WORD	$0x4e22d652	/* fadd v18.4s, v18.4s, v2.4s */ \
	WORD	$0x4e23d673	/* fadd v19.4s, v19.4s, v3.4s */

// TinyBLASDot (cpuops.go): one 16-lane accumulator, acc = fma(w, x, acc);
// then Reduce16.
#define TINY_FMA \
	WORD	$0x4e24cc10	/* fmla v16.4s, v0.4s, v4.4s */ \
	WORD	$0x4e25cc31	/* fmla v17.4s, v1.4s, v5.4s */ \
	WORD	$0x4e26cc52	/* fmla v18.4s, v2.4s, v6.4s */ \
	WORD	$0x4e27cc73	/* fmla v19.4s, v3.4s, v7.4s */

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

// func dotF32RowsNEON(w []byte, wstride int, x []float32, xstride int, k int, n int, out []float32, ostride int)
TEXT ·dotF32RowsNEON(SB), NOSPLIT, $0-112
	ROWS_ARGS(4)
row:
	CBZ	R6, done
	MOVD	R0, R8
	MOVD	R2, R9
	MOVD	R5, R10
	ZERO_V16_V19
	CBZ	R10, reduce
step:
	LOADW_F32
	LOADX
	EXACT_MULADD
	SUBS	$1, R10, R10
	BNE	step
reduce:
	REDUCE16
	ROWS_NEXT
	B	row
done:
	RET

// func dotF16RowsNEON(w []byte, wstride int, x []float32, xstride int, k int, n int, out []float32, ostride int)
TEXT ·dotF16RowsNEON(SB), NOSPLIT, $0-112
	ROWS_ARGS(4)
row:
	CBZ	R6, done
	MOVD	R0, R8
	MOVD	R2, R9
	MOVD	R5, R10
	ZERO_V16_V19
	CBZ	R10, reduce
step:
	LOADW_F16
	LOADX
	EXACT_MULADD
	SUBS	$1, R10, R10
	BNE	step
reduce:
	REDUCE16
	ROWS_NEXT
	B	row
done:
	RET

// func tinyF32RowsNEON(w []byte, wstride int, x []float32, xstride int, k int, n int, out []float32, ostride int)
TEXT ·tinyF32RowsNEON(SB), NOSPLIT, $0-112
	ROWS_ARGS(4)
row:
	CBZ	R6, done
	MOVD	R0, R8
	MOVD	R2, R9
	MOVD	R5, R10
	ZERO_V16_V19
	CBZ	R10, reduce
step:
	LOADW_F32
	LOADX
	TINY_FMA
	SUBS	$1, R10, R10
	BNE	step
reduce:
	REDUCE16
	ROWS_NEXT
	B	row
done:
	RET

// func tinyF16RowsNEON(w []byte, wstride int, x []float32, xstride int, k int, n int, out []float32, ostride int)
TEXT ·tinyF16RowsNEON(SB), NOSPLIT, $0-112
	ROWS_ARGS(4)
row:
	CBZ	R6, done
	MOVD	R0, R8
	MOVD	R2, R9
	MOVD	R5, R10
	ZERO_V16_V19
	CBZ	R10, reduce
step:
	LOADW_F16
	LOADX
	TINY_FMA
	SUBS	$1, R10, R10
	BNE	step
reduce:
	REDUCE16
	ROWS_NEXT
	B	row
done:
	RET

// ggml_vec_dot_f32's body (VecDotF32, cpuops.go): four 16-lane FMA
// accumulators (V16-V19, V20-V23, V24-V27, V28-V31) over steps of 64,
// folded (x0+x2)+(x1+x3), then Reduce16; the k%64 leftovers are the
// caller's.
// func vecDotF32RowsNEON(w []byte, wstride int, x []float32, xstride int, k int, n int, out []float32, ostride int)
TEXT ·vecDotF32RowsNEON(SB), NOSPLIT, $0-112
	ROWS_ARGS(6)
row:
	CBZ	R6, done
	MOVD	R0, R8
	MOVD	R2, R9
	MOVD	R5, R10
	VEOR	V16.B16, V16.B16, V16.B16
	VEOR	V17.B16, V17.B16, V17.B16
	VEOR	V18.B16, V18.B16, V18.B16
	VEOR	V19.B16, V19.B16, V19.B16
	VEOR	V20.B16, V20.B16, V20.B16
	VEOR	V21.B16, V21.B16, V21.B16
	VEOR	V22.B16, V22.B16, V22.B16
	VEOR	V23.B16, V23.B16, V23.B16
	VEOR	V24.B16, V24.B16, V24.B16
	VEOR	V25.B16, V25.B16, V25.B16
	VEOR	V26.B16, V26.B16, V26.B16
	VEOR	V27.B16, V27.B16, V27.B16
	VEOR	V28.B16, V28.B16, V28.B16
	VEOR	V29.B16, V29.B16, V29.B16
	VEOR	V30.B16, V30.B16, V30.B16
	VEOR	V31.B16, V31.B16, V31.B16
	CBZ	R10, reduce
step:
	LOADW_F32
	LOADX
	WORD	$0x4e24cc10	// fmla v16.4s, v0.4s, v4.4s
	WORD	$0x4e25cc31	// fmla v17.4s, v1.4s, v5.4s
	WORD	$0x4e26cc52	// fmla v18.4s, v2.4s, v6.4s
	WORD	$0x4e27cc73	// fmla v19.4s, v3.4s, v7.4s
	LOADW_F32
	LOADX
	WORD	$0x4e24cc14	// fmla v20.4s, v0.4s, v4.4s
	WORD	$0x4e25cc35	// fmla v21.4s, v1.4s, v5.4s
	WORD	$0x4e26cc56	// fmla v22.4s, v2.4s, v6.4s
	WORD	$0x4e27cc77	// fmla v23.4s, v3.4s, v7.4s
	LOADW_F32
	LOADX
	WORD	$0x4e24cc18	// fmla v24.4s, v0.4s, v4.4s
	WORD	$0x4e25cc39	// fmla v25.4s, v1.4s, v5.4s
	WORD	$0x4e26cc5a	// fmla v26.4s, v2.4s, v6.4s
	WORD	$0x4e27cc7b	// fmla v27.4s, v3.4s, v7.4s
	LOADW_F32
	LOADX
	WORD	$0x4e24cc1c	// fmla v28.4s, v0.4s, v4.4s
	WORD	$0x4e25cc3d	// fmla v29.4s, v1.4s, v5.4s
	WORD	$0x4e26cc5e	// fmla v30.4s, v2.4s, v6.4s
	WORD	$0x4e27cc7f	// fmla v31.4s, v3.4s, v7.4s
	SUBS	$1, R10, R10
	BNE	step
reduce:
	WORD	$0x4e38d610	// fadd v16.4s, v16.4s, v24.4s
	WORD	$0x4e39d631	// fadd v17.4s, v17.4s, v25.4s
	WORD	$0x4e3ad652	// fadd v18.4s, v18.4s, v26.4s
	WORD	$0x4e3bd673	// fadd v19.4s, v19.4s, v27.4s
	WORD	$0x4e3cd694	// fadd v20.4s, v20.4s, v28.4s
	WORD	$0x4e3dd6b5	// fadd v21.4s, v21.4s, v29.4s
	WORD	$0x4e3ed6d6	// fadd v22.4s, v22.4s, v30.4s
	WORD	$0x4e3fd6f7	// fadd v23.4s, v23.4s, v31.4s
	WORD	$0x4e34d610	// fadd v16.4s, v16.4s, v20.4s
	WORD	$0x4e35d631	// fadd v17.4s, v17.4s, v21.4s
	WORD	$0x4e36d652	// fadd v18.4s, v18.4s, v22.4s
	WORD	$0x4e37d673	// fadd v19.4s, v19.4s, v23.4s
	REDUCE16
	ROWS_NEXT
	B	row
done:
	RET

// func vecDotF16RowsNEON(w []byte, wstride int, x []float32, xstride int, k int, n int, out []float32, ostride int)
TEXT ·vecDotF16RowsNEON(SB), NOSPLIT, $0-112
	ROWS_ARGS(6)
row:
	CBZ	R6, done
	MOVD	R0, R8
	MOVD	R2, R9
	MOVD	R5, R10
	VEOR	V16.B16, V16.B16, V16.B16
	VEOR	V17.B16, V17.B16, V17.B16
	VEOR	V18.B16, V18.B16, V18.B16
	VEOR	V19.B16, V19.B16, V19.B16
	VEOR	V20.B16, V20.B16, V20.B16
	VEOR	V21.B16, V21.B16, V21.B16
	VEOR	V22.B16, V22.B16, V22.B16
	VEOR	V23.B16, V23.B16, V23.B16
	VEOR	V24.B16, V24.B16, V24.B16
	VEOR	V25.B16, V25.B16, V25.B16
	VEOR	V26.B16, V26.B16, V26.B16
	VEOR	V27.B16, V27.B16, V27.B16
	VEOR	V28.B16, V28.B16, V28.B16
	VEOR	V29.B16, V29.B16, V29.B16
	VEOR	V30.B16, V30.B16, V30.B16
	VEOR	V31.B16, V31.B16, V31.B16
	CBZ	R10, reduce
step:
	LOADW_F16
	LOADX
	WORD	$0x4e24cc10	// fmla v16.4s, v0.4s, v4.4s
	WORD	$0x4e25cc31	// fmla v17.4s, v1.4s, v5.4s
	WORD	$0x4e26cc52	// fmla v18.4s, v2.4s, v6.4s
	WORD	$0x4e27cc73	// fmla v19.4s, v3.4s, v7.4s
	LOADW_F16
	LOADX
	WORD	$0x4e24cc14	// fmla v20.4s, v0.4s, v4.4s
	WORD	$0x4e25cc35	// fmla v21.4s, v1.4s, v5.4s
	WORD	$0x4e26cc56	// fmla v22.4s, v2.4s, v6.4s
	WORD	$0x4e27cc77	// fmla v23.4s, v3.4s, v7.4s
	LOADW_F16
	LOADX
	WORD	$0x4e24cc18	// fmla v24.4s, v0.4s, v4.4s
	WORD	$0x4e25cc39	// fmla v25.4s, v1.4s, v5.4s
	WORD	$0x4e26cc5a	// fmla v26.4s, v2.4s, v6.4s
	WORD	$0x4e27cc7b	// fmla v27.4s, v3.4s, v7.4s
	LOADW_F16
	LOADX
	WORD	$0x4e24cc1c	// fmla v28.4s, v0.4s, v4.4s
	WORD	$0x4e25cc3d	// fmla v29.4s, v1.4s, v5.4s
	WORD	$0x4e26cc5e	// fmla v30.4s, v2.4s, v6.4s
	WORD	$0x4e27cc7f	// fmla v31.4s, v3.4s, v7.4s
	SUBS	$1, R10, R10
	BNE	step
reduce:
	WORD	$0x4e38d610	// fadd v16.4s, v16.4s, v24.4s
	WORD	$0x4e39d631	// fadd v17.4s, v17.4s, v25.4s
	WORD	$0x4e3ad652	// fadd v18.4s, v18.4s, v26.4s
	WORD	$0x4e3bd673	// fadd v19.4s, v19.4s, v27.4s
	WORD	$0x4e3cd694	// fadd v20.4s, v20.4s, v28.4s
	WORD	$0x4e3dd6b5	// fadd v21.4s, v21.4s, v29.4s
	WORD	$0x4e3ed6d6	// fadd v22.4s, v22.4s, v30.4s
	WORD	$0x4e3fd6f7	// fadd v23.4s, v23.4s, v31.4s
	WORD	$0x4e34d610	// fadd v16.4s, v16.4s, v20.4s
	WORD	$0x4e35d631	// fadd v17.4s, v17.4s, v21.4s
	WORD	$0x4e36d652	// fadd v18.4s, v18.4s, v22.4s
	WORD	$0x4e37d673	// fadd v19.4s, v19.4s, v23.4s
	REDUCE16
	ROWS_NEXT
	B	row
done:
	RET
// Attention's weighted sum of V (WeightedColumns, cpuops.go): every output
// column i is a lanes-lane FMA dot product over the rows j, so
// accumulator lane L of column i is acc[L*dp+i] (dp: the columns rounded up
// to 4), one FMLA by element updating four columns of a lane; then the lanes
// of four columns at a time are reduced as VecDotF32 (64 lanes: the four
// 16-lane accumulators folded (x0+x2)+(x1+x3)) or TinyBLASDot (16) do.

// func laneFMANEON(acc []float32, lanes int, v []byte, stride int, p []float32, d int, dp int)
// For every row j < len(p) of v (stride bytes apart; float32 values), with
// lane L = j%lanes: acc[L*dp+i] = fma(v[j][i], p[j], acc[L*dp+i]) for i < d.
TEXT ·laneFMANEON(SB), NOSPLIT, $0-104
	MOVD	acc_base+0(FP), R0
	MOVD	lanes+24(FP), R1
	MOVD	v_base+32(FP), R2
	MOVD	stride+56(FP), R3
	MOVD	p_base+64(FP), R4
	MOVD	p_len+72(FP), R5
	MOVD	d+88(FP), R6
	MOVD	dp+96(FP), R7
	LSL	$2, R7, R7 // an accumulator row's bytes
	MOVD	ZR, R8 // lane
row:
	CBZ	R5, done
	MUL	R8, R7, R9
	ADD	R0, R9, R9
	FMOVS.P	4(R4), F30
	MOVD	R2, R10
	LSR	$2, R6, R11
	CBZ	R11, tail
col4:
	VLD1.P	16(R10), [V0.S4]
	VLD1	(R9), [V1.S4]
	WORD	$0x4f9e1001	// fmla v1.4s, v0.4s, v30.s[0]
	VST1.P	[V1.S4], 16(R9)
	SUBS	$1, R11, R11
	BNE	col4
tail:
	AND	$3, R6, R11
	CBZ	R11, next
col1:
	FMOVS.P	4(R10), F0
	FMOVS	(R9), F1
	WORD	$0x1f1e0401	// fmadd s1, s0, s30, s1
	FMOVS.P	F1, 4(R9)
	SUBS	$1, R11, R11
	BNE	col1
next:
	ADD	R3, R2, R2
	ADD	$1, R8, R8
	CMP	R1, R8
	BLO	laneok
	MOVD	ZR, R8
laneok:
	SUB	$1, R5, R5
	B	row
done:
	RET

// func laneFMAF16NEON(acc []float32, lanes int, v []byte, stride int, p []float32, d int, dp int)
// For every row j < len(p) of v (stride bytes apart; binary16 values), with
// lane L = j%lanes: acc[L*dp+i] = fma(v[j][i], p[j], acc[L*dp+i]) for i < d.
TEXT ·laneFMAF16NEON(SB), NOSPLIT, $0-104
	MOVD	acc_base+0(FP), R0
	MOVD	lanes+24(FP), R1
	MOVD	v_base+32(FP), R2
	MOVD	stride+56(FP), R3
	MOVD	p_base+64(FP), R4
	MOVD	p_len+72(FP), R5
	MOVD	d+88(FP), R6
	MOVD	dp+96(FP), R7
	LSL	$2, R7, R7 // an accumulator row's bytes
	MOVD	ZR, R8 // lane
row:
	CBZ	R5, done
	MUL	R8, R7, R9
	ADD	R0, R9, R9
	FMOVS.P	4(R4), F30
	MOVD	R2, R10
	LSR	$2, R6, R11
	CBZ	R11, tail
col4:
	VLD1.P	8(R10), [V0.H4]
	WORD	$0x0e217800	// fcvtl v0.4s, v0.4h
	VLD1	(R9), [V1.S4]
	WORD	$0x4f9e1001	// fmla v1.4s, v0.4s, v30.s[0]
	VST1.P	[V1.S4], 16(R9)
	SUBS	$1, R11, R11
	BNE	col4
tail:
	AND	$3, R6, R11
	CBZ	R11, next
col1:
	WORD	$0x7c402540	// ldr h0, [x10], #2
	WORD	$0x1ee24000	// fcvt s0, h0
	FMOVS	(R9), F1
	WORD	$0x1f1e0401	// fmadd s1, s0, s30, s1
	FMOVS.P	F1, 4(R9)
	SUBS	$1, R11, R11
	BNE	col1
next:
	ADD	R3, R2, R2
	ADD	$1, R8, R8
	CMP	R1, R8
	BLO	laneok
	MOVD	ZR, R8
laneok:
	SUB	$1, R5, R5
	B	row
done:
	RET

// func reduceLanes64NEON(acc []float32, dp int, out []float32)
// out[i] = the reduction of the 64 lanes acc[L*dp+i], for i < dp (a
// multiple of 4), four columns at a time.
TEXT ·reduceLanes64NEON(SB), NOSPLIT, $0-56
	MOVD	acc_base+0(FP), R0
	MOVD	dp+24(FP), R1
	MOVD	out_base+32(FP), R4
	LSL	$2, R1, R7 // an accumulator row's bytes
	LSR	$2, R1, R1
col:
	CBZ	R1, done
	MOVD	R0, R10
	LSL	$4, R7, R11
	ADD	R0, R11, R14 // row 16
	ADD	R14, R11, R15 // row 32
	ADD	R15, R11, R16 // row 48
	WORD	$0x4cc77940	// ld1 {v0.4s}, [x10], x7
	WORD	$0x4cc779e1	// ld1 {v1.4s}, [x15], x7
	WORD	$0x4cc779c2	// ld1 {v2.4s}, [x14], x7
	WORD	$0x4cc77a03	// ld1 {v3.4s}, [x16], x7
	WORD	$0x4e21d400	// fadd v0.4s, v0.4s, v1.4s
	WORD	$0x4e23d442	// fadd v2.4s, v2.4s, v3.4s
	WORD	$0x4e22d408	// fadd v8.4s, v0.4s, v2.4s
	WORD	$0x4cc77940	// ld1 {v0.4s}, [x10], x7
	WORD	$0x4cc779e1	// ld1 {v1.4s}, [x15], x7
	WORD	$0x4cc779c2	// ld1 {v2.4s}, [x14], x7
	WORD	$0x4cc77a03	// ld1 {v3.4s}, [x16], x7
	WORD	$0x4e21d400	// fadd v0.4s, v0.4s, v1.4s
	WORD	$0x4e23d442	// fadd v2.4s, v2.4s, v3.4s
	WORD	$0x4e22d409	// fadd v9.4s, v0.4s, v2.4s
	WORD	$0x4cc77940	// ld1 {v0.4s}, [x10], x7
	WORD	$0x4cc779e1	// ld1 {v1.4s}, [x15], x7
	WORD	$0x4cc779c2	// ld1 {v2.4s}, [x14], x7
	WORD	$0x4cc77a03	// ld1 {v3.4s}, [x16], x7
	WORD	$0x4e21d400	// fadd v0.4s, v0.4s, v1.4s
	WORD	$0x4e23d442	// fadd v2.4s, v2.4s, v3.4s
	WORD	$0x4e22d40a	// fadd v10.4s, v0.4s, v2.4s
	WORD	$0x4cc77940	// ld1 {v0.4s}, [x10], x7
	WORD	$0x4cc779e1	// ld1 {v1.4s}, [x15], x7
	WORD	$0x4cc779c2	// ld1 {v2.4s}, [x14], x7
	WORD	$0x4cc77a03	// ld1 {v3.4s}, [x16], x7
	WORD	$0x4e21d400	// fadd v0.4s, v0.4s, v1.4s
	WORD	$0x4e23d442	// fadd v2.4s, v2.4s, v3.4s
	WORD	$0x4e22d40b	// fadd v11.4s, v0.4s, v2.4s
	WORD	$0x4cc77940	// ld1 {v0.4s}, [x10], x7
	WORD	$0x4cc779e1	// ld1 {v1.4s}, [x15], x7
	WORD	$0x4cc779c2	// ld1 {v2.4s}, [x14], x7
	WORD	$0x4cc77a03	// ld1 {v3.4s}, [x16], x7
	WORD	$0x4e21d400	// fadd v0.4s, v0.4s, v1.4s
	WORD	$0x4e23d442	// fadd v2.4s, v2.4s, v3.4s
	WORD	$0x4e22d40c	// fadd v12.4s, v0.4s, v2.4s
	WORD	$0x4cc77940	// ld1 {v0.4s}, [x10], x7
	WORD	$0x4cc779e1	// ld1 {v1.4s}, [x15], x7
	WORD	$0x4cc779c2	// ld1 {v2.4s}, [x14], x7
	WORD	$0x4cc77a03	// ld1 {v3.4s}, [x16], x7
	WORD	$0x4e21d400	// fadd v0.4s, v0.4s, v1.4s
	WORD	$0x4e23d442	// fadd v2.4s, v2.4s, v3.4s
	WORD	$0x4e22d40d	// fadd v13.4s, v0.4s, v2.4s
	WORD	$0x4cc77940	// ld1 {v0.4s}, [x10], x7
	WORD	$0x4cc779e1	// ld1 {v1.4s}, [x15], x7
	WORD	$0x4cc779c2	// ld1 {v2.4s}, [x14], x7
	WORD	$0x4cc77a03	// ld1 {v3.4s}, [x16], x7
	WORD	$0x4e21d400	// fadd v0.4s, v0.4s, v1.4s
	WORD	$0x4e23d442	// fadd v2.4s, v2.4s, v3.4s
	WORD	$0x4e22d40e	// fadd v14.4s, v0.4s, v2.4s
	WORD	$0x4cc77940	// ld1 {v0.4s}, [x10], x7
	WORD	$0x4cc779e1	// ld1 {v1.4s}, [x15], x7
	WORD	$0x4cc779c2	// ld1 {v2.4s}, [x14], x7
	WORD	$0x4cc77a03	// ld1 {v3.4s}, [x16], x7
	WORD	$0x4e21d400	// fadd v0.4s, v0.4s, v1.4s
	WORD	$0x4e23d442	// fadd v2.4s, v2.4s, v3.4s
	WORD	$0x4e22d40f	// fadd v15.4s, v0.4s, v2.4s
	WORD	$0x4cc77940	// ld1 {v0.4s}, [x10], x7
	WORD	$0x4cc779e1	// ld1 {v1.4s}, [x15], x7
	WORD	$0x4cc779c2	// ld1 {v2.4s}, [x14], x7
	WORD	$0x4cc77a03	// ld1 {v3.4s}, [x16], x7
	WORD	$0x4e21d400	// fadd v0.4s, v0.4s, v1.4s
	WORD	$0x4e23d442	// fadd v2.4s, v2.4s, v3.4s
	WORD	$0x4e22d410	// fadd v16.4s, v0.4s, v2.4s
	WORD	$0x4cc77940	// ld1 {v0.4s}, [x10], x7
	WORD	$0x4cc779e1	// ld1 {v1.4s}, [x15], x7
	WORD	$0x4cc779c2	// ld1 {v2.4s}, [x14], x7
	WORD	$0x4cc77a03	// ld1 {v3.4s}, [x16], x7
	WORD	$0x4e21d400	// fadd v0.4s, v0.4s, v1.4s
	WORD	$0x4e23d442	// fadd v2.4s, v2.4s, v3.4s
	WORD	$0x4e22d411	// fadd v17.4s, v0.4s, v2.4s
	WORD	$0x4cc77940	// ld1 {v0.4s}, [x10], x7
	WORD	$0x4cc779e1	// ld1 {v1.4s}, [x15], x7
	WORD	$0x4cc779c2	// ld1 {v2.4s}, [x14], x7
	WORD	$0x4cc77a03	// ld1 {v3.4s}, [x16], x7
	WORD	$0x4e21d400	// fadd v0.4s, v0.4s, v1.4s
	WORD	$0x4e23d442	// fadd v2.4s, v2.4s, v3.4s
	WORD	$0x4e22d412	// fadd v18.4s, v0.4s, v2.4s
	WORD	$0x4cc77940	// ld1 {v0.4s}, [x10], x7
	WORD	$0x4cc779e1	// ld1 {v1.4s}, [x15], x7
	WORD	$0x4cc779c2	// ld1 {v2.4s}, [x14], x7
	WORD	$0x4cc77a03	// ld1 {v3.4s}, [x16], x7
	WORD	$0x4e21d400	// fadd v0.4s, v0.4s, v1.4s
	WORD	$0x4e23d442	// fadd v2.4s, v2.4s, v3.4s
	WORD	$0x4e22d413	// fadd v19.4s, v0.4s, v2.4s
	WORD	$0x4cc77940	// ld1 {v0.4s}, [x10], x7
	WORD	$0x4cc779e1	// ld1 {v1.4s}, [x15], x7
	WORD	$0x4cc779c2	// ld1 {v2.4s}, [x14], x7
	WORD	$0x4cc77a03	// ld1 {v3.4s}, [x16], x7
	WORD	$0x4e21d400	// fadd v0.4s, v0.4s, v1.4s
	WORD	$0x4e23d442	// fadd v2.4s, v2.4s, v3.4s
	WORD	$0x4e22d414	// fadd v20.4s, v0.4s, v2.4s
	WORD	$0x4cc77940	// ld1 {v0.4s}, [x10], x7
	WORD	$0x4cc779e1	// ld1 {v1.4s}, [x15], x7
	WORD	$0x4cc779c2	// ld1 {v2.4s}, [x14], x7
	WORD	$0x4cc77a03	// ld1 {v3.4s}, [x16], x7
	WORD	$0x4e21d400	// fadd v0.4s, v0.4s, v1.4s
	WORD	$0x4e23d442	// fadd v2.4s, v2.4s, v3.4s
	WORD	$0x4e22d415	// fadd v21.4s, v0.4s, v2.4s
	WORD	$0x4cc77940	// ld1 {v0.4s}, [x10], x7
	WORD	$0x4cc779e1	// ld1 {v1.4s}, [x15], x7
	WORD	$0x4cc779c2	// ld1 {v2.4s}, [x14], x7
	WORD	$0x4cc77a03	// ld1 {v3.4s}, [x16], x7
	WORD	$0x4e21d400	// fadd v0.4s, v0.4s, v1.4s
	WORD	$0x4e23d442	// fadd v2.4s, v2.4s, v3.4s
	WORD	$0x4e22d416	// fadd v22.4s, v0.4s, v2.4s
	WORD	$0x4cc77940	// ld1 {v0.4s}, [x10], x7
	WORD	$0x4cc779e1	// ld1 {v1.4s}, [x15], x7
	WORD	$0x4cc779c2	// ld1 {v2.4s}, [x14], x7
	WORD	$0x4cc77a03	// ld1 {v3.4s}, [x16], x7
	WORD	$0x4e21d400	// fadd v0.4s, v0.4s, v1.4s
	WORD	$0x4e23d442	// fadd v2.4s, v2.4s, v3.4s
	WORD	$0x4e22d417	// fadd v23.4s, v0.4s, v2.4s
	WORD	$0x4e28d608	// fadd v8.4s, v16.4s, v8.4s
	WORD	$0x4e29d629	// fadd v9.4s, v17.4s, v9.4s
	WORD	$0x4e2ad64a	// fadd v10.4s, v18.4s, v10.4s
	WORD	$0x4e2bd66b	// fadd v11.4s, v19.4s, v11.4s
	WORD	$0x4e2cd68c	// fadd v12.4s, v20.4s, v12.4s
	WORD	$0x4e2dd6ad	// fadd v13.4s, v21.4s, v13.4s
	WORD	$0x4e2ed6ce	// fadd v14.4s, v22.4s, v14.4s
	WORD	$0x4e2fd6ef	// fadd v15.4s, v23.4s, v15.4s
	WORD	$0x4e28d588	// fadd v8.4s, v12.4s, v8.4s
	WORD	$0x4e29d5a9	// fadd v9.4s, v13.4s, v9.4s
	WORD	$0x4e2ad5ca	// fadd v10.4s, v14.4s, v10.4s
	WORD	$0x4e2bd5eb	// fadd v11.4s, v15.4s, v11.4s
	WORD	$0x4e2ad508	// fadd v8.4s, v8.4s, v10.4s
	WORD	$0x4e2bd529	// fadd v9.4s, v9.4s, v11.4s
	WORD	$0x4e29d508	// fadd v8.4s, v8.4s, v9.4s
	VST1.P	[V8.S4], 16(R4)
	ADD	$16, R0, R0
	SUB	$1, R1, R1
	B	col
done:
	RET

// func reduceLanes16NEON(acc []float32, dp int, out []float32)
// out[i] = the reduction of the 16 lanes acc[L*dp+i], for i < dp (a
// multiple of 4), four columns at a time.
TEXT ·reduceLanes16NEON(SB), NOSPLIT, $0-56
	MOVD	acc_base+0(FP), R0
	MOVD	dp+24(FP), R1
	MOVD	out_base+32(FP), R4
	LSL	$2, R1, R7 // an accumulator row's bytes
	LSR	$2, R1, R1
col:
	CBZ	R1, done
	MOVD	R0, R10
	WORD	$0x4cc77948	// ld1 {v8.4s}, [x10], x7
	WORD	$0x4cc77949	// ld1 {v9.4s}, [x10], x7
	WORD	$0x4cc7794a	// ld1 {v10.4s}, [x10], x7
	WORD	$0x4cc7794b	// ld1 {v11.4s}, [x10], x7
	WORD	$0x4cc7794c	// ld1 {v12.4s}, [x10], x7
	WORD	$0x4cc7794d	// ld1 {v13.4s}, [x10], x7
	WORD	$0x4cc7794e	// ld1 {v14.4s}, [x10], x7
	WORD	$0x4cc7794f	// ld1 {v15.4s}, [x10], x7
	WORD	$0x4cc77950	// ld1 {v16.4s}, [x10], x7
	WORD	$0x4cc77951	// ld1 {v17.4s}, [x10], x7
	WORD	$0x4cc77952	// ld1 {v18.4s}, [x10], x7
	WORD	$0x4cc77953	// ld1 {v19.4s}, [x10], x7
	WORD	$0x4cc77954	// ld1 {v20.4s}, [x10], x7
	WORD	$0x4cc77955	// ld1 {v21.4s}, [x10], x7
	WORD	$0x4cc77956	// ld1 {v22.4s}, [x10], x7
	WORD	$0x4cc77957	// ld1 {v23.4s}, [x10], x7
	WORD	$0x4e28d608	// fadd v8.4s, v16.4s, v8.4s
	WORD	$0x4e29d629	// fadd v9.4s, v17.4s, v9.4s
	WORD	$0x4e2ad64a	// fadd v10.4s, v18.4s, v10.4s
	WORD	$0x4e2bd66b	// fadd v11.4s, v19.4s, v11.4s
	WORD	$0x4e2cd68c	// fadd v12.4s, v20.4s, v12.4s
	WORD	$0x4e2dd6ad	// fadd v13.4s, v21.4s, v13.4s
	WORD	$0x4e2ed6ce	// fadd v14.4s, v22.4s, v14.4s
	WORD	$0x4e2fd6ef	// fadd v15.4s, v23.4s, v15.4s
	WORD	$0x4e28d588	// fadd v8.4s, v12.4s, v8.4s
	WORD	$0x4e29d5a9	// fadd v9.4s, v13.4s, v9.4s
	WORD	$0x4e2ad5ca	// fadd v10.4s, v14.4s, v10.4s
	WORD	$0x4e2bd5eb	// fadd v11.4s, v15.4s, v11.4s
	WORD	$0x4e2ad508	// fadd v8.4s, v8.4s, v10.4s
	WORD	$0x4e2bd529	// fadd v9.4s, v9.4s, v11.4s
	WORD	$0x4e29d508	// fadd v8.4s, v8.4s, v9.4s
	VST1.P	[V8.S4], 16(R4)
	ADD	$16, R0, R0
	SUB	$1, R1, R1
	B	col
done:
	RET

// func addZeroNEON(x []float32)
// x[i] += +0 for i < len(x) (a multiple of 4): what fma(0, 0, x[i])
// does, turning -0 into +0.
TEXT ·addZeroNEON(SB), NOSPLIT, $0-24
	MOVD	x_base+0(FP), R0
	MOVD	x_len+8(FP), R1
	LSR	$2, R1, R1
	VEOR	V1.B16, V1.B16, V1.B16
loop:
	CBZ	R1, done
	VLD1	(R0), [V0.S4]
	WORD	$0x4e21d400	// fadd v0.4s, v0.4s, v1.4s
	VST1.P	[V0.S4], 16(R0)
	SUB	$1, R1, R1
	B	loop
done:
	RET
