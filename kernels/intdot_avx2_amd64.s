//go:build amd64 && !purego

#include "textflag.h"
#include "intdot_amd64.h"

// AVX2 integer-dot row kernels (the order is in intdot.go). Units go four at
// a time: each unit's exact int32 partial sums in 8 lanes (VPMADDUBSW:
// unsigned byte times signed byte, adjacent pairs summed to int16, no pair
// able to saturate; VPMADDWD by ones: int16 pairs to int32), REDUCE4 to the
// four unit sums, one rounded product each with the units' scales, added to
// the 4 float lanes in X0. A row's last 1-3 units go one at a time (REDUCE1,
// ADDLANE). HSUM4 folds the lanes.
//
// Constants: Y15 = int16 ones, Y14 = bytes 0x0f, Y13 = bytes 8 or 32.

// Q80INT: the Q8_0 block at boff(BX) against the codes at xoff(DI), into Y.
// Signed times signed: |w| (unsigned) times x*sign(w).
#define Q80INT(boff, xoff, Y) \
	VMOVDQU    (boff+2)(BX), Y; \
	VMOVDQU    (xoff)(DI), Y8; \
	VPSIGNB    Y, Y8, Y8; \
	VPSIGNB    Y, Y, Y; \
	VPMADDUBSW Y8, Y, Y; \
	VPMADDWD   Y15, Y, Y

// func q80RowsAVX2(w unsafe.Pointer, stride, rows int, x *actView, out *float32)
TEXT ·q80RowsAVX2(SB), NOSPLIT, $0-40
	ROWS_ARGS
	BCAST32(0x00010001, X15, Y15)
	TESTQ R10, R10
	JZ    q80done

q80row:
	ROW_SETUP
	VXORPS X0, X0, X0
	MOVQ   CX, R8
	SHRQ   $2, R8
	JZ     q80tail

q80loop:
	Q80INT(0, 0, Y4)
	Q80INT(34, 32, Y5)
	Q80INT(68, 64, Y6)
	Q80INT(102, 96, Y7)
	REDUCE4
	F16SCALES4(34)
	ACC4
	ADDQ $136, BX
	ADDQ $128, DI
	ADDQ $16, DX
	DECQ R8
	JNZ  q80loop

q80tail:
	ANDQ $3, CX
	JZ   q80fold
	Q80INT(0, 0, Y4)
	REDUCE1
	F16SCALE1
	ADDLANE(0x0e)
	DECQ CX
	JZ   q80fold
	ADDQ $34, BX
	ADDQ $32, DI
	ADDQ $4, DX
	Q80INT(0, 0, Y4)
	REDUCE1
	F16SCALE1
	ADDLANE(0x1d)
	DECQ CX
	JZ   q80fold
	ADDQ $34, BX
	ADDQ $32, DI
	ADDQ $4, DX
	Q80INT(0, 0, Y4)
	REDUCE1
	F16SCALE1
	ADDLANE(0x2b)

q80fold:
	HSUM4
	ROW_NEXT
	JNZ q80row

q80done:
	VZEROUPPER
	RET

// Q40INT: codes nibble-8; the block's 16 bytes give values 0-15 (low
// nibbles) and 16-31 (high). sum (q-8)x = sum q*x - sum 8*x, in int16 pairs.
#define Q40INT(boff, xoff, Y) \
	VMOVDQU     (boff+2)(BX), X8; \
	VPSRLW      $4, X8, X9; \
	VINSERTI128 $1, X9, Y8, Y8; \
	VPAND       Y14, Y8, Y8; \
	VMOVDQU     (xoff)(DI), Y9; \
	VPMADDUBSW  Y9, Y8, Y; \
	VPMADDUBSW  Y9, Y13, Y9; \
	VPSUBW      Y9, Y, Y; \
	VPMADDWD    Y15, Y, Y

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
	VXORPS X0, X0, X0
	MOVQ   CX, R8
	SHRQ   $2, R8
	JZ     q40tail

q40loop:
	Q40INT(0, 0, Y4)
	Q40INT(18, 32, Y5)
	Q40INT(36, 64, Y6)
	Q40INT(54, 96, Y7)
	REDUCE4
	F16SCALES4(18)
	ACC4
	ADDQ $72, BX
	ADDQ $128, DI
	ADDQ $16, DX
	DECQ R8
	JNZ  q40loop

q40tail:
	ANDQ $3, CX
	JZ   q40fold
	Q40INT(0, 0, Y4)
	REDUCE1
	F16SCALE1
	ADDLANE(0x0e)
	DECQ CX
	JZ   q40fold
	ADDQ $18, BX
	ADDQ $32, DI
	ADDQ $4, DX
	Q40INT(0, 0, Y4)
	REDUCE1
	F16SCALE1
	ADDLANE(0x1d)
	DECQ CX
	JZ   q40fold
	ADDQ $18, BX
	ADDQ $32, DI
	ADDQ $4, DX
	Q40INT(0, 0, Y4)
	REDUCE1
	F16SCALE1
	ADDLANE(0x2b)

q40fold:
	HSUM4
	ROW_NEXT
	JNZ q40row

q40done:
	VZEROUPPER
	RET

// Q4KSCALES: the super-block at BX: Y11 = (d*sc_j)*dx_b for its 8 blocks,
// and its minimums added to the 8 lanes of Y10. The 6-bit scales and mins
// (see q4KScales) are unpacked four bytes at a time from A = bytes 4-7,
// B = bytes 8-11, C = bytes 12-15. Uses AX, R8, R9, R14, Y5-Y7.
#define Q4KSCALES \
	MOVL         4(BX), AX; \
	MOVL         12(BX), R8; \
	MOVL         AX, R9; \
	SHRL         $2, R9; \
	ANDL         $0x30303030, R9; \
	MOVL         R8, R14; \
	ANDL         $0x0f0f0f0f, R14; \
	ORL          R9, R14; \
	SHLQ         $32, R14; \
	ANDL         $0x3f3f3f3f, AX; \
	ORQ          R14, AX; \
	VMOVQ        AX, X5; \
	MOVL         8(BX), AX; \
	MOVL         AX, R9; \
	SHRL         $2, R9; \
	ANDL         $0x30303030, R9; \
	SHRL         $4, R8; \
	ANDL         $0x0f0f0f0f, R8; \
	ORL          R9, R8; \
	SHLQ         $32, R8; \
	ANDL         $0x3f3f3f3f, AX; \
	ORQ          R8, AX; \
	VMOVQ        AX, X7; \
	VPBROADCASTW (BX), X6; \
	VCVTPH2PS    X6, Y6; \
	VPMOVZXBD    X5, Y5; \
	VCVTDQ2PS    Y5, Y5; \
	VMULPS       Y6, Y5, Y5; \
	VMULPS       (DX), Y5, Y11; \
	VPBROADCASTW 2(BX), X6; \
	VCVTPH2PS    X6, Y6; \
	VPMOVZXBD    X7, Y7; \
	VCVTDQ2PS    Y7, Y7; \
	VMULPS       Y6, Y7, Y7; \
	VMULPS       (DX), Y7, Y7; \
	VMULPS       (R13), Y7, Y7; \
	VADDPS       Y7, Y10, Y10

// Q4KCH: the 32 nibble bytes of chunk c: low nibbles are block 2c, high
// nibbles block 2c+1 (unsigned codes, no offset).
#define Q4KCH(c, YLO, YHI) \
	VMOVDQU    (16+32*c)(BX), Y9; \
	VPAND      Y14, Y9, Y8; \
	VPSRLW     $4, Y9, Y9; \
	VPAND      Y14, Y9, Y9; \
	VPMADDUBSW (64*c)(DI), Y8, YLO; \
	VPMADDWD   Y15, YLO, YLO; \
	VPMADDUBSW (64*c+32)(DI), Y9, YHI; \
	VPMADDWD   Y15, YHI, YHI

// func q4kRowsAVX2(w unsafe.Pointer, stride, rows int, x *actView, out *float32)
// Y10 holds the minimums' 8 lanes.
TEXT ·q4kRowsAVX2(SB), NOSPLIT, $0-40
	ROWS_ARGS
	BCAST32(0x00010001, X15, Y15)
	BCAST32(0x0f0f0f0f, X14, Y14)
	TESTQ R10, R10
	JZ    q4kdone

q4krow:
	ROW_SETUP
	VXORPS X0, X0, X0
	VXORPS Y10, Y10, Y10
	SHRQ   $3, CX

q4ksb:
	Q4KSCALES
	Q4KCH(0, Y4, Y5)
	Q4KCH(1, Y6, Y7)
	REDUCE4
	VMOVAPS X11, X6
	ACC4
	Q4KCH(2, Y4, Y5)
	Q4KCH(3, Y6, Y7)
	REDUCE4
	VEXTRACTF128 $1, Y11, X6
	ACC4
	ADDQ         $144, BX
	ADDQ         $256, DI
	ADDQ         $32, DX
	ADDQ         $32, R13
	DECQ         CX
	JNZ          q4ksb

	HSUM4
	VMOVAPS X0, X12
	VMOVAPS Y10, Y0
	HSUM8
	VSUBSS  X0, X12, X0
	ROW_NEXT
	JNZ     q4krow

q4kdone:
	VZEROUPPER
	RET

// Q6KQ0..Q6KQ3: Y8 = the 32 six-bit codes of quarter i of a half whose ql
// is in Y10 (bytes 0-31) and Y11 (32-63) and qh in Y12: the low 4 bits from
// the low (quarters 0, 1) or high (2, 3) nibbles, bits 4-5 from qh bits 2i,
// 2i+1. 0x30 bytes in Y3.
#define Q6KQ0 \
	VPAND  Y14, Y10, Y8; \
	VPSLLW $4, Y12, Y1; \
	VPAND  Y3, Y1, Y1; \
	VPOR   Y1, Y8, Y8

#define Q6KQ1 \
	VPAND  Y14, Y11, Y8; \
	VPSLLW $2, Y12, Y1; \
	VPAND  Y3, Y1, Y1; \
	VPOR   Y1, Y8, Y8

#define Q6KQ2 \
	VPSRLW $4, Y10, Y8; \
	VPAND  Y14, Y8, Y8; \
	VPAND  Y3, Y12, Y1; \
	VPOR   Y1, Y8, Y8

#define Q6KQ3 \
	VPSRLW $4, Y11, Y8; \
	VPAND  Y14, Y8, Y8; \
	VPSRLW $2, Y12, Y1; \
	VPAND  Y3, Y1, Y1; \
	VPOR   Y1, Y8, Y8

// Q6KINT: the codes in Y8 (0..63) against x at xoff(DI), into Y:
// sum (q-32)x = sum q*x - sum 32*x, in int16 pairs.
#define Q6KINT(xoff, Y) \
	VMOVDQU    (xoff)(DI), Y9; \
	VPMADDUBSW Y9, Y8, Y; \
	VPMADDUBSW Y9, Y13, Y9; \
	VPSUBW     Y9, Y, Y; \
	VPMADDWD   Y15, Y, Y

// REDUCE2H: units (halves of 16) of two blocks from their 8-lane partial
// sums in Y4 (block b) and Y5 (block b+1): X4 = [sum Y4[0:4], sum Y4[4:8],
// sum Y5[0:4], sum Y5[4:8]]. Y2 holds the dword index [0, 4, 1, 5, ...].
#define REDUCE2H \
	VPHADDD Y5, Y4, Y4; \
	VPHADDD Y4, Y4, Y4; \
	VPERMD  Y4, Y2, Y4

// Q6KSCALES(g): X6 = Dsc[4g .. 4g+3] (at 16g(SP)) times the dx of blocks
// 2g, 2g+1 (8g(DX)), each twice.
#define Q6KSCALES(g) \
	VMOVSD     (8*(g))(DX), X6; \
	VPERMILPS  $0x50, X6, X6; \
	VMULPS     (16*(g))(SP), X6, X6

// Q6KHALF(h): the 8 units of half h (blocks 4h .. 4h+3).
#define Q6KHALF(h) \
	VMOVDQU (64*h)(BX), Y10; \
	VMOVDQU (64*h+32)(BX), Y11; \
	VMOVDQU (128+32*h)(BX), Y12; \
	Q6KQ0; \
	Q6KINT(128*h, Y4); \
	Q6KQ1; \
	Q6KINT(128*h+32, Y5); \
	REDUCE2H; \
	Q6KSCALES(2*h); \
	ACC4; \
	Q6KQ2; \
	Q6KINT(128*h+64, Y4); \
	Q6KQ3; \
	Q6KINT(128*h+96, Y5); \
	REDUCE2H; \
	Q6KSCALES(2*h+1); \
	ACC4

DATA half2Idx<>+0(SB)/8, $0x0000000400000000
DATA half2Idx<>+8(SB)/8, $0x0000000500000001
DATA half2Idx<>+16(SB)/8, $0x0000000600000002
DATA half2Idx<>+24(SB)/8, $0x0000000700000003
GLOBL half2Idx<>(SB), RODATA|NOPTR, $32

// func q6kRowsAVX2(w unsafe.Pointer, stride, rows int, x *actView, out *float32)
// Frame: Dsc[k] = d*sc_k (exact) for the super-block's 16 sub-blocks.
TEXT ·q6kRowsAVX2(SB), NOSPLIT, $64-40
	ROWS_ARGS
	BCAST32(0x00010001, X15, Y15)
	BCAST32(0x0f0f0f0f, X14, Y14)
	BCAST32(0x20202020, X13, Y13)
	BCAST32(0x30303030, X3, Y3)
	VMOVDQU half2Idx<>(SB), Y2
	TESTQ   R10, R10
	JZ      q6kdone

q6krow:
	ROW_SETUP
	VXORPS X0, X0, X0
	SHRQ   $3, CX

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

	HSUM4
	ROW_NEXT
	JNZ q6krow

q6kdone:
	VZEROUPPER
	RET

// Q8GINT: the 32 int8 at boff(BX) against the codes at xoff(DI), into Y.
#define Q8GINT(boff, xoff, Y) \
	VMOVDQU    (boff)(BX), Y; \
	VMOVDQU    (xoff)(DI), Y8; \
	VPSIGNB    Y, Y8, Y8; \
	VPSIGNB    Y, Y, Y; \
	VPMADDUBSW Y8, Y, Y; \
	VPMADDWD   Y15, Y, Y

// Q8GSCALES4: X6 = s_g(b+k) * dx_(b+k), k < 4: the group scales of the row
// (base AX) picked by the group indices at R14 (gidx[b..b+3]). Uses R9.
#define Q8GSCALES4 \
	MOVL      0(R14), R9; \
	VMOVSS    (AX)(R9*4), X6; \
	MOVL      4(R14), R9; \
	VINSERTPS $0x10, (AX)(R9*4), X6, X6; \
	MOVL      8(R14), R9; \
	VINSERTPS $0x20, (AX)(R9*4), X6, X6; \
	MOVL      12(R14), R9; \
	VINSERTPS $0x30, (AX)(R9*4), X6, X6; \
	VMULPS    (DX), X6, X6

// Q8GSCALE1: X6[0] = s_g(b) * dx_b for one block.
#define Q8GSCALE1 \
	MOVL   0(R14), R9; \
	VMOVSS (AX)(R9*4), X6; \
	VMULSS (DX), X6, X6

// func q8gRowsAVX2(w unsafe.Pointer, stride, rows int, x *actView, out *float32)
// Q8G rows of whole groups of blocks; row r's group scales are at x.sc +
// r*x.scRow (the current row's at 0(SP)), and x.gidx[b] is block b's group.
TEXT ·q8gRowsAVX2(SB), NOSPLIT, $8-40
	ROWS_ARGS
	BCAST32(0x00010001, X15, Y15)
	MOVQ  32(R11), AX
	MOVQ  AX, 0(SP)
	TESTQ R10, R10
	JZ    q8gdone

q8grow:
	ROW_SETUP
	MOVQ   0(SP), AX
	MOVQ   64(R11), R14
	VXORPS X0, X0, X0
	MOVQ   CX, R8
	SHRQ   $2, R8
	JZ     q8gtail

q8gloop:
	Q8GINT(0, 0, Y4)
	Q8GINT(32, 32, Y5)
	Q8GINT(64, 64, Y6)
	Q8GINT(96, 96, Y7)
	REDUCE4
	Q8GSCALES4
	ACC4
	ADDQ $128, BX
	ADDQ $128, DI
	ADDQ $16, DX
	ADDQ $16, R14
	DECQ R8
	JNZ  q8gloop

q8gtail:
	ANDQ $3, CX
	JZ   q8gfold
	Q8GINT(0, 0, Y4)
	REDUCE1
	Q8GSCALE1
	ADDLANE(0x0e)
	DECQ CX
	JZ   q8gfold
	ADDQ $32, BX
	ADDQ $32, DI
	ADDQ $4, DX
	ADDQ $4, R14
	Q8GINT(0, 0, Y4)
	REDUCE1
	Q8GSCALE1
	ADDLANE(0x1d)
	DECQ CX
	JZ   q8gfold
	ADDQ $32, BX
	ADDQ $32, DI
	ADDQ $4, DX
	ADDQ $4, R14
	Q8GINT(0, 0, Y4)
	REDUCE1
	Q8GSCALE1
	ADDLANE(0x2b)

q8gfold:
	HSUM4
	MOVQ 40(R11), AX
	ADDQ AX, 0(SP)
	ROW_NEXT
	JNZ  q8grow

q8gdone:
	VZEROUPPER
	RET
