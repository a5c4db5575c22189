#include "textflag.h"

// func prefetchGroups(kv *uint64, groups *uint64, n int)
// Issues PREFETCHT0 for both lines (keys, vals) of each group's 128-byte
// block. A prefetch retires at once, unlike a load, so a whole chunk's
// misses are in flight together without filling the reorder buffer.
TEXT ·prefetchGroups(SB), NOSPLIT, $0-24
	MOVQ kv+0(FP), AX
	MOVQ groups+8(FP), BX
	MOVQ n+16(FP), CX
	TESTQ CX, CX
	JLE done
loop:
	MOVQ (BX), DX
	SHLQ $7, DX
	PREFETCHT0 (AX)(DX*1)
	PREFETCHT0 64(AX)(DX*1)
	ADDQ $8, BX
	DECQ CX
	JNZ loop
done:
	RET
