//go:build amd64 && !purego

#include "textflag.h"

// The arithmetic ceiling of one core (BenchmarkCeiling): n rounds of 12
// independent multiply-accumulates on registers, no memory operand, so that
// only the execution units' throughput limits them. Twelve chains cover the
// latency of either instruction at two issued a cycle.

#define ZERO12 \
	VPXORD Z0, Z0, Z0 \
	VPXORD Z1, Z1, Z1 \
	VPXORD Z2, Z2, Z2 \
	VPXORD Z3, Z3, Z3 \
	VPXORD Z4, Z4, Z4 \
	VPXORD Z5, Z5, Z5 \
	VPXORD Z6, Z6, Z6 \
	VPXORD Z7, Z7, Z7 \
	VPXORD Z8, Z8, Z8 \
	VPXORD Z9, Z9, Z9 \
	VPXORD Z10, Z10, Z10 \
	VPXORD Z11, Z11, Z11 \
	VPXORD Z20, Z20, Z20 \
	VPXORD Z21, Z21, Z21

#define TWELVE(op) \
	op Z20, Z21, Z0 \
	op Z20, Z21, Z1 \
	op Z20, Z21, Z2 \
	op Z20, Z21, Z3 \
	op Z20, Z21, Z4 \
	op Z20, Z21, Z5 \
	op Z20, Z21, Z6 \
	op Z20, Z21, Z7 \
	op Z20, Z21, Z8 \
	op Z20, Z21, Z9 \
	op Z20, Z21, Z10 \
	op Z20, Z21, Z11

// func peakVNNI(n int)
TEXT ·peakVNNI(SB), NOSPLIT, $0-8
	MOVQ n+0(FP), CX
	ZERO12
	TESTQ CX, CX
	JZ    vnnidone

vnniloop:
	TWELVE(VPDPBUSD)
	DECQ CX
	JNZ  vnniloop

vnnidone:
	VZEROUPPER
	RET

// func peakFMA(n int)
TEXT ·peakFMA(SB), NOSPLIT, $0-8
	MOVQ n+0(FP), CX
	ZERO12
	TESTQ CX, CX
	JZ    fmadone

fmaloop:
	TWELVE(VFMADD231PS)
	DECQ CX
	JNZ  fmaloop

fmadone:
	VZEROUPPER
	RET
