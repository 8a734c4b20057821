// Macros shared by the integer-dot and GEMM kernels (intdot_*_amd64.s,
// gemm_*_amd64.s). fold_test.go interprets FOLD32TO8, HSUM8 and FOLD512 from
// this file in pure Go, so a wrong fold fails on machines that cannot run it.

// Step 2 of the canonical orders, AVX2: Y0 = (lanes 0-7 + lanes 8-15) +
// (lanes 16-23 + lanes 24-31) with lanes 8i..8i+7 in Y(i).
#define FOLD32TO8 \
	VADDPS Y1, Y0, Y0; \
	VADDPS Y3, Y2, Y2; \
	VADDPS Y2, Y0, Y0

// Step 2, AVX-512, with lanes 0-15 in Z0 and 16-31 in Z1: leaves Y0.
#define FOLD512 \
	VEXTRACTF64X4 $1, Z0, Y2; \
	VADDPS        Y2, Y0, Y0; \
	VEXTRACTF64X4 $1, Z1, Y3; \
	VADDPS        Y3, Y1, Y1; \
	VADDPS        Y1, Y0, Y0

// The last step: X0[0] = ((v0+v4) + (v2+v6)) + ((v1+v5) + (v3+v7)) for v
// in Y0. Uses X1.
#define HSUM8 \
	VEXTRACTF128 $1, Y0, X1; \
	VADDPS       X1, X0, X0; \
	VMOVHLPS     X0, X0, X1; \
	VADDPS       X1, X0, X0; \
	VMOVSHDUP    X0, X1; \
	VADDSS       X1, X0, X0

// The arguments of every row kernel:
// func(w unsafe.Pointer, stride, rows int, x *actView, out *float32).
// SI: row 0, R10: rows, R11: x, R12: out.
#define ROWS_ARGS \
	MOVQ w+0(FP), SI; \
	MOVQ rows+16(FP), R10; \
	MOVQ x+24(FP), R11; \
	MOVQ out+32(FP), R12

// Per row: BX = the row, DI = activation codes, DX = their scales, R13 =
// their block sums, CX = blocks of 32.
#define ROW_SETUP \
	MOVQ SI, BX; \
	MOVQ 0(R11), DI; \
	MOVQ 8(R11), DX; \
	MOVQ 16(R11), R13; \
	MOVQ 24(R11), CX

// ROW_NEXT stores X0[0] and moves to the next row.
#define ROW_NEXT \
	VMOVSS X0, (R12); \
	ADDQ   $4, R12; \
	ADDQ   stride+8(FP), SI; \
	DECQ   R10

// BCAST32(value, X, Y) broadcasts a 32-bit constant to every lane of Y.
#define BCAST32(value, X, Y) \
	MOVL         $value, AX; \
	VMOVD        AX, X; \
	VPBROADCASTD X, Y
