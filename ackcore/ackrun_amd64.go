package ackcore

import "golang.org/x/sys/cpu"

// ackRun is Shard.applyRun's loop in assembly (ackrun_amd64.s).
//
//go:noescape
func ackRun(st *runState, msgs *Msg, count int) (done int, slot uint64, probe int)

// ackRunFar is ackRun looking further ahead (ackrun_far_amd64.s), for
// tables past farAbove.
//
//go:noescape
func ackRunFar(st *runState, msgs *Msg, count int) (done int, slot uint64, probe int)

// haveAckRun says whether ackRun may run here (it needs AVX2). Tests turn
// it off to cover the portable loop too.
var haveAckRun = cpu.X86.HasAVX2
