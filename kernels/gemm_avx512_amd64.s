//go:build amd64 && !purego

#include "textflag.h"
#include "intdot_amd64.h"

// GEMM register tiles. The float tile's every result accumulates its 32
// canonical lanes in two registers (lanes 0-15, lanes 16-31), the same lanes
// as the matrix-vector kernels, so each result is the same bits.

// I8ARGS loads the arguments of the integer tiles.
#define I8ARGS \
	MOVQ  w+0(FP), SI; \
	MOVQ  nunits+8(FP), CX; \
	MOVQ  xp+16(FP), DI; \
	MOVQ  out+24(FP), DX; \
	MOVQ  stride+32(FP), R11; \
	MOVQ  mask+40(FP), AX; \
	KMOVW AX, K3; \
	MOVQ  mins+48(FP), R12

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

// The float tile: two rows against 4 vectors. Each 32 values of a vector,
// loaded once into Z20 and Z21, serve both rows: a step of 4 vectors makes
// 12 loads for 16 products (AVX2's tile, one row against 8 vectors, makes
// 18). Row r's result for vector t accumulates in Z(8r+2t) (lanes 0-15) and
// Z(8r+2t+1) (lanes 16-31): the canonical lanes again, products rounded,
// then added, as in Dot.

// F32R2TOK: 32 values of vector P against both rows (Z16, Z17 and Z18,
// Z19) into row 0's LO0, HI0 and row 1's LO1, HI1.
#define F32R2TOK(P, LO0, HI0, LO1, HI1) \
	VMOVUPS (P)(AX*1), Z20; \
	VMOVUPS 64(P)(AX*1), Z21; \
	VMULPS  Z20, Z16, Z22; \
	VADDPS  Z22, LO0, LO0; \
	VMULPS  Z21, Z17, Z23; \
	VADDPS  Z23, HI0, HI0; \
	VMULPS  Z20, Z18, Z24; \
	VADDPS  Z24, LO1, LO1; \
	VMULPS  Z21, Z19, Z25; \
	VADDPS  Z25, HI1, HI1

// R2STEP: one step of 32 values of both rows against the 4 vectors.
#define R2STEP \
	VMOVUPS (SI)(AX*1), Z16; \
	VMOVUPS 64(SI)(AX*1), Z17; \
	VMOVUPS (R11)(AX*1), Z18; \
	VMOVUPS 64(R11)(AX*1), Z19; \
	F32R2TOK(DI, Z0, Z1, Z8, Z9); \
	F32R2TOK(R8, Z2, Z3, Z10, Z11); \
	F32R2TOK(R9, Z4, Z5, Z12, Z13); \
	F32R2TOK(R10, Z6, Z7, Z14, Z15)

// func gemmF32R2AVX512(w *float32, wStride, n int, x *float32, xStride int, out *[8]float32, pf uintptr)
// out[4r+t] = the canonical dot product of row r (w + r*wStride bytes, n
// values, n a multiple of 32) with vector t (x + t*xStride bytes). Unless
// pf is 0, the loop also prefetches two rows of n values at pf and
// pf+wStride, the same bytes per step as it reads from w: the weights of a
// batch come from memory, and the hardware's prefetcher alone left the
// tile waiting on them half the time.
TEXT ·gemmF32R2AVX512(SB), NOSPLIT, $0-56
	MOVQ w+0(FP), SI
	MOVQ wStride+8(FP), R11
	ADDQ SI, R11
	MOVQ n+16(FP), CX
	MOVQ x+24(FP), DI
	MOVQ xStride+32(FP), BX
	MOVQ out+40(FP), DX
	MOVQ pf+48(FP), R12
	LEAQ (DI)(BX*1), R8
	LEAQ (R8)(BX*1), R9
	LEAQ (R9)(BX*1), R10
	ZERO16
	XORQ AX, AX
	SHRQ $5, CX
	JZ   r2fold
	TESTQ R12, R12
	JZ    r2loop
	MOVQ  wStride+8(FP), R13
	ADDQ  R12, R13

r2loopPF:
	PREFETCHT0 (R12)(AX*1)
	PREFETCHT0 64(R12)(AX*1)
	PREFETCHT0 (R13)(AX*1)
	PREFETCHT0 64(R13)(AX*1)
	R2STEP
	ADDQ $128, AX
	DECQ CX
	JNZ  r2loopPF
	JMP  r2fold

r2loop:
	R2STEP
	ADDQ $128, AX
	DECQ CX
	JNZ  r2loop

r2fold:
	FOLDALL
	VZEROUPPER
	RET

// The integer GEMM tile (gemm.go): 16 rows in the lanes of a register
// against 4 vectors. Each row's integer-dot order (intdot.go) runs in its
// lane: per unit an exact int32 sum (VPDPBUSD of 4 bytes of each of the 16
// rows, interleaved, against 4 bytes of the vector broadcast to all lanes,
// from an accumulator started at -128 times the sum of the unit's codes,
// since the weights are stored as c+128), then one rounded product with the
// unit's scale (the rows' factors W times the vector's block scale, rounded)
// added to the lane of the unit's class u mod 4. Vector t's class c is
// Z(4t+c); Z16-Z19 are the int sums, Z20 a group of weights, Z21 the
// factors, Z22 the scales.
//
// The weights of a unit: its groups of 4 values, each 16 rows x 4 bytes
// (64 bytes), then the 16 rows' factors W (64 bytes). The vectors' packed
// entry for a unit (gemmPacked): 64 bytes per vector: the codes (bytes
// 0-31, or 0-15), the int32 -128*sum at 32, the float32 block scale at 36.

#define I8INIT \
	VPBROADCASTD 32(DI), Z16; \
	VPBROADCASTD 96(DI), Z17; \
	VPBROADCASTD 160(DI), Z18; \
	VPBROADCASTD 224(DI), Z19

// I8GROUP(g): the unit's group g (4 values) for the 16 rows and 4 vectors.
#define I8GROUP(g) \
	VMOVDQU64     (64*g)(SI), Z20; \
	VPDPBUSD.BCST (4*g)(DI), Z20, Z16; \
	VPDPBUSD.BCST (64+4*g)(DI), Z20, Z17; \
	VPDPBUSD.BCST (128+4*g)(DI), Z20, Z18; \
	VPDPBUSD.BCST (192+4*g)(DI), Z20, Z19

// I8SCALE(groups, F0, F1, F2, F3): the unit's float step for the 4 vectors
// into their lanes of class F*, then on to the next unit.
#define I8SCALE(groups, F0, F1, F2, F3) \
	VMOVUPS     (64*groups)(SI), Z21; \
	VCVTDQ2PS   Z16, Z16; \
	VMULPS.BCST 36(DI), Z21, Z22; \
	VMULPS      Z22, Z16, Z16; \
	VADDPS      Z16, F0, F0; \
	VCVTDQ2PS   Z17, Z17; \
	VMULPS.BCST 100(DI), Z21, Z22; \
	VMULPS      Z22, Z17, Z17; \
	VADDPS      Z17, F1, F1; \
	VCVTDQ2PS   Z18, Z18; \
	VMULPS.BCST 164(DI), Z21, Z22; \
	VMULPS      Z22, Z18, Z18; \
	VADDPS      Z18, F2, F2; \
	VCVTDQ2PS   Z19, Z19; \
	VMULPS.BCST 228(DI), Z21, Z22; \
	VMULPS      Z22, Z19, Z19; \
	VADDPS      Z19, F3, F3; \
	ADDQ        $(64*groups+64), SI; \
	ADDQ        $256, DI

#define UNIT32(F0, F1, F2, F3) \
	I8INIT; \
	I8GROUP(0); \
	I8GROUP(1); \
	I8GROUP(2); \
	I8GROUP(3); \
	I8GROUP(4); \
	I8GROUP(5); \
	I8GROUP(6); \
	I8GROUP(7); \
	I8SCALE(8, F0, F1, F2, F3)

#define UNIT16(F0, F1, F2, F3) \
	I8INIT; \
	I8GROUP(0); \
	I8GROUP(1); \
	I8GROUP(2); \
	I8GROUP(3); \
	I8SCALE(4, F0, F1, F2, F3)

// I8FOLD: vector t's 16 results (c0 + c2) + (c1 + c3), minus its 16 Q4_K
// minimums at off(R12) (zeros for other types: x - 0 is x), stored at DX
// through mask K3 (the valid rows), then DX moves to the next vector's row
// (stride R11).
#define I8FOLD(C0, C1, C2, C3, off) \
	VADDPS  C2, C0, C0; \
	VADDPS  C3, C1, C1; \
	VADDPS  C1, C0, C0; \
	VSUBPS  off(R12), C0, C0; \
	VMOVUPS C0, K3, (DX); \
	ADDQ    R11, DX

#define I8FOLDALL \
	I8FOLD(Z0, Z1, Z2, Z3, 0); \
	I8FOLD(Z4, Z5, Z6, Z7, 64); \
	I8FOLD(Z8, Z9, Z10, Z11, 128); \
	I8FOLD(Z12, Z13, Z14, Z15, 192)

// func gemmI8U32VNNI(w *byte, nunits int, xp *byte, out *float32, stride, mask int, mins *float32)
// Units of 32 values; nunits a multiple of 4. Vector t's results go to
// out + t*stride bytes, the rows where mask has a bit.
TEXT ·gemmI8U32VNNI(SB), NOSPLIT, $0-56
	I8ARGS
	ZERO16
	SHRQ $2, CX
	JZ   u32fold

u32loop:
	UNIT32(Z0, Z4, Z8, Z12)
	UNIT32(Z1, Z5, Z9, Z13)
	UNIT32(Z2, Z6, Z10, Z14)
	UNIT32(Z3, Z7, Z11, Z15)
	DECQ CX
	JNZ  u32loop

u32fold:
	I8FOLDALL
	VZEROUPPER
	RET

// func gemmI8U16VNNI(w *byte, nunits int, xp *byte, out *float32, stride, mask int, mins *float32)
// Units of 16 values (Q6_K's halves); as gemmI8U32VNNI otherwise.
TEXT ·gemmI8U16VNNI(SB), NOSPLIT, $0-56
	I8ARGS
	ZERO16
	SHRQ $2, CX
	JZ   u16fold

u16loop:
	UNIT16(Z0, Z4, Z8, Z12)
	UNIT16(Z1, Z5, Z9, Z13)
	UNIT16(Z2, Z6, Z10, Z14)
	UNIT16(Z3, Z7, Z11, Z15)
	DECQ CX
	JNZ  u16loop

u16fold:
	I8FOLDALL
	VZEROUPPER
	RET

// MINSB(j, ACC): block j of the super-block.
#define MINSB(j, ACC) \
	VMOVUPS     (64*j)(SI), Z8; \
	VMULPS.BCST (4*j)(DI), Z8, Z8; \
	VMULPS.BCST (4*j)(R8), Z8, Z8; \
	VADDPS      Z8, ACC, ACC

// func q4kMins16VNNI(m *float32, nb int, d, bs *float32, out *[16]float32)
// Q4_K's minimums for 16 rows (m: per block, the 16 rows' factors M) and
// one vector: class j = b mod 8 of each row += round(round(M * dx_b) *
// bs_b), then the fold ((m0+m4) + (m2+m6)) + ((m1+m5) + (m3+m7)).
TEXT ·q4kMins16VNNI(SB), NOSPLIT, $0-40
	MOVQ   m+0(FP), SI
	MOVQ   nb+8(FP), CX
	MOVQ   d+16(FP), DI
	MOVQ   bs+24(FP), R8
	MOVQ   out+32(FP), DX
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	VPXORD Z4, Z4, Z4
	VPXORD Z5, Z5, Z5
	VPXORD Z6, Z6, Z6
	VPXORD Z7, Z7, Z7
	SHRQ   $3, CX
	JZ     minsfold

minssb:
	MINSB(0, Z0)
	MINSB(1, Z1)
	MINSB(2, Z2)
	MINSB(3, Z3)
	MINSB(4, Z4)
	MINSB(5, Z5)
	MINSB(6, Z6)
	MINSB(7, Z7)
	ADDQ $512, SI
	ADDQ $32, DI
	ADDQ $32, R8
	DECQ CX
	JNZ  minssb

minsfold:
	VADDPS  Z4, Z0, Z0
	VADDPS  Z6, Z2, Z2
	VADDPS  Z2, Z0, Z0
	VADDPS  Z5, Z1, Z1
	VADDPS  Z7, Z3, Z3
	VADDPS  Z3, Z1, Z1
	VADDPS  Z1, Z0, Z0
	VMOVUPS Z0, (DX)
	VZEROUPPER
	RET

// func interleave16VNNI(u *byte, wf *float32, cols, nunits, groups int, dst *byte)
// The integer tile's weight form from 16 unpacked rows (u: 16 rows of cols
// bytes; wf: 16 rows of cols/4 factors, also cols bytes per row): for each
// unit, each of its groups of 4 bytes for the 16 rows (one gather each),
// then the 16 rows' factors of the unit.
TEXT ·interleave16VNNI(SB), NOSPLIT, $0-48
	MOVQ u+0(FP), SI
	MOVQ wf+8(FP), R8
	MOVQ cols+16(FP), AX
	MOVQ nunits+24(FP), CX
	MOVQ groups+32(FP), BX
	MOVQ dst+40(FP), DI
	// Z2 = row offsets k*cols, k = 0..15.
	VPBROADCASTD AX, Z3
	VMOVDQU32    rowIdx<>(SB), Z2
	VPMULLD      Z3, Z2, Z2
	MOVQ         BX, R10
	SHLQ         $2, R10 // bytes of a unit's codes in a row (4 per group)

ilunit:
	MOVQ SI, R9
	MOVQ BX, DX

ilgroup:
	KXNORW     K1, K1, K1
	VPGATHERDD (R9)(Z2*1), K1, Z0
	VMOVDQU32  Z0, (DI)
	ADDQ       $4, R9
	ADDQ       $64, DI
	DECQ       DX
	JNZ        ilgroup

	KXNORW     K1, K1, K1
	VGATHERDPS (R8)(Z2*1), K1, Z1
	VMOVUPS    Z1, (DI)
	ADDQ       $64, DI
	ADDQ       R10, SI
	ADDQ       R10, R8 // a unit has groups factors per row, 4 bytes each
	DECQ       CX
	JNZ        ilunit
	VZEROUPPER
	RET

DATA rowIdx<>+0(SB)/8, $0x0000000100000000
DATA rowIdx<>+8(SB)/8, $0x0000000300000002
DATA rowIdx<>+16(SB)/8, $0x0000000500000004
DATA rowIdx<>+24(SB)/8, $0x0000000700000006
DATA rowIdx<>+32(SB)/8, $0x0000000900000008
DATA rowIdx<>+40(SB)/8, $0x0000000b0000000a
DATA rowIdx<>+48(SB)/8, $0x0000000d0000000c
DATA rowIdx<>+56(SB)/8, $0x0000000f0000000e
GLOBL rowIdx<>(SB), RODATA|NOPTR, $64

// The fused unpack and interleave of 16 whole Q8_0 rows (the integer
// tile's weight form, as unpacked.interleave builds it from unpackRow's
// output): per block, the 16 rows' 32 codes are loaded two rows to a
// register, transposed as 16 x 8 dwords (stages 1 and 2 permute dwords
// across register pairs, stage 3 swaps 256-bit halves; the indices were
// generated and checked by a model of the transpose), offset by 128 and
// stored as the unit's 8 groups; the 16 f16 scales come by word inserts.
// It replaces 16 unpack passes and 9 gathers per unit, and prefetches the
// next 16 rows (pf: 9 lines per unit, 16 x 34 = 544 bytes).

DATA q80TrIdx1a<>+0(SB)/8, $0x0000000800000000
DATA q80TrIdx1a<>+8(SB)/8, $0x0000001800000010
DATA q80TrIdx1a<>+16(SB)/8, $0x0000000a00000002
DATA q80TrIdx1a<>+24(SB)/8, $0x0000001a00000012
DATA q80TrIdx1a<>+32(SB)/8, $0x0000000c00000004
DATA q80TrIdx1a<>+40(SB)/8, $0x0000001c00000014
DATA q80TrIdx1a<>+48(SB)/8, $0x0000000e00000006
DATA q80TrIdx1a<>+56(SB)/8, $0x0000001e00000016
GLOBL q80TrIdx1a<>(SB), RODATA|NOPTR, $64

DATA q80TrIdx1b<>+0(SB)/8, $0x0000000900000001
DATA q80TrIdx1b<>+8(SB)/8, $0x0000001900000011
DATA q80TrIdx1b<>+16(SB)/8, $0x0000000b00000003
DATA q80TrIdx1b<>+24(SB)/8, $0x0000001b00000013
DATA q80TrIdx1b<>+32(SB)/8, $0x0000000d00000005
DATA q80TrIdx1b<>+40(SB)/8, $0x0000001d00000015
DATA q80TrIdx1b<>+48(SB)/8, $0x0000000f00000007
DATA q80TrIdx1b<>+56(SB)/8, $0x0000001f00000017
GLOBL q80TrIdx1b<>(SB), RODATA|NOPTR, $64

DATA q80TrIdx2a<>+0(SB)/8, $0x0000000100000000
DATA q80TrIdx2a<>+8(SB)/8, $0x0000000300000002
DATA q80TrIdx2a<>+16(SB)/8, $0x0000001100000010
DATA q80TrIdx2a<>+24(SB)/8, $0x0000001300000012
DATA q80TrIdx2a<>+32(SB)/8, $0x0000000900000008
DATA q80TrIdx2a<>+40(SB)/8, $0x0000000b0000000a
DATA q80TrIdx2a<>+48(SB)/8, $0x0000001900000018
DATA q80TrIdx2a<>+56(SB)/8, $0x0000001b0000001a
GLOBL q80TrIdx2a<>(SB), RODATA|NOPTR, $64

DATA q80TrIdx2b<>+0(SB)/8, $0x0000000500000004
DATA q80TrIdx2b<>+8(SB)/8, $0x0000000700000006
DATA q80TrIdx2b<>+16(SB)/8, $0x0000001500000014
DATA q80TrIdx2b<>+24(SB)/8, $0x0000001700000016
DATA q80TrIdx2b<>+32(SB)/8, $0x0000000d0000000c
DATA q80TrIdx2b<>+40(SB)/8, $0x0000000f0000000e
DATA q80TrIdx2b<>+48(SB)/8, $0x0000001d0000001c
DATA q80TrIdx2b<>+56(SB)/8, $0x0000001f0000001e
GLOBL q80TrIdx2b<>(SB), RODATA|NOPTR, $64

// TRANSPOSE16X8(OFS): Z0-Z7 = rows (2i, 2i+1) of a block's codes -> the
// unit's 8 groups at DI, each offset by OFS with Z31 (Q8_0: XOR 0x80, Q4_0:
// add 120, both c+128). Uses Z8-Z15; Z24-Z27 the indices.
#define TRANSPOSE16X8(OFS) \
	VMOVDQA64 Z25, Z8 \
	VPERMI2D  Z1, Z0, Z8 \
	VPERMT2D  Z1, Z24, Z0 \
	VMOVDQA64 Z25, Z9 \
	VPERMI2D  Z3, Z2, Z9 \
	VPERMT2D  Z3, Z24, Z2 \
	VMOVDQA64 Z25, Z10 \
	VPERMI2D  Z5, Z4, Z10 \
	VPERMT2D  Z5, Z24, Z4 \
	VMOVDQA64 Z25, Z11 \
	VPERMI2D  Z7, Z6, Z11 \
	VPERMT2D  Z7, Z24, Z6 \
	VMOVDQA64 Z27, Z12 \
	VPERMI2D  Z2, Z0, Z12 \
	VPERMT2D  Z2, Z26, Z0 \
	VMOVDQA64 Z27, Z13 \
	VPERMI2D  Z9, Z8, Z13 \
	VPERMT2D  Z9, Z26, Z8 \
	VMOVDQA64 Z27, Z14 \
	VPERMI2D  Z6, Z4, Z14 \
	VPERMT2D  Z6, Z26, Z4 \
	VMOVDQA64 Z27, Z15 \
	VPERMI2D  Z11, Z10, Z15 \
	VPERMT2D  Z11, Z26, Z10 \
	VSHUFI64X2 $0xee, Z4, Z0, Z1 \
	VSHUFI64X2 $0x44, Z4, Z0, Z0 \
	VSHUFI64X2 $0xee, Z10, Z8, Z3 \
	VSHUFI64X2 $0x44, Z10, Z8, Z8 \
	VSHUFI64X2 $0xee, Z14, Z12, Z5 \
	VSHUFI64X2 $0x44, Z14, Z12, Z12 \
	VSHUFI64X2 $0xee, Z15, Z13, Z7 \
	VSHUFI64X2 $0x44, Z15, Z13, Z13 \
	OFS       Z31, Z0, Z0 \
	VMOVDQU64 Z0, 0(DI) \
	OFS       Z31, Z8, Z8 \
	VMOVDQU64 Z8, 64(DI) \
	OFS       Z31, Z12, Z12 \
	VMOVDQU64 Z12, 128(DI) \
	OFS       Z31, Z13, Z13 \
	VMOVDQU64 Z13, 192(DI) \
	OFS       Z31, Z1, Z1 \
	VMOVDQU64 Z1, 256(DI) \
	OFS       Z31, Z3, Z3 \
	VMOVDQU64 Z3, 320(DI) \
	OFS       Z31, Z5, Z5 \
	VMOVDQU64 Z5, 384(DI) \
	OFS       Z31, Z7, Z7 \
	VMOVDQU64 Z7, 448(DI)

// Q80LOADS: the 16 rows' codes of the block at R8-R11 (rows 4j to 4j+3
// from R(8+j), stride BX, R13 = 3 x stride) into Z0-Z7.
#define Q80LOADS \
	VMOVDQU      2(R8), Y0 \
	VINSERTI64X4 $1, 2(R8)(BX*1), Z0, Z0 \
	VMOVDQU      2(R8)(BX*2), Y1 \
	VINSERTI64X4 $1, 2(R8)(R13*1), Z1, Z1 \
	VMOVDQU      2(R9), Y2 \
	VINSERTI64X4 $1, 2(R9)(BX*1), Z2, Z2 \
	VMOVDQU      2(R9)(BX*2), Y3 \
	VINSERTI64X4 $1, 2(R9)(R13*1), Z3, Z3 \
	VMOVDQU      2(R10), Y4 \
	VINSERTI64X4 $1, 2(R10)(BX*1), Z4, Z4 \
	VMOVDQU      2(R10)(BX*2), Y5 \
	VINSERTI64X4 $1, 2(R10)(R13*1), Z5, Z5 \
	VMOVDQU      2(R11), Y6 \
	VINSERTI64X4 $1, 2(R11)(BX*1), Z6, Z6 \
	VMOVDQU      2(R11)(BX*2), Y7 \
	VINSERTI64X4 $1, 2(R11)(R13*1), Z7, Z7

// SCALES8(A, B, X): X = the f16 scales (word 0 of the block) of the 8
// rows at A and B (4 each, stride BX, R13 = 3 x stride).
#define SCALES8(A, B, X) \
	VPXORD  X, X, X \
	VPINSRW $0, (A), X, X \
	VPINSRW $1, (A)(BX*1), X, X \
	VPINSRW $2, (A)(BX*2), X, X \
	VPINSRW $3, (A)(R13*1), X, X \
	VPINSRW $4, (B), X, X \
	VPINSRW $5, (B)(BX*1), X, X \
	VPINSRW $6, (B)(BX*2), X, X \
	VPINSRW $7, (B)(R13*1), X, X

// SCALES16: Z28 = the f16 scales of the 16 rows at R8-R11, widened. Word
// inserts: a VPGATHERDD of them cost more.
#define SCALES16 \
	SCALES8(R8, R9, X28) \
	SCALES8(R10, R11, X29) \
	VINSERTI32X4 $1, X29, Y28, Y28 \
	VCVTPH2PS    Y28, Z28

// IL_ARGS loads the arguments of the fused interleaves: R8-R11 rows 0, 4,
// 8 and 12 (stride BX, R13 = 3 x stride), CX blocks, DI dst, R12 pf, and
// the transpose's indices in Z24-Z27.
#define IL_ARGS \
	MOVQ      w+0(FP), R8 \
	MOVQ      stride+8(FP), BX \
	MOVQ      nb+16(FP), CX \
	MOVQ      dst+24(FP), DI \
	MOVQ      pf+32(FP), R12 \
	LEAQ      (BX)(BX*2), R13 \
	LEAQ      (R8)(BX*4), R9 \
	LEAQ      (R9)(BX*4), R10 \
	LEAQ      (R10)(BX*4), R11 \
	VMOVDQU32 q80TrIdx1a<>(SB), Z24 \
	VMOVDQU32 q80TrIdx1b<>(SB), Z25 \
	VMOVDQU32 q80TrIdx2a<>(SB), Z26 \
	VMOVDQU32 q80TrIdx2b<>(SB), Z27

// IL_NEXT(bs, pf) moves the rows to the next block (bs bytes), the
// prefetch on by pf bytes (16 rows' worth) and dst to the next unit.
#define IL_NEXT(bs, pf) \
	ADDQ bs, R8 \
	ADDQ bs, R9 \
	ADDQ bs, R10 \
	ADDQ bs, R11 \
	ADDQ pf, R12 \
	ADDQ $576, DI

// func interleaveQ80VNNI(w unsafe.Pointer, stride, nb int, dst *byte, pf unsafe.Pointer)
TEXT ·interleaveQ80VNNI(SB), NOSPLIT, $0-40
	IL_ARGS
	MOVL         $0x80808080, AX
	VPBROADCASTD AX, Z31
	TESTQ CX, CX
	JZ    q80ildone

q80ilunit:
	PREFETCHT0 (R12)
	PREFETCHT0 64(R12)
	PREFETCHT0 128(R12)
	PREFETCHT0 192(R12)
	PREFETCHT0 256(R12)
	PREFETCHT0 320(R12)
	PREFETCHT0 384(R12)
	PREFETCHT0 448(R12)
	PREFETCHT0 512(R12)
	Q80LOADS
	SCALES16
	TRANSPOSE16X8(VPXORD)
	VMOVUPS    Z28, 512(DI)
	IL_NEXT($34, $544)
	DECQ CX
	JNZ  q80ilunit

q80ildone:
	VZEROUPPER
	RET

// Q40LOADS: as Q80LOADS for the Q4_0 blocks at R8-R11: each row's 16
// bytes of nibbles broadcast to both 128-bit lanes of its half (the second
// row of a register through K2, the upper 8 dwords), the second lane of
// each shifted right by 4 (Z17, the word shift counts of nibShift) and all
// masked to 4 bits (Z16): the 32 codes in value order, as unpackRow has
// them.
#define Q40LOAD(lo, hi, Z) \
	VBROADCASTI32X4 lo, Z \
	VBROADCASTI32X4 hi, K2, Z \
	VPSRLVW         Z17, Z, Z \
	VPANDD          Z16, Z, Z

#define Q40LOADS \
	Q40LOAD(2(R8), 2(R8)(BX*1), Z0) \
	Q40LOAD(2(R8)(BX*2), 2(R8)(R13*1), Z1) \
	Q40LOAD(2(R9), 2(R9)(BX*1), Z2) \
	Q40LOAD(2(R9)(BX*2), 2(R9)(R13*1), Z3) \
	Q40LOAD(2(R10), 2(R10)(BX*1), Z4) \
	Q40LOAD(2(R10)(BX*2), 2(R10)(R13*1), Z5) \
	Q40LOAD(2(R11), 2(R11)(BX*1), Z6) \
	Q40LOAD(2(R11)(BX*2), 2(R11)(R13*1), Z7)

// func interleaveQ40VNNI(w unsafe.Pointer, stride, nb int, dst *byte, pf unsafe.Pointer)
// interleaveQ80VNNI for Q4_0 (18-byte blocks: 16 x 18 = 288 bytes, 5
// lines, prefetched per unit).
TEXT ·interleaveQ40VNNI(SB), NOSPLIT, $0-40
	IL_ARGS
	VMOVDQU32    q40NibShift<>(SB), Z17
	MOVL         $0x0f0f0f0f, AX
	VPBROADCASTD AX, Z16
	MOVL         $0x78787878, AX
	VPBROADCASTD AX, Z31
	MOVL         $0xff00, AX
	KMOVW        AX, K2
	TESTQ CX, CX
	JZ    q40ildone

q40ilunit:
	PREFETCHT0 (R12)
	PREFETCHT0 64(R12)
	PREFETCHT0 128(R12)
	PREFETCHT0 192(R12)
	PREFETCHT0 256(R12)
	Q40LOADS
	SCALES16
	TRANSPOSE16X8(VPADDB)
	VMOVUPS    Z28, 512(DI)
	IL_NEXT($18, $288)
	DECQ CX
	JNZ  q40ilunit

q40ildone:
	VZEROUPPER
	RET

// q40NibShift: word shift counts [0 x8, 4 x8, 0 x8, 4 x8].
DATA q40NibShift<>+0(SB)/8, $0
DATA q40NibShift<>+8(SB)/8, $0
DATA q40NibShift<>+16(SB)/8, $0x0004000400040004
DATA q40NibShift<>+24(SB)/8, $0x0004000400040004
DATA q40NibShift<>+32(SB)/8, $0
DATA q40NibShift<>+40(SB)/8, $0
DATA q40NibShift<>+48(SB)/8, $0x0004000400040004
DATA q40NibShift<>+56(SB)/8, $0x0004000400040004
GLOBL q40NibShift<>(SB), RODATA|NOPTR, $64
