//go:build amd64 && !purego

#include "textflag.h"
#include "intdot_amd64.h"

// AVX-512 VNNI integer-dot row kernels (the order is in intdot.go). The 32
// float lanes are Z0 (lanes 0-15) and Z1 (16-31): one register holds two
// consecutive blocks, so blocks b, b+1 with b mod 4 = 0 add to Z0 and b+2,
// b+3 to Z1. A block's 8 exact int32 group sums come from VPDPBUSD
// (unsigned byte times signed byte, four adjacent products summed into
// int32): group i = values 4i..4i+3, as in the AVX2 kernels. A lone last
// block adds to the low half only, through mask K1.
//
// Constants: Z31 = bytes 0x80, Z29 = bytes 0x0f, Z20-Z23 = pair index p:
// dwords [2p x8, 2p+1 x8].

DATA pairIdx<>+0(SB)/8, $0
DATA pairIdx<>+8(SB)/8, $0
DATA pairIdx<>+16(SB)/8, $0
DATA pairIdx<>+24(SB)/8, $0
DATA pairIdx<>+32(SB)/8, $0x0000000100000001
DATA pairIdx<>+40(SB)/8, $0x0000000100000001
DATA pairIdx<>+48(SB)/8, $0x0000000100000001
DATA pairIdx<>+56(SB)/8, $0x0000000100000001
GLOBL pairIdx<>(SB), RODATA|NOPTR, $64

// quadIdx: dwords [4p x4, 4p+1 x4, 4p+2 x4, 4p+3 x4] for p = 0 (add 4p).
DATA quadIdx<>+0(SB)/8, $0
DATA quadIdx<>+8(SB)/8, $0
DATA quadIdx<>+16(SB)/8, $0x0000000100000001
DATA quadIdx<>+24(SB)/8, $0x0000000100000001
DATA quadIdx<>+32(SB)/8, $0x0000000200000002
DATA quadIdx<>+40(SB)/8, $0x0000000200000002
DATA quadIdx<>+48(SB)/8, $0x0000000300000003
DATA quadIdx<>+56(SB)/8, $0x0000000300000003
GLOBL quadIdx<>(SB), RODATA|NOPTR, $64

// nibShift: word shift counts [0 x8, 4 x8, 0 x8, 4 x8]: the second copy of
// each block's 16 bytes gives the high nibbles.
DATA nibShift<>+0(SB)/8, $0
DATA nibShift<>+8(SB)/8, $0
DATA nibShift<>+16(SB)/8, $0x0004000400040004
DATA nibShift<>+24(SB)/8, $0x0004000400040004
DATA nibShift<>+32(SB)/8, $0
DATA nibShift<>+40(SB)/8, $0
DATA nibShift<>+48(SB)/8, $0x0004000400040004
DATA nibShift<>+56(SB)/8, $0x0004000400040004
GLOBL nibShift<>(SB), RODATA|NOPTR, $64

#define ZERO2 \
	VPXORD Z0, Z0, Z0; \
	VPXORD Z1, Z1, Z1

// CONSTS loads Z20-Z23, Z29, Z31, K1 = the low 8 lanes and K2 = the high 8
// lanes (of 16). Uses AX.
#define CONSTS \
	VMOVDQU32    pairIdx<>(SB), Z20; \
	MOVL         $2, AX; \
	VPBROADCASTD AX, Z24; \
	VPADDD       Z24, Z20, Z21; \
	VPADDD       Z24, Z21, Z22; \
	VPADDD       Z24, Z22, Z23; \
	MOVL         $0x80808080, AX; \
	VPBROADCASTD AX, Z31; \
	MOVL         $0x0f0f0f0f, AX; \
	VPBROADCASTD AX, Z29; \
	MOVL         $0xff, AX; \
	KMOVW        AX, K1; \
	MOVL         $0xff00, AX; \
	KMOVW        AX, K2

// PAIR_F16xF32(h0, h1, foff): Z6 = [d0*dx0 x8, d1*dx1 x8], d0 and d1 the
// f16 at h0(BX) and h1(BX), dx0 and dx1 the f32 pair at foff(DX). K2
// selects the upper 8 of 16 lanes.
#define PAIR_F16xF32(h0, h1, foff) \
	VPBROADCASTW (h0)(BX), Y6; \
	VPBROADCASTW (h1)(BX), K2, Y6; \
	VCVTPH2PS    Y6, Z6; \
	VBROADCASTSS (foff)(DX), Z7; \
	VBROADCASTSS (foff+4)(DX), K2, Z7; \
	VMULPS       Z7, Z6, Z6

// ONE_F16xF32(h0, foff): Y6 = d0*dx0 in 8 lanes.
#define ONE_F16xF32(h0, foff) \
	VPBROADCASTW (h0)(BX), X6; \
	VCVTPH2PS    X6, Y6; \
	VBROADCASTSS (foff)(DX), Y7; \
	VMULPS       Y7, Y6, Y6

// SCALES4(bs): for the 4 blocks of bs bytes at BX, their f16 scales d
// times the activation scales dx at DX: Z10 = [d0*dx0 x8, d1*dx1 x8], Z11 =
// [d2*dx2 x8, d3*dx3 x8], each product rounded once. Uses AX, R9, Z6.
#define SCALES4(bs) \
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
	VMULPS    (DX), X6, X6; \
	VPERMPS   Z6, Z20, Z10; \
	VPERMPS   Z6, Z21, Z11

// SCALED_ACC: ACC += round(float32(Z4) * SC).
#define SCALED_ACC(SC, ACC) \
	VCVTDQ2PS Z4, Z4; \
	VMULPS    SC, Z4, Z4; \
	VADDPS    Z4, ACC, ACC

// PAIR_ACC: ACC += round(float32(Z4) * Z6).
#define PAIR_ACC(ACC) \
	VCVTDQ2PS Z4, Z4; \
	VMULPS    Z6, Z4, Z4; \
	VADDPS    Z4, ACC, ACC

// ONE_ACC: the low 8 lanes of ACC += round(float32(Y4) * Y6).
#define ONE_ACC(ACC) \
	VCVTDQ2PS Y4, Y4; \
	VMULPS    Y6, Y4, Y4; \
	VADDPS    Z4, ACC, K1, ACC

// Q8_0: signed times signed. w+128 = w^0x80 is unsigned, and
// sum (w+128)*x - 128*sum x = sum w*x; the accumulator starts at -128*sum x
// (R13 points at the negated 4-code sums of x).
#define Q80PAIR(boff, xoff, doff, ACC) \
	VMOVDQU      (boff+2)(BX), Y8; \
	VINSERTI64X4 $1, (boff+36)(BX), Z8, Z8; \
	VPXORD       Z31, Z8, Z8; \
	VPSLLD       $7, (xoff)(R13), Z4; \
	VPDPBUSD     (xoff)(DI), Z8, Z4; \
	PAIR_F16xF32(boff, boff+34, doff); \
	PAIR_ACC(ACC)

// Q80PAIRS is Q80PAIR with the scales given in SC (from SCALES4).
#define Q80PAIRS(boff, xoff, SC, ACC) \
	VMOVDQU      (boff+2)(BX), Y8; \
	VINSERTI64X4 $1, (boff+36)(BX), Z8, Z8; \
	VPXORD       Z31, Z8, Z8; \
	VPSLLD       $7, (xoff)(R13), Z4; \
	VPDPBUSD     (xoff)(DI), Z8, Z4; \
	SCALED_ACC(SC, ACC)

// A lone block: EVEX 256-bit integer ops.
#define Q80ONE(boff, xoff, doff, ACC) \
	VMOVDQU  (boff+2)(BX), Y8; \
	VPXORD   Y31, Y8, Y8; \
	VPSLLD   $7, (xoff)(R13), Y4; \
	VPDPBUSD (xoff)(DI), Y8, Y4; \
	ONE_F16xF32(boff, doff); \
	ONE_ACC(ACC)

// func q80RowsVNNI(w unsafe.Pointer, stride, rows int, x *actView, out *float32)
TEXT ·q80RowsVNNI(SB), NOSPLIT, $0-40
	ROWS_ARGS
	CONSTS
	TESTQ R10, R10
	JZ    q80done

q80row:
	ROW_SETUP
	MOVQ 56(R11), R13
	ZERO2
	MOVQ CX, R8
	SHRQ $2, R8
	JZ   q80tail

q80loop:
	SCALES4(34)
	Q80PAIRS(0, 0, Z10, Z0)
	Q80PAIRS(68, 64, Z11, Z1)
	ADDQ $136, BX
	ADDQ $128, DI
	ADDQ $128, R13
	ADDQ $16, DX
	DECQ R8
	JNZ  q80loop

q80tail:
	ANDQ $3, CX
	CMPQ CX, $2
	JB   q80single
	Q80PAIR(0, 0, 0, Z0)
	CMPQ CX, $3
	JNE  q80fold
	Q80ONE(68, 64, 8, Z1)
	JMP  q80fold

q80single:
	TESTQ CX, CX
	JZ    q80fold
	Q80ONE(0, 0, 0, Z0)

q80fold:
	FOLD512
	HSUM8
	ROW_NEXT
	JNZ q80row

q80done:
	VZEROUPPER
	RET

// Q4_0: codes nibble-8: sum (q-8)x = sum q*x - 8*sum x, starting from
// -8*sum x.
#define Q40INT(W, xoff) \
	VPSLLD   $3, (xoff)(R13), Z4; \
	VPDPBUSD (xoff)(DI), W, Z4

// Z8 = the two blocks' nibbles in value order: 128-bit lanes [qs0 low,
// qs0 high, qs1 low, qs1 high].
#define Q40PAIR(boff, xoff, doff, ACC) \
	VMOVDQU      (boff+2)(BX), X8; \
	VINSERTI128  $1, (boff+20)(BX), Y8, Y8; \
	VPSRLW       $4, Y8, Y9; \
	VINSERTI64X4 $1, Y9, Z8, Z8; \
	VSHUFI64X2   $0xd8, Z8, Z8, Z8; \
	VPANDD       Z29, Z8, Z8; \
	Q40INT(Z8, xoff); \
	PAIR_F16xF32(boff, boff+18, doff); \
	PAIR_ACC(ACC)

// Q40PAIRS is Q40PAIR with the scales given in SC (from SCALES4), and the
// nibbles arranged without shuffles: each block's 16 bytes broadcast to two
// 128-bit lanes (the second block's through mask K2), the second lane of
// each shifted right by 4 (Z28), then masked.
#define Q40PAIRS(boff, xoff, SC, ACC) \
	VBROADCASTI32X4 (boff+2)(BX), Z8; \
	VBROADCASTI32X4 (boff+20)(BX), K2, Z8; \
	VPSRLVW         Z28, Z8, Z8; \
	VPANDD          Z29, Z8, Z8; \
	Q40INT(Z8, xoff); \
	SCALED_ACC(SC, ACC)

// A lone block reads 32 codes only: EVEX 256-bit ops.
#define Q40ONE(boff, xoff, doff, ACC) \
	VMOVDQU     (boff+2)(BX), X8; \
	VPSRLW      $4, X8, X9; \
	VINSERTI128 $1, X9, Y8, Y8; \
	VPANDD      Y29, Y8, Y8; \
	VPSLLD      $3, (xoff)(R13), Y4; \
	VPDPBUSD    (xoff)(DI), Y8, Y4; \
	ONE_F16xF32(boff, doff); \
	ONE_ACC(ACC)

// func q40RowsVNNI(w unsafe.Pointer, stride, rows int, x *actView, out *float32)
TEXT ·q40RowsVNNI(SB), NOSPLIT, $0-40
	ROWS_ARGS
	CONSTS
	VMOVDQU64    nibShift<>(SB), Z28
	TESTQ        R10, R10
	JZ           q40done

q40row:
	ROW_SETUP
	MOVQ 56(R11), R13
	ZERO2
	MOVQ CX, R8
	SHRQ $2, R8
	JZ   q40tail

q40loop:
	SCALES4(18)
	Q40PAIRS(0, 0, Z10, Z0)
	Q40PAIRS(36, 64, Z11, Z1)
	ADDQ $72, BX
	ADDQ $128, DI
	ADDQ $128, R13
	ADDQ $16, DX
	DECQ R8
	JNZ  q40loop

q40tail:
	ANDQ $3, CX
	CMPQ CX, $2
	JB   q40single
	Q40PAIR(0, 0, 0, Z0)
	CMPQ CX, $3
	JNE  q40fold
	Q40ONE(36, 64, 8, Z1)
	JMP  q40fold

q40single:
	TESTQ CX, CX
	JZ    q40fold
	Q40ONE(0, 0, 0, Z0)

q40fold:
	FOLD512
	HSUM8
	ROW_NEXT
	JNZ q40row

q40done:
	VZEROUPPER
	RET

// Q4KCH: chunk c's 32 bytes: low nibbles block 2c, high nibbles block 2c+1,
// their scales lanes 2c and 2c+1 of Z10 (S = (d*sc_j)*dx_b), picked by
// pair index IDX.
#define Q4KCH(c, IDX, ACC) \
	VMOVDQU      (16+32*c)(BX), Y8; \
	VPSRLW       $4, Y8, Y9; \
	VINSERTI64X4 $1, Y9, Z8, Z8; \
	VPANDD       Z29, Z8, Z8; \
	VPXORD       Z4, Z4, Z4; \
	VPDPBUSD     (64*c)(DI), Z8, Z4; \
	VPERMPS      Z10, IDX, Z6; \
	PAIR_ACC(ACC)

// func q4kRowsVNNI(w unsafe.Pointer, stride, rows int, x *actView, out *float32)
// Y11 holds the minimums' 8 lanes.
TEXT ·q4kRowsVNNI(SB), NOSPLIT, $0-40
	ROWS_ARGS
	CONSTS
	TESTQ R10, R10
	JZ    q4kdone

q4krow:
	ROW_SETUP
	ZERO2
	VXORPS Y11, Y11, Y11
	SHRQ   $3, CX

q4ksb:
	MOVL  4(BX), AX
	MOVL  12(BX), R8
	MOVL  AX, R9
	SHRL  $2, R9
	ANDL  $0x30303030, R9
	MOVL  R8, R14
	ANDL  $0x0f0f0f0f, R14
	ORL   R9, R14
	SHLQ  $32, R14
	ANDL  $0x3f3f3f3f, AX
	ORQ   R14, AX
	VMOVQ AX, X5 // scales 0-7
	MOVL  8(BX), AX
	MOVL  AX, R9
	SHRL  $2, R9
	ANDL  $0x30303030, R9
	SHRL  $4, R8
	ANDL  $0x0f0f0f0f, R8
	ORL   R9, R8
	SHLQ  $32, R8
	ANDL  $0x3f3f3f3f, AX
	ORQ   R8, AX
	VMOVQ AX, X7 // mins 0-7

	VPBROADCASTW (BX), X6
	VCVTPH2PS    X6, Y6
	VPMOVZXBD    X5, Y10
	VCVTDQ2PS    Y10, Y10
	VMULPS       Y6, Y10, Y10 // d*sc_j, exact
	VMULPS       (DX), Y10, Y10
	VPBROADCASTW 2(BX), X6
	VCVTPH2PS    X6, Y6
	VPMOVZXBD    X7, Y5
	VCVTDQ2PS    Y5, Y5
	VMULPS       Y6, Y5, Y5 // dmin*mn_j, exact
	VMULPS       (DX), Y5, Y5
	VMULPS       (R13), Y5, Y5
	VADDPS       Y5, Y11, Y11

	Q4KCH(0, Z20, Z0)
	Q4KCH(1, Z21, Z1)
	Q4KCH(2, Z22, Z0)
	Q4KCH(3, Z23, Z1)
	ADDQ $144, BX
	ADDQ $256, DI
	ADDQ $32, DX
	ADDQ $32, R13
	DECQ CX
	JNZ  q4ksb

	FOLD512
	HSUM8
	VMOVAPS X0, X10
	VMOVAPS Y11, Y0
	HSUM8
	VSUBSS  X0, X10, X0
	ROW_NEXT
	JNZ     q4krow

q4kdone:
	VZEROUPPER
	RET

// Q6KPAIR: pair p of the super-block (blocks 2p, 2p+1), codes in Z8 (0..63);
// sum (q-32)x = sum q*x - 32*sum x, starting from -32*sum x. Scales: lanes 4q..4q+3 of the pair take
// Dsc[4p+q] (Z10, index Z24 + 4p) times dx of their block (Z11, index IDX).
#define Q6KPAIR(p, IDX, ACC) \
	VPSLLD       $5, (64*(p))(R13), Z4; \
	VPDPBUSD     (64*(p))(DI), Z8, Z4; \
	MOVL         $(4*(p)), AX; \
	VPBROADCASTD AX, Z6; \
	VPADDD       Z24, Z6, Z6; \
	VPERMPS      Z10, Z6, Z6; \
	VPERMPS      Z11, IDX, Z7; \
	VMULPS       Z7, Z6, Z6; \
	PAIR_ACC(ACC)

// Q6KHALF: half h: ql (64 bytes) in Z12, qh (32) in Y13; quarters 0 and 1
// take low nibbles and qh bits 0-1 and 2-3, quarters 2 and 3 high nibbles
// and bits 4-5 and 6-7 (moved to bits 4-5; 0x30 bytes in Z25).
#define Q6KHALF(h, IDX0, IDX1, ACC0, ACC1) \
	VMOVDQU64    (64*h)(BX), Z12; \
	VMOVDQU      (128+32*h)(BX), Y13; \
	VPSLLW       $4, Y13, Y14; \
	VPSLLW       $2, Y13, Y15; \
	VINSERTI64X4 $1, Y15, Z14, Z14; \
	VPANDD       Z25, Z14, Z14; \
	VPANDD       Z29, Z12, Z8; \
	VPORD        Z14, Z8, Z8; \
	Q6KPAIR(2*h, IDX0, ACC0); \
	VPSRLW       $2, Y13, Y15; \
	VINSERTI64X4 $1, Y15, Z13, Z14; \
	VPANDD       Z25, Z14, Z14; \
	VPSRLW       $4, Z12, Z8; \
	VPANDD       Z29, Z8, Z8; \
	VPORD        Z14, Z8, Z8; \
	Q6KPAIR(2*h+1, IDX1, ACC1)

// func q6kRowsVNNI(w unsafe.Pointer, stride, rows int, x *actView, out *float32)
TEXT ·q6kRowsVNNI(SB), NOSPLIT, $0-40
	ROWS_ARGS
	CONSTS
	VMOVDQU32    quadIdx<>(SB), Z24
	MOVL         $0x30303030, AX
	VPBROADCASTD AX, Z25
	TESTQ        R10, R10
	JZ           q6kdone

q6krow:
	ROW_SETUP
	MOVQ 56(R11), R13
	ZERO2
	SHRQ $3, CX

q6ksb:
	VPMOVSXBD    192(BX), Z10
	VCVTDQ2PS    Z10, Z10
	VPBROADCASTW 208(BX), Y6
	VCVTPH2PS    Y6, Z6
	VMULPS       Z6, Z10, Z10 // Dsc = d*sc_k, exact
	VMOVUPS      (DX), Y11
	Q6KHALF(0, Z20, Z21, Z0, Z1)
	Q6KHALF(1, Z22, Z23, Z0, Z1)
	ADDQ         $210, BX
	ADDQ         $256, DI
	ADDQ         $256, R13
	ADDQ         $32, DX
	DECQ         CX
	JNZ          q6ksb

	FOLD512
	HSUM8
	ROW_NEXT
	JNZ q6krow

q6kdone:
	VZEROUPPER
	RET

// Q8GPAIR: blocks b, b+1 (64 int8 at boff(BX)) of a Q8G row whose groups
// hold an even number of blocks, so both blocks share the scale at (AX).
// Signed times signed as for Q8_0.
#define Q8GPAIR(boff, xoff, doff, ACC) \
	VMOVDQU64    (boff)(BX), Z8; \
	VPXORD       Z31, Z8, Z8; \
	VPSLLD       $7, (xoff)(R13), Z4; \
	VPDPBUSD     (xoff)(DI), Z8, Z4; \
	VBROADCASTSS (AX), Z6; \
	VBROADCASTSS (doff)(DX), Z7; \
	VBROADCASTSS (doff+4)(DX), K2, Z7; \
	VMULPS       Z7, Z6, Z6; \
	PAIR_ACC(ACC)

// func q8gRowsVNNI(w unsafe.Pointer, stride, rows int, x *actView, out *float32)
// Q8G rows of whole groups of spg blocks, spg even (the caller checks); the
// group scales of row r are at x.sc + r*x.scRow. R14 = spg/2 pairs per
// group, R8 counts the pairs left in the current group, AX its scale.
TEXT ·q8gRowsVNNI(SB), NOSPLIT, $0-40
	ROWS_ARGS
	CONSTS
	MOVQ  32(R11), R9
	MOVQ  48(R11), R14
	SHRQ  $1, R14
	TESTQ R10, R10
	JZ    q8gdone

q8grow:
	ROW_SETUP
	MOVQ 56(R11), R13
	ZERO2
	MOVQ R9, AX
	MOVQ R14, R8
	SHRQ $1, CX // pairs

q8gloop:
	Q8GPAIR(0, 0, 0, Z0)
	DECQ R8
	JNZ  q8gsame1
	ADDQ $4, AX
	MOVQ R14, R8

q8gsame1:
	DECQ CX
	JZ   q8gfold
	Q8GPAIR(64, 64, 8, Z1)
	DECQ R8
	JNZ  q8gsame2
	ADDQ $4, AX
	MOVQ R14, R8

q8gsame2:
	ADDQ $128, BX
	ADDQ $128, DI
	ADDQ $16, DX
	ADDQ $128, R13
	DECQ CX
	JNZ  q8gloop

q8gfold:
	FOLD512
	HSUM8
	ADDQ 40(R11), R9
	ROW_NEXT
	JNZ  q8grow

q8gdone:
	VZEROUPPER
	RET
