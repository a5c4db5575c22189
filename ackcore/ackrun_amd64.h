// The body of ackRun (ackrun_amd64.s), kept apart from its description
// there, and of ackRunFar (ackrun_far_amd64.s): each file defines PFD1
// and PFD2 before it includes this. Offsets and constants come from
// go_asm.h.

// The look-ahead entry of the message at D(R) is at D(R11)(R*1): R11 is
// st.ring less msgs, and the entries are 32 bytes a message like the
// messages themselves.

// STAGE1(R, D) looks far ahead at the message at D(R): hashes its root
// (table.hashOf) into its look-ahead entry (home group * 16, and the low
// word of the product, whose top byte, at +15, is the tag before 0 is
// taken as 1, which STAGE2 and HOME do with VPMAXUB and Y8) and prefetches
// the home group's and the next group's control words. Clobbers AX, DX.
#define STAGE1(R, D) \
	MOVQ       (D+Msg_Root)(R), AX; \
	XORQ       runState_k1(R12), AX; \
	MULQ       runState_k2(R12); \
	XORQ       DX, AX; \
	IMULQ      runState_k3(R12), AX; \
	MULQ       CX; \
	MOVQ       AX, (D+8)(R11)(R*1); \
	SHLQ       $4, DX; \
	MOVQ       DX, (D)(R11)(R*1); \
	PREFETCHT0 (R15)(DX*1); \
	PREFETCHT0 31(R15)(DX*1)

// STAGE2(R, D) looks nearer ahead at the message at D(R): compares its
// tag (from its look-ahead entry) with its home group's and the next
// group's control bytes, which STAGE1 fetched, writes the slot its probe
// most likely ends at, times 3, into the look-ahead entry and prefetches
// that slot: the first tag match's (a count byte that happens to equal
// the tag names the first slot of the next group or of the one after),
// else the first empty slot's (where an INIT goes, and where an ACK soon
// after it finds its root), else, with neither, the first slot two groups
// on (c = home*16 + 32, past the last group in the table's padding
// slots). Bit b of the pair's masks is control byte c = group*16 + b,
// slot c - c/16. A prediction only: the loop compares the key. Clobbers
// AX, R9, R14, Y4, Y5, Y6.
#define STAGE2(R, D) \
	MOVQ         (D)(R11)(R*1), R14; \
	VPBROADCASTB (D+15)(R11)(R*1), Y4; \
	VPMAXUB      Y8, Y4, Y4; \
	VMOVDQU      (R15)(R14*1), Y5; \
	VPCMPEQB     Y5, Y4, Y6; \
	VPMOVMSKB    Y6, AX; \
	VPCMPEQB     Y5, Y7, Y6; \
	VPMOVMSKB    Y6, R9; \
	ANDL         $0x7fff7fff, R9; \
	TESTL        AX, AX; \
	CMOVLEQ      R9, AX; \
	TZCNTL       AX, AX; \
	ADDQ         R14, AX; \
	MOVQ         AX, R9; \
	SHRQ         $4, R9; \
	SUBQ         R9, AX; \
	LEAQ         (AX)(AX*2), AX; \
	MOVQ         AX, (D+16)(R11)(R*1); \
	PREFETCHT0   8(DI)(AX*8)

// HOME: X3 = the message's home group * 16, Y1 = its tag in every byte,
// DX = its home group (from its look-ahead entry).
#define HOME \
	VPBROADCASTB 15(R11)(SI*1), Y1; \
	VPMAXUB      Y8, Y1, Y1; \
	MOVQ         (R11)(SI*1), DX; \
	VMOVQ        DX, X3; \
	SHRQ         $4, DX

	MOVQ st+0(FP), R12
	MOVQ runState_es(R12), DI
	MOVQ runState_ctrl(R12), R15
	MOVQ runState_ng(R12), CX
	MOVQ msgs+8(FP), SI
	MOVQ count+16(FP), R13
	IMULQ $Msg__size, R13
	ADDQ SI, R13 // the end of msgs
	MOVQ runState_ring(R12), R11
	SUBQ SI, R11
	VPXOR X7, X7, X7
	MOVL $0x01010101, AX
	VMOVD AX, X8
	VPBROADCASTD X8, Y8 // 1 in every byte: a tag is max(its byte, 1)
	// Look ahead at the first PFD1 messages (STAGE1) and the first PFD2
	// (STAGE2); the loop then looks ahead at messages i+PFD1 and i+PFD2
	// as it applies message i.
	MOVQ SI, R10
	LEAQ (PFD1*Msg__size)(SI), R8
	CMPQ R8, R13
	CMOVQHI R13, R8
prime1:
	CMPQ R10, R8
	JAE  primed1
	STAGE1(R10, 0)
	ADDQ $Msg__size, R10
	JMP  prime1
primed1:
	MOVQ SI, R10
	LEAQ (PFD2*Msg__size)(SI), R8
	CMPQ R8, R13
	CMOVQHI R13, R8
prime2:
	CMPQ R10, R8
	JAE  primed2
	STAGE2(R10, 0)
	ADDQ $Msg__size, R10
	JMP  prime2
primed2:
	// st.end: the end of the messages with one PFD1 after them; those
	// past it take the tail's checks.
	SUBQ $(PFD1*Msg__size), R13
	MOVQ R13, runState_end(R12)

loop:
	CMPQ SI, runState_end(R12)
	JAE  tail
next:
	MOVQ Msg_Root(SI), R8
	TESTQ R8, R8
	JZ   none
	STAGE1(SI, PFD1*Msg__size)
	STAGE2(SI, PFD2*Msg__size)
body:
	MOVQ 16(R11)(SI*1), AX // the predicted slot * 3
	CMPB Msg_Kind(SI), $const_Ack
	JNE  notack
	// An ACK whose root is in the predicted slot (nearly all): found.
	CMPQ entry_key(DI)(AX*8), R8
	JNE  aprobe
	MOVQ entry_val(DI)(AX*8), R10
	XORQ Msg_Val(SI), R10
	JZ   pcomplete
	MOVQ R10, entry_val(DI)(AX*8)
	ADDQ $Msg__size, SI
	CMPQ SI, runState_end(R12)
	JB   next
	JMP  tail
pcomplete: // R9 = &es[slot], DX = slot = AX / 3
	LEAQ (DI)(AX*8), R9
	MOVQ $0xaaaaaaaaaaaaaaab, DX
	MULQ DX
	SHRQ $1, DX
	JMP  complete

// The last PFD1 messages: no STAGE1, and STAGE2 while one is PFD2 on.
tail:
	MOVQ runState_end(R12), AX
	ADDQ $(PFD1*Msg__size), AX // the end of msgs
	CMPQ SI, AX
	JAE  none
	MOVQ Msg_Root(SI), R8
	TESTQ R8, R8
	JZ   none
	LEAQ (PFD2*Msg__size)(SI), BX
	CMPQ BX, AX
	JAE  body
	STAGE2(SI, PFD2*Msg__size)
	JMP  body

aprobe:
	HOME

	// The home group and the next at once (the sentinel follows the
	// last): the first tag match, checked; anything else probes.
	MOVQ      DX, R9
	SHLQ      $4, R9
	VPCMPEQB  (R15)(R9*1), Y1, Y0
	VPMOVMSKB Y0, AX
	ANDL      $0x7fff7fff, AX // the tag bytes (bytes 15 and 31 are counts)
	JZ        snext
// Candidates AX (bit i: slot i of the pair from group DX, R9 = DX*16):
// the first whose key is the root, or on to the next group.
pcand:
	BSFL      AX, R10
	MOVQ      R10, BX
	SHRQ      $4, BX
	SUBQ      BX, R10 // i in the pair: 0..14 the group, 15..29 the next
	ADDQ      R9, R10
	SUBQ      DX, R10 // slot = group*15 + i
	LEAQ      (R10)(R10*2), BX
	CMPQ      entry_key(DI)(BX*8), R8
	JEQ       pfound
	BLSRL     AX, AX // a tag that matched another root: the next one
	JNZ       pcand
	JMP       snext
pfound:
	MOVQ      R10, DX
	LEAQ      (DI)(BX*8), R9 // &es[slot]
	JMP       found

// ---- The probe, group by group: group DX, tag X1, root R8. Found: R9 =
// &es[slot], DX = slot, on to found; not there: on to absent.
search:
	MOVQ      DX, R9
	SHLQ      $4, R9
	VPCMPEQB  (R15)(R9*1), X1, X0
	VPMOVMSKB X0, AX
	ANDL      $0x7fff, AX // the tag bytes (byte 15 is the overflow count)
	JNZ       pcand
snext:
	CMPB 15(R15)(R9*1), $0
	JEQ  absent // no entry passed this group: not there
	INCQ DX
	CMPQ DX, CX
	JNE  snowrap
	XORQ DX, DX
snowrap:
	VMOVQ X3, AX
	SHRQ  $4, AX
	CMPQ  DX, AX
	JEQ   absent // round the whole table (never at the bound's load)
	JMP   search

found: // R9 = &es[slot], DX = slot
	CMPB Msg_Kind(SI), $const_Ack
	JNE  hit // not an ACK
ackfound:
	MOVQ entry_val(R9), AX
	XORQ Msg_Val(SI), AX
	JZ   complete
	MOVQ AX, entry_val(R9)
	ADDQ $Msg__size, SI
	JMP  loop

absent:
	CMPB Msg_Kind(SI), $const_Init
	JEQ  initabsent
	JMP  none // an ACK without an entry: step

// ---- INIT: its checks, then a root surely absent (no tag match, no
// overflow in its home group) goes straight to its insert; anything else
// probes first.
notack:
	HOME
	CMPB Msg_Kind(SI), $const_Init
	JNE  none // FAIL, RESET, invalid: step
	MOVL Msg_TimeoutMs(SI), AX
	TESTL AX, AX
	JZ   deftimeout
	CMPL AX, runState_defMs(R12)
	JNE  customto // a per-root timeout (other than the default)
deftimeout:
	CMPQ Msg_Val(SI), $0
	JEQ  missx // val 0: completes at once
	CMPL Msg_Task(SI), $const_MaxTask
	JA   missx // task out of range
	MOVQ runState_count(R12), AX
	CMPQ AX, runState_maxPending(R12)
	JGE  missx // full
	BTQ  $32, runState_initMeta(R12)
	JCC  missx // the default deadline is near: a near timer is needed
	// Absent for sure when no tag in the home group and the next matches
	// and either count is 0; then the first empty slot of the two.
	MOVQ      DX, R9
	SHLQ      $4, R9
	VMOVDQU   (R15)(R9*1), Y0
	VPCMPEQB  Y1, Y0, Y2
	VPMOVMSKB Y2, AX
	ANDL      $0x7fff7fff, AX
	JNZ       search // a tag matches: probe
	VPCMPEQB  Y7, Y0, Y2
	VPMOVMSKB Y2, AX // empty slots, and counts of 0 (bits 15, 31)
	TESTL     $0x80008000, AX
	JZ        search // entries passed both: probe
	ANDL      $0x7fff7fff, AX
	JZ        initabsent // both full
	MOVQ      DX, R10 // home
	TESTL     $0x7fff, AX
	JZ        inext
	BSFL      AX, AX // in the home group: distance 0
	XORL      R13, R13
	JMP       ecounted
inext:
	SHRL      $16, AX // the next group's
	INCQ      DX
	ADDQ      $16, R9
	JMP       efound

// ---- Insert root R8, absent, with home group DX: the first empty slot
// from the home group on.
initabsent:
	VMOVQ X3, R10
	SHRQ $4, R10 // home
	MOVQ R10, DX
egroup:
	MOVQ      DX, R9
	SHLQ      $4, R9
	VPCMPEQB  (R15)(R9*1), X7, X0
	VPMOVMSKB X0, AX
	ANDL      $0x7fff, AX
	JNZ       efound
	INCQ DX // full: the next group (the table is never full)
	CMPQ DX, CX
	JNE  egroup
	XORQ DX, DX
	JMP  egroup
efound: // DX = group, R9 = group*16, R10 = home, AX = its empty slots
	BSFL AX, AX
	MOVQ DX, R13
	SUBQ R10, R13
	JCC  edist
	ADDQ CX, R13
edist: // R13 = the distance in groups
	CMPQ R13, $const_distSat
	JAE  missx // a distance near saturation: step
	TESTQ R13, R13
	JZ   ecounted
	MOVQ $1, BX
	JMP  count // count the entry into the groups it passed, home up to DX
ecounted:
	VMOVQ X1, R14
	ADDQ AX, R9
	MOVB R14, (R15)(R9*1) // the tag
	SUBQ DX, R9
	MOVQ R9, R10 // slot
	LEAQ (R9)(R9*2), R9
	LEAQ (DI)(R9*8), R9 // &es[slot]
	MOVQ R8, entry_key(R9)
	MOVQ Msg_Val(SI), DX
	MOVQ DX, entry_val(R9)
	MOVL Msg_Task(SI), DX
	BTSQ $31, DX
	SHLQ $32, DX
	SHLQ $const_metaDistShift, R13
	ORQ  R13, DX
	MOVQ runState_insx(R12), AX
	TESTQ AX, AX
	JNZ  insx
	MOVL runState_initMeta(R12), AX
	ORQ  AX, DX
insdone:
	MOVQ DX, entry_meta(R9)
	INCQ runState_count(R12)
	INCQ runState_inits(R12)
	ADDQ $Msg__size, SI
	JMP  loop

// ---- Completion: R9 = &es[slot], DX = slot, R8 root.
complete:
	MOVQ entry_meta(R9), AX
	MOVQ AX, R10
	SHRQ $const_metaDistShift, R10
	CMPQ R10, $(const_flagInit>>const_distShift)
	JNE  completek // not timing kind 0, in its home group, without a near timer
	MOVQ runState_outLen(R12), R10
	CMPQ R10, runState_outCap(R12)
	JGE  hit // no room in out
	// latency = latBase - int32(uint32(meta) - uint32(nowTick)) * tickNs
	// (latstart's sum with the deadline's start for kind 0 rearranged),
	// >= 0
	SUBL    runState_nowTick(R12), AX
	MOVLQSX AX, AX
	IMULQ   runState_tickNs(R12), AX
	MOVQ    runState_latBase(R12), R10
	SUBQ    AX, R10
	JMP     latclamp
// Timing kinds 0, 1 and 2 without a near timer (meta >> 60 in 8..10)
// complete here when their distance is not saturated and out has room;
// the rest step. R10 = meta >> const_metaDistShift.
completek:
	SHRQ $8, R10
	CMPQ R10, $8
	JB   hit
	CMPQ R10, $10
	JA   hit // a near timer, or the side table
	MOVQ AX, R10
	SHRQ $const_metaDistShift, R10
	ANDQ $const_distSat, R10
	CMPQ R10, $const_distSat
	JEQ  hit // a saturated distance: step
	MOVQ runState_outLen(R12), R10
	CMPQ R10, runState_outCap(R12)
	JGE  hit // no room in out
	MOVQ AX, R10
	SHRQ $60, R10
	CMPQ R10, $8
	JNE  completex // timing kind 1 or 2

	// latency = nowNs - (deadline - defTicks) * tickNs + tickNs/2, >= 0;
	// deadline = nowTick + int32(uint32(meta) - uint32(nowTick))
	MOVL    AX, AX
	MOVQ    runState_nowTick(R12), R10
	SUBL    R10, AX
	MOVLQSX AX, AX
	ADDQ    R10, AX
	SUBQ    runState_defTicks(R12), AX
latstart: // AX = the root's start tick
	IMULQ   runState_tickNs(R12), AX
	MOVQ    runState_nowNs(R12), R10
	SUBQ    AX, R10
	MOVQ    runState_tickNs(R12), AX
	SHRQ    $1, AX
	ADDQ    AX, R10
latclamp:
	TESTQ   R10, R10
	JGE     latok
	XORQ    R10, R10
latok:
	MOVQ runState_outLen(R12), AX
	SHLQ $5, AX
	ADDQ runState_out(R12), AX // &out[outLen]
	MOVQ R8, Outcome_Root(AX)
	MOVQ R10, Outcome_Latency(AX)
	MOVQ entry_meta(R9), R10
	SHRQ $32, R10
	ANDQ $const_MaxTask, R10
	BTSQ $32, R10 // Task, Kind Completed (1), Reason none
	MOVQ R10, Outcome_Task(AX)
	MOVQ $0, (Outcome_Task+8)(AX)
	INCQ runState_outLen(R12)
	INCQ runState_completed(R12)

	// Empty the slot: its group (slot/15), its distance, the overflow
	// counts of the groups from its home up to it, its tag, the entry.
	MOVQ DX, R13 // slot
	MOVQ $0x8888888888888889, AX
	MULQ R13
	SHRQ $3, DX // group = slot / 15
	MOVQ entry_meta(R9), R10
	SHRQ $const_metaDistShift, R10
	ANDQ $const_distSat, R10
	JZ   rmcounted
	NEGQ R10
	ADDQ DX, R10 // home = group - distance
	JGE  rmcount
	ADDQ CX, R10
rmcount: // take the entry out of the groups it passed
	MOVQ $-1, BX
	JMP  count
rmcounted:
	LEAQ (R13)(DX*1), AX // group*16 + i = slot + group
	MOVB $0, (R15)(AX*1)
	VMOVDQU X7, entry_key(R9) // key and val
	MOVQ $0, entry_meta(R9)
	DECQ runState_count(R12)
	ADDQ $Msg__size, SI
	JMP  loop

// ---- Completion of timing kind 1 (start = deadline - X) or 2 (start =
// deadline - default - X), without a near timer, checked at completek:
// R10 = meta >> 60, R9 = &es[slot], DX = slot, R8 root. X = ext[slot] |
// xhi << 16.
completex:
	MOVQ runState_ext(R12), AX
	MOVWQZX (AX)(DX*2), R13
	MOVQ entry_meta(R9), AX
	SHRQ $(32+const_xhiShift), AX
	ANDQ $7, AX
	SHLQ $16, AX
	ORQ  AX, R13 // X
	CMPQ R10, $9
	JEQ  cxstart
	ADDQ runState_defTicks(R12), R13 // kind 2: default + X
cxstart:
	MOVQ    entry_meta(R9), AX
	MOVL    AX, AX
	MOVQ    runState_nowTick(R12), R10
	SUBL    R10, AX
	MOVLQSX AX, AX
	ADDQ    R10, AX // deadline
	SUBQ    R13, AX // start
	INCQ    runState_extDrops(R12)
	JMP     latstart

// ---- Add BL (1 or -1) to the overflow counts of groups R10 up to DX
// (not DX), leaving sticky counts alone; then back to ecounted (1) or
// rmcounted (-1). Clobbers R10, R14.
count:
	MOVQ R10, R14
	SHLQ $4, R14
	CMPB 15(R15)(R14*1), $const_overflowSticky
	JEQ  countsticky
	ADDB BL, 15(R15)(R14*1)
countsticky:
	INCQ R10
	CMPQ R10, CX
	JNE  countnowrap
	XORQ R10, R10
countnowrap:
	CMPQ R10, DX
	JNE  count
	TESTB BL, BL
	JS   rmcounted
	JMP  ecounted

hit:
	MOVQ $0, runState_insx(R12)
	MOVQ $const_probeHit, R10
	JMP  ret

// ---- INIT of a new root with its own timeout T ms (AX), in the slot as
// timing kind 1 (X = T ticks) when st.xok (1 ms ticks, an ext array), T
// fits X, and its deadline nowStart+T is far (at or past st.limit): on to
// the checks and the insert of a default INIT, with st.insx = T.
customto:
	CMPQ runState_xok(R12), $0
	JEQ  missx
	CMPQ AX, $0x7ffff
	JA   missx // X has 19 bits
	MOVQ AX, runState_insx(R12)
	ADDQ runState_nowStart(R12), AX
	CMPQ AX, runState_limit(R12)
	JB   missx // near: a near timer is needed
	JMP  deftimeout

// ---- The end of an insert with st.insx = T: ext[slot] = T's low 16
// bits, xhi = T >> 16, kind 1, deadline nowStart+T. DX = the word's other
// bits << 32, R9 = &es[slot], R10 = slot.
insx:
	MOVQ runState_ext(R12), R8
	MOVW AX, (R8)(R10*2)
	MOVQ AX, R8
	SHRQ $16, R8
	SHLQ $(32+const_xhiShift), R8
	ORQ  R8, DX
	BTSQ $(32+const_kindShift), DX // kind 1
	ADDQ runState_nowStart(R12), AX
	MOVL AX, AX
	ORQ  AX, DX
	MOVQ $0, runState_insx(R12)
	INCQ runState_extAdds(R12)
	JMP  insdone

missx:
none:
	MOVQ $0, runState_insx(R12)
	MOVQ $const_probeNone, R10
	XORQ DX, DX

ret:
	VZEROUPPER
	SUBQ msgs+8(FP), SI
	SHRQ $5, SI
	MOVQ SI, done+24(FP)
	MOVQ DX, slot+32(FP)
	MOVQ R10, probe+40(FP)
	RET

