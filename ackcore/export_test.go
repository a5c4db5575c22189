package ackcore

import "github.com/xorack/xorack/internal/timerwheel"

// Verify exposes the invariant checker to the external tests.
func (s *Shard) Verify() error { return s.verify() }

// SetAckRun turns the assembly loop on or off (where the CPU has it) and
// returns a func that restores the previous setting.
func SetAckRun(on bool) (restore func()) {
	prev := haveAckRun
	haveAckRun = on && prev
	return func() { haveAckRun = prev }
}

// AckRunAvailable reports whether this CPU runs the assembly loop.
func AckRunAvailable() bool { return haveAckRun }

// ProbeStats returns the mean and the longest probe distance (groups past
// home) of the entries in the table.
func (s *Shard) ProbeStats() (mean float64, longest int) {
	sum := 0
	for i := range s.t.e {
		if s.t.e[i].key == 0 {
			continue
		}
		d := int(s.t.groupDist(uint64(i)/groupSlots, s.t.home(s.t.e[i].key)))
		sum += d
		longest = max(longest, d)
	}
	if s.t.count == 0 {
		return 0, 0
	}
	return float64(sum) / float64(s.t.count), longest
}

// PastHome counts the entries in the table that live past their home
// group, and of those the ones in the group right after it.
func (s *Shard) PastHome() (entries, past, next int) {
	for i := range s.t.e {
		if s.t.e[i].key == 0 {
			continue
		}
		entries++
		switch s.t.groupDist(uint64(i)/groupSlots, s.t.home(s.t.e[i].key)) {
		case 0:
		case 1:
			past++
			next++
		default:
			past++
		}
	}
	return entries, past, next
}

// HomeOf is the home group of root in a table of n groups keyed by seed.
func HomeOf(seed uint64, n int, root uint64) int64 {
	t := table{ng: uint64(n)}
	t.keys = newKeys(seed)
	return int64(t.home(root))
}

// ExpireWork is what one Expire call did.
type ExpireWork = expireWork

// LastExpire is what the last Expire call did.
func (s *Shard) LastExpire() ExpireWork { return s.call }

// SideLen is the number of roots whose timing lives in the side map.
func (s *Shard) SideLen() int { return s.side.len() }

// NearBytes is the memory of the near wheel and the due lists.
func (s *Shard) NearBytes() int { return s.nearBytes() }

// NearIdleBytes is what the near tier holds idle once made: the near
// wheel at its idle capacity, with its roots and free stack, once a near
// timer made it, and the due lists' buckets once a root was listed.
func (s *Shard) NearIdleBytes() int {
	n := 0
	if s.near != nil {
		n += timerwheel.New(nearInitial, 0).Bytes() + nearInitial*8 + nearInitial*4
	}
	if s.due.buckets != nil {
		n += int(s.due.span) * 16
	}
	return n
}

// ForcePrefetch makes s take the paths of tables past prefetchAbove and
// farAbove, whatever its size: Apply's prefetching path for the portable
// loop, and ackRunFar in place of ackRun where the assembly loop runs.
func (s *Shard) ForcePrefetch() { s.prefetch, s.far = true, true }

// Groups is the number of groups in s's table.
func (s *Shard) Groups() int { return int(s.t.ng) }

// TagOf is the tag of root in a table of n groups keyed by seed.
func TagOf(seed uint64, n int, root uint64) uint8 {
	t := table{ng: uint64(n)}
	t.keys = newKeys(seed)
	_, tag := t.hashOf(root)
	return tag
}
