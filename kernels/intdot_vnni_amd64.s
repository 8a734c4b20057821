//go:build amd64 && !purego

#include "textflag.h"
#include "intdot_amd64.h"

// AVX-512 VNNI integer-dot row kernels: the AVX2 kernels' structure
// (intdot_avx2_amd64.s) with each unit's 8 partial sums from VPDPBUSD
// (unsigned byte times signed byte, four adjacent products into an int32),
// EVEX-encoded on 256-bit registers. Signed weights are offset to unsigned
// (w+128 = w^0x80) and unsigned codes with a zero point (Q4_0's 8, Q6_K's
// 32) are used as they are; the accumulator starts at minus the offset
// times each 4 codes of x (R13 points at their negated sums, actQ.ls), so
// the sums are exact and equal the AVX2 ones.
//
// Constants: Y12 = bytes 0x80, Y14 = bytes 0x0f.
//
// Where blocks lie in pairs (Q8_0, Q4_0, Q4_K, Q6_K, Q8G), one 512-bit
// VPDPBUSD serves two blocks, and ZREDUCE4 reduces two such registers to
// the four units' sums (ZREDUCE16 and Q6KREDUCE16 reduce 16 at once).

// dword index [0, 4, 8, 12, ...]: lane 0 of each 128-bit lane.
DATA lane0Idx<>+0(SB)/8, $0x0000000400000000
DATA lane0Idx<>+8(SB)/8, $0x0000000c00000008
DATA lane0Idx<>+16(SB)/8, $0
DATA lane0Idx<>+24(SB)/8, $0
DATA lane0Idx<>+32(SB)/8, $0
DATA lane0Idx<>+40(SB)/8, $0
DATA lane0Idx<>+48(SB)/8, $0
DATA lane0Idx<>+56(SB)/8, $0
GLOBL lane0Idx<>(SB), RODATA|NOPTR, $64

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

// ZCONSTS: Z27 = lane0Idx, K2 = the upper 8 dwords, Z31 = bytes 0x80,
// Z29 = bytes 0x0f, Z28 = nibShift. Uses AX.
#define ZCONSTS \
	VMOVDQU32    lane0Idx<>(SB), Z27; \
	VMOVDQU32    nibShift<>(SB), Z28; \
	MOVL         $0xff00, AX; \
	KMOVW        AX, K2; \
	MOVL         $0x80808080, AX; \
	VPBROADCASTD AX, Z31; \
	MOVL         $0x0f0f0f0f, AX; \
	VPBROADCASTD AX, Z29

// ZSUM128: every dword of each 128-bit lane of Z6 = the lane's sum. Uses Z7.
#define ZSUM128 \
	VPSHUFD $0x4e, Z6, Z7; \
	VPADDD  Z7, Z6, Z6; \
	VPSHUFD $0xb1, Z6, Z7; \
	VPADDD  Z7, Z6, Z6

// ZREDUCE4: from Z4 = [block 0 | block 1] and Z5 = [block 2 | block 3] (8
// partial sums each), X4 = the 4 blocks' sums.
#define ZREDUCE4 \
	VSHUFI32X4 $0x88, Z5, Z4, Z6; \
	VSHUFI32X4 $0xdd, Z5, Z4, Z7; \
	VPADDD     Z7, Z6, Z6; \
	ZSUM128; \
	VPERMD     Z6, Z27, Z4

// Q80INTV: Q8_0 block at boff(BX) against the codes at xoff(DI), into Y:
// sum (w+128)x - 128 sum x.
#define Q80INTV(boff, xoff, Y) \
	VMOVDQU  (boff+2)(BX), Y8; \
	VPXOR    Y12, Y8, Y8; \
	VPSLLD   $7, (xoff)(R13), Y; \
	VPDPBUSD (xoff)(DI), Y8, Y

// Q80PAIRZ: the Q8_0 blocks at boff and boff+34 (BX) against 64 codes at
// xoff(DI), into Z.
#define Q80PAIRZ(boff, xoff, Z) \
	VMOVDQU      (boff+2)(BX), Y8; \
	VINSERTI64X4 $1, (boff+36)(BX), Z8, Z8; \
	VPXORD       Z31, Z8, Z8; \
	VPSLLD       $7, (xoff)(R13), Z; \
	VPDPBUSD     (xoff)(DI), Z8, Z

// ZREDUCE16 reduces 16 blocks' partial sums, pair i of blocks (2i, 2i+1)
// in Z(16+i) as Q40PAIRZ and Q80PAIRZ leave them, to Z16 = the 16 blocks'
// exact sums in block order. Each step adds neighbours within 128-bit
// lanes of two registers at once (dwords, then qwords), then the lane
// halves of each block; the result is in the order 0 2 4 6 1 3 5 7 8 10 12
// 14 9 11 13 15, which Z26 (blk16Idx) permutes back. Uses Z8, Z9.
#define ZREDUCE16 \
	VPUNPCKLDQ  Z17, Z16, Z8; \
	VPUNPCKHDQ  Z17, Z16, Z9; \
	VPADDD      Z9, Z8, Z16; \
	VPUNPCKLDQ  Z19, Z18, Z8; \
	VPUNPCKHDQ  Z19, Z18, Z9; \
	VPADDD      Z9, Z8, Z18; \
	VPUNPCKLDQ  Z21, Z20, Z8; \
	VPUNPCKHDQ  Z21, Z20, Z9; \
	VPADDD      Z9, Z8, Z20; \
	VPUNPCKLDQ  Z23, Z22, Z8; \
	VPUNPCKHDQ  Z23, Z22, Z9; \
	VPADDD      Z9, Z8, Z22; \
	VPUNPCKLQDQ Z18, Z16, Z8; \
	VPUNPCKHQDQ Z18, Z16, Z9; \
	VPADDD      Z9, Z8, Z16; \
	VPUNPCKLQDQ Z22, Z20, Z8; \
	VPUNPCKHQDQ Z22, Z20, Z9; \
	VPADDD      Z9, Z8, Z20; \
	VSHUFI32X4  $0x88, Z20, Z16, Z8; \
	VSHUFI32X4  $0xdd, Z20, Z16, Z9; \
	VPADDD      Z9, Z8, Z16; \
	VPERMD      Z16, Z26, Z16

// ZACC16(SCALES): for the 16 blocks at BX with sums in Z16, X0's lanes
// += round(float32(sum_k) * S_k) for k = 0..15 in order, block k into lane
// k mod 4, as ACC4 four times. S_k = d_k * dx_k: SCALES leaves the 16 f16
// scales d_k in Y10, dx_k are the 16 floats at DX. Uses Z8, Z9.
#define ZACC16(SCALES) \
	SCALES; \
	VCVTPH2PS     Y10, Z9; \
	VMULPS        (DX), Z9, Z9; \
	VCVTDQ2PS     Z16, Z16; \
	VMULPS        Z9, Z16, Z16; \
	VADDPS        X16, X0, X0; \
	VEXTRACTF32X4 $1, Z16, X8; \
	VADDPS        X8, X0, X0; \
	VEXTRACTF32X4 $2, Z16, X8; \
	VADDPS        X8, X0, X0; \
	VEXTRACTF32X4 $3, Z16, X8; \
	VADDPS        X8, X0, X0

// The scales of 16 blocks lie at word offsets stride*k (Q4_0: 9 words,
// Q8_0: 17) from BX, word aligned. A VPERMT2W picks words from a 128-byte
// window; for both strides word stride*k sits at stride*k mod 64 in the
// window that holds it, so one index register (Z24) serves every window
// and a word mask puts each window's blocks in place. (A VPGATHERDD of the
// 16 scales cost more than the rest of the 16 blocks together.)
//
// Q40SCALES16: blocks 0-7 in window 0, 8-14 in window 1 (K4), block 15
// (byte 270) broadcast (K5), so nothing past the 16 blocks' 288 bytes is
// read. Uses Z11.
#define Q40SCALES16 \
	VMOVDQU16    (BX), Z10; \
	VPERMT2W     64(BX), Z24, Z10; \
	VMOVDQU16    128(BX), Z11; \
	VPERMT2W     192(BX), Z24, Z11; \
	VMOVDQU16    Z11, K4, Z10; \
	VPBROADCASTW 270(BX), Z11; \
	VMOVDQU16    Z11, K5, Z10

// Q80SCALES16: 4 blocks per window, windows 1-3 under K4, K5, K6. Reads
// 512 of the 16 blocks' 544 bytes. Uses Z11.
#define Q80SCALES16 \
	VMOVDQU16 (BX), Z10; \
	VPERMT2W  64(BX), Z24, Z10; \
	VMOVDQU16 128(BX), Z11; \
	VPERMT2W  192(BX), Z24, Z11; \
	VMOVDQU16 Z11, K4, Z10; \
	VMOVDQU16 256(BX), Z11; \
	VPERMT2W  320(BX), Z24, Z11; \
	VMOVDQU16 Z11, K5, Z10; \
	VMOVDQU16 384(BX), Z11; \
	VPERMT2W  448(BX), Z24, Z11; \
	VMOVDQU16 Z11, K6, Z10

// blk16Idx: ZREDUCE16's permutation back to block order.
DATA blk16Idx<>+0(SB)/8, $0x0000000400000000
DATA blk16Idx<>+8(SB)/8, $0x0000000500000001
DATA blk16Idx<>+16(SB)/8, $0x0000000600000002
DATA blk16Idx<>+24(SB)/8, $0x0000000700000003
DATA blk16Idx<>+32(SB)/8, $0x0000000c00000008
DATA blk16Idx<>+40(SB)/8, $0x0000000d00000009
DATA blk16Idx<>+48(SB)/8, $0x0000000e0000000a
DATA blk16Idx<>+56(SB)/8, $0x0000000f0000000b
GLOBL blk16Idx<>(SB), RODATA|NOPTR, $64

// q40ScIdx, q80ScIdx: word k = stride*k mod 64, the Z24 of Q40SCALES16 and
// Q80SCALES16 (words 16-31 unused).
DATA q40ScIdx<>+0(SB)/8, $0x001b001200090000
DATA q40ScIdx<>+8(SB)/8, $0x003f0036002d0024
DATA q40ScIdx<>+16(SB)/8, $0x0023001a00110008
DATA q40ScIdx<>+24(SB)/8, $0x0007003e0035002c
DATA q40ScIdx<>+32(SB)/8, $0x002b002200190010
DATA q40ScIdx<>+40(SB)/8, $0x000f0006003d0034
DATA q40ScIdx<>+48(SB)/8, $0x0033002a00210018
DATA q40ScIdx<>+56(SB)/8, $0x0017000e0005003c
GLOBL q40ScIdx<>(SB), RODATA|NOPTR, $64

DATA q80ScIdx<>+0(SB)/8, $0x0033002200110000
DATA q80ScIdx<>+8(SB)/8, $0x0037002600150004
DATA q80ScIdx<>+16(SB)/8, $0x003b002a00190008
DATA q80ScIdx<>+24(SB)/8, $0x003f002e001d000c
DATA q80ScIdx<>+32(SB)/8, $0x0003003200210010
DATA q80ScIdx<>+40(SB)/8, $0x0007003600250014
DATA q80ScIdx<>+48(SB)/8, $0x000b003a00290018
DATA q80ScIdx<>+56(SB)/8, $0x000f003e002d001c
GLOBL q80ScIdx<>(SB), RODATA|NOPTR, $64

// func q80RowsVNNI(w unsafe.Pointer, stride, rows int, x *actView, out *float32)
TEXT ·q80RowsVNNI(SB), NOSPLIT, $0-40
	ROWS_ARGS
	ZCONSTS
	VMOVDQU32 blk16Idx<>(SB), Z26
	VMOVDQU16 q80ScIdx<>(SB), Z24
	MOVL      $0xf0, AX
	KMOVD     AX, K4
	MOVL      $0xf00, AX
	KMOVD     AX, K5
	MOVL      $0xf000, AX
	KMOVD     AX, K6
	BCAST32(0x80808080, X12, Y12)
	TESTQ R10, R10
	JZ    q80done

q80row:
	ROW_SETUP
	MOVQ   56(R11), R13
	VXORPS X0, X0, X0
	MOVQ   CX, R8
	SHRQ   $4, R8
	JZ     q80quad

q80loop16:
	Q80PAIRZ(0, 0, Z16)
	Q80PAIRZ(68, 64, Z17)
	Q80PAIRZ(136, 128, Z18)
	Q80PAIRZ(204, 192, Z19)
	Q80PAIRZ(272, 256, Z20)
	Q80PAIRZ(340, 320, Z21)
	Q80PAIRZ(408, 384, Z22)
	Q80PAIRZ(476, 448, Z23)
	ZREDUCE16
	ZACC16(Q80SCALES16)
	ADDQ $544, BX
	ADDQ $512, DI
	ADDQ $512, R13
	ADDQ $64, DX
	DECQ R8
	JNZ  q80loop16

q80quad:
	MOVQ   CX, R8
	ANDQ   $15, R8
	SHRQ   $2, R8
	JZ     q80tail

q80loop:
	Q80PAIRZ(0, 0, Z4)
	Q80PAIRZ(68, 64, Z5)
	ZREDUCE4
	F16SCALES4(34)
	ACC4
	ADDQ $136, BX
	ADDQ $128, DI
	ADDQ $128, R13
	ADDQ $16, DX
	DECQ R8
	JNZ  q80loop

q80tail:
	ANDQ $3, CX
	JZ   q80fold
	Q80INTV(0, 0, Y4)
	REDUCE1
	F16SCALE1
	ADDLANE(0x0e)
	DECQ CX
	JZ   q80fold
	ADDQ $34, BX
	ADDQ $32, DI
	ADDQ $32, R13
	ADDQ $4, DX
	Q80INTV(0, 0, Y4)
	REDUCE1
	F16SCALE1
	ADDLANE(0x1d)
	DECQ CX
	JZ   q80fold
	ADDQ $34, BX
	ADDQ $32, DI
	ADDQ $32, R13
	ADDQ $4, DX
	Q80INTV(0, 0, Y4)
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

// Q40INTV: Q4_0 nibbles (unsigned) against x, starting from -8 sum x.
#define Q40INTV(boff, xoff, Y) \
	VMOVDQU     (boff+2)(BX), X8; \
	VPSRLW      $4, X8, X9; \
	VINSERTI128 $1, X9, Y8, Y8; \
	VPAND       Y14, Y8, Y8; \
	VPSLLD      $3, (xoff)(R13), Y; \
	VPDPBUSD    (xoff)(DI), Y8, Y

// Q40PAIRZ: the Q4_0 blocks at boff and boff+18 (BX), their 16 bytes each
// broadcast to two 128-bit lanes (the second block's through K2), the
// second lane of each shifted right by 4, masked: the nibbles in value
// order; against 64 codes at xoff(DI), from -8 sum x, into Z.
#define Q40PAIRZ(boff, xoff, Z) \
	VBROADCASTI32X4 (boff+2)(BX), Z8; \
	VBROADCASTI32X4 (boff+20)(BX), K2, Z8; \
	VPSRLVW         Z28, Z8, Z8; \
	VPANDD          Z29, Z8, Z8; \
	VPSLLD          $3, (xoff)(R13), Z; \
	VPDPBUSD        (xoff)(DI), Z8, Z

// func q40RowsVNNI(w unsafe.Pointer, stride, rows int, x *actView, out *float32)
TEXT ·q40RowsVNNI(SB), NOSPLIT, $0-40
	ROWS_ARGS
	ZCONSTS
	VMOVDQU32 blk16Idx<>(SB), Z26
	VMOVDQU16 q40ScIdx<>(SB), Z24
	MOVL      $0x7f00, AX
	KMOVD     AX, K4
	MOVL      $0x8000, AX
	KMOVD     AX, K5
	BCAST32(0x0f0f0f0f, X14, Y14)
	TESTQ R10, R10
	JZ    q40done

q40row:
	ROW_SETUP
	MOVQ   56(R11), R13
	VXORPS X0, X0, X0
	MOVQ   CX, R8
	SHRQ   $4, R8
	JZ     q40quad

q40loop16:
	Q40PAIRZ(0, 0, Z16)
	Q40PAIRZ(36, 64, Z17)
	Q40PAIRZ(72, 128, Z18)
	Q40PAIRZ(108, 192, Z19)
	Q40PAIRZ(144, 256, Z20)
	Q40PAIRZ(180, 320, Z21)
	Q40PAIRZ(216, 384, Z22)
	Q40PAIRZ(252, 448, Z23)
	ZREDUCE16
	ZACC16(Q40SCALES16)
	ADDQ $288, BX
	ADDQ $512, DI
	ADDQ $512, R13
	ADDQ $64, DX
	DECQ R8
	JNZ  q40loop16

q40quad:
	MOVQ   CX, R8
	ANDQ   $15, R8
	SHRQ   $2, R8
	JZ     q40tail

q40loop:
	Q40PAIRZ(0, 0, Z4)
	Q40PAIRZ(36, 64, Z5)
	ZREDUCE4
	F16SCALES4(18)
	ACC4
	ADDQ $72, BX
	ADDQ $128, DI
	ADDQ $128, R13
	ADDQ $16, DX
	DECQ R8
	JNZ  q40loop

q40tail:
	ANDQ $3, CX
	JZ   q40fold
	Q40INTV(0, 0, Y4)
	REDUCE1
	F16SCALE1
	ADDLANE(0x0e)
	DECQ CX
	JZ   q40fold
	ADDQ $18, BX
	ADDQ $32, DI
	ADDQ $32, R13
	ADDQ $4, DX
	Q40INTV(0, 0, Y4)
	REDUCE1
	F16SCALE1
	ADDLANE(0x1d)
	DECQ CX
	JZ   q40fold
	ADDQ $18, BX
	ADDQ $32, DI
	ADDQ $32, R13
	ADDQ $4, DX
	Q40INTV(0, 0, Y4)
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

// Q4KSCALESV is the AVX2 kernel's Q4KSCALES (R13 holds the block sums).
#define Q4KSCALESV \
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

// Q4KCHZ: chunk c's 32 bytes as [low nibbles (block 2c) | high nibbles
// (block 2c+1)] against 64 codes, into Z.
#define Q4KCHZ(c, Z) \
	VMOVDQU      (16+32*c)(BX), Y8; \
	VPSRLW       $4, Y8, Y9; \
	VINSERTI64X4 $1, Y9, Z8, Z8; \
	VPANDD       Z29, Z8, Z8; \
	VPXORD       Z, Z, Z; \
	VPDPBUSD     (64*c)(DI), Z8, Z

// func q4kRowsVNNI(w unsafe.Pointer, stride, rows int, x *actView, out *float32)
// Y10 holds the minimums' 8 lanes.
//
// Super-blocks go two at a time: their 16 blocks' sums reduced at once
// (ZREDUCE16) and scaled by one 16-lane product, added to X0's lanes in
// block order as ACC4 would, four blocks at a time; an odd last
// super-block takes the loop of one.
TEXT ·q4kRowsVNNI(SB), NOSPLIT, $0-40
	ROWS_ARGS
	ZCONSTS
	VMOVDQU32 blk16Idx<>(SB), Z26
	BCAST32(0x0f0f0f0f, X14, Y14)
	TESTQ R10, R10
	JZ    q4kdone

q4krow:
	ROW_SETUP
	VXORPS X0, X0, X0
	VXORPS Y10, Y10, Y10
	SHRQ   $4, CX
	JZ     q4kone

q4kpair:
	Q4KSCALESV
	VMOVAPS Y11, Y24
	Q4KCHZ(0, Z16)
	Q4KCHZ(1, Z17)
	Q4KCHZ(2, Z18)
	Q4KCHZ(3, Z19)
	ADDQ $144, BX
	ADDQ $256, DI
	ADDQ $32, DX
	ADDQ $32, R13
	Q4KSCALESV
	Q4KCHZ(0, Z20)
	Q4KCHZ(1, Z21)
	Q4KCHZ(2, Z22)
	Q4KCHZ(3, Z23)
	ZREDUCE16
	VINSERTF64X4  $1, Y11, Z24, Z24
	VCVTDQ2PS     Z16, Z16
	VMULPS        Z24, Z16, Z16
	VADDPS        X16, X0, X0
	VEXTRACTF32X4 $1, Z16, X8
	VADDPS        X8, X0, X0
	VEXTRACTF32X4 $2, Z16, X8
	VADDPS        X8, X0, X0
	VEXTRACTF32X4 $3, Z16, X8
	VADDPS        X8, X0, X0
	ADDQ          $144, BX
	ADDQ          $256, DI
	ADDQ          $32, DX
	ADDQ          $32, R13
	DECQ          CX
	JNZ           q4kpair

q4kone:
	MOVQ 24(R11), CX
	SHRQ $3, CX
	ANDQ $1, CX
	JZ   q4kfold

q4ksb:
	Q4KSCALESV
	Q4KCHZ(0, Z4)
	Q4KCHZ(1, Z5)
	ZREDUCE4
	VMOVAPS X11, X6
	ACC4
	Q4KCHZ(2, Z4)
	Q4KCHZ(3, Z5)
	ZREDUCE4
	VEXTRACTF128 $1, Y11, X6
	ACC4
	ADDQ         $144, BX
	ADDQ         $256, DI
	ADDQ         $32, DX
	ADDQ         $32, R13
	DECQ         CX
	JNZ          q4ksb

q4kfold:
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

// Q6KHALF2(h, ZA, ZB): the 8 units of half h, two blocks per register: ql
// (64 bytes) in Z12, qh (32) in Y13; [quarter 0 | quarter 1] takes the low
// nibbles and qh bits 0-1 and 2-3, [quarter 2 | quarter 3] the high nibbles
// and bits 4-5 and 6-7, moved to bits 4-5 (0x30 bytes in Z25), against the
// codes from -32 sum x: ZA holds units 8h..8h+3 and ZB 8h+4..8h+7, one unit
// of 16 values per 128-bit lane, not yet reduced.
#define Q6KHALF2(h, ZA, ZB) \
	VMOVDQU64    (64*h)(BX), Z12; \
	VMOVDQU      (128+32*h)(BX), Y13; \
	VPSLLW       $4, Y13, Y16; \
	VPSLLW       $2, Y13, Y17; \
	VINSERTI64X4 $1, Y17, Z16, Z16; \
	VPANDD       Z25, Z16, Z16; \
	VPANDD       Z29, Z12, Z8; \
	VPORD        Z16, Z8, Z8; \
	VPSLLD       $5, (128*h)(R13), ZA; \
	VPDPBUSD     (128*h)(DI), Z8, ZA; \
	VPSRLW       $2, Y13, Y17; \
	VINSERTI64X4 $1, Y17, Z13, Z16; \
	VPANDD       Z25, Z16, Z16; \
	VPSRLW       $4, Z12, Z8; \
	VPANDD       Z29, Z8, Z8; \
	VPORD        Z16, Z8, Z8; \
	VPSLLD       $5, (128*h+64)(R13), ZB; \
	VPDPBUSD     (128*h+64)(DI), Z8, ZB

// Q6KREDUCE16: the 16 units' exact sums from Z18-Z21 (4 units each, one
// per 128-bit lane, 4 partial sums a unit) into Z18 in unit order: pairs
// of registers added across dwords, then qwords (lane l then holds units
// l, 4+l, 8+l, 12+l), then a transpose (Z22). Uses Z8, Z9.
#define Q6KREDUCE16 \
	VPUNPCKLDQ  Z19, Z18, Z8; \
	VPUNPCKHDQ  Z19, Z18, Z9; \
	VPADDD      Z9, Z8, Z18; \
	VPUNPCKLDQ  Z21, Z20, Z8; \
	VPUNPCKHDQ  Z21, Z20, Z9; \
	VPADDD      Z9, Z8, Z20; \
	VPUNPCKLQDQ Z20, Z18, Z8; \
	VPUNPCKHQDQ Z20, Z18, Z9; \
	VPADDD      Z9, Z8, Z18; \
	VPERMD      Z18, Z22, Z18

// q6kUnitIdx: output unit p from dword 4*(p mod 4) + p/4 (Q6KREDUCE16).
DATA q6kUnitIdx<>+0(SB)/8, $0x0000000400000000
DATA q6kUnitIdx<>+8(SB)/8, $0x0000000c00000008
DATA q6kUnitIdx<>+16(SB)/8, $0x0000000500000001
DATA q6kUnitIdx<>+24(SB)/8, $0x0000000d00000009
DATA q6kUnitIdx<>+32(SB)/8, $0x0000000600000002
DATA q6kUnitIdx<>+40(SB)/8, $0x0000000e0000000a
DATA q6kUnitIdx<>+48(SB)/8, $0x0000000700000003
DATA q6kUnitIdx<>+56(SB)/8, $0x0000000f0000000b
GLOBL q6kUnitIdx<>(SB), RODATA|NOPTR, $64

// dup8Idx: [0, 0, 1, 1, ..., 7, 7], each of 8 floats twice.
DATA dup8Idx<>+0(SB)/8, $0x0000000000000000
DATA dup8Idx<>+8(SB)/8, $0x0000000100000001
DATA dup8Idx<>+16(SB)/8, $0x0000000200000002
DATA dup8Idx<>+24(SB)/8, $0x0000000300000003
DATA dup8Idx<>+32(SB)/8, $0x0000000400000004
DATA dup8Idx<>+40(SB)/8, $0x0000000500000005
DATA dup8Idx<>+48(SB)/8, $0x0000000600000006
DATA dup8Idx<>+56(SB)/8, $0x0000000700000007
GLOBL dup8Idx<>(SB), RODATA|NOPTR, $64

// func q6kRowsVNNI(w unsafe.Pointer, stride, rows int, x *actView, out *float32)
//
// A super-block's 16 units are reduced together (Q6KREDUCE16) and scaled
// by one 16-lane product, (d * sc_u) * dx, then added to X0's lanes in
// unit order as ACC4 would, four units at a time.
TEXT ·q6kRowsVNNI(SB), NOSPLIT, $0-40
	ROWS_ARGS
	ZCONSTS
	MOVL         $0x30303030, AX
	VPBROADCASTD AX, Z25
	BCAST32(0x0f0f0f0f, X14, Y14)
	BCAST32(0x30303030, X3, Y3)
	VMOVDQU32 q6kUnitIdx<>(SB), Z22
	VMOVDQU32 dup8Idx<>(SB), Z23
	TESTQ   R10, R10
	JZ      q6kdone

q6krow:
	ROW_SETUP
	MOVQ   56(R11), R13
	VXORPS X0, X0, X0
	SHRQ   $3, CX

q6ksb:
	VPBROADCASTW 208(BX), Y6
	VCVTPH2PS    Y6, Z6
	VPMOVSXBD    192(BX), Z5
	VCVTDQ2PS    Z5, Z5
	VMULPS       Z6, Z5, Z5
	Q6KHALF2(0, Z18, Z19)
	Q6KHALF2(1, Z20, Z21)
	Q6KREDUCE16
	VMOVUPS       (DX), Y8
	VPERMPS       Z8, Z23, Z8
	VMULPS        Z5, Z8, Z9
	VCVTDQ2PS     Z18, Z18
	VMULPS        Z9, Z18, Z18
	VADDPS        X18, X0, X0
	VEXTRACTF32X4 $1, Z18, X8
	VADDPS        X8, X0, X0
	VEXTRACTF32X4 $2, Z18, X8
	VADDPS        X8, X0, X0
	VEXTRACTF32X4 $3, Z18, X8
	VADDPS        X8, X0, X0
	ADDQ         $210, BX
	ADDQ         $256, DI
	ADDQ         $256, R13
	ADDQ         $32, DX
	DECQ         CX
	JNZ          q6ksb

	HSUM4
	ROW_NEXT
	JNZ q6krow

q6kdone:
	VZEROUPPER
	RET

// Q8GINTV: 32 int8 at boff(BX), offset to unsigned, against x.
#define Q8GINTV(boff, xoff, Y) \
	VMOVDQU  (boff)(BX), Y8; \
	VPXOR    Y12, Y8, Y8; \
	VPSLLD   $7, (xoff)(R13), Y; \
	VPDPBUSD (xoff)(DI), Y8, Y

#define Q8GSCALES4V \
	MOVL      0(R14), R9; \
	VMOVSS    (AX)(R9*4), X6; \
	MOVL      4(R14), R9; \
	VINSERTPS $0x10, (AX)(R9*4), X6, X6; \
	MOVL      8(R14), R9; \
	VINSERTPS $0x20, (AX)(R9*4), X6, X6; \
	MOVL      12(R14), R9; \
	VINSERTPS $0x30, (AX)(R9*4), X6, X6; \
	VMULPS    (DX), X6, X6

#define Q8GSCALE1V \
	MOVL   0(R14), R9; \
	VMOVSS (AX)(R9*4), X6; \
	VMULSS (DX), X6, X6

// Q8GPAIRZ: 64 int8 at boff(BX) (two blocks) against 64 codes, into Z.
#define Q8GPAIRZ(boff, xoff, Z) \
	VMOVDQU64 (boff)(BX), Z8; \
	VPXORD    Z31, Z8, Z8; \
	VPSLLD    $7, (xoff)(R13), Z; \
	VPDPBUSD  (xoff)(DI), Z8, Z

// func q8gRowsVNNI(w unsafe.Pointer, stride, rows int, x *actView, out *float32)
TEXT ·q8gRowsVNNI(SB), NOSPLIT, $8-40
	ROWS_ARGS
	ZCONSTS
	BCAST32(0x80808080, X12, Y12)
	MOVQ  32(R11), AX
	MOVQ  AX, 0(SP)
	TESTQ R10, R10
	JZ    q8gdone

q8grow:
	ROW_SETUP
	MOVQ   56(R11), R13
	MOVQ   0(SP), AX
	MOVQ   64(R11), R14
	VXORPS X0, X0, X0
	MOVQ   CX, R8
	SHRQ   $2, R8
	JZ     q8gtail

q8gloop:
	Q8GPAIRZ(0, 0, Z4)
	Q8GPAIRZ(64, 64, Z5)
	ZREDUCE4
	Q8GSCALES4V
	ACC4
	ADDQ $128, BX
	ADDQ $128, DI
	ADDQ $128, R13
	ADDQ $16, DX
	ADDQ $16, R14
	DECQ R8
	JNZ  q8gloop

q8gtail:
	ANDQ $3, CX
	JZ   q8gfold
	Q8GINTV(0, 0, Y4)
	REDUCE1
	Q8GSCALE1V
	ADDLANE(0x0e)
	DECQ CX
	JZ   q8gfold
	ADDQ $32, BX
	ADDQ $32, DI
	ADDQ $32, R13
	ADDQ $4, DX
	ADDQ $4, R14
	Q8GINTV(0, 0, Y4)
	REDUCE1
	Q8GSCALE1V
	ADDLANE(0x1d)
	DECQ CX
	JZ   q8gfold
	ADDQ $32, BX
	ADDQ $32, DI
	ADDQ $32, R13
	ADDQ $4, DX
	ADDQ $4, R14
	Q8GINTV(0, 0, Y4)
	REDUCE1
	Q8GSCALE1V
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
