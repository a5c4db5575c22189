package acker

import (
	"fmt"

	"github.com/xorack/xorack/ackcore"
)

// ShardStats returns shard i's counters: while running, the snapshot
// its executor published at its last tick; after Stop, exact. Stats is
// their sum.
func (a *Acker) ShardStats(i int) ackcore.Stats {
	if i < 0 || i >= len(a.execs) {
		panic(fmt.Sprintf("acker: ShardStats(%d) out of range [0, %d)", i, len(a.execs)))
	}
	e := a.execs[i]
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.snap
}
