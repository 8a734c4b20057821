//go:build amd64 && !purego

#include "textflag.h"

// Exp (vec.go) four values at a time in float64 lanes, with the very same
// operations in the same order, so the results are the same bits: k =
// round-half-away(x*log2e), r = (x - k*ln2Hi) - k*ln2Lo, Horner's
// polynomial with every product rounded, times 2^k, rounded to float32.

// The Horner constants: 1/13!, then expCoeffs (1/12!, ..., 1/1!, 1/0!), each
// as 4 float64 lanes.
#define C4(off, bits) \
	DATA expC<>+(off)(SB)/8, $bits; \
	DATA expC<>+(off+8)(SB)/8, $bits; \
	DATA expC<>+(off+16)(SB)/8, $bits; \
	DATA expC<>+(off+24)(SB)/8, $bits

C4(0, 0x3de6124613a86d09)
C4(32, 0x3e21eed8eff8d898)
C4(64, 0x3e5ae64567f544e4)
C4(96, 0x3e927e4fb7789f5c)
C4(128, 0x3ec71de3a556c734)
C4(160, 0x3efa01a01a01a01a)
C4(192, 0x3f2a01a01a01a01a)
C4(224, 0x3f56c16c16c16c17)
C4(256, 0x3f81111111111111)
C4(288, 0x3fa5555555555555)
C4(320, 0x3fc5555555555555)
C4(352, 0x3fe0000000000000)
C4(384, 0x3ff0000000000000)
C4(416, 0x3ff0000000000000)
C4(448, 0x3ff71547652b82fe) // log2e
C4(480, 0x3fe62e42fee00000) // ln2Hi
C4(512, 0x3dea39ef35793c76) // ln2Lo
C4(544, 0x3fe0000000000000) // 0.5
C4(576, 0x7fffffffffffffff) // |.|
C4(608, 0x8000000000000000) // sign
C4(640, 0x43300000000003ff) // 2^52 + 1023
GLOBL expC<>(SB), RODATA|NOPTR, $672

// Float32 constants, 4 lanes each: 89, -104, +Inf, sign.
DATA expF<>+0(SB)/8, $0x42b2000042b20000
DATA expF<>+8(SB)/8, $0x42b2000042b20000
DATA expF<>+16(SB)/8, $0xc2d00000c2d00000
DATA expF<>+24(SB)/8, $0xc2d00000c2d00000
DATA expF<>+32(SB)/8, $0x7f8000007f800000
DATA expF<>+40(SB)/8, $0x7f8000007f800000
DATA expF<>+48(SB)/8, $0x8000000080000000
DATA expF<>+56(SB)/8, $0x8000000080000000
GLOBL expF<>(SB), RODATA|NOPTR, $64

// HORNER13 applies STEP to the offsets of expC's 13 Horner constants
// after the first.
#define HORNER13(STEP) \
	STEP(32); \
	STEP(64); \
	STEP(96); \
	STEP(128); \
	STEP(160); \
	STEP(192); \
	STEP(224); \
	STEP(256); \
	STEP(288); \
	STEP(320); \
	STEP(352); \
	STEP(384); \
	STEP(416)

// The AVX2 loops run two vectors' chains interleaved, as the AVX-512 ones
// below do (see there).

// EXPRED4 loads 4 float32 from (src) into IN (xored with X15, the sign
// when negating) and computes k into K and r into R (XD, T, F scratch).
#define EXPRED4(src, IN, XD, T, K, F, R) \
	VMOVUPS   src, IN; \
	VXORPS    X15, IN, IN; \
	VCVTPS2PD IN, XD; \
	VMULPD    expC<>+448(SB), XD, T; \
	VROUNDPD  $3, T, K; \
	VSUBPD    K, T, F; \
	VANDPD    expC<>+576(SB), F, F; \
	VCMPPD    $0x1d, expC<>+544(SB), F, F; \
	VANDPD    expC<>+608(SB), T, T; \
	VORPD     expC<>+384(SB), T, T; \
	VANDPD    F, T, T; \
	VADDPD    T, K, K; \
	VMULPD    expC<>+480(SB), K, R; \
	VSUBPD    R, XD, R; \
	VMULPD    expC<>+512(SB), K, T; \
	VSUBPD    T, R, R

#define HORNER4(off, R, P) \
	VMULPD R, P, P; \
	VADDPD expC<>+(off)(SB), P, P

// EXPFIN4 scales P by 2^K (T scratch), rounds it to float32 in XP and
// applies Exp's special cases for the input IN (XF scratch).
#define EXPFIN4(IN, K, P, XP, T, XF) \
	VADDPD     expC<>+640(SB), K, T; \
	VPSLLQ     $52, T, T; \
	VMULPD     T, P, P; \
	VCVTPD2PSY P, XP; \
	VCMPPS     $0x1e, expF<>+0(SB), IN, XF; \
	VBLENDVPS  XF, expF<>+32(SB), XP, XP; \
	VCMPPS     $0x11, expF<>+16(SB), IN, XF; \
	VANDNPS    XP, XF, XP; \
	VCMPPS     $3, IN, IN, XF; \
	VBLENDVPS  XF, IN, XP, XP

#define HORNER4X2(off) \
	HORNER4(off, Y5, Y6); \
	HORNER4(off, Y12, Y13)

#define HORNER4X1(off) HORNER4(off, Y5, Y6)

// EXP4X2 computes Exp of the 8 float32 at (src0) and (src1) into X6 (the
// first 4) and X13.
#define EXP4X2(src0, src1) \
	EXPRED4(src0, X0, Y1, Y2, Y3, Y4, Y5); \
	EXPRED4(src1, X7, Y8, Y9, Y10, Y11, Y12); \
	VMOVUPD expC<>+0(SB), Y6; \
	VMOVUPD expC<>+0(SB), Y13; \
	HORNER13(HORNER4X2); \
	EXPFIN4(X0, Y3, Y6, X6, Y2, X4); \
	EXPFIN4(X7, Y10, Y13, X13, Y9, X11)

// EXP4 computes Exp of the 4 float32 at (src) into X6.
#define EXP4(src) \
	EXPRED4(src, X0, Y1, Y2, Y3, Y4, Y5); \
	VMOVUPD expC<>+0(SB), Y6; \
	HORNER13(HORNER4X1); \
	EXPFIN4(X0, Y3, Y6, X6, Y2, X4)

// func expAVX2(dst, src *float32, n int, negate bool)
// dst[i] = Exp(src[i]) (Exp(-src[i]) with negate) for i < n, n a multiple of 4.
TEXT ·expAVX2(SB), NOSPLIT, $0-25
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	MOVB negate+24(FP), AL
	VXORPS  X15, X15, X15
	TESTB   AL, AL
	JZ      expnoneg
	VMOVUPS expF<>+48(SB), X15

expnoneg:
	SHRQ $2, CX
	JZ   expdone

exppair:
	CMPQ    CX, $2
	JB      expone
	EXP4X2((SI), 16(SI))
	VMOVUPS X6, (DI)
	VMOVUPS X13, 16(DI)
	ADDQ    $32, SI
	ADDQ    $32, DI
	SUBQ    $2, CX
	JMP     exppair

expone:
	TESTQ   CX, CX
	JZ      expdone
	EXP4((SI))
	VMOVUPS X6, (DI)

expdone:
	VZEROUPPER
	RET

// Float32 1.0, 4 lanes.
DATA oneF4<>+0(SB)/8, $0x3f8000003f800000
DATA oneF4<>+8(SB)/8, $0x3f8000003f800000
GLOBL oneF4<>(SB), RODATA|NOPTR, $16

// SWIGLU sets the float32 at (gate) to g / (1 + e) * u, e in E, u at
// (up), 1.0 in every lane of ONE, T scratch: SwiGLU's float32 operations,
// rounded as Go rounds them. The registers' width sets how many.
#define SWIGLU(ONE, gate, up, E, T) \
	VADDPS  ONE, E, E; \
	VMOVUPS gate, T; \
	VDIVPS  E, T, T; \
	VMULPS  up, T, T; \
	VMOVUPS T, gate

// SWIGLUB is SWIGLU with 1.0 broadcast from memory, for the AVX-512
// loop (EXP8X4 leaves no register for it).
#define SWIGLUB(gate, up, E, T) \
	VADDPS.BCST oneF4<>(SB), E, E; \
	VMOVUPS     gate, T; \
	VDIVPS      E, T, T; \
	VMULPS      up, T, T; \
	VMOVUPS     T, gate

// func swigluAVX2(gate, up *float32, n int)
// gate[i] = gate[i] / (1 + Exp(-gate[i])) * up[i] for i < n, n a multiple
// of 4.
TEXT ·swigluAVX2(SB), NOSPLIT, $0-24
	MOVQ    gate+0(FP), SI
	MOVQ    up+8(FP), DX
	MOVQ    n+16(FP), CX
	VMOVUPS expF<>+48(SB), X15 // negate: Exp(-g)
	VMOVUPS oneF4<>(SB), X14
	SHRQ    $2, CX
	JZ      swiglu4done

swiglu4pair:
	CMPQ CX, $2
	JB   swiglu4one
	EXP4X2((SI), 16(SI))
	SWIGLU(X14, (SI), (DX), X6, X4)
	SWIGLU(X14, 16(SI), 16(DX), X13, X11)
	ADDQ $32, SI
	ADDQ $32, DX
	SUBQ $2, CX
	JMP  swiglu4pair

swiglu4one:
	TESTQ CX, CX
	JZ    swiglu4done
	EXP4((SI))
	SWIGLU(X14, (SI), (DX), X6, X4)

swiglu4done:
	VZEROUPPER
	RET

// The same in 8 float64 lanes (AVX-512), constants broadcast from the 4-lane
// tables (Z20-Z31). The Horner steps are a chain of 26 dependent roundings,
// so the loops run two vectors' chains interleaved, instruction by
// instruction: one chain at a time left the core idle between its steps
// (1.5 ns a value on the Zen 5 measured). Each lane still sees the same
// operations in the same order.

// EXPRED8 loads 8 float32 from (src) into IN (xored with Y19, the sign
// when negating) and computes k into K and r into R (ZXD, ZT, ZF, ZS, ZTMP
// are scratch; KF a scratch mask).
#define EXPRED8(src, IN, ZXD, ZT, K, ZF, ZS, R, ZTMP, KF) \
	VMOVUPS     src, IN; \
	VXORPS      Y19, IN, IN; \
	VCVTPS2PD   IN, ZXD; \
	VMULPD      Z20, ZXD, ZT; \
	VRNDSCALEPD $3, ZT, K; \
	VSUBPD      K, ZT, ZF; \
	VANDPD      Z24, ZF, ZF; \
	VCMPPD      $0x1d, Z23, ZF, KF; \
	VANDPD      Z25, ZT, ZS; \
	VORPD       Z26, ZS, ZS; \
	VADDPD      ZS, K, KF, K; \
	VMULPD      Z21, K, R; \
	VSUBPD      R, ZXD, R; \
	VMULPD      Z22, K, ZTMP; \
	VSUBPD      ZTMP, R, R

#define HORNER8(off, R, P) \
	VMULPD      R, P, P; \
	VADDPD.BCST expC<>+(off)(SB), P, P

// Both chains' Horner steps, alternating.
#define HORNER8X2(off) \
	HORNER8(off, Z6, Z8); \
	HORNER8(off, Z16, Z18)

// The first chain's step alone.
#define HORNER8X1(off) HORNER8(off, Z6, Z8)

// EXPFIN8 scales P by 2^K (ZT scratch), rounds it to float32 in YP and
// applies Exp's special cases for the input IN (YZ scratch; masks K2-K4).
#define EXPFIN8(IN, K, P, YP, ZT, YZ) \
	VADDPD    Z27, K, ZT; \
	VPSLLQ    $52, ZT, ZT; \
	VMULPD    ZT, P, P; \
	VCVTPD2PS P, YP; \
	VCMPPS    $0x1e, Y29, IN, K2; \
	VMOVAPS   Y31, K2, YP; \
	VCMPPS    $0x11, Y30, IN, K3; \
	VXORPS    YZ, YZ, YZ; \
	VMOVAPS   YZ, K3, YP; \
	VCMPPS    $3, IN, IN, K4; \
	VMOVAPS   IN, K4, YP

#define EXP8CONSTS \
	VBROADCASTSD expC<>+448(SB), Z20; \
	VBROADCASTSD expC<>+480(SB), Z21; \
	VBROADCASTSD expC<>+512(SB), Z22; \
	VBROADCASTSD expC<>+544(SB), Z23; \
	VBROADCASTSD expC<>+576(SB), Z24; \
	VBROADCASTSD expC<>+608(SB), Z25; \
	VBROADCASTSD expC<>+384(SB), Z26; \
	VBROADCASTSD expC<>+640(SB), Z27; \
	VBROADCASTSD expC<>+0(SB), Z28; \
	VBROADCASTSS expF<>+0(SB), Y29; \
	VBROADCASTSS expF<>+16(SB), Y30; \
	VBROADCASTSS expF<>+32(SB), Y31

// EXP8X2 computes Exp of the 16 float32 at (src) into Y8 (the first 8)
// and Y18 (the next 8).
#define EXP8X2(src0, src1) \
	EXPRED8(src0, Y0, Z1, Z2, Z3, Z4, Z5, Z6, Z7, K1); \
	EXPRED8(src1, Y10, Z11, Z12, Z13, Z14, Z15, Z16, Z17, K5); \
	VMOVAPD Z28, Z8; \
	VMOVAPD Z28, Z18; \
	HORNER13(HORNER8X2); \
	EXPFIN8(Y0, Z3, Z8, Y8, Z2, Y7); \
	EXPFIN8(Y10, Z13, Z18, Y18, Z12, Y17)

// EXP8 computes Exp of the 8 float32 at (src) into Y8.
#define EXP8(src) \
	EXPRED8(src, Y0, Z1, Z2, Z3, Z4, Z5, Z6, Z7, K1); \
	VMOVAPD Z28, Z8; \
	HORNER13(HORNER8X1); \
	EXPFIN8(Y0, Z3, Z8, Y8, Z2, Y7)

// Four chains at a time, where at least 32 values are left: two chains
// still left the core waiting on each step's rounding (SwiGLU of 2048
// values, BenchmarkActivations on the Zen 5 measured: 2.40 µs with two
// chains, 2.00 with four). Chain c keeps its input in Y(4c), k in
// Z(4c+1), r in Z(4c+2) and the polynomial in Z(4c+3); Z16-Z18 are
// scratch shared by all four (renaming lets the four reductions overlap
// all the same).
#define EXPRED8Q(src, IN, K, R, P) \
	EXPRED8(src, IN, P, Z16, K, Z17, Z18, R, Z16, K1)

#define HORNER8X4(off) \
	HORNER8(off, Z2, Z3); \
	HORNER8(off, Z6, Z7); \
	HORNER8(off, Z10, Z11); \
	HORNER8(off, Z14, Z15)

// EXP8X4 computes Exp of the 32 float32 at (src0) .. (src3) into Y2, Y6,
// Y10 and Y14.
#define EXP8X4(src0, src1, src2, src3) \
	EXPRED8Q(src0, Y0, Z1, Z2, Z3); \
	EXPRED8Q(src1, Y4, Z5, Z6, Z7); \
	EXPRED8Q(src2, Y8, Z9, Z10, Z11); \
	EXPRED8Q(src3, Y12, Z13, Z14, Z15); \
	VMOVAPD Z28, Z3; \
	VMOVAPD Z28, Z7; \
	VMOVAPD Z28, Z11; \
	VMOVAPD Z28, Z15; \
	HORNER13(HORNER8X4); \
	EXPFIN8(Y0, Z1, Z3, Y2, Z16, Y17); \
	EXPFIN8(Y4, Z5, Z7, Y6, Z16, Y17); \
	EXPFIN8(Y8, Z9, Z11, Y10, Z16, Y17); \
	EXPFIN8(Y12, Z13, Z15, Y14, Z16, Y17)

// func expAVX512(dst, src *float32, n int, negate bool)
// n a multiple of 8.
TEXT ·expAVX512(SB), NOSPLIT, $0-25
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	MOVB negate+24(FP), AL
	VXORPS Y19, Y19, Y19
	TESTB  AL, AL
	JZ     exp8noneg
	VBROADCASTSS expF<>+48(SB), Y19

exp8noneg:
	EXP8CONSTS
	SHRQ $3, CX
	JZ   exp8done

exp8quad:
	CMPQ    CX, $4
	JB      exp8pair
	EXP8X4((SI), 32(SI), 64(SI), 96(SI))
	VMOVUPS Y2, (DI)
	VMOVUPS Y6, 32(DI)
	VMOVUPS Y10, 64(DI)
	VMOVUPS Y14, 96(DI)
	ADDQ    $128, SI
	ADDQ    $128, DI
	SUBQ    $4, CX
	JMP     exp8quad

exp8pair:
	CMPQ CX, $2
	JB   exp8one
	EXP8X2((SI), 32(SI))
	VMOVUPS Y8, (DI)
	VMOVUPS Y18, 32(DI)
	ADDQ    $64, SI
	ADDQ    $64, DI
	SUBQ    $2, CX
	JMP     exp8pair

exp8one:
	TESTQ CX, CX
	JZ    exp8done
	EXP8((SI))
	VMOVUPS Y8, (DI)

exp8done:
	VZEROUPPER
	RET

// func swigluAVX512(gate, up *float32, n int)
// gate[i] = gate[i] / (1 + Exp(-gate[i])) * up[i] for i < n, n a multiple
// of 8.
TEXT ·swigluAVX512(SB), NOSPLIT, $0-24
	MOVQ gate+0(FP), SI
	MOVQ up+8(FP), DX
	MOVQ n+16(FP), CX
	VBROADCASTSS expF<>+48(SB), Y19 // negate: Exp(-g)
	EXP8CONSTS
	SHRQ $3, CX
	JZ   swigludone

swigluquad:
	CMPQ CX, $4
	JB   swiglupair
	EXP8X4((SI), 32(SI), 64(SI), 96(SI))
	SWIGLUB((SI), (DX), Y2, Y16)
	SWIGLUB(32(SI), 32(DX), Y6, Y16)
	SWIGLUB(64(SI), 64(DX), Y10, Y16)
	SWIGLUB(96(SI), 96(DX), Y14, Y16)
	ADDQ $128, SI
	ADDQ $128, DX
	SUBQ $4, CX
	JMP  swigluquad

swiglupair:
	CMPQ CX, $2
	JB   swigluone
	EXP8X2((SI), 32(SI))
	SWIGLUB((SI), (DX), Y8, Y7)
	SWIGLUB(32(SI), 32(DX), Y18, Y17)
	ADDQ $64, SI
	ADDQ $64, DX
	SUBQ $2, CX
	JMP  swiglupair

swigluone:
	TESTQ CX, CX
	JZ    swigludone
	EXP8((SI))
	SWIGLUB((SI), (DX), Y8, Y7)

swigludone:
	VZEROUPPER
	RET
