//go:build amd64 && !purego

#include "textflag.h"

// func spinPause(n int)
TEXT ·spinPause(SB), NOSPLIT, $0-8
	MOVQ  n+0(FP), AX
	TESTQ AX, AX
	JLE   done

loop:
	PAUSE
	DECQ AX
	JNZ  loop

done:
	RET
