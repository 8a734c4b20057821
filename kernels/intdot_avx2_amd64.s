//go:build amd64 && !purego

#include "textflag.h"
#include "intdot_amd64.h"

// AVX2 integer-dot row kernels (the order is in intdot.go). The 32 float
// lanes are Y0-Y3, block b adding to Y(b mod 4). A block's 8 exact int32
// group sums come from VPMADDUBSW (unsigned byte times signed byte, adjacent
// pairs summed to int16; no pair here can saturate) and VPMADDWD by ones
// (adjacent int16 pairs to int32): group i = values 4i..4i+3.
//
// Constants: Y15 = int16 ones, Y14 = bytes 0x0f, Y13 = bytes 8 or 32.

#define ZERO4 \
	VXORPS Y0, Y0, Y0; \
	VXORPS Y1, Y1, Y1; \
	VXORPS Y2, Y2, Y2; \
	VXORPS Y3, Y3, Y3

// SCALE_ACC: ACC += round(float32(Y4 int32 lanes) * S), S in Y6.
#define SCALE_ACC(ACC) \
	VCVTDQ2PS Y4, Y4; \
	VMULPS    Y6, Y4, Y4; \
	VADDPS    Y4, ACC, ACC

// F16xF32(hoff, foff): Y6 = f16 at hoff(BX) times f32 at foff(DX), rounded,
// in every lane.
#define F16xF32(hoff, foff) \
	VPBROADCASTW (hoff)(BX), X6; \
	VCVTPH2PS    X6, Y6; \
	VBROADCASTSS (foff)(DX), Y7; \
	VMULPS       Y7, Y6, Y6

// Q80BLK: the Q8_0 block at boff(BX) against codes at xoff(DI). Signed
// times signed: |w| (unsigned) times x*sign(w).
#define Q80BLK(boff, xoff, doff, ACC) \
	VMOVDQU    (boff+2)(BX), Y4; \
	VMOVDQU    (xoff)(DI), Y5; \
	VPSIGNB    Y4, Y5, Y5; \
	VPSIGNB    Y4, Y4, Y4; \
	VPMADDUBSW Y5, Y4, Y4; \
	VPMADDWD   Y15, Y4, Y4; \
	F16xF32(boff, doff); \
	SCALE_ACC(ACC)

// func q80RowsAVX2(w unsafe.Pointer, stride, rows int, x *actView, out *float32)
TEXT ·q80RowsAVX2(SB), NOSPLIT, $0-40
	ROWS_ARGS
	BCAST32(0x00010001, X15, Y15)
	TESTQ R10, R10
	JZ    q80done

q80row:
	ROW_SETUP
	ZERO4
	MOVQ CX, R8
	SHRQ $2, R8
	JZ   q80tail

q80loop:
	Q80BLK(0, 0, 0, Y0)
	Q80BLK(34, 32, 4, Y1)
	Q80BLK(68, 64, 8, Y2)
	Q80BLK(102, 96, 12, Y3)
	ADDQ $136, BX
	ADDQ $128, DI
	ADDQ $16, DX
	DECQ R8
	JNZ  q80loop

q80tail:
	ANDQ $3, CX
	JZ   q80fold
	Q80BLK(0, 0, 0, Y0)
	DECQ CX
	JZ   q80fold
	Q80BLK(34, 32, 4, Y1)
	DECQ CX
	JZ   q80fold
	Q80BLK(68, 64, 8, Y2)

q80fold:
	FOLD32TO8
	HSUM8
	ROW_NEXT
	JNZ q80row

q80done:
	VZEROUPPER
	RET

// Q40BLK: codes nibble-8; the block's 16 bytes give values 0-15 (low
// nibbles) and 16-31 (high). sum (q-8)x = sum q*x - sum 8*x, in int16 pairs.
#define Q40BLK(boff, xoff, doff, ACC) \
	VMOVDQU     (boff+2)(BX), X4; \
	VPSRLW      $4, X4, X5; \
	VINSERTI128 $1, X5, Y4, Y4; \
	VPAND       Y14, Y4, Y4; \
	VMOVDQU     (xoff)(DI), Y5; \
	VPMADDUBSW  Y5, Y4, Y4; \
	VPMADDUBSW  Y5, Y13, Y5; \
	VPSUBW      Y5, Y4, Y4; \
	VPMADDWD    Y15, Y4, Y4; \
	F16xF32(boff, doff); \
	SCALE_ACC(ACC)

// func q40RowsAVX2(w unsafe.Pointer, stride, rows int, x *actView, out *float32)
TEXT ·q40RowsAVX2(SB), NOSPLIT, $0-40
	ROWS_ARGS
	BCAST32(0x00010001, X15, Y15)
	BCAST32(0x0f0f0f0f, X14, Y14)
	BCAST32(0x08080808, X13, Y13)
	TESTQ R10, R10
	JZ    q40done

q40row:
	ROW_SETUP
	ZERO4
	MOVQ CX, R8
	SHRQ $2, R8
	JZ   q40tail

q40loop:
	Q40BLK(0, 0, 0, Y0)
	Q40BLK(18, 32, 4, Y1)
	Q40BLK(36, 64, 8, Y2)
	Q40BLK(54, 96, 12, Y3)
	ADDQ $72, BX
	ADDQ $128, DI
	ADDQ $16, DX
	DECQ R8
	JNZ  q40loop

q40tail:
	ANDQ $3, CX
	JZ   q40fold
	Q40BLK(0, 0, 0, Y0)
	DECQ CX
	JZ   q40fold
	Q40BLK(18, 32, 4, Y1)
	DECQ CX
	JZ   q40fold
	Q40BLK(36, 64, 8, Y2)

q40fold:
	FOLD32TO8
	HSUM8
	ROW_NEXT
	JNZ q40row

q40done:
	VZEROUPPER
	RET

// Q4KCH: the 32 nibble bytes of chunk c: low nibbles are block 2c, high
// nibbles block 2c+1, whose scales S are at 8c(SP) and 8c+4(SP).
#define Q4KCH(c, ACCLO, ACCHI) \
	VMOVDQU      (16+32*c)(BX), Y5; \
	VPAND        Y14, Y5, Y4; \
	VPSRLW       $4, Y5, Y5; \
	VPAND        Y14, Y5, Y5; \
	VPMADDUBSW   (64*c)(DI), Y4, Y4; \
	VPMADDWD     Y15, Y4, Y4; \
	VBROADCASTSS (8*c)(SP), Y6; \
	SCALE_ACC(ACCLO); \
	VPMADDUBSW   (64*c+32)(DI), Y5, Y4; \
	VPMADDWD     Y15, Y4, Y4; \
	VBROADCASTSS (8*c+4)(SP), Y6; \
	SCALE_ACC(ACCHI)

// func q4kRowsAVX2(w unsafe.Pointer, stride, rows int, x *actView, out *float32)
// Frame: S = (d*sc_j)*dx_b for the super-block's 8 blocks. Y9 holds the
// minimums' 8 lanes.
TEXT ·q4kRowsAVX2(SB), NOSPLIT, $32-40
	ROWS_ARGS
	BCAST32(0x00010001, X15, Y15)
	BCAST32(0x0f0f0f0f, X14, Y14)
	TESTQ R10, R10
	JZ    q4kdone

q4krow:
	ROW_SETUP
	ZERO4
	VXORPS Y9, Y9, Y9
	SHRQ   $3, CX

q4ksb:
	// Unpack the 6-bit scales and mins (see q4KScales): A = bytes 4-7,
	// B = bytes 8-11, C = bytes 12-15.
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
	VPMOVZXBD    X5, Y5
	VCVTDQ2PS    Y5, Y5
	VMULPS       Y6, Y5, Y5 // d*sc_j, exact
	VMULPS       (DX), Y5, Y5
	VMOVUPS      Y5, 0(SP)
	VPBROADCASTW 2(BX), X6
	VCVTPH2PS    X6, Y6
	VPMOVZXBD    X7, Y5
	VCVTDQ2PS    Y5, Y5
	VMULPS       Y6, Y5, Y5 // dmin*mn_j, exact
	VMULPS       (DX), Y5, Y5
	VMULPS       (R13), Y5, Y5
	VADDPS       Y5, Y9, Y9

	Q4KCH(0, Y0, Y1)
	Q4KCH(1, Y2, Y3)
	Q4KCH(2, Y0, Y1)
	Q4KCH(3, Y2, Y3)
	ADDQ $144, BX
	ADDQ $256, DI
	ADDQ $32, DX
	ADDQ $32, R13
	DECQ CX
	JNZ  q4ksb

	FOLD32TO8
	HSUM8
	VMOVAPS X0, X10
	VMOVAPS Y9, Y0
	HSUM8
	VSUBSS  X0, X10, X0
	ROW_NEXT
	JNZ     q4krow

q4kdone:
	VZEROUPPER
	RET

// Q6KS: Y6 = S for a block: lanes 0-3 Dsc[k] * dx, lanes 4-7 Dsc[k+1] * dx,
// with Dsc[k] at soff(SP) and dx at doff(DX).
#define Q6KS(soff, doff) \
	VBROADCASTSS (soff)(SP), X6; \
	VBROADCASTSS (soff+4)(SP), X7; \
	VINSERTF128  $1, X7, Y6, Y6; \
	VBROADCASTSS (doff)(DX), Y7; \
	VMULPS       Y7, Y6, Y6

// Q6KDOT: Y4 holds 32 six-bit codes q; sum (q-32)x = sum q*x - sum 32*x.
#define Q6KDOT(xoff, ACC) \
	VMOVDQU    (xoff)(DI), Y5; \
	VPMADDUBSW Y5, Y4, Y4; \
	VPMADDUBSW Y5, Y13, Y5; \
	VPSUBW     Y5, Y4, Y4; \
	VPMADDWD   Y15, Y4, Y4; \
	SCALE_ACC(ACC)

// Q6KHALF: the four blocks of half h (see dotQ6KInt): ql in Y10 and Y11,
// qh in Y12; 0x30 bytes in Y9. The high bits of quarter i are qh bits
// 2i, 2i+1, moved to bits 4-5.
#define Q6KHALF(h) \
	VMOVDQU (64*h)(BX), Y10; \
	VMOVDQU (64*h+32)(BX), Y11; \
	VMOVDQU (128+32*h)(BX), Y12; \
	VPAND   Y14, Y10, Y4; \
	VPSLLW  $4, Y12, Y5; \
	VPAND   Y9, Y5, Y5; \
	VPOR    Y5, Y4, Y4; \
	Q6KS(4*(8*h), 4*(4*h)); \
	Q6KDOT(128*h, Y0); \
	VPAND   Y14, Y11, Y4; \
	VPSLLW  $2, Y12, Y5; \
	VPAND   Y9, Y5, Y5; \
	VPOR    Y5, Y4, Y4; \
	Q6KS(4*(8*h+2), 4*(4*h+1)); \
	Q6KDOT(128*h+32, Y1); \
	VPSRLW  $4, Y10, Y4; \
	VPAND   Y14, Y4, Y4; \
	VPAND   Y9, Y12, Y5; \
	VPOR    Y5, Y4, Y4; \
	Q6KS(4*(8*h+4), 4*(4*h+2)); \
	Q6KDOT(128*h+64, Y2); \
	VPSRLW  $4, Y11, Y4; \
	VPAND   Y14, Y4, Y4; \
	VPSRLW  $2, Y12, Y5; \
	VPAND   Y9, Y5, Y5; \
	VPOR    Y5, Y4, Y4; \
	Q6KS(4*(8*h+6), 4*(4*h+3)); \
	Q6KDOT(128*h+96, Y3)

// func q6kRowsAVX2(w unsafe.Pointer, stride, rows int, x *actView, out *float32)
// Frame: Dsc[k] = d*sc_k (exact) for the super-block's 16 sub-blocks.
TEXT ·q6kRowsAVX2(SB), NOSPLIT, $64-40
	ROWS_ARGS
	BCAST32(0x00010001, X15, Y15)
	BCAST32(0x0f0f0f0f, X14, Y14)
	BCAST32(0x20202020, X13, Y13)
	BCAST32(0x30303030, X9, Y9)
	TESTQ R10, R10
	JZ    q6kdone

q6krow:
	ROW_SETUP
	ZERO4
	SHRQ $3, CX

q6ksb:
	VPBROADCASTW 208(BX), X6
	VCVTPH2PS    X6, Y6
	VPMOVSXBD    192(BX), Y5
	VCVTDQ2PS    Y5, Y5
	VMULPS       Y6, Y5, Y5
	VMOVUPS      Y5, 0(SP)
	VPMOVSXBD    200(BX), Y5
	VCVTDQ2PS    Y5, Y5
	VMULPS       Y6, Y5, Y5
	VMOVUPS      Y5, 32(SP)
	Q6KHALF(0)
	Q6KHALF(1)
	ADDQ         $210, BX
	ADDQ         $256, DI
	ADDQ         $32, DX
	DECQ         CX
	JNZ          q6ksb

	FOLD32TO8
	HSUM8
	ROW_NEXT
	JNZ q6krow

q6kdone:
	VZEROUPPER
	RET

// ROTATE4: (Y0, Y1, Y2, Y3) = (Y1, Y2, Y3, Y0), so that Y0 always holds the
// lanes of the next block.
#define ROTATE4 \
	VMOVAPS Y0, Y8; \
	VMOVAPS Y1, Y0; \
	VMOVAPS Y2, Y1; \
	VMOVAPS Y3, Y2; \
	VMOVAPS Y8, Y3

// func q8gRowsAVX2(w unsafe.Pointer, stride, rows int, x *actView, out *float32)
// Q8G rows of whole groups of spg blocks of 32 int8; the group scales of
// row r are 4*ng bytes at x.sc + r*x.scRow. Each block adds to Y0, then the
// accumulators rotate; after the row they are rotated back into place.
TEXT ·q8gRowsAVX2(SB), NOSPLIT, $0-40
	ROWS_ARGS
	BCAST32(0x00010001, X15, Y15)
	MOVQ  32(R11), R14
	TESTQ R10, R10
	JZ    q8gdone

q8grow:
	ROW_SETUP
	ZERO4
	MOVQ R14, AX
	MOVQ 48(R11), R8

q8gblk:
	VMOVDQU      (BX), Y4
	VMOVDQU      (DI), Y5
	VPSIGNB      Y4, Y5, Y5
	VPSIGNB      Y4, Y4, Y4
	VPMADDUBSW   Y5, Y4, Y4
	VPMADDWD     Y15, Y4, Y4
	VBROADCASTSS (AX), Y6
	VBROADCASTSS (DX), Y7
	VMULPS       Y7, Y6, Y6
	SCALE_ACC(Y0)
	ROTATE4
	ADDQ         $32, BX
	ADDQ         $32, DI
	ADDQ         $4, DX
	DECQ         R8
	JNZ          q8gsame
	ADDQ         $4, AX
	MOVQ         48(R11), R8

q8gsame:
	DECQ CX
	JNZ  q8gblk

	// After nb blocks Y0 holds the lanes of block nb: rotate (-nb) mod 4 more.
	MOVQ 24(R11), CX
	NEGQ CX
	ANDQ $3, CX
	JZ   q8gfold

q8gunrot:
	ROTATE4
	DECQ CX
	JNZ  q8gunrot

q8gfold:
	FOLD32TO8
	HSUM8
	ADDQ 40(R11), R14
	ROW_NEXT
	JNZ  q8grow

q8gdone:
	VZEROUPPER
	RET
