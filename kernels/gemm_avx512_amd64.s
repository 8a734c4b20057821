//go:build amd64 && !purego

#include "textflag.h"
#include "intdot_amd64.h"

// GEMM register tiles: one row against 8 vectors. Vector t accumulates its
// 32 canonical lanes in Z(2t) (lanes 0-15) and Z(2t+1) (lanes 16-31), the
// same lanes as the matrix-vector kernels, so each result is the same bits.

#define ZERO16 \
	VPXORD Z0, Z0, Z0; \
	VPXORD Z1, Z1, Z1; \
	VPXORD Z2, Z2, Z2; \
	VPXORD Z3, Z3, Z3; \
	VPXORD Z4, Z4, Z4; \
	VPXORD Z5, Z5, Z5; \
	VPXORD Z6, Z6, Z6; \
	VPXORD Z7, Z7, Z7; \
	VPXORD Z8, Z8, Z8; \
	VPXORD Z9, Z9, Z9; \
	VPXORD Z10, Z10, Z10; \
	VPXORD Z11, Z11, Z11; \
	VPXORD Z12, Z12, Z12; \
	VPXORD Z13, Z13, Z13; \
	VPXORD Z14, Z14, Z14; \
	VPXORD Z15, Z15, Z15

// MOVEUP copies the accumulators Z0-Z15 to Z16-Z31, freeing Z0-Z3 for the
// fold.
#define MOVEUP \
	VMOVAPS Z0, Z16; \
	VMOVAPS Z1, Z17; \
	VMOVAPS Z2, Z18; \
	VMOVAPS Z3, Z19; \
	VMOVAPS Z4, Z20; \
	VMOVAPS Z5, Z21; \
	VMOVAPS Z6, Z22; \
	VMOVAPS Z7, Z23; \
	VMOVAPS Z8, Z24; \
	VMOVAPS Z9, Z25; \
	VMOVAPS Z10, Z26; \
	VMOVAPS Z11, Z27; \
	VMOVAPS Z12, Z28; \
	VMOVAPS Z13, Z29; \
	VMOVAPS Z14, Z30; \
	VMOVAPS Z15, Z31

// FOLDOUT folds one vector's lanes (LO, HI) and stores the sum at off(DX).
#define FOLDOUT(LO, HI, off) \
	VMOVAPS LO, Z0; \
	VMOVAPS HI, Z1; \
	FOLD512; \
	HSUM8; \
	VMOVSS  X0, off(DX)

#define FOLDALL \
	MOVEUP; \
	FOLDOUT(Z16, Z17, 0); \
	FOLDOUT(Z18, Z19, 4); \
	FOLDOUT(Z20, Z21, 8); \
	FOLDOUT(Z22, Z23, 12); \
	FOLDOUT(Z24, Z25, 16); \
	FOLDOUT(Z26, Z27, 20); \
	FOLDOUT(Z28, Z29, 24); \
	FOLDOUT(Z30, Z31, 28)

// F32TOK: 32 values of vector P against the row's in Z16, Z17: products
// rounded, then added.
#define F32TOK(P, LO, HI) \
	VMULPS (P)(AX*1), Z16, Z18; \
	VADDPS Z18, LO, LO; \
	VMULPS 64(P)(AX*1), Z17, Z19; \
	VADDPS Z19, HI, HI

// func gemmF32AVX512(w *float32, n int, x *float32, xStride int, out *[8]float32)
TEXT ·gemmF32AVX512(SB), NOSPLIT, $0-40
	MOVQ w+0(FP), SI
	MOVQ n+8(FP), CX
	MOVQ x+16(FP), DI
	MOVQ xStride+24(FP), BX
	MOVQ out+32(FP), DX
	LEAQ (DI)(BX*1), R8
	LEAQ (R8)(BX*1), R9
	LEAQ (R9)(BX*1), R10
	LEAQ (R10)(BX*1), R11
	LEAQ (R11)(BX*1), R12
	LEAQ (R12)(BX*1), R13
	LEAQ (R13)(BX*1), R14
	ZERO16
	XORQ AX, AX
	SHRQ $5, CX
	JZ   f32fold

f32loop:
	VMOVUPS (SI)(AX*1), Z16
	VMOVUPS 64(SI)(AX*1), Z17
	F32TOK(DI, Z0, Z1)
	F32TOK(R8, Z2, Z3)
	F32TOK(R9, Z4, Z5)
	F32TOK(R10, Z6, Z7)
	F32TOK(R11, Z8, Z9)
	F32TOK(R12, Z10, Z11)
	F32TOK(R13, Z12, Z13)
	F32TOK(R14, Z14, Z15)
	ADDQ $128, AX
	DECQ CX
	JNZ  f32loop

f32fold:
	FOLDALL
	VZEROUPPER
	RET

// I8TOK: vector t of the packed pair (codes at 192t(DI), negated 4-code
// sums at 192t+64, lane scales at 192t+128) against the unpacked row pair
// (u+128 codes in Z16, factors W in Z17): L = sum u*x - 128*sum x, exact;
// ACC += round(float32(L) * round(W * dx)).
#define I8TOK(t, ACC) \
	VPSLLD    $7, (192*t+64)(DI), Z18; \
	VPDPBUSD  (192*t)(DI), Z16, Z18; \
	VCVTDQ2PS Z18, Z18; \
	VMULPS    (192*t+128)(DI), Z17, Z19; \
	VMULPS    Z19, Z18, Z18; \
	VADDPS    Z18, ACC, ACC

#define I8PAIR(A0, A1, A2, A3, A4, A5, A6, A7) \
	VMOVDQU64 (SI), Z16; \
	VMOVUPS   (BX), Z17; \
	I8TOK(0, A0); \
	I8TOK(1, A1); \
	I8TOK(2, A2); \
	I8TOK(3, A3); \
	I8TOK(4, A4); \
	I8TOK(5, A5); \
	I8TOK(6, A6); \
	I8TOK(7, A7); \
	ADDQ      $64, SI; \
	ADDQ      $64, BX; \
	ADDQ      $1536, DI

// func gemmI8VNNI(u *byte, wf *float32, npairs int, xp *byte, out *[8]float32)
// Pairs alternate between lanes 0-15 (blocks b mod 4 = 0, 1) and 16-31.
TEXT ·gemmI8VNNI(SB), NOSPLIT, $0-40
	MOVQ u+0(FP), SI
	MOVQ wf+8(FP), BX
	MOVQ npairs+16(FP), CX
	MOVQ xp+24(FP), DI
	MOVQ out+32(FP), DX
	ZERO16
	MOVQ CX, R8
	SHRQ $1, R8
	JZ   i8tail

i8loop:
	I8PAIR(Z0, Z2, Z4, Z6, Z8, Z10, Z12, Z14)
	I8PAIR(Z1, Z3, Z5, Z7, Z9, Z11, Z13, Z15)
	DECQ R8
	JNZ  i8loop

i8tail:
	TESTQ $1, CX
	JZ    i8fold
	I8PAIR(Z0, Z2, Z4, Z6, Z8, Z10, Z12, Z14)

i8fold:
	FOLDALL
	VZEROUPPER
	RET

// func q4kMinsAVX2(m *float32, nsb int, d, bs *float32, stride int, out *[8]float32)
// For each of 8 vectors: lanes j += round(round(M_b * dx_b) * bs_b) over the
// super-blocks (b = 8sb + j), then the 8-lane fold.
TEXT ·q4kMinsAVX2(SB), NOSPLIT, $0-48
	MOVQ d+16(FP), DI
	MOVQ bs+24(FP), R8
	MOVQ stride+32(FP), BX
	MOVQ out+40(FP), DX
	MOVQ $8, R9

minstok:
	MOVQ   m+0(FP), SI
	MOVQ   nsb+8(FP), CX
	MOVQ   DI, R10
	MOVQ   R8, R11
	VXORPS Y0, Y0, Y0

minssb:
	VMOVUPS (SI), Y2
	VMULPS  (R10), Y2, Y2
	VMULPS  (R11), Y2, Y2
	VADDPS  Y2, Y0, Y0
	ADDQ    $32, SI
	ADDQ    $32, R10
	ADDQ    $32, R11
	DECQ    CX
	JNZ     minssb

	HSUM8
	VMOVSS X0, (DX)
	ADDQ   $4, DX
	ADDQ   BX, DI
	ADDQ   BX, R8
	DECQ   R9
	JNZ    minstok
	VZEROUPPER
	RET
