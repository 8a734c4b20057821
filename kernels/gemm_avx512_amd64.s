//go:build amd64 && !purego

#include "textflag.h"
#include "intdot_amd64.h"

// GEMM register tiles: one row against 8 vectors. Vector t accumulates its
// 32 canonical lanes in Z(2t) (lanes 0-15) and Z(2t+1) (lanes 16-31), the
// same lanes as the matrix-vector kernels, so each result is the same bits.

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
