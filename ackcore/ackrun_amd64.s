#include "textflag.h"
#include "go_asm.h"

// PFD1 and PFD2 are how many messages ahead ackRun hashes a root and
// fetches its control words (STAGE1), and prefetches its slot (STAGE2).
// PFD1 < runMsgs. One stage at 4, 8 or 12 and two
// at 10/4, 12/6 or 15/8 measured alike within the noise of a shared
// 2-vCPU VM at 10,000 and 100,000 roots pending; two stages fetch the
// control words, which outgrow L2 near a million roots, one stage ahead
// of the compare that reads them. ackRunFar (ackrun_far_amd64.s) is the
// same loop further ahead, for tables past farAbove.
#define PFD1 12
#define PFD2 6

// func ackRun(st *runState, msgs *Msg, count int) (done int, slot uint64, probe int)
//
// Shard.applyRun's loop (see there). It looks ahead: as it applies
// message i it hashes the root of message i+PFD1 to its home group and
// tag, keeps them in its entry of st.ring and prefetches the home group's
// control word and the next (STAGE1); and it compares the tag of message
// i+PFD2 with those two, now cached, and prefetches the slot its probe
// most likely ends at, keeping that slot in the entry too (STAGE2).
// Message i's entry is 32 bytes at st.ring + i*32: count is at most
// runMsgs. A message's lines
// are then in cache or on their way when its turn comes, at any table
// size, and the misses of a dozen messages overlap even across a
// mispredicted branch. For message i: an ACK whose root is in the
// predicted slot is found with one key compare; anything else compares
// the tag with the home group's fifteen tags and the next group's at once
// (VPCMPEQB), compares keys only where a tag matches, and reads on group
// by group while the overflow count says entries passed; then
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
// Registers: SI msg, R11 st.ring less msgs (the message at SI has its
// entry at (R11)(SI*1)), DI slots, R15 control words, CX groups, R12 st,
// R8 root, then (HOME, off the predicted ACK's path) X3 its home group *
// 16 and Y1 its tag in every byte; Y7 zero, Y8 1 in every byte; AX, BX,
// DX, R9, R10, R13, R14, Y4-Y6 scratch. st.end is the end of msgs less
// PFD1 messages (the tail past it looks ahead at fewer). The ACKs applied
// are done less the INITs inserted (st.inits): the caller counts them.
// The rare paths keep to registers. R14 and R15 are free in
// ABI0 code: Go's caller restores R14 (g) after an ABI0 call, and R15
// matters only to dynamically linked code that addresses globals, which
// this does not.
TEXT ·ackRun(SB), NOSPLIT, $0-48
#include "ackrun_amd64.h"
