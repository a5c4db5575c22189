package ackcore

// Per-root timing: a root's start, its timeout and its deadline.
//
// The slot stores the deadline (meta's low 32 bits, or the near wheel
// does). The start (the INIT's tick, for the latency; the entry's creation
// without INIT, for OldestPending) and the timeout (which a RESET without
// one restarts) are derived from it by the entry's kind (word bits 29..28):
//
//	kind 0  default   start = deadline - default;     timeout = default
//	kind 1  timeout   start = deadline - X;           timeout = X ticks
//	kind 2  extended  start = deadline - default - X; timeout = default
//	kind 3  side      start and timeout in Shard.side
//
// X is a 19-bit count of ticks: its low 16 bits in ext[slot], a uint16
// array beside the slots (allocated while an entry of kind 1 or 2 exists,
// 2 bytes a slot, 2.7 bytes a root at the 3/4 load bound), its high 3 bits in
// the word (xhi). Kind 1 is a root with its own timeout (TimeoutMs on INIT,
// or on the RESET that made an entry before its INIT), kind 2 a root with
// the default timeout whose deadline a RESET moved on: X is how far. So
// per-root timeouts up to 2^19-1 ticks (8.7 minutes at 1 ms) and RESETs
// within that long of the INIT stay in the slot; the rest (a longer
// timeout or extension, a timeout that is not a whole number of ticks, a
// RESET of a root that has its own timeout) goes to the side table
// (side.go), 24 to 64 bytes a root. A timeout equal to the default is the
// default: kind 0, and the fast paths take it.
const (
	kindDefault  uint32 = 0
	kindTimeout  uint32 = 1
	kindExtended uint32 = 2
	kindSide     uint32 = 3

	// xMax is the largest X: 16 bits in ext and 3 in the word.
	xMax = 1<<19 - 1
)

// timing holds what kinds 1 to 3 need beside the table.
type timing struct {
	ext      []uint16  // X's low 16 bits, by slot; nil while no entry of kind 1 or 2 exists
	extCount int       // entries of kind 1 or 2
	side     sideTable // kind 3 entries, by root
}

func kindOf(w metaWord) uint32 { return w.kind() }

// xOf is the X of the entry in slot, whose word is w.
func (s *Shard) xOf(slot int, w metaWord) uint64 {
	return uint64(s.ext[slot]) | uint64((uint32(w)&xhiMask)>>xhiShift)<<16
}

// startTimeout decodes the start tick and the timeout of the entry e in
// slot, whose deadline is d.
func (s *Shard) startTimeout(slot int, e *entry, d uint64) (start uint64, timeout int64) {
	w := e.word()
	switch kindOf(w) {
	case kindDefault:
		return d - s.defTicks, s.defNs
	case kindTimeout:
		x := s.xOf(slot, w)
		return d - x, int64(x) * s.tickNs
	case kindExtended:
		return d - s.defTicks - s.xOf(slot, w), s.defNs
	}
	st, _ := s.side.get(e.key)
	return st.start, st.timeout
}

// setTiming records, for the entry e in slot, the start and the timeout
// that go with deadline d, choosing its kind (the deadline itself is
// setDeadline's). Unsigned differences that would be negative wrap to huge
// values and fall through to the side map.
func (s *Shard) setTiming(slot int, e *entry, d, start uint64, timeout int64) {
	kind, x := kindSide, uint64(0)
	switch {
	case timeout == s.defNs && d-s.defTicks == start:
		kind = kindDefault
	case timeout == s.defNs && d-s.defTicks-start <= xMax:
		kind, x = kindExtended, d-s.defTicks-start
	case timeout%s.tickNs == 0 && uint64(timeout/s.tickNs) <= xMax && d-uint64(timeout/s.tickNs) == start:
		kind, x = kindTimeout, uint64(timeout/s.tickNs)
	}
	w := e.word()
	old := kindOf(w)
	if old == kindSide && kind != kindSide {
		s.side.del(e.key)
	}
	hasX := func(k uint32) bool { return k == kindTimeout || k == kindExtended }
	switch {
	case hasX(kind) && !hasX(old):
		s.extCount++
	case hasX(old) && !hasX(kind):
		s.extCount--
	}
	switch kind {
	case kindSide:
		s.side.put(sideRec{root: e.key, start: start, timeout: timeout})
	case kindTimeout, kindExtended:
		if s.ext == nil {
			s.ext = make([]uint16, len(s.t.e))
		}
		s.ext[slot] = uint16(x)
	}
	w = w&^metaWord(kindMask|xhiMask) | metaWord(kind<<kindShift|uint32(x>>16)<<xhiShift)
	e.meta = uint64(w)<<32 | e.meta&0xffffffff
}

// dropTiming forgets what e's kind keeps beside the table, before e is
// removed.
func (s *Shard) dropTiming(e *entry) {
	switch kindOf(e.word()) {
	case kindSide:
		s.side.del(e.key)
	case kindTimeout, kindExtended:
		s.extCount--
	}
}

// trimTiming releases the ext array once no entry uses it. Called once per
// pass (the side table shrinks by itself).
func (s *Shard) trimTiming() {
	if s.extCount == 0 {
		s.ext = nil
	}
}

// timingBytes is the memory the ext array and the side table hold.
func (s *Shard) timingBytes() int {
	return cap(s.ext)*2 + s.side.bytes()
}
