//go:build amd64 && !purego

#include "textflag.h"

// func prefetch(p unsafe.Pointer, n int)
TEXT ·prefetch(SB), NOSPLIT, $0-16
	MOVQ p+0(FP), AX
	MOVQ n+8(FP), CX
	ADDQ AX, CX

loop:
	CMPQ       AX, CX
	JAE        done
	PREFETCHT0 (AX)
	ADDQ       $64, AX
	JMP        loop

done:
	RET
