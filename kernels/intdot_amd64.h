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
// SI: row 0, R10: rows, R11: x, R12: out; and the first rows asked for
// (START_PREFETCH).
#define ROWS_ARGS \
	MOVQ w+0(FP), SI; \
	MOVQ rows+16(FP), R10; \
	MOVQ x+24(FP), R11; \
	MOVQ out+32(FP), R12; \
	START_PREFETCH

// START_PREFETCH asks for the first startPrefetch bytes of the rows (all
// of them when they are fewer) at once, PREFETCHT0 per 64 bytes: the
// start of a range is where the hardware's prefetchers have nothing to go
// on yet, and on two threads each thread's range of a decode product
// starts cold (see startPrefetch in prefetch.go). Uses AX and R9.
#define START_PREFETCH \
	MOVQ       stride+8(FP), R9; \
	IMULQ      R10, R9; \
	MOVQ       ·startPrefetch(SB), AX; \
	CMPQ       AX, R9; \
	CMOVQLT    AX, R9; \
	TESTQ      R9, R9; \
	JEQ        7(PC); \
	MOVQ       SI, AX; \
	ADDQ       SI, R9; \
	PREFETCHT0 (AX); \
	ADDQ       $64, AX; \
	CMPQ       AX, R9; \
	JCS        -3(PC)

// Per row: BX = the row, DI = activation codes, DX = their scales, R13 =
// their block sums, CX = blocks of 32; and the row rowPrefetch bytes ahead
// asked for (ROW_PREFETCH).
#define ROW_SETUP \
	MOVQ SI, BX; \
	MOVQ 0(R11), DI; \
	MOVQ 8(R11), DX; \
	MOVQ 16(R11), R13; \
	MOVQ 24(R11), CX; \
	ROW_PREFETCH

// ROW_PREFETCH asks for the stride bytes at SI + rowPrefetch (none when
// rowPrefetch is 0) into the L2 cache, a PREFETCHT1 per 64 bytes: see
// rowPrefetch in prefetch.go. Each row asks for the row as far ahead
// as rowPrefetch, so every line of a long range is asked for once, and the
// last rows ask for bytes past the range (a prefetch never faults). Uses
// AX and R9.
#define ROW_PREFETCH \
	MOVQ       ·rowPrefetch(SB), AX; \
	TESTQ      AX, AX; \
	JEQ        8(PC); \
	ADDQ       SI, AX; \
	MOVQ       stride+8(FP), R9; \
	ADDQ       AX, R9; \
	PREFETCHT1 (AX); \
	ADDQ       $64, AX; \
	CMPQ       AX, R9; \
	JCS        -3(PC)

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

// The integer-dot order's fold (intdot.go, step 3): X0[0] = (l0 + l2) +
// (l1 + l3) for the 4 lanes l of X0. Uses X1.
#define HSUM4 \
	VMOVHLPS  X0, X0, X1; \
	VADDPS    X1, X0, X0; \
	VMOVSHDUP X0, X1; \
	VADDSS    X1, X0, X0

// REDUCE4: the 4 units' exact int32 sums from their 8-lane partial sums in
// Y4, Y5, Y6, Y7: X4 = [sum Y4, sum Y5, sum Y6, sum Y7]. Uses Y5, Y6.
#define REDUCE4 \
	VPHADDD      Y5, Y4, Y4; \
	VPHADDD      Y7, Y6, Y6; \
	VPHADDD      Y6, Y4, Y4; \
	VEXTRACTI128 $1, Y4, X5; \
	VPADDD       X5, X4, X4

// ACC4: X0 += round(float32(X4) * X6), the 4 units' products rounded, then
// added to the 4 lanes.
#define ACC4 \
	VCVTDQ2PS X4, X4; \
	VMULPS    X6, X4, X4; \
	VADDPS    X4, X0, X0

// F16SCALES4(bs): X6 = d_k * dx_k for the 4 blocks of bs bytes at BX, d_k
// their leading f16 scales and dx_k the 4 floats at DX, each product rounded
// once. Uses AX, R9.
#define F16SCALES4(bs) \
	MOVWLZX   (3*bs)(BX), AX; \
	SHLQ      $16, AX; \
	MOVWLZX   (2*bs)(BX), R9; \
	ORQ       R9, AX; \
	SHLQ      $16, AX; \
	MOVWLZX   (bs)(BX), R9; \
	ORQ       R9, AX; \
	SHLQ      $16, AX; \
	MOVWLZX   (BX), R9; \
	ORQ       R9, AX; \
	VMOVQ     AX, X6; \
	VCVTPH2PS X6, X6; \
	VMULPS    (DX), X6, X6

// REDUCE1: X4[0] = the sum of Y4's 8 int32 lanes (a lone unit of a row's
// last, partial group of 4). Uses X5.
#define REDUCE1 \
	VEXTRACTI128 $1, Y4, X5; \
	VPADDD       X5, X4, X4; \
	VPHADDD      X4, X4, X4; \
	VPHADDD      X4, X4, X4

// F16SCALE1: X6[0] = d * dx for the block at BX (f16 scale d) and the float
// dx at DX.
#define F16SCALE1 \
	VPBROADCASTW (BX), X6; \
	VCVTPH2PS    X6, X6; \
	VMULSS       (DX), X6, X6

// ADDLANE(ins): lane k of X0 += round(float32(X4[0]) * X6[0]), ins the
// VINSERTPS immediate putting element 0 at lane k and zeroing the others
// (k = 0, 1, 2: 0x0e, 0x1d, 0x2b). The other lanes get +0, which changes
// no lane (a lane is never -0). Uses X4, X7.
#define ADDLANE(ins) \
	VCVTDQ2PS X4, X4; \
	VMULSS    X6, X4, X4; \
	VINSERTPS $ins, X4, X7, X7; \
	VADDPS    X7, X0, X0
