#include "textflag.h"

// func prefetchSlots(base *entry, slots *uint64, n int)
// Issues PREFETCHT0 for the lines of the four slots from each home slot
// (96 bytes at base+24*slot, three lines at most), which fastPath compares
// at once. A prefetch retires at once, unlike a load, so a whole
// chunk's misses are in flight together without filling the reorder buffer.
TEXT ·prefetchSlots(SB), NOSPLIT, $0-24
	MOVQ base+0(FP), AX
	MOVQ slots+8(FP), BX
	MOVQ n+16(FP), CX
	TESTQ CX, CX
	JLE done
loop:
	MOVQ (BX), DX
	LEAQ (DX)(DX*2), DX
	SHLQ $3, DX
	PREFETCHT0 (AX)(DX*1)
	PREFETCHT0 64(AX)(DX*1)
	PREFETCHT0 95(AX)(DX*1)
	ADDQ $8, BX
	DECQ CX
	JNZ loop
done:
	RET
