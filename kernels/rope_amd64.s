//go:build amd64 && !purego

#include "textflag.h"

// RotatePairs and RotateHalves (rope.go), 8 pairs at a time: the same
// products, each rounded, and the same sums and differences with their
// operands in the same order (so that even a NaN's payload is the one the
// Go code would keep).

// func rotatePairsAVX2(v, cos, sin *float32, n int)
// n pairs, a multiple of 8. With cs = [c0 s0 c1 s1 ...] and sc = [s0 c0 s1
// c1 ...], the even values of x*cs - y*sc and the odd values of x*cs + y*sc
// (VADDSUBPS) are the pairs turned, x = [x0 x0 x1 x1 ...] (VMOVSLDUP) and
// y = [y0 y0 y1 y1 ...] (VMOVSHDUP).
TEXT ·rotatePairsAVX2(SB), NOSPLIT, $0-32
	MOVQ v+0(FP), DI
	MOVQ cos+8(FP), SI
	MOVQ sin+16(FP), DX
	MOVQ n+24(FP), CX
	SHRQ $3, CX
	JZ   pairsdone

pairsloop:
	VMOVUPS    (SI), Y0                 // c0 .. c7
	VMOVUPS    (DX), Y1                 // s0 .. s7
	VUNPCKLPS  Y1, Y0, Y2               // c0 s0 c1 s1 | c4 s4 c5 s5
	VUNPCKHPS  Y1, Y0, Y3               // c2 s2 c3 s3 | c6 s6 c7 s7
	VPERM2F128 $0x20, Y3, Y2, Y4        // cs of pairs 0-3
	VPERM2F128 $0x31, Y3, Y2, Y5        // cs of pairs 4-7
	VPERMILPS  $0xb1, Y4, Y6            // sc of pairs 0-3
	VPERMILPS  $0xb1, Y5, Y7            // sc of pairs 4-7
	VMOVSLDUP  (DI), Y8
	VMOVSHDUP  (DI), Y9
	VMULPS     Y4, Y8, Y8
	VMULPS     Y6, Y9, Y9
	VADDSUBPS  Y9, Y8, Y8
	VMOVUPS    Y8, (DI)
	VMOVSLDUP  32(DI), Y10
	VMOVSHDUP  32(DI), Y11
	VMULPS     Y5, Y10, Y10
	VMULPS     Y7, Y11, Y11
	VADDSUBPS  Y11, Y10, Y10
	VMOVUPS    Y10, 32(DI)
	ADDQ       $64, DI
	ADDQ       $32, SI
	ADDQ       $32, DX
	DECQ       CX
	JNZ        pairsloop

pairsdone:
	VZEROUPPER
	RET

// func rotateHalvesAVX2(a, b, cos, sin *float32, n int)
// n pairs, a multiple of 8: a*c - b*s into a, a*s + b*c into b.
TEXT ·rotateHalvesAVX2(SB), NOSPLIT, $0-40
	MOVQ a+0(FP), DI
	MOVQ b+8(FP), BX
	MOVQ cos+16(FP), SI
	MOVQ sin+24(FP), DX
	MOVQ n+32(FP), CX
	SHRQ $3, CX
	JZ   halvesdone

halvesloop:
	VMOVUPS (DI), Y0 // x
	VMOVUPS (BX), Y1 // y
	VMOVUPS (SI), Y2 // c
	VMOVUPS (DX), Y3 // s
	VMULPS  Y2, Y0, Y4
	VMULPS  Y3, Y1, Y5
	VSUBPS  Y5, Y4, Y4
	VMULPS  Y3, Y0, Y6
	VMULPS  Y2, Y1, Y7
	VADDPS  Y7, Y6, Y6
	VMOVUPS Y4, (DI)
	VMOVUPS Y6, (BX)
	ADDQ    $32, DI
	ADDQ    $32, BX
	ADDQ    $32, SI
	ADDQ    $32, DX
	DECQ    CX
	JNZ     halvesloop

halvesdone:
	VZEROUPPER
	RET
