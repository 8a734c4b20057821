//go:build amd64 && !purego

#include "textflag.h"

// Activation quantization (the rule is in actq.go) for blocks whose largest
// magnitude is finite and non-zero and whose 1/d is finite; any other block
// gets d = -1 (0xbf800000), which no real block has, and is redone in Go.
// The largest magnitude is the unsigned maximum of the values' bits with the
// sign cleared: for finite values that is the float order, and infinities
// and NaNs compare above every finite value.

// CHECKD: AX holds the bits of the block's largest magnitude. Jumps to
// special unless it is finite and non-zero; else X8 = d = amax/127 and
// X9 = inv = 1/d, jumping to special when inv is infinite. Uses X10, AX.
#define CHECKD(special) \
	TESTL    AX, AX; \
	JZ       special; \
	CMPL     AX, $0x7f800000; \
	JAE      special; \
	VMOVD    AX, X8; \
	VDIVSS   X11, X8, X8; \
	VDIVSS   X8, X12, X9; \
	VMOVD    X9, AX; \
	ANDL     $0x7fffffff, AX; \
	CMPL     AX, $0x7f800000; \
	JAE      special

// func quantAVX512(x *float32, nb int, q *int8, d, bs *float32, ls *int32)
TEXT ·quantAVX512(SB), NOSPLIT, $0-48
	MOVQ         x+0(FP), SI
	MOVQ         nb+8(FP), CX
	MOVQ         q+16(FP), DI
	MOVQ         d+24(FP), DX
	MOVQ         bs+32(FP), R8
	MOVQ         ls+40(FP), R9
	MOVL         $0x7fffffff, AX
	VPBROADCASTD AX, Z31        // sign mask
	MOVL         $127, AX
	VPBROADCASTD AX, Z30
	MOVL         $-127, AX
	VPBROADCASTD AX, Z29
	MOVL         $0x01010101, AX
	VPBROADCASTD AX, Y28        // byte ones
	MOVL         $0x42fe0000, AX // 127.0
	VMOVD        AX, X11
	MOVL         $0x3f800000, AX // 1.0
	VMOVD        AX, X12
	TESTQ        CX, CX
	JZ           qdone

qblock:
	VMOVUPS  (SI), Z0
	VMOVUPS  64(SI), Z1
	VPANDD   Z31, Z0, Z2
	VPANDD   Z31, Z1, Z3
	VPMAXUD  Z3, Z2, Z2
	VEXTRACTI64X4 $1, Z2, Y3
	VPMAXUD  Y3, Y2, Y2
	VEXTRACTI128 $1, Y2, X3
	VPMAXUD  X3, X2, X2
	VPSHUFD  $0x4e, X2, X3
	VPMAXUD  X3, X2, X2
	VPSHUFD  $0xb1, X2, X3
	VPMAXUD  X3, X2, X2
	VMOVD    X2, AX
	CHECKD(qspecial)

	VMOVSS       X8, (DX)
	VBROADCASTSS X9, Z9
	VMULPS       Z9, Z0, Z0
	VMULPS       Z9, Z1, Z1
	VCVTPS2DQ    Z0, Z0 // rounds to nearest even (MXCSR default)
	VCVTPS2DQ    Z1, Z1
	VPMINSD      Z30, Z0, Z0
	VPMINSD      Z30, Z1, Z1
	VPMAXSD      Z29, Z0, Z0
	VPMAXSD      Z29, Z1, Z1
	VPMOVSDB     Z0, X4
	VPMOVSDB     Z1, X5
	VINSERTI128  $1, X5, Y4, Y4
	VMOVDQU      Y4, (DI)
	// 4-code sums: ones (unsigned) times codes (signed), negated.
	VPXORD       Y6, Y6, Y6
	VPDPBUSD     Y4, Y28, Y6
	VPXORD       Y7, Y7, Y7
	VPSUBD       Y6, Y7, Y7
	VMOVDQU      Y7, (R9)
	// The block sum: add the 8 lane sums.
	VEXTRACTI128 $1, Y6, X7
	VPADDD       X7, X6, X6
	VPSHUFD      $0x4e, X6, X7
	VPADDD       X7, X6, X6
	VPSHUFD      $0xb1, X6, X7
	VPADDD       X7, X6, X6
	VCVTDQ2PS    X6, X6
	VMOVSS       X6, (R8)
	JMP          qnext

qspecial:
	MOVL $0xbf800000, (DX)

qnext:
	ADDQ $128, SI
	ADDQ $32, DI
	ADDQ $4, DX
	ADDQ $4, R8
	ADDQ $32, R9
	DECQ CX
	JNZ  qblock

qdone:
	VZEROUPPER
	RET
