#include "textflag.h"
#include "go_asm.h"

// ackRunFar is ackRun (ackrun_amd64.s, the same body) looking further
// ahead: it hashes a root and fetches its control words 16 messages
// ahead, and prefetches its slot 8 ahead. Shard.applyRun calls it for
// tables past farAbove (apply.go), the largest, whose misses take the
// longest, so that a miss has longer to arrive. In one process, the two
// loops alternating on one shard (word count, pinned, 60 rounds of
// 4 x 256k messages): 1.08x ackRun at 1,000,000 roots pending (a 34 MB
// table), but 0.98x at 10,000 and 0.95x on tree8x8 at 100,000: there
// ackRun runs.
#define PFD1 16
#define PFD2 8

// func ackRunFar(st *runState, msgs *Msg, count int) (done int, slot uint64, probe int)
TEXT ·ackRunFar(SB), NOSPLIT, $0-48
#include "ackrun_amd64.h"
