#include "textflag.h"
#include "go_asm.h"

// func ackRun(st *runState, msgs *Msg, count int) (done int, slot uint64, probe int, acks uint64)
//
// Shard.applyRun's loop (see there). For each of msgs[0:count]: hash the
// root to its home group and tag (one message ahead), compare the tag with
// the group's fifteen tags at once (VPCMPEQB), compare keys only where a
// tag matches, and read on group by group while the overflow count says
// entries passed; then
//   - an ACK to an entry whose val it does not bring to 0: val ^= msg.Val;
//   - an ACK that completes a root of timing kind 0, 1 or 2 (start =
//     deadline - default, - X, - default - X; timing.go) without a near
//     timer, with room in out: append Completed, empty the slot and its
//     tag, and take the entry out of the overflow counts it is in;
//   - an INIT of a new root with the default timeout (TimeoutMs 0 or
//     defMs) when initMeta allows it (room in the table, the default
//     deadline far, no FAIL filter): into the first empty slot from its
//     home group on, counted into the groups it passes; and one with its
//     own timeout of T ms, as timing kind 1, when st.xok (1 ms ticks, an
//     ext array), T fits X and its deadline is far.
// It stops at the first message that is anything else, unapplied, and
// says whether it found the root: probe 1 (slot holds the root) or 0 (not
// probed, or not there: the caller probes).
//
// Registers: SI msg, R11 end of msgs, DI slots, R15 control words, CX
// groups, R14 the next message's home group << 8 | tag (hashed one
// ahead), R12 st, R13 acks, R8 root, Y1 the tag in every byte, X3 this
// message's group << 8 | tag, Y7 zero; AX, BX, DX, R9, R10 scratch. The
// rare paths spill to st's save words. R14 and R15 are free in ABI0
// code: Go's caller restores R14 (g) after an ABI0 call, and R15 matters
// only to dynamically linked code that addresses globals, which this does
// not.
TEXT ·ackRun(SB), NOSPLIT, $0-56
#include "ackrun_amd64.h"

// func ackRunHS(st *runState, msgs *Msg, count int) (done int, slot uint64, probe int, acks uint64)
//
// ackRun with the home groups and tags taken from st.hs instead of hashed.
#define ACKRUN_HS
TEXT ·ackRunHS(SB), NOSPLIT, $0-56
#include "ackrun_amd64.h"
