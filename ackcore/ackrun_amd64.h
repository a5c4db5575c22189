// The body of ackRun and ackRunHS (ackrun_amd64.s), which differ only in
// where a message's home slot comes from: ackRun hashes each root, one
// message ahead; ackRunHS (ACKRUN_HS defined) reads st.hs, the home slots
// Apply computed a chunk ahead with its prefetches. Labels are local to
// each TEXT block, so the body is included twice.

	MOVQ st+0(FP), R12
	MOVQ ST_ES(R12), DI
	MOVQ ST_N(R12), CX
	MOVQ ST_K1(R12), BX
	LEAQ -4(CX), AX
	MOVQ AX, ST_NM4(R12)
	MOVQ msgs+8(FP), SI
	MOVQ count+16(FP), R11
	SHLQ $5, R11
	ADDQ SI, R11
#ifdef ACKRUN_HS
	MOVQ ST_HS(R12), R15 // home slots of msgs
	XORQ R13, R13
	VPXOR Y7, Y7, Y7
#else
	LEAQ -32(R11), R15 // the last message
	XORQ R13, R13
	VPXOR Y7, Y7, Y7
	// Hash one message ahead (R14): the hash's multiplies then overlap
	// the previous message's probe, also across a branch the CPU
	// mispredicted there.
	CMPQ SI, R11
	JAE  loop
	MOVQ 0(SI), AX
	XORQ BX, AX
	MULQ ST_K2(R12)
	XORQ DX, AX
	IMULQ ST_K3(R12), AX
	MULQ CX
	MOVQ DX, R14
#endif

loop:
	CMPQ SI, R11
	JAE  none
	MOVQ 0(SI), R8 // root
	TESTQ R8, R8
	JZ   none

#ifdef ACKRUN_HS
	MOVQ  SI, DX
	SUBQ  msgs+8(FP), DX
	SHRQ  $2, DX // (msg - msgs) / 32 * 8
	MOVQ  (R15)(DX*1), DX // home, hashed (and prefetched) a chunk ahead
	MOVQ  DX, R10
#else
	// home slot = hi64(mix(root) * n), mix(root) = (hi ^ lo of (root^k1)*k2) * k3
	MOVQ  R14, R10 // this message's, hashed one message ahead
	CMPQ  SI, R15
	JAE   hashed // the last message: none ahead
	MOVQ  32(SI), AX
	XORQ  BX, AX
	MULQ  ST_K2(R12)
	XORQ  DX, AX
	IMULQ ST_K3(R12), AX
	MULQ  CX
	MOVQ  DX, R14 // the next message's home
hashed:
	MOVQ  R10, DX // DX = R10 = home
#endif
	LEAQ (DX)(DX*2), R9
	LEAQ (DI)(R9*8), R9 // window = &es[home]
	CMPQ  DX, ST_NM4(R12)
	JGT   walk // home > n-4 (signed: n may be below 4): the window passes the end, slot by slot
	VMOVQ        0(R9), X0
	VPINSRQ      $1, 24(R9), X0, X0
	VMOVQ        48(R9), X1
	VPINSRQ      $1, 72(R9), X1, X1
	VINSERTI128  $1, X1, Y0, Y0
	VMOVQ        R8, X2
	VPBROADCASTQ X2, Y2
	VPCMPEQQ     Y2, Y0, Y3
	VPCMPEQQ     Y7, Y0, Y4
	VPOR         Y3, Y4, Y3
	VMOVMSKPD    Y3, AX
	TESTL AX, AX
	JZ    beyond // root and an empty slot both beyond the window
	BSFL  AX, AX
	ADDQ AX, DX  // slot
	LEAQ (AX)(AX*2), AX
	LEAQ (R9)(AX*8), R9 // &es[slot]

probed: // R9 = &es[slot], DX = slot: the root, or the first empty slot
	CMPQ 0(R9), R8
	JNE  miss // the first empty slot: the root has no entry
	CMPB 20(SI), $2
	JNE  hit // not an ACK

	MOVQ 8(R9), AX
	XORQ 8(SI), AX
	JNZ  store
	BTQ  $63, 16(R9) // val reaches 0 with INIT seen: completes the root
	JCS  complete
	JMP  hit // val reaches 0 without INIT: left to step (a drain ends)

store:
	MOVQ AX, 8(R9)
	INCQ R13
	ADDQ $32, SI
	JMP  loop

// ---- Past the window (or a window past the end): slot by slot, round
// the end of the table.
beyond:
	ADDQ $4, DX
	ADDQ $96, R9
walk:
	CMPQ DX, CX
	JNE  walkon
	XORQ DX, DX
	MOVQ DI, R9
walkon:
	MOVQ 0(R9), AX
	CMPQ AX, R8
	JEQ  probed
	TESTQ AX, AX
	JZ   probed
	INCQ DX
	ADDQ $24, R9
	JMP  walk

// ---- INIT of a new root: R9 = &es[z] (z = DX, empty), R10 = home, R8 root.
miss:
	CMPB 20(SI), $1
	JNE  missx
	MOVL 24(SI), AX
	TESTL AX, AX
	JZ   deftimeout
	CMPL AX, ST_DEFMS(R12)
	JNE  customto // a per-root timeout (other than the default)
deftimeout:
	CMPQ 8(SI), $0
	JEQ  missx // val 0: completes at once
	MOVL 16(SI), AX
	CMPL AX, $0xfffff
	JA   missx // task out of range
	MOVQ ST_COUNT(R12), AX
	CMPQ AX, ST_MAXPENDING(R12)
	JGE  missx // full
	MOVQ ST_INITMETA(R12), AX
	BTQ  $32, AX
	JCC  missx // the default deadline is near: a near timer is needed
	MOVQ DX, AX
	SUBQ R10, AX
	JCS  missx // the probe went round the end of the table
	CMPQ AX, $29
	JAE  missx // a distance near saturation (31)

	MOVQ R13, ST_SAVE0(R12)
	MOVQ R8, ST_SAVE1(R12)
	XORQ R13, R13 // d, the new entry's distance at p = R10

rhwalk: // the first slot from home whose entry is homed later (shorter distance)
	CMPQ R10, DX
	JEQ  rhfound
	LEAQ (R10)(R10*2), R9
	LEAQ (DI)(R9*8), R9
	MOVQ 16(R9), AX
	SHRQ $52, AX
	ANDQ $0x1f, AX
	CMPQ AX, R13
	JB   rhfound
	INCQ R10 // no wrap: z < n and p <= z
	INCQ R13
	JMP  rhwalk

rhfound: // shift es[p:z] up by one slot, distances + 1 (saturated stay)
	MOVQ DX, AX // q = z
shup:
	CMPQ AX, R10
	JEQ  shupdone
	LEAQ (AX)(AX*2), R9
	LEAQ (DI)(R9*8), R9 // &es[q]
	MOVQ -24(R9), DX
	MOVQ DX, 0(R9)
	MOVQ -16(R9), DX
	MOVQ DX, 8(R9)
	MOVQ -8(R9), DX
	MOVQ DX, R8
	SHRQ $52, R8
	ANDQ $0x1f, R8
	CMPQ R8, $0x1f
	JEQ  shupsat
	MOVQ DISTONE, R8
	ADDQ R8, DX
shupsat:
	MOVQ DX, 16(R9)
	MOVQ ST_EXT(R12), R8
	TESTQ R8, R8
	JZ   shupnoext
	MOVWQZX -2(R8)(AX*2), DX // ext moves with its entry
	MOVW DX, (R8)(AX*2)
shupnoext:
	DECQ AX
	JMP  shup

shupdone: // es[p] = {root, val, (init | task) << 32 | d << 52 | default deadline}
	LEAQ (R10)(R10*2), R9
	LEAQ (DI)(R9*8), R9
	MOVQ ST_SAVE1(R12), R8
	MOVQ R8, 0(R9)
	MOVQ 8(SI), DX
	MOVQ DX, 8(R9)
	MOVL 16(SI), DX
	BTSQ $31, DX
	SHLQ $32, DX
	MOVQ R13, AX
	SHLQ $52, AX
	ORQ  AX, DX
	MOVQ ST_INSX(R12), AX
	TESTQ AX, AX
	JNZ  insx
	MOVL ST_INITMETA(R12), AX
	ORQ  AX, DX
insdone:
	MOVQ DX, 16(R9)
	INCQ ST_COUNT(R12)
	INCQ ST_INITS(R12)
	MOVQ ST_SAVE0(R12), R13
	ADDQ $32, SI
	JMP  loop

// ---- Completion: R9 = &es[slot], DX = slot, R8 root.
complete:
	MOVQ 16(R9), AX
	MOVQ AX, R10
	SHRQ $60, R10
	CMPQ R10, $8
	JNE  completex // not timing kind 0 without a near timer
	MOVQ ST_OUTLEN(R12), R10
	CMPQ R10, ST_OUTCAP(R12)
	JGE  hit // no room in out

	// latency = nowNs - (deadline - defTicks) * tickNs + tickNs/2, >= 0;
	// deadline = nowTick + int32(uint32(meta) - uint32(nowTick))
	MOVL    AX, AX
	MOVQ    ST_NOWTICK(R12), R10
	SUBL    R10, AX
	MOVLQSX AX, AX
	ADDQ    R10, AX
	SUBQ    ST_DEFTICKS(R12), AX
latstart: // AX = the root's start tick
	IMULQ   ST_TICKNS(R12), AX
	MOVQ    ST_NOWNS(R12), R10
	SUBQ    AX, R10
	MOVQ    ST_TICKNS(R12), AX
	SHRQ    $1, AX
	ADDQ    AX, R10
	TESTQ   R10, R10
	JGE     latok
	XORQ    R10, R10
latok:
	MOVQ ST_OUTLEN(R12), AX
	SHLQ $5, AX
	ADDQ ST_OUT(R12), AX // &out[outLen]
	MOVQ R8, 0(AX)   // Root
	MOVQ R10, 8(AX)  // Latency
	MOVQ 16(R9), R10
	SHRQ $32, R10
	ANDQ $0xfffff, R10
	BTSQ $32, R10    // Task, Kind Completed (1), Reason none
	MOVQ R10, 16(AX)
	MOVQ $0, 24(AX)
	INCQ ST_OUTLEN(R12)
	INCQ ST_COMPLETED(R12)
	INCQ R13

	// backward shift from the hole at DX (R9): each later entry moves back
	// one slot, up to an empty slot or an entry at distance 0.
	MOVQ R13, ST_SAVE0(R12)
	MOVQ $0, ST_SAVE1(R12) // crossed the pass cursor
rmloop:
	LEAQ 1(DX), R10
	CMPQ R10, CX
	JNE  rmnowrap
	XORQ R10, R10
rmnowrap:
	LEAQ (R10)(R10*2), AX
	LEAQ (DI)(AX*8), AX // &es[j]
	MOVQ 0(AX), R8
	TESTQ R8, R8
	JZ   rmdone
	MOVQ 16(AX), R13
	MOVQ R13, R8
	SHRQ $52, R8
	ANDQ $0x1f, R8
	JZ   rmdone // in its home slot
	CMPQ R8, $0x1f
	JEQ  rmsat
	MOVQ DISTONE, R8
	SUBQ R8, R13
rmmove:
	MOVQ R13, 16(R9)
	MOVQ 0(AX), R8
	MOVQ R8, 0(R9)
	MOVQ 8(AX), R8
	MOVQ R8, 8(R9)
	MOVQ ST_EXT(R12), R8
	TESTQ R8, R8
	JZ   rmnoext
	MOVWQZX (R8)(R10*2), R13 // ext moves with its entry
	MOVW R13, (R8)(DX*2)
rmnoext:
	CMPQ R10, ST_SCAN(R12)
	JNE  rmnext
	MOVQ $1, ST_SAVE1(R12) // moved from the cursor to just behind it
rmnext:
	MOVQ R10, DX
	MOVQ AX, R9
	JMP  rmloop

rmsat: // saturated: the distance at the hole is 30 or stays saturated
	MOVQ AX, ST_SAVE2(R12)
	MOVQ DX, R10 // the hole's index (j is recomputed below)
	MOVQ 0(AX), AX
	XORQ BX, AX
	MULQ ST_K2(R12)
	XORQ DX, AX
	IMULQ ST_K3(R12), AX
	MULQ CX // DX = home of the moving entry
	MOVQ R10, R8
	SUBQ DX, R8
	JCC  rmsatpos
	ADDQ CX, R8
rmsatpos:
	MOVQ R10, DX // the hole again
	CMPQ R8, $0x1f
	JAE  rmsatkeep
	MOVQ DISTONE, R8
	SUBQ R8, R13
rmsatkeep:
	MOVQ ST_SAVE2(R12), AX
	LEAQ 1(DX), R10
	CMPQ R10, CX
	JNE  rmmove
	XORQ R10, R10
	JMP  rmmove

rmdone:
	MOVQ $0, 0(R9)
	MOVQ $0, 8(R9)
	MOVQ $0, 16(R9)
	DECQ ST_COUNT(R12)
	MOVQ ST_SAVE0(R12), R13
	ADDQ $32, SI
	CMPQ ST_SAVE1(R12), $0
	JNE  crossed
	JMP  loop

crossed:
	MOVQ $3, R10
	XORQ DX, DX
	JMP  ret

// ---- Completion of timing kind 1 (start = deadline - X) or 2 (start =
// deadline - default - X), without a near timer: R10 = meta >> 60, R9 =
// &es[slot], DX = slot, R8 root. X = ext[slot] | xhi << 16.
completex:
	CMPQ R10, $9
	JB   hit
	CMPQ R10, $10
	JA   hit // a near timer, or the side table
	MOVQ ST_OUTLEN(R12), AX
	CMPQ AX, ST_OUTCAP(R12)
	JGE  hit // no room in out
	MOVQ R13, ST_SAVE0(R12)
	MOVQ ST_EXT(R12), AX
	MOVWQZX (AX)(DX*2), R13
	MOVQ 16(R9), AX
	SHRQ $57, AX
	ANDQ $7, AX
	SHLQ $16, AX
	ORQ  AX, R13 // X
	CMPQ R10, $9
	JEQ  cxstart
	ADDQ ST_DEFTICKS(R12), R13 // kind 2: default + X
cxstart:
	MOVQ    16(R9), AX
	MOVL    AX, AX
	MOVQ    ST_NOWTICK(R12), R10
	SUBL    R10, AX
	MOVLQSX AX, AX
	ADDQ    R10, AX // deadline
	SUBQ    R13, AX // start
	MOVQ    ST_SAVE0(R12), R13
	INCQ    ST_EXTDROPS(R12)
	JMP     latstart

hit:
	MOVQ $1, R10
	JMP  ret

// ---- INIT of a new root with its own timeout T ms (AX), in the slot as
// timing kind 1 (X = T ticks) when st.xok (1 ms ticks, an ext array), T
// fits X, and its deadline nowStart+T is far (at or past st.limit): on to
// the checks and the insert of a default INIT, with st.insx = T.
customto:
	CMPQ ST_XOK(R12), $0
	JEQ  missx
	CMPQ AX, $0x7ffff
	JA   missx // X has 19 bits
	MOVQ AX, ST_INSX(R12)
	ADDQ ST_NOWSTART(R12), AX
	CMPQ AX, ST_LIMIT(R12)
	JB   missx // near: a near timer is needed
	JMP  deftimeout

// ---- The end of an insert with st.insx = T: ext[p] = T's low 16 bits,
// xhi = T >> 16, kind 1, deadline nowStart+T. DX = the word's other bits
// << 32, R9 = &es[p], R10 = p.
insx:
	MOVQ ST_EXT(R12), R8
	MOVW AX, (R8)(R10*2)
	MOVQ AX, R8
	SHRQ $16, R8
	SHLQ $57, R8
	ORQ  R8, DX
	BTSQ $60, DX // kind 1
	ADDQ ST_NOWSTART(R12), AX
	MOVL AX, AX
	ORQ  AX, DX
	MOVQ $0, ST_INSX(R12)
	INCQ ST_EXTADDS(R12)
	JMP  insdone

missx:
	MOVQ $0, ST_INSX(R12)
	MOVQ $2, R10
	JMP  ret

none:
	XORQ R10, R10
	XORQ DX, DX

ret:
	VZEROUPPER
	SUBQ msgs+8(FP), SI
	SHRQ $5, SI
	MOVQ SI, done+24(FP)
	MOVQ DX, slot+32(FP)
	MOVQ R10, probe+40(FP)
	MOVQ R13, acks+48(FP)
	RET
