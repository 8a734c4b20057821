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

// func unpackQ80AVX2(row unsafe.Pointer, nb int, u *byte, wf *float32)
// The GEMM's unpacked form of a Q8_0 row: u = code+128 (code^0x80), and the
// block's f16 scale widened, 8 copies per block (one per group of 4).
TEXT ·unpackQ80AVX2(SB), NOSPLIT, $0-32
	MOVQ         row+0(FP), SI
	MOVQ         nb+8(FP), CX
	MOVQ         u+16(FP), DI
	MOVQ         wf+24(FP), R8
	MOVL         $0x80808080, AX
	VMOVD        AX, X15
	VPBROADCASTD X15, Y15
	TESTQ        CX, CX
	JZ           uq80done

uq80loop:
	VMOVDQU      2(SI), Y0
	VPXOR        Y15, Y0, Y0
	VMOVDQU      Y0, (DI)
	VPBROADCASTW (SI), X1
	VCVTPH2PS    X1, Y1
	VMOVUPS      Y1, (R8)
	ADDQ         $34, SI
	ADDQ         $32, DI
	ADDQ         $32, R8
	DECQ         CX
	JNZ          uq80loop

uq80done:
	VZEROUPPER
	RET

// func unpackQ40AVX2(row unsafe.Pointer, nb int, u *byte, wf *float32)
// Q4_0: u = (nibble-8)+128 = nibble+120, values 0-15 from the low nibbles
// and 16-31 from the high ones; the scale as for Q8_0.
TEXT ·unpackQ40AVX2(SB), NOSPLIT, $0-32
	MOVQ         row+0(FP), SI
	MOVQ         nb+8(FP), CX
	MOVQ         u+16(FP), DI
	MOVQ         wf+24(FP), R8
	MOVL         $0x0f0f0f0f, AX
	VMOVD        AX, X14
	VPBROADCASTD X14, Y14
	MOVL         $0x78787878, AX // 120
	VMOVD        AX, X13
	VPBROADCASTD X13, Y13
	TESTQ        CX, CX
	JZ           uq40done

uq40loop:
	VMOVDQU      2(SI), X0
	VPSRLW       $4, X0, X1
	VINSERTI128  $1, X1, Y0, Y0
	VPAND        Y14, Y0, Y0
	VPADDB       Y13, Y0, Y0
	VMOVDQU      Y0, (DI)
	VPBROADCASTW (SI), X1
	VCVTPH2PS    X1, Y1
	VMOVUPS      Y1, (R8)
	ADDQ         $18, SI
	ADDQ         $32, DI
	ADDQ         $32, R8
	DECQ         CX
	JNZ          uq40loop

uq40done:
	VZEROUPPER
	RET
