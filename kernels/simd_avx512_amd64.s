//go:build amd64 && !purego

#include "textflag.h"

// AVX-512 kernels. They keep the same 32 canonical lanes as the AVX2 ones
// (see dot.go) in two registers, Z0 = lanes 0-15 and Z1 = lanes 16-31, and
// fold them to 8 lanes in the same tree, so both give identical bits. After
// the fold they continue with the 256-bit code (FOLD_TO8 leaves Y0).

// Step 2: Y0 = (lane[i] + lane[i+8]) + (lane[i+16] + lane[i+24]).
#define FOLD_TO8 \
	VEXTRACTF64X4 $1, Z0, Y2; \
	VADDPS        Y2, Y0, Y0; \
	VEXTRACTF64X4 $1, Z1, Y3; \
	VADDPS        Y3, Y1, Y1; \
	VADDPS        Y1, Y0, Y0

// Step 4, as in the AVX2 file.
#define HSUM8_512 \
	VEXTRACTF128 $1, Y0, X1; \
	VADDPS       X1, X0, X0; \
	VMOVHLPS     X0, X0, X1; \
	VADDPS       X1, X0, X0; \
	VMOVSHDUP    X0, X1; \
	VADDSS       X1, X0, X0

#define ZERO2 \
	VPXORD Z0, Z0, Z0; \
	VPXORD Z1, Z1, Z1

// ZSTEP adds round(V * x[xoff/4 : xoff/4+16]) to ACC.
#define ZSTEP(V, xoff, ACC) \
	VMULPS (xoff)(DI), V, V; \
	VADDPS V, ACC, ACC

// YSTEP8 is the 8-wide phase (step 3) on Y0.
#define YSTEP8(V) \
	VMULPS (DI), V, V; \
	VADDPS V, Y0, Y0

// func dotF32AVX512(a unsafe.Pointer, b *float32, n int) float32
TEXT ·dotF32AVX512(SB), NOSPLIT, $0-28
	MOVQ a+0(FP), SI
	MOVQ b+8(FP), DI
	MOVQ n+16(FP), CX
	ZERO2
	MOVQ CX, DX
	SHRQ $5, DX
	JZ   f32fold

f32loop:
	VMOVUPS (SI), Z4
	ZSTEP(Z4, 0, Z0)
	VMOVUPS 64(SI), Z5
	ZSTEP(Z5, 64, Z1)
	ADDQ $128, SI
	ADDQ $128, DI
	DECQ DX
	JNZ  f32loop

f32fold:
	FOLD_TO8
	ANDQ $31, CX
	SHRQ $3, CX
	JZ   f32sum

f32loop8:
	VMOVUPS (SI), Y4
	YSTEP8(Y4)
	ADDQ $32, SI
	ADDQ $32, DI
	DECQ CX
	JNZ  f32loop8

f32sum:
	HSUM8_512
	VZEROUPPER
	MOVSS X0, ret+24(FP)
	RET

// func dotF16AVX512(a unsafe.Pointer, b *float32, n int) float32
TEXT ·dotF16AVX512(SB), NOSPLIT, $0-28
	MOVQ a+0(FP), SI
	MOVQ b+8(FP), DI
	MOVQ n+16(FP), CX
	ZERO2
	MOVQ CX, DX
	SHRQ $5, DX
	JZ   f16fold

f16loop:
	VCVTPH2PS (SI), Z4
	ZSTEP(Z4, 0, Z0)
	VCVTPH2PS 32(SI), Z5
	ZSTEP(Z5, 64, Z1)
	ADDQ $64, SI
	ADDQ $128, DI
	DECQ DX
	JNZ  f16loop

f16fold:
	FOLD_TO8
	ANDQ $31, CX
	SHRQ $3, CX
	JZ   f16sum

f16loop8:
	VCVTPH2PS (SI), Y4
	YSTEP8(Y4)
	ADDQ $16, SI
	ADDQ $32, DI
	DECQ CX
	JNZ  f16loop8

f16sum:
	HSUM8_512
	VZEROUPPER
	MOVSS X0, ret+24(FP)
	RET

// func dotBF16AVX512(a unsafe.Pointer, b *float32, n int) float32
TEXT ·dotBF16AVX512(SB), NOSPLIT, $0-28
	MOVQ a+0(FP), SI
	MOVQ b+8(FP), DI
	MOVQ n+16(FP), CX
	ZERO2
	MOVQ CX, DX
	SHRQ $5, DX
	JZ   bf16fold

bf16loop:
	VPMOVZXWD (SI), Z4
	VPSLLD    $16, Z4, Z4
	ZSTEP(Z4, 0, Z0)
	VPMOVZXWD 32(SI), Z5
	VPSLLD    $16, Z5, Z5
	ZSTEP(Z5, 64, Z1)
	ADDQ $64, SI
	ADDQ $128, DI
	DECQ DX
	JNZ  bf16loop

bf16fold:
	FOLD_TO8
	ANDQ $31, CX
	SHRQ $3, CX
	JZ   bf16sum

bf16loop8:
	VPMOVZXWD (SI), Y4
	VPSLLD    $16, Y4, Y4
	YSTEP8(Y4)
	ADDQ $16, SI
	ADDQ $32, DI
	DECQ CX
	JNZ  bf16loop8

bf16sum:
	HSUM8_512
	VZEROUPPER
	MOVSS X0, ret+24(FP)
	RET

// LOADD16 broadcasts the f16 at off(SI), widened, to all of Z4.
#define LOADD16(off) \
	VPBROADCASTW (off)(SI), Y4; \
	VCVTPH2PS    Y4, Z4

// func dotQ80AVX512(row unsafe.Pointer, x *float32, nblocks int) float32
TEXT ·dotQ80AVX512(SB), NOSPLIT, $0-28
	MOVQ row+0(FP), SI
	MOVQ x+8(FP), DI
	MOVQ nblocks+16(FP), CX
	ZERO2
	TESTQ CX, CX
	JZ    q80sum

q80loop:
	LOADD16(0)
	VPMOVSXBD 2(SI), Z5
	VCVTDQ2PS Z5, Z5
	VMULPS    Z4, Z5, Z5
	ZSTEP(Z5, 0, Z0)
	VPMOVSXBD 18(SI), Z6
	VCVTDQ2PS Z6, Z6
	VMULPS    Z4, Z6, Z6
	ZSTEP(Z6, 64, Z1)
	ADDQ $34, SI
	ADDQ $128, DI
	DECQ CX
	JNZ  q80loop

q80sum:
	FOLD_TO8
	HSUM8_512
	VZEROUPPER
	MOVSS X0, ret+24(FP)
	RET

// func dotQ40AVX512(row unsafe.Pointer, x *float32, nblocks int) float32
// The 16 nibble bytes give values 0-15 (low nibbles, lanes 0-15) and 16-31
// (high nibbles, lanes 16-31); 0x0f in Z14, 8 in Z15.
TEXT ·dotQ40AVX512(SB), NOSPLIT, $0-28
	MOVQ         row+0(FP), SI
	MOVQ         x+8(FP), DI
	MOVQ         nblocks+16(FP), CX
	ZERO2
	MOVL         $0x0f, AX
	VPBROADCASTD AX, Z14
	MOVL         $8, AX
	VPBROADCASTD AX, Z15
	TESTQ        CX, CX
	JZ           q40sum

q40loop:
	LOADD16(0)
	VPMOVZXBD 2(SI), Z5
	VPANDD    Z14, Z5, Z6
	VPSRLD    $4, Z5, Z7
	VPSUBD    Z15, Z6, Z6
	VCVTDQ2PS Z6, Z6
	VMULPS    Z4, Z6, Z6
	ZSTEP(Z6, 0, Z0)
	VPSUBD    Z15, Z7, Z7
	VCVTDQ2PS Z7, Z7
	VMULPS    Z4, Z7, Z7
	ZSTEP(Z7, 64, Z1)
	ADDQ $18, SI
	ADDQ $128, DI
	DECQ CX
	JNZ  q40loop

q40sum:
	FOLD_TO8
	HSUM8_512
	VZEROUPPER
	MOVSS X0, ret+24(FP)
	RET

// Q4KHALF512: 16 nibble bytes at qoff give 16 values of sub-block 2c (low
// nibbles: D in Z4, M in Z5) and 16 of sub-block 2c+1 (high: D in Z6, M in Z7).
#define Q4KHALF512(qoff, xlo, xhi, ACC) \
	VPMOVZXBD (qoff)(SI), Z8; \
	VPANDD    Z14, Z8, Z9; \
	VPSRLD    $4, Z8, Z10; \
	VCVTDQ2PS Z9, Z9; \
	VMULPS    Z4, Z9, Z9; \
	VSUBPS    Z5, Z9, Z9; \
	ZSTEP(Z9, xlo, ACC); \
	VCVTDQ2PS Z10, Z10; \
	VMULPS    Z6, Z10, Z10; \
	VSUBPS    Z7, Z10, Z10; \
	ZSTEP(Z10, xhi, ACC)

#define Q4KCHUNK512(c) \
	VBROADCASTSS (8*c)(SP), Z4; \
	VBROADCASTSS (32+8*c)(SP), Z5; \
	VBROADCASTSS (8*c+4)(SP), Z6; \
	VBROADCASTSS (36+8*c)(SP), Z7; \
	Q4KHALF512(16+32*c, 4*(64*c), 4*(64*c+32), Z0); \
	Q4KHALF512(16+32*c+16, 4*(64*c+16), 4*(64*c+48), Z1)

// func dotQ4KAVX512(row unsafe.Pointer, x *float32, nblocks int) float32
// The frame holds D[0..7] at 0(SP) and M[0..7] at 32(SP), as in dotQ4KAVX2.
TEXT ·dotQ4KAVX512(SB), NOSPLIT, $64-28
	MOVQ         row+0(FP), SI
	MOVQ         x+8(FP), DI
	MOVQ         nblocks+16(FP), CX
	ZERO2
	MOVL         $0x0f, AX
	VPBROADCASTD AX, Z14
	TESTQ        CX, CX
	JZ           q4ksum

q4kloop:
	MOVL 4(SI), AX
	MOVL 8(SI), BX
	MOVL 12(SI), DX
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

	Q4KCHUNK512(0)
	Q4KCHUNK512(1)
	Q4KCHUNK512(2)
	Q4KCHUNK512(3)
	ADDQ $144, SI
	ADDQ $1024, DI
	DECQ CX
	JNZ  q4kloop

q4ksum:
	FOLD_TO8
	HSUM8_512
	VZEROUPPER
	MOVSS X0, ret+24(FP)
	RET

// Q6KACC512: Q holds 16 six-bit codes; weight S*(q-32), S at soff(SP), 32 in Z15.
#define Q6KACC512(Q, soff, xoff, ACC) \
	VPSUBD       Z15, Q, Q; \
	VCVTDQ2PS    Q, Q; \
	VBROADCASTSS (soff)(SP), Z10; \
	VMULPS       Z10, Q, Q; \
	ZSTEP(Q, xoff, ACC)

// Q6KGROUP512: values l = 16k..16k+15 of half h and their partners at l+32,
// l+64, l+96; sub-block of value 128h+32i+l is 8h+2i+k. 0x0f in Z14, 0x30 in Z12.
#define Q6KGROUP512(h, k, ACC) \
	VPMOVZXBD (64*h+16*k)(SI), Z5; \
	VPMOVZXBD (64*h+32+16*k)(SI), Z6; \
	VPMOVZXBD (128+32*h+16*k)(SI), Z7; \
	VPANDD    Z14, Z5, Z8; \
	VPSLLD    $4, Z7, Z9; \
	VPANDD    Z12, Z9, Z9; \
	VPORD     Z9, Z8, Z8; \
	Q6KACC512(Z8, 4*(8*h+k), 4*(128*h+16*k), ACC); \
	VPANDD    Z14, Z6, Z8; \
	VPSLLD    $2, Z7, Z9; \
	VPANDD    Z12, Z9, Z9; \
	VPORD     Z9, Z8, Z8; \
	Q6KACC512(Z8, 4*(8*h+k+2), 4*(128*h+32+16*k), ACC); \
	VPSRLD    $4, Z5, Z8; \
	VPANDD    Z12, Z7, Z9; \
	VPORD     Z9, Z8, Z8; \
	Q6KACC512(Z8, 4*(8*h+k+4), 4*(128*h+64+16*k), ACC); \
	VPSRLD    $4, Z6, Z8; \
	VPSRLD    $2, Z7, Z9; \
	VPANDD    Z12, Z9, Z9; \
	VPORD     Z9, Z8, Z8; \
	Q6KACC512(Z8, 4*(8*h+k+6), 4*(128*h+96+16*k), ACC)

// func dotQ6KAVX512(row unsafe.Pointer, x *float32, nblocks int) float32
// The frame holds S[0..15] at 0(SP).
TEXT ·dotQ6KAVX512(SB), NOSPLIT, $64-28
	MOVQ         row+0(FP), SI
	MOVQ         x+8(FP), DI
	MOVQ         nblocks+16(FP), CX
	ZERO2
	MOVL         $0x0f, AX
	VPBROADCASTD AX, Z14
	MOVL         $0x30, AX
	VPBROADCASTD AX, Z12
	MOVL         $32, AX
	VPBROADCASTD AX, Z15
	TESTQ        CX, CX
	JZ           q6ksum

q6kloop:
	VPBROADCASTW 208(SI), Y4
	VCVTPH2PS    Y4, Z4     // d
	VPMOVSXBD    192(SI), Z5
	VCVTDQ2PS    Z5, Z5
	VMULPS       Z4, Z5, Z5
	VMOVUPS      Z5, 0(SP)

	Q6KGROUP512(0, 0, Z0)
	Q6KGROUP512(0, 1, Z1)
	Q6KGROUP512(1, 0, Z0)
	Q6KGROUP512(1, 1, Z1)
	ADDQ $210, SI
	ADDQ $1024, DI
	DECQ CX
	JNZ  q6kloop

q6ksum:
	FOLD_TO8
	HSUM8_512
	VZEROUPPER
	MOVSS X0, ret+24(FP)
	RET

// func dotQ8GAVX512(row, scales unsafe.Pointer, x *float32, ngroups, steps int) float32
// As dotQ8GAVX2.
TEXT ·dotQ8GAVX512(SB), NOSPLIT, $0-44
	MOVQ row+0(FP), SI
	MOVQ scales+8(FP), BX
	MOVQ x+16(FP), DI
	MOVQ ngroups+24(FP), CX
	MOVQ steps+32(FP), R8
	ZERO2
	TESTQ CX, CX
	JZ    q8gsum

q8ggroup:
	VBROADCASTSS (BX), Z4
	MOVQ         R8, DX

q8gstep:
	VPMOVSXBD (SI), Z5
	VCVTDQ2PS Z5, Z5
	VMULPS    Z4, Z5, Z5
	ZSTEP(Z5, 0, Z0)
	VPMOVSXBD 16(SI), Z6
	VCVTDQ2PS Z6, Z6
	VMULPS    Z4, Z6, Z6
	ZSTEP(Z6, 64, Z1)
	ADDQ $32, SI
	ADDQ $128, DI
	DECQ DX
	JNZ  q8gstep
	ADDQ $4, BX
	DECQ CX
	JNZ  q8ggroup

q8gsum:
	FOLD_TO8
	HSUM8_512
	VZEROUPPER
	MOVSS X0, ret+40(FP)
	RET

// func f32RowsAVX512(w unsafe.Pointer, stride, rows int, x *float32, n int, out *float32)
// out[r] = dotF32AVX512(w + r*stride, x, n) for r < rows: the same code, one
// call for a run of rows.
TEXT ·f32RowsAVX512(SB), NOSPLIT, $0-48
	MOVQ w+0(FP), R8
	MOVQ rows+16(FP), R9
	MOVQ out+40(FP), R10
	TESTQ R9, R9
	JZ    rowsdone

rowsrow:
	MOVQ R8, SI
	MOVQ x+24(FP), DI
	MOVQ n+32(FP), CX
	ZERO2
	MOVQ CX, DX
	SHRQ $5, DX
	JZ   rowsfold

rowsloop:
	VMOVUPS (SI), Z4
	ZSTEP(Z4, 0, Z0)
	VMOVUPS 64(SI), Z5
	ZSTEP(Z5, 64, Z1)
	ADDQ $128, SI
	ADDQ $128, DI
	DECQ DX
	JNZ  rowsloop

rowsfold:
	FOLD_TO8
	ANDQ $31, CX
	SHRQ $3, CX
	JZ   rowssum

rowsloop8:
	VMOVUPS (SI), Y4
	YSTEP8(Y4)
	ADDQ $32, SI
	ADDQ $32, DI
	DECQ CX
	JNZ  rowsloop8

rowssum:
	HSUM8_512
	VMOVSS X0, (R10)
	ADDQ   $4, R10
	ADDQ   stride+8(FP), R8
	DECQ   R9
	JNZ    rowsrow

rowsdone:
	VZEROUPPER
	RET

// func axpyRowsAVX512(y *float32, n int, a *float32, x *float32, stride, rows int)
// axpyRowsAVX2 with 64 columns of y in four ZMM registers per pass over the
// rows (one head of 64 values, an attention step's usual width, in one
// pass), then 16, then 8 at a time: y[i] += round(a[r] * x[r*stride/4 +
// i]) for r = 0 .. rows-1 in order, n a multiple of 8; the same products
// and sums as AVX2 and Go (no FMA), so the same bits.
TEXT ·axpyRowsAVX512(SB), NOSPLIT, $0-48
	MOVQ y+0(FP), DI
	MOVQ n+8(FP), CX
	MOVQ stride+32(FP), BX

zrows64:
	CMPQ      CX, $64
	JB        zrows16
	VMOVUPS   (DI), Z0
	VMOVUPS   64(DI), Z1
	VMOVUPS   128(DI), Z2
	VMOVUPS   192(DI), Z3
	MOVQ      a+16(FP), SI
	MOVQ      x+24(FP), R8
	MOVQ      rows+40(FP), R9

zrows64row:
	VBROADCASTSS (SI), Z4
	VMULPS       (R8), Z4, Z5
	VADDPS       Z5, Z0, Z0
	VMULPS       64(R8), Z4, Z6
	VADDPS       Z6, Z1, Z1
	VMULPS       128(R8), Z4, Z7
	VADDPS       Z7, Z2, Z2
	VMULPS       192(R8), Z4, Z8
	VADDPS       Z8, Z3, Z3
	ADDQ         $4, SI
	ADDQ         BX, R8
	DECQ         R9
	JNZ          zrows64row

	VMOVUPS Z0, (DI)
	VMOVUPS Z1, 64(DI)
	VMOVUPS Z2, 128(DI)
	VMOVUPS Z3, 192(DI)
	ADDQ    $256, DI
	ADDQ    $256, x+24(FP)
	SUBQ    $64, CX
	JMP     zrows64

zrows16:
	CMPQ    CX, $16
	JB      zrows8
	VMOVUPS (DI), Z0
	MOVQ    a+16(FP), SI
	MOVQ    x+24(FP), R8
	MOVQ    rows+40(FP), R9

zrows16row:
	VBROADCASTSS (SI), Z4
	VMULPS       (R8), Z4, Z5
	VADDPS       Z5, Z0, Z0
	ADDQ         $4, SI
	ADDQ         BX, R8
	DECQ         R9
	JNZ          zrows16row

	VMOVUPS Z0, (DI)
	ADDQ    $64, DI
	ADDQ    $64, x+24(FP)
	SUBQ    $16, CX
	JMP     zrows16

zrows8:
	CMPQ    CX, $8
	JB      zrowsdone
	VMOVUPS (DI), Y0
	MOVQ    a+16(FP), SI
	MOVQ    x+24(FP), R8
	MOVQ    rows+40(FP), R9

zrows8row:
	VBROADCASTSS (SI), Y4
	VMULPS       (R8), Y4, Y5
	VADDPS       Y5, Y0, Y0
	ADDQ         $4, SI
	ADDQ         BX, R8
	DECQ         R9
	JNZ          zrows8row

	VMOVUPS Y0, (DI)

zrowsdone:
	VZEROUPPER
	RET
