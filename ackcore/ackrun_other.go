//go:build !amd64

package ackcore

// ackRun is never called where haveAckRun is false.
func ackRun(st *runState, msgs *Msg, count int) (done int, slot uint64, probe int) {
	panic("ackcore: ackRun without assembly")
}

// ackRunFar is never called where haveAckRun is false.
func ackRunFar(st *runState, msgs *Msg, count int) (done int, slot uint64, probe int) {
	panic("ackcore: ackRunFar without assembly")
}

var haveAckRun = false
