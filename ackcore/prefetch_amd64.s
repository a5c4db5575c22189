#include "textflag.h"

// func prefetchSlots(base *entry, ctrl *group, hs *uint64, n int)
//
// For each home group g and tag t (hs[i] = g<<8 | t): read the control
// words of g and g+1 (the sentinel follows the last group), take the first
// slot of the two whose tag is t, or else the first empty one, and issue
// PREFETCHT0 for the two lines that slot may span. The control words'
// loads are real ones (a small array, mostly cached); the slot's is a
// prefetch, which retires at once, so a whole chunk's misses are in
// flight together without filling the reorder buffer. SSE2 only.
TEXT ·prefetchSlots(SB), NOSPLIT, $0-32
	MOVQ base+0(FP), DI
	MOVQ ctrl+8(FP), SI
	MOVQ hs+16(FP), BX
	MOVQ n+24(FP), CX
	TESTQ CX, CX
	JLE done
	PXOR X7, X7
	XORQ R12, R12
loop:
	MOVQ (BX), DX
	MOVQ DX, R8
	SHRQ $8, DX              // g
	MOVQ DX, R9
	SHLQ $4, R9
	MOVOU (SI)(R9*1), X0     // g's control word
	MOVOU 16(SI)(R9*1), X2   // g+1's
	MOVQ R8, X1
	PUNPCKLBW X1, X1
	PSHUFLW $0, X1, X1
	PSHUFD $0, X1, X1        // the tag in every byte
	MOVOU X1, X3
	PCMPEQB X0, X1
	PCMPEQB X2, X3
	PMOVMSKB X1, AX
	PMOVMSKB X3, R11
	SHLL $16, R11
	ORL R11, AX
	PCMPEQB X7, X0
	PCMPEQB X7, X2
	PMOVMSKB X0, R10
	PMOVMSKB X2, R11
	SHLL $16, R11
	ORL R11, R10
	ANDL $0x7fff7fff, AX
	ANDL $0x7fff7fff, R10
	TESTL AX, AX
	CMOVQEQ R10, AX          // no tag match: the first empty slot
	BSFL AX, AX
	CMOVLEQ R12, AX          // (zero) neither: slot 0 of g
	MOVQ AX, R11
	SHRQ $4, R11
	SUBQ R11, AX             // i in the pair: 0..29
	SUBQ DX, R9              // g*15
	ADDQ AX, R9              // the slot
	LEAQ (R9)(R9*2), R9
	SHLQ $3, R9
	PREFETCHT0 (DI)(R9*1)
	PREFETCHT0 23(DI)(R9*1)
	ADDQ $8, BX
	DECQ CX
	JNZ loop
done:
	RET
