#include "textflag.h"

// runState offsets (TestRunStateLayout checks them).
#define ST_ES 0
#define ST_N 8
#define ST_K1 16
#define ST_OUT 24
#define ST_OUTLEN 32
#define ST_OUTCAP 40
#define ST_NOWTICK 48
#define ST_NOWNS 56
#define ST_TICKNS 64
#define ST_DEFTICKS 72
#define ST_SCAN 80
#define ST_COUNT 88
#define ST_MAXPENDING 96
#define ST_INITMETA 104
#define ST_INITS 112
#define ST_COMPLETED 120
#define ST_SAVE0 128
#define ST_SAVE1 136
#define ST_SAVE2 144
#define ST_K2 152
#define ST_K3 160
#define ST_DEFMS 168
#define ST_NM4 184
#define ST_EXT 192
#define ST_HS 176
#define ST_EXTDROPS 200
#define ST_EXTADDS 208
#define ST_XOK 216
#define ST_NOWSTART 224
#define ST_LIMIT 232
#define ST_INSX 240

#define DISTONE $0x10000000000000

// func ackRun(st *runState, msgs *Msg, count int) (done int, slot uint64, probe int, acks uint64)
//
// Shard.applyRun's loop (see there). For each of msgs[0:count]: hash the
// root (one message ahead), probe the
// four slots from the root's home at once (AVX2: two VPCMPEQQ against the
// root and 0), slot by slot beyond them, then
//   - an ACK to an entry whose val it does not bring to 0: val ^= msg.Val;
//   - an ACK that completes a root of timing kind 0, 1 or 2 (start =
//     deadline - default, - X, - default - X; timing.go) without a near
//     timer, with room in out: append Completed, backward-shift the run
//     (ext with it, where st.ext is set);
//   - an INIT of a new root with the default timeout (TimeoutMs 0 or
//     defMs) when initMeta allows it (room in the table, the default
//     deadline far, no FAIL filter): Robin Hood insert; and one with its
//     own timeout of T ms, as timing kind 1, when st.xok (1 ms ticks, an
//     ext array), T fits X and its deadline is far.
// It stops at the first message that is anything else, unapplied, and
// says how far its probe got: probe 1 (slot holds the root), 2 (slot is
// the first empty slot of the root's probe), 0 (not probed: root 0). Probe 3: the
// last message applied was a completion whose shift moved an entry across
// the running pass's cursor, which the caller must rescan.
//
// Registers: SI msg, R11 end of msgs, R15 the last msg (ackRunHS: st.hs),
// DI es, CX n, BX k1, R14 the next message's home (hashed one ahead), R12
// st, R13 acks, R8
// root, R9 window then entry, DX home then slot, R10 home then scratch, AX
// scratch. The rare paths spill to st's save words. R14 and R15 are free
// in ABI0 code: Go's caller restores R14 (g) after an ABI0 call, and R15
// matters only to dynamically linked code that addresses globals, which
// this does not.
TEXT ·ackRun(SB), NOSPLIT, $0-56
#include "ackrun_amd64.h"

// func ackRunHS(st *runState, msgs *Msg, count int) (done int, slot uint64, probe int, acks uint64)
//
// ackRun with the home slots taken from st.hs instead of hashed.
#define ACKRUN_HS
TEXT ·ackRunHS(SB), NOSPLIT, $0-56
#include "ackrun_amd64.h"
