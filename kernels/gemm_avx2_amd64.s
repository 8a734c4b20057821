//go:build amd64 && !purego

#include "textflag.h"
#include "intdot_amd64.h"

// The f32 GEMM tile for AVX2: one row against 8 vectors, in 4 passes of 2
// vectors over the row (the row stays in L1), each vector with its 32
// canonical lanes in 4 registers: Y0-Y3 for the first of the pair, Y4-Y7 for
// the second, lanes 8i..8i+7 in register i, as the matrix-vector kernel.

// F32AVX2TOK: 32 values of vector P (at AX) against the row's in Y8-Y11.
#define F32AVX2TOK(P, A0, A1, A2, A3) \
	VMULPS (P)(AX*1), Y8, Y12; \
	VADDPS Y12, A0, A0; \
	VMULPS 32(P)(AX*1), Y9, Y13; \
	VADDPS Y13, A1, A1; \
	VMULPS 64(P)(AX*1), Y10, Y12; \
	VADDPS Y12, A2, A2; \
	VMULPS 96(P)(AX*1), Y11, Y13; \
	VADDPS Y13, A3, A3

// func gemmF32AVX2(w *float32, n int, x *float32, xStride int, out *[8]float32)
TEXT ·gemmF32AVX2(SB), NOSPLIT, $0-40
	MOVQ w+0(FP), SI
	MOVQ x+16(FP), DI
	MOVQ xStride+24(FP), BX
	MOVQ out+32(FP), DX
	MOVQ $4, R9

f32pass:
	LEAQ   (DI)(BX*1), R8
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	XORQ   AX, AX
	MOVQ   n+8(FP), CX
	SHRQ   $5, CX

f32step:
	VMOVUPS (SI)(AX*1), Y8
	VMOVUPS 32(SI)(AX*1), Y9
	VMOVUPS 64(SI)(AX*1), Y10
	VMOVUPS 96(SI)(AX*1), Y11
	F32AVX2TOK(DI, Y0, Y1, Y2, Y3)
	F32AVX2TOK(R8, Y4, Y5, Y6, Y7)
	ADDQ $128, AX
	DECQ CX
	JNZ  f32step

	FOLD32TO8
	HSUM8
	VMOVSS  X0, (DX)
	VMOVAPS Y4, Y0
	VMOVAPS Y5, Y1
	VMOVAPS Y6, Y2
	VMOVAPS Y7, Y3
	FOLD32TO8
	HSUM8
	VMOVSS  X0, 4(DX)
	ADDQ    $8, DX
	LEAQ    (DI)(BX*2), DI
	DECQ    R9
	JNZ     f32pass
	VZEROUPPER
	RET
