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

#define HORNER(off) \
	VMULPD Y6, Y8, Y8; \
	VADDPD expC<>+(off)(SB), Y8, Y8

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

exploop:
	VMOVUPS   (SI), X0
	VXORPS    X15, X0, X0 // negate (or not)
	VCVTPS2PD X0, Y1
	VMULPD    expC<>+448(SB), Y1, Y2
	VROUNDPD  $3, Y2, Y3 // truncate
	VSUBPD    Y3, Y2, Y4
	VANDPD    expC<>+576(SB), Y4, Y4
	VCMPPD    $0x1d, expC<>+544(SB), Y4, Y4 // |frac| >= 0.5
	VANDPD    expC<>+608(SB), Y2, Y5
	VORPD     expC<>+384(SB), Y5, Y5 // +-1
	VANDPD    Y4, Y5, Y5
	VADDPD    Y5, Y3, Y3 // k, rounded half away from zero
	VMULPD    expC<>+480(SB), Y3, Y6
	VSUBPD    Y6, Y1, Y6
	VMULPD    expC<>+512(SB), Y3, Y7
	VSUBPD    Y7, Y6, Y6 // r
	VMOVUPD   expC<>+0(SB), Y8
	HORNER(32)
	HORNER(64)
	HORNER(96)
	HORNER(128)
	HORNER(160)
	HORNER(192)
	HORNER(224)
	HORNER(256)
	HORNER(288)
	HORNER(320)
	HORNER(352)
	HORNER(384)
	HORNER(416)
	VADDPD     expC<>+640(SB), Y3, Y9
	VPSLLQ     $52, Y9, Y9 // 2^k
	VMULPD     Y9, Y8, Y8
	VCVTPD2PSY Y8, X8
	// Out of range and NaN inputs, as Exp's switch.
	VCMPPS    $0x1e, expF<>+0(SB), X0, X9 // x > 89
	VBLENDVPS X9, expF<>+32(SB), X8, X8
	VCMPPS    $0x11, expF<>+16(SB), X0, X9 // x < -104
	VANDNPS   X8, X9, X8
	VCMPPS    $3, X0, X0, X9 // NaN
	VBLENDVPS X9, X0, X8, X8
	VMOVUPS   X8, (DI)
	ADDQ      $16, SI
	ADDQ      $16, DI
	DECQ      CX
	JNZ       exploop

expdone:
	VZEROUPPER
	RET

// The same in 8 float64 lanes (AVX-512), constants broadcast from the 4-lane
// tables.
#define HORNER8(off) \
	VMULPD      Z6, Z8, Z8; \
	VADDPD.BCST expC<>+(off)(SB), Z8, Z8

// func expAVX512(dst, src *float32, n int, negate bool)
// n a multiple of 8.
TEXT ·expAVX512(SB), NOSPLIT, $0-25
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	MOVB negate+24(FP), AL
	VXORPS Y15, Y15, Y15
	TESTB  AL, AL
	JZ     exp8noneg
	VBROADCASTSS expF<>+48(SB), Y15

exp8noneg:
	VBROADCASTSD expC<>+448(SB), Z20 // log2e
	VBROADCASTSD expC<>+480(SB), Z21 // ln2Hi
	VBROADCASTSD expC<>+512(SB), Z22 // ln2Lo
	VBROADCASTSD expC<>+544(SB), Z23 // 0.5
	VBROADCASTSD expC<>+576(SB), Z24 // |.|
	VBROADCASTSD expC<>+608(SB), Z25 // sign
	VBROADCASTSD expC<>+384(SB), Z26 // 1
	VBROADCASTSD expC<>+640(SB), Z27 // 2^52 + 1023
	VBROADCASTSD expC<>+0(SB), Z28   // 1/13!
	VBROADCASTSS expF<>+0(SB), Y29   // 89
	VBROADCASTSS expF<>+16(SB), Y30  // -104
	VBROADCASTSS expF<>+32(SB), Y31  // +Inf
	SHRQ $3, CX
	JZ   exp8done

exp8loop:
	VMOVUPS       (SI), Y0
	VXORPS        Y15, Y0, Y0
	VCVTPS2PD     Y0, Z1
	VMULPD        Z20, Z1, Z2
	VRNDSCALEPD   $3, Z2, Z3 // truncate
	VSUBPD        Z3, Z2, Z4
	VANDPD        Z24, Z4, Z4
	VCMPPD        $0x1d, Z23, Z4, K1 // |frac| >= 0.5
	VANDPD        Z25, Z2, Z5
	VORPD         Z26, Z5, Z5 // +-1
	VADDPD        Z5, Z3, K1, Z3 // k, rounded half away from zero
	VMULPD        Z21, Z3, Z6
	VSUBPD        Z6, Z1, Z6
	VMULPD        Z22, Z3, Z7
	VSUBPD        Z7, Z6, Z6 // r
	VMOVAPD       Z28, Z8
	HORNER8(32)
	HORNER8(64)
	HORNER8(96)
	HORNER8(128)
	HORNER8(160)
	HORNER8(192)
	HORNER8(224)
	HORNER8(256)
	HORNER8(288)
	HORNER8(320)
	HORNER8(352)
	HORNER8(384)
	HORNER8(416)
	VADDPD        Z27, Z3, Z9
	VPSLLQ        $52, Z9, Z9 // 2^k
	VMULPD        Z9, Z8, Z8
	VCVTPD2PS     Z8, Y8
	VCMPPS        $0x1e, Y29, Y0, K2 // x > 89
	VMOVAPS       Y31, K2, Y8
	VCMPPS        $0x11, Y30, Y0, K3 // x < -104
	VXORPS        Y9, Y9, Y9
	VMOVAPS       Y9, K3, Y8
	VCMPPS        $3, Y0, Y0, K4 // NaN
	VMOVAPS       Y0, K4, Y8
	VMOVUPS       Y8, (DI)
	ADDQ          $32, SI
	ADDQ          $32, DI
	DECQ          CX
	JNZ           exp8loop

exp8done:
	VZEROUPPER
	RET
