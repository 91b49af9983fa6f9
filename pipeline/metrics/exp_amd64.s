//go:build amd64

#include "textflag.h"

// expAVX512: math.Exp's amd64 FMA path (src/math/exp_amd64.s, label avxfma)
// on eight float64 lanes; the constants are the same literals.

DATA expconst<>+0(SB)/8, $1.4426950408889634073599246810018920 // LOG2E
DATA expconst<>+8(SB)/8, $0.69314718055966295651160180568695068359375 // LN2U
DATA expconst<>+16(SB)/8, $0.28235290563031577122588448175013436025525412068e-12 // LN2L
DATA expconst<>+24(SB)/8, $0.0625
DATA expconst<>+32(SB)/8, $2.4801587301587301587e-5
DATA expconst<>+40(SB)/8, $1.9841269841269841270e-4
DATA expconst<>+48(SB)/8, $1.3888888888888888889e-3
DATA expconst<>+56(SB)/8, $8.3333333333333333333e-3
DATA expconst<>+64(SB)/8, $4.1666666666666666667e-2
DATA expconst<>+72(SB)/8, $1.6666666666666666667e-1
DATA expconst<>+80(SB)/8, $0.5
DATA expconst<>+88(SB)/8, $1.0
DATA expconst<>+96(SB)/8, $2.0
DATA expconst<>+104(SB)/8, $-708.0 // expLo
DATA expconst<>+112(SB)/8, $708.0 // expHi
DATA expconst<>+120(SB)/8, $0x3FF // exponent bias (int64)
GLOBL expconst<>(SB), RODATA, $128

// func expAVX512(dst *float64, src *float32, n int, shift float64) int
TEXT ·expAVX512(SB), NOSPLIT, $0-40
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	VBROADCASTSD shift+24(FP), Z31
	VBROADCASTSD expconst<>+0(SB), Z16  // LOG2E
	VBROADCASTSD expconst<>+8(SB), Z17  // LN2U
	VBROADCASTSD expconst<>+16(SB), Z18 // LN2L
	VBROADCASTSD expconst<>+24(SB), Z19 // 1/16
	VBROADCASTSD expconst<>+32(SB), Z20 // Taylor coefficients, highest first
	VBROADCASTSD expconst<>+40(SB), Z21
	VBROADCASTSD expconst<>+48(SB), Z22
	VBROADCASTSD expconst<>+56(SB), Z23
	VBROADCASTSD expconst<>+64(SB), Z24
	VBROADCASTSD expconst<>+72(SB), Z25
	VBROADCASTSD expconst<>+80(SB), Z26 // 0.5
	VBROADCASTSD expconst<>+88(SB), Z27 // 1
	VBROADCASTSD expconst<>+96(SB), Z28 // 2
	VBROADCASTSD expconst<>+104(SB), Z29
	VBROADCASTSD expconst<>+112(SB), Z30
	VPBROADCASTQ expconst<>+120(SB), Z15
	XORQ AX, AX

loop:
	LEAQ 8(AX), DX
	CMPQ DX, CX
	JGT  done
	VCVTPS2PD (SI)(AX*4), Z0
	VSUBPD    Z31, Z0, Z0             // x = src - shift
	VCMPPD    $0x1d, Z29, Z0, K1      // x >= expLo (ordered: false for NaN)
	VCMPPD    $0x12, Z30, Z0, K2      // x <= expHi
	KANDW     K1, K2, K1
	KMOVW     K1, BX
	CMPL      BX, $0xff
	JNE       done

	VMULPD       Z0, Z16, Z1          // LOG2E·x
	VCVTPD2DQ    Z1, Y2               // k = round(LOG2E·x) (MXCSR: nearest)
	VCVTDQ2PD    Y2, Z1
	VFNMADD231PD Z17, Z1, Z0          // x -= k·LN2U (fused)
	VFNMADD231PD Z18, Z1, Z0          // x -= k·LN2L (fused)
	VMULPD       Z19, Z0, Z0          // x /= 16
	VMOVAPD      Z20, Z1
	VFMADD213PD  Z21, Z0, Z1          // p = p·x + c
	VFMADD213PD  Z22, Z0, Z1
	VFMADD213PD  Z23, Z0, Z1
	VFMADD213PD  Z24, Z0, Z1
	VFMADD213PD  Z25, Z0, Z1
	VFMADD213PD  Z26, Z0, Z1
	VFMADD213PD  Z27, Z0, Z1
	VMULPD       Z1, Z0, Z0           // y = x·p: exp(x)−1
	VADDPD       Z28, Z0, Z1          // y = y·(y+2), three times: exp(2x)−1
	VMULPD       Z1, Z0, Z0
	VADDPD       Z28, Z0, Z1
	VMULPD       Z1, Z0, Z0
	VADDPD       Z28, Z0, Z1
	VMULPD       Z1, Z0, Z0
	VADDPD       Z28, Z0, Z1
	VFMADD213PD  Z27, Z1, Z0          // the fourth, +1 fused
	VPMOVSXDQ    Y2, Z3               // · 2^k
	VPADDQ       Z15, Z3, Z3
	VPSLLQ       $52, Z3, Z3
	VMULPD       Z3, Z0, Z0
	VMOVUPD      Z0, (DI)(AX*8)
	MOVQ         DX, AX
	JMP          loop

done:
	MOVQ AX, ret+32(FP)
	VZEROUPPER
	RET
