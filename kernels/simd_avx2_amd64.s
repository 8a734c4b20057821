//go:build amd64 && !purego

#include "textflag.h"

// AVX2 kernels. Each keeps the 32 canonical lanes (see dot.go) in Y0-Y3:
// Y0 holds lanes 0-7, Y1 lanes 8-15, Y2 lanes 16-23, Y3 lanes 24-31, so one
// step of 32 consecutive values adds one vector to each. Products are rounded
// (VMULPS) before they are added (VADDPS), never fused. Loads are unaligned and
// never peeled to an alignment boundary, so the order does not depend on where
// the data lies in memory.

// Step 2 of the canonical order: Y0 = (Y0+Y1) + (Y2+Y3).
#define FOLD32TO8 \
	VADDPS Y1, Y0, Y0; \
	VADDPS Y3, Y2, Y2; \
	VADDPS Y2, Y0, Y0

// Step 4: X0[0] = ((v0+v4) + (v2+v6)) + ((v1+v5) + (v3+v7)) for v in Y0.
#define HSUM8 \
	VEXTRACTF128 $1, Y0, X1; \
	VADDPS X1, X0, X0; \
	VMOVHLPS X0, X0, X1; \
	VADDPS X1, X0, X0; \
	VMOVSHDUP X0, X1; \
	VADDSS X1, X0, X0

#define ZERO4 \
	VXORPS Y0, Y0, Y0; \
	VXORPS Y1, Y1, Y1; \
	VXORPS Y2, Y2, Y2; \
	VXORPS Y3, Y3, Y3

// DOTSTEP adds round(V * x[xoff/4 : xoff/4+8]) to ACC, V holding 8 weights.
#define DOTSTEP(V, xoff, ACC) \
	VMULPS (xoff)(DI), V, V; \
	VADDPS V, ACC, ACC

// func dotF32AVX2(a unsafe.Pointer, b *float32, n int) float32
// Steps 1-4 for n a multiple of 8; a may be unaligned.
TEXT ·dotF32AVX2(SB), NOSPLIT, $0-28
	MOVQ a+0(FP), SI
	MOVQ b+8(FP), DI
	MOVQ n+16(FP), CX
	ZERO4
	MOVQ CX, DX
	SHRQ $5, DX
	JZ   f32fold

f32loop:
	VMOVUPS (SI), Y4
	DOTSTEP(Y4, 0, Y0)
	VMOVUPS 32(SI), Y5
	DOTSTEP(Y5, 32, Y1)
	VMOVUPS 64(SI), Y6
	DOTSTEP(Y6, 64, Y2)
	VMOVUPS 96(SI), Y7
	DOTSTEP(Y7, 96, Y3)
	ADDQ $128, SI
	ADDQ $128, DI
	DECQ DX
	JNZ  f32loop

f32fold:
	FOLD32TO8
	ANDQ $31, CX
	SHRQ $3, CX
	JZ   f32sum

f32loop8:
	VMOVUPS (SI), Y4
	DOTSTEP(Y4, 0, Y0)
	ADDQ $32, SI
	ADDQ $32, DI
	DECQ CX
	JNZ  f32loop8

f32sum:
	HSUM8
	VZEROUPPER
	MOVSS X0, ret+24(FP)
	RET

// func dotF16AVX2(a unsafe.Pointer, b *float32, n int) float32
// As dotF32AVX2 with IEEE half weights, widened exactly by VCVTPH2PS.
TEXT ·dotF16AVX2(SB), NOSPLIT, $0-28
	MOVQ a+0(FP), SI
	MOVQ b+8(FP), DI
	MOVQ n+16(FP), CX
	ZERO4
	MOVQ CX, DX
	SHRQ $5, DX
	JZ   f16fold

f16loop:
	VCVTPH2PS (SI), Y4
	DOTSTEP(Y4, 0, Y0)
	VCVTPH2PS 16(SI), Y5
	DOTSTEP(Y5, 32, Y1)
	VCVTPH2PS 32(SI), Y6
	DOTSTEP(Y6, 64, Y2)
	VCVTPH2PS 48(SI), Y7
	DOTSTEP(Y7, 96, Y3)
	ADDQ $64, SI
	ADDQ $128, DI
	DECQ DX
	JNZ  f16loop

f16fold:
	FOLD32TO8
	ANDQ $31, CX
	SHRQ $3, CX
	JZ   f16sum

f16loop8:
	VCVTPH2PS (SI), Y4
	DOTSTEP(Y4, 0, Y0)
	ADDQ $16, SI
	ADDQ $32, DI
	DECQ CX
	JNZ  f16loop8

f16sum:
	HSUM8
	VZEROUPPER
	MOVSS X0, ret+24(FP)
	RET

// BF16LOAD widens 8 bfloat16 values at off(SI) into V (a bf16 is the top half
// of an f32).
#define BF16LOAD(off, V) \
	VPMOVZXWD (off)(SI), V; \
	VPSLLD    $16, V, V

// func dotBF16AVX2(a unsafe.Pointer, b *float32, n int) float32
TEXT ·dotBF16AVX2(SB), NOSPLIT, $0-28
	MOVQ a+0(FP), SI
	MOVQ b+8(FP), DI
	MOVQ n+16(FP), CX
	ZERO4
	MOVQ CX, DX
	SHRQ $5, DX
	JZ   bf16fold

bf16loop:
	BF16LOAD(0, Y4)
	DOTSTEP(Y4, 0, Y0)
	BF16LOAD(16, Y5)
	DOTSTEP(Y5, 32, Y1)
	BF16LOAD(32, Y6)
	DOTSTEP(Y6, 64, Y2)
	BF16LOAD(48, Y7)
	DOTSTEP(Y7, 96, Y3)
	ADDQ $64, SI
	ADDQ $128, DI
	DECQ DX
	JNZ  bf16loop

bf16fold:
	FOLD32TO8
	ANDQ $31, CX
	SHRQ $3, CX
	JZ   bf16sum

bf16loop8:
	BF16LOAD(0, Y4)
	DOTSTEP(Y4, 0, Y0)
	ADDQ $16, SI
	ADDQ $32, DI
	DECQ CX
	JNZ  bf16loop8

bf16sum:
	HSUM8
	VZEROUPPER
	MOVSS X0, ret+24(FP)
	RET

// Q80STEP: weights d*q for 8 int8 at off(SI), d broadcast in Y4.
#define Q80STEP(off, xoff, ACC) \
	VPMOVSXBD (off)(SI), Y5; \
	VCVTDQ2PS Y5, Y5; \
	VMULPS    Y4, Y5, Y5; \
	DOTSTEP(Y5, xoff, ACC)

// func dotQ80AVX2(row unsafe.Pointer, x *float32, nblocks int) float32
// One 34-byte block is one step of 32 values.
TEXT ·dotQ80AVX2(SB), NOSPLIT, $0-28
	MOVQ row+0(FP), SI
	MOVQ x+8(FP), DI
	MOVQ nblocks+16(FP), CX
	ZERO4
	TESTQ CX, CX
	JZ    q80sum

q80loop:
	VPBROADCASTW (SI), X4
	VCVTPH2PS    X4, Y4
	Q80STEP(2, 0, Y0)
	Q80STEP(10, 32, Y1)
	Q80STEP(18, 64, Y2)
	Q80STEP(26, 96, Y3)
	ADDQ $34, SI
	ADDQ $128, DI
	DECQ CX
	JNZ  q80loop

q80sum:
	FOLD32TO8
	HSUM8
	VZEROUPPER
	MOVSS X0, ret+24(FP)
	RET

// Q40HALF: bytes off..off+7 of the nibbles give values lo..lo+7 (low
// nibbles) and lo+16.. (high nibbles); weights d*(nibble-8), d in Y4,
// 0x0f in Y14 and 8 in Y15 (int32 lanes).
#define Q40HALF(off, xlo, ACCLO, xhi, ACCHI) \
	VPMOVZXBD (off)(SI), Y5; \
	VPAND     Y14, Y5, Y6; \
	VPSRLD    $4, Y5, Y7; \
	VPSUBD    Y15, Y6, Y6; \
	VCVTDQ2PS Y6, Y6; \
	VMULPS    Y4, Y6, Y6; \
	DOTSTEP(Y6, xlo, ACCLO); \
	VPSUBD    Y15, Y7, Y7; \
	VCVTDQ2PS Y7, Y7; \
	VMULPS    Y4, Y7, Y7; \
	DOTSTEP(Y7, xhi, ACCHI)

// func dotQ40AVX2(row unsafe.Pointer, x *float32, nblocks int) float32
TEXT ·dotQ40AVX2(SB), NOSPLIT, $0-28
	MOVQ row+0(FP), SI
	MOVQ x+8(FP), DI
	MOVQ nblocks+16(FP), CX
	ZERO4
	MOVL         $0x0f, AX
	VMOVD        AX, X14
	VPBROADCASTD X14, Y14
	MOVL         $8, AX
	VMOVD        AX, X15
	VPBROADCASTD X15, Y15
	TESTQ        CX, CX
	JZ           q40sum

q40loop:
	VPBROADCASTW (SI), X4
	VCVTPH2PS    X4, Y4
	Q40HALF(2, 0, Y0, 64, Y2)
	Q40HALF(10, 32, Y1, 96, Y3)
	ADDQ $18, SI
	ADDQ $128, DI
	DECQ CX
	JNZ  q40loop

q40sum:
	FOLD32TO8
	HSUM8
	VZEROUPPER
	MOVSS X0, ret+24(FP)
	RET

// Q4KGROUP: 8 nibble bytes at 16+32c+8k give values 64c+8k.. (low nibbles,
// sub-block 2c: D in Y4, M in Y5) and 64c+32+8k.. (high nibbles, sub-block
// 2c+1: D in Y6, M in Y7); weight D*q - M, 0x0f in Y14.
#define Q4KGROUP(qoff, xlo, xhi, ACC) \
	VPMOVZXBD (qoff)(SI), Y8; \
	VPAND     Y14, Y8, Y9; \
	VPSRLD    $4, Y8, Y10; \
	VCVTDQ2PS Y9, Y9; \
	VMULPS    Y4, Y9, Y9; \
	VSUBPS    Y5, Y9, Y9; \
	DOTSTEP(Y9, xlo, ACC); \
	VCVTDQ2PS Y10, Y10; \
	VMULPS    Y6, Y10, Y10; \
	VSUBPS    Y7, Y10, Y10; \
	DOTSTEP(Y10, xhi, ACC)

// Q4KCHUNK: the 32 nibble bytes of chunk c: sub-blocks 2c and 2c+1, whose
// D are at 8c(SP), 8c+4(SP) and M at 32+8c(SP), 36+8c(SP).
#define Q4KCHUNK(c) \
	VBROADCASTSS (8*c)(SP), Y4; \
	VBROADCASTSS (32+8*c)(SP), Y5; \
	VBROADCASTSS (8*c+4)(SP), Y6; \
	VBROADCASTSS (36+8*c)(SP), Y7; \
	Q4KGROUP(16+32*c, 4*(64*c), 4*(64*c+32), Y0); \
	Q4KGROUP(16+32*c+8, 4*(64*c+8), 4*(64*c+40), Y1); \
	Q4KGROUP(16+32*c+16, 4*(64*c+16), 4*(64*c+48), Y2); \
	Q4KGROUP(16+32*c+24, 4*(64*c+24), 4*(64*c+56), Y3)

// func dotQ4KAVX2(row unsafe.Pointer, x *float32, nblocks int) float32
// The frame holds the super-block's D[0..7] at 0(SP) and M[0..7] at 32(SP).
TEXT ·dotQ4KAVX2(SB), NOSPLIT, $64-28
	MOVQ row+0(FP), SI
	MOVQ x+8(FP), DI
	MOVQ nblocks+16(FP), CX
	ZERO4
	MOVL         $0x0f, AX
	VMOVD        AX, X14
	VPBROADCASTD X14, Y14
	TESTQ        CX, CX
	JZ           q4ksum

q4kloop:
	// Unpack the 6-bit scales and mins four bytes at a time (see q4KScales).
	MOVL 4(SI), AX  // A: scales 0-3, top bits of scales 4-7
	MOVL 8(SI), BX  // B: mins 0-3, top bits of mins 4-7
	MOVL 12(SI), DX // C: low bits of scales 4-7 (low nibbles), mins 4-7 (high)
	MOVL AX, R8
	ANDL $0x3f3f3f3f, R8
	MOVL DX, R9
	ANDL $0x0f0f0f0f, R9
	MOVL AX, R10
	SHRL $2, R10
	ANDL $0x30303030, R10
	ORL  R10, R9
	SHLQ $32, R9
	ORQ  R9, R8           // R8: scale bytes 0-7
	MOVL BX, R11
	ANDL $0x3f3f3f3f, R11
	MOVL DX, R12
	SHRL $4, R12
	ANDL $0x0f0f0f0f, R12
	MOVL BX, R13
	SHRL $2, R13
	ANDL $0x30303030, R13
	ORL  R13, R12
	SHLQ $32, R12
	ORQ  R12, R11         // R11: min bytes 0-7

	VPBROADCASTW (SI), X4
	VCVTPH2PS    X4, Y4   // d
	VPBROADCASTW 2(SI), X5
	VCVTPH2PS    X5, Y5   // dmin
	VMOVQ        R8, X6
	VPMOVZXBD    X6, Y6
	VCVTDQ2PS    Y6, Y6
	VMULPS       Y4, Y6, Y6
	VMOVUPS      Y6, 0(SP)
	VMOVQ        R11, X7
	VPMOVZXBD    X7, Y7
	VCVTDQ2PS    Y7, Y7
	VMULPS       Y5, Y7, Y7
	VMOVUPS      Y7, 32(SP)

	Q4KCHUNK(0)
	Q4KCHUNK(1)
	Q4KCHUNK(2)
	Q4KCHUNK(3)
	ADDQ $144, SI
	ADDQ $1024, DI
	DECQ CX
	JNZ  q4kloop

q4ksum:
	FOLD32TO8
	HSUM8
	VZEROUPPER
	MOVSS X0, ret+24(FP)
	RET

// Q6KACC: Q holds 8 six-bit codes; weight S*(q-32) with S at soff(SP),
// 32 in Y15.
#define Q6KACC(Q, soff, xoff, ACC) \
	VPSUBD       Y15, Q, Q; \
	VCVTDQ2PS    Q, Q; \
	VBROADCASTSS (soff)(SP), Y10; \
	VMULPS       Y10, Q, Q; \
	DOTSTEP(Q, xoff, ACC)

// Q6KGROUP: values l = 8k..8k+7 of half h and their partners at l+32, l+64,
// l+96 (see dequantQ6K). A = ql[l], B = ql[l+32], H = qh[l] as int32 lanes;
// 0x0f in Y14, 0x30 in Y12. Sub-block of value 128h+32i+l is 8h+2i+k/2.
#define Q6KGROUP(h, k, ACC) \
	VPMOVZXBD (64*h+8*k)(SI), Y5; \
	VPMOVZXBD (64*h+32+8*k)(SI), Y6; \
	VPMOVZXBD (128+32*h+8*k)(SI), Y7; \
	VPAND     Y14, Y5, Y8; \
	VPSLLD    $4, Y7, Y9; \
	VPAND     Y12, Y9, Y9; \
	VPOR      Y9, Y8, Y8; \
	Q6KACC(Y8, 4*(8*h+k/2), 4*(128*h+8*k), ACC); \
	VPAND     Y14, Y6, Y8; \
	VPSLLD    $2, Y7, Y9; \
	VPAND     Y12, Y9, Y9; \
	VPOR      Y9, Y8, Y8; \
	Q6KACC(Y8, 4*(8*h+k/2+2), 4*(128*h+32+8*k), ACC); \
	VPSRLD    $4, Y5, Y8; \
	VPAND     Y12, Y7, Y9; \
	VPOR      Y9, Y8, Y8; \
	Q6KACC(Y8, 4*(8*h+k/2+4), 4*(128*h+64+8*k), ACC); \
	VPSRLD    $4, Y6, Y8; \
	VPSRLD    $2, Y7, Y9; \
	VPAND     Y12, Y9, Y9; \
	VPOR      Y9, Y8, Y8; \
	Q6KACC(Y8, 4*(8*h+k/2+6), 4*(128*h+96+8*k), ACC)

// func dotQ6KAVX2(row unsafe.Pointer, x *float32, nblocks int) float32
// The frame holds the super-block's S[0..15] at 0(SP).
TEXT ·dotQ6KAVX2(SB), NOSPLIT, $64-28
	MOVQ row+0(FP), SI
	MOVQ x+8(FP), DI
	MOVQ nblocks+16(FP), CX
	ZERO4
	MOVL         $0x0f, AX
	VMOVD        AX, X14
	VPBROADCASTD X14, Y14
	MOVL         $0x30, AX
	VMOVD        AX, X12
	VPBROADCASTD X12, Y12
	MOVL         $32, AX
	VMOVD        AX, X15
	VPBROADCASTD X15, Y15
	TESTQ        CX, CX
	JZ           q6ksum

q6kloop:
	VPBROADCASTW 208(SI), X4
	VCVTPH2PS    X4, Y4     // d
	VPMOVSXBD    192(SI), Y5
	VCVTDQ2PS    Y5, Y5
	VMULPS       Y4, Y5, Y5
	VMOVUPS      Y5, 0(SP)
	VPMOVSXBD    200(SI), Y5
	VCVTDQ2PS    Y5, Y5
	VMULPS       Y4, Y5, Y5
	VMOVUPS      Y5, 32(SP)

	Q6KGROUP(0, 0, Y0)
	Q6KGROUP(0, 1, Y1)
	Q6KGROUP(0, 2, Y2)
	Q6KGROUP(0, 3, Y3)
	Q6KGROUP(1, 0, Y0)
	Q6KGROUP(1, 1, Y1)
	Q6KGROUP(1, 2, Y2)
	Q6KGROUP(1, 3, Y3)
	ADDQ $210, SI
	ADDQ $1024, DI
	DECQ CX
	JNZ  q6kloop

q6ksum:
	FOLD32TO8
	HSUM8
	VZEROUPPER
	MOVSS X0, ret+24(FP)
	RET

// func scaleI8AVX2(dst *float32, src unsafe.Pointer, n int, s float32)
// dst[i] = float32(int8 src[i]) * s for i < n, n a multiple of 8.
TEXT ·scaleI8AVX2(SB), NOSPLIT, $0-28
	MOVQ         dst+0(FP), DI
	MOVQ         src+8(FP), SI
	MOVQ         n+16(FP), CX
	VBROADCASTSS s+24(FP), Y4
	SHRQ         $3, CX
	JZ           i8done

i8loop:
	VPMOVSXBD (SI), Y5
	VCVTDQ2PS Y5, Y5
	VMULPS    Y4, Y5, Y5
	VMOVUPS   Y5, (DI)
	ADDQ      $8, SI
	ADDQ      $32, DI
	DECQ      CX
	JNZ       i8loop

i8done:
	VZEROUPPER
	RET

// func dotQ8GAVX2(row, scales unsafe.Pointer, x *float32, ngroups, steps int) float32
// Q8G rows whose groups are whole multiples of 32 values and do not straddle
// rows: each group is steps steps of 32 int8 values sharing one f32 scale.
TEXT ·dotQ8GAVX2(SB), NOSPLIT, $0-44
	MOVQ row+0(FP), SI
	MOVQ scales+8(FP), BX
	MOVQ x+16(FP), DI
	MOVQ ngroups+24(FP), CX
	MOVQ steps+32(FP), R8
	ZERO4
	TESTQ CX, CX
	JZ    q8gsum

q8ggroup:
	VBROADCASTSS (BX), Y4
	MOVQ         R8, DX

q8gstep:
	Q80STEP(0, 0, Y0)
	Q80STEP(8, 32, Y1)
	Q80STEP(16, 64, Y2)
	Q80STEP(24, 96, Y3)
	ADDQ $32, SI
	ADDQ $128, DI
	DECQ DX
	JNZ  q8gstep
	ADDQ $4, BX
	DECQ CX
	JNZ  q8ggroup

q8gsum:
	FOLD32TO8
	HSUM8
	VZEROUPPER
	MOVSS X0, ret+40(FP)
	RET

// func cvtF16AVX2(dst *float32, src unsafe.Pointer, n int)
// dst[i] = f16 src[i] widened (exact), n a multiple of 8.
TEXT ·cvtF16AVX2(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	SHRQ $3, CX
	JZ   f16cdone

f16cloop:
	VCVTPH2PS (SI), Y0
	VMOVUPS   Y0, (DI)
	ADDQ      $16, SI
	ADDQ      $32, DI
	DECQ      CX
	JNZ       f16cloop

f16cdone:
	VZEROUPPER
	RET

// func cvtBF16AVX2(dst *float32, src unsafe.Pointer, n int)
// dst[i] = bf16 src[i] widened (its bits shifted up), n a multiple of 8.
TEXT ·cvtBF16AVX2(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	SHRQ $3, CX
	JZ   bf16cdone

bf16cloop:
	VPMOVZXWD (SI), Y0
	VPSLLD    $16, Y0, Y0
	VMOVUPS   Y0, (DI)
	ADDQ      $16, SI
	ADDQ      $32, DI
	DECQ      CX
	JNZ       bf16cloop

bf16cdone:
	VZEROUPPER
	RET

// func axpyAVX2(y *float32, a float32, x *float32, n int)
// y[i] += round(a * x[i]) for i < n, n a multiple of 8.
TEXT ·axpyAVX2(SB), NOSPLIT, $0-32
	MOVQ         y+0(FP), DI
	VBROADCASTSS a+8(FP), Y0
	MOVQ         x+16(FP), SI
	MOVQ         n+24(FP), CX
	SHRQ         $3, CX
	JZ           axpydone

axpyloop:
	VMULPS  (SI), Y0, Y1
	VADDPS  (DI), Y1, Y1
	VMOVUPS Y1, (DI)
	ADDQ    $32, SI
	ADDQ    $32, DI
	DECQ    CX
	JNZ     axpyloop

axpydone:
	VZEROUPPER
	RET

// func f32RowsAVX2(w unsafe.Pointer, stride, rows int, x *float32, n int, out *float32)
// out[r] = dotF32AVX2(w + r*stride, x, n) for r < rows.
TEXT ·f32RowsAVX2(SB), NOSPLIT, $0-48
	MOVQ w+0(FP), R8
	MOVQ rows+16(FP), R9
	MOVQ out+40(FP), R10
	TESTQ R9, R9
	JZ    rowsdone

rowsrow:
	MOVQ R8, SI
	MOVQ x+24(FP), DI
	MOVQ n+32(FP), CX
	ZERO4
	MOVQ CX, DX
	SHRQ $5, DX
	JZ   rowsfold

rowsloop:
	VMOVUPS (SI), Y4
	DOTSTEP(Y4, 0, Y0)
	VMOVUPS 32(SI), Y5
	DOTSTEP(Y5, 32, Y1)
	VMOVUPS 64(SI), Y6
	DOTSTEP(Y6, 64, Y2)
	VMOVUPS 96(SI), Y7
	DOTSTEP(Y7, 96, Y3)
	ADDQ $128, SI
	ADDQ $128, DI
	DECQ DX
	JNZ  rowsloop

rowsfold:
	FOLD32TO8
	ANDQ $31, CX
	SHRQ $3, CX
	JZ   rowssum

rowsloop8:
	VMOVUPS (SI), Y4
	DOTSTEP(Y4, 0, Y0)
	ADDQ $32, SI
	ADDQ $32, DI
	DECQ CX
	JNZ  rowsloop8

rowssum:
	HSUM8
	VMOVSS X0, (R10)
	ADDQ   $4, R10
	ADDQ   stride+8(FP), R8
	DECQ   R9
	JNZ    rowsrow

rowsdone:
	VZEROUPPER
	RET

// func axpyRowsAVX2(y *float32, n int, a *float32, x *float32, stride, rows int)
// For r = 0 .. rows-1 in order: y[i] += round(a[r] * x[r*stride/4 + i]),
// i < n, n a multiple of 8; y is held in registers, 32 columns at a time
// (4 independent sums), then 8 at a time.
TEXT ·axpyRowsAVX2(SB), NOSPLIT, $0-48
	MOVQ y+0(FP), DI
	MOVQ n+8(FP), CX
	MOVQ stride+32(FP), BX

arows32:
	CMPQ    CX, $32
	JB      arows8
	VMOVUPS (DI), Y0
	VMOVUPS 32(DI), Y1
	VMOVUPS 64(DI), Y2
	VMOVUPS 96(DI), Y3
	MOVQ    a+16(FP), SI
	MOVQ    x+24(FP), R8
	MOVQ    rows+40(FP), R9
	TESTQ   R9, R9
	JZ      arows32store

arows32row:
	VBROADCASTSS (SI), Y4
	VMULPS       (R8), Y4, Y5
	VADDPS       Y5, Y0, Y0
	VMULPS       32(R8), Y4, Y6
	VADDPS       Y6, Y1, Y1
	VMULPS       64(R8), Y4, Y7
	VADDPS       Y7, Y2, Y2
	VMULPS       96(R8), Y4, Y8
	VADDPS       Y8, Y3, Y3
	ADDQ         $4, SI
	ADDQ         BX, R8
	DECQ         R9
	JNZ          arows32row

arows32store:
	VMOVUPS Y0, (DI)
	VMOVUPS Y1, 32(DI)
	VMOVUPS Y2, 64(DI)
	VMOVUPS Y3, 96(DI)
	ADDQ    $128, DI
	ADDQ    $128, x+24(FP)
	SUBQ    $32, CX
	JMP     arows32

arows8:
	CMPQ    CX, $8
	JB      arowsdone
	VMOVUPS (DI), Y0
	MOVQ    a+16(FP), SI
	MOVQ    x+24(FP), R8
	MOVQ    rows+40(FP), R9
	TESTQ   R9, R9
	JZ      arows8store

arows8row:
	VBROADCASTSS (SI), Y4
	VMULPS       (R8), Y4, Y5
	VADDPS       Y5, Y0, Y0
	ADDQ         $4, SI
	ADDQ         BX, R8
	DECQ         R9
	JNZ          arows8row

arows8store:
	VMOVUPS Y0, (DI)
	ADDQ    $32, DI
	ADDQ    $32, x+24(FP)
	SUBQ    $8, CX
	JMP     arows8

arowsdone:
	VZEROUPPER
	RET
