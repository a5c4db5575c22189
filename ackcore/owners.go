package ackcore

import (
	"fmt"
	"math"
	"math/bits"

	"github.com/xorack/xorack/internal/layout"
)

// Orphans per owner (docs/semantics.md, rule 10 and netio rule 9). Every
// message that can make an entry counts against its sender: an INIT by
// its share of the table (the embedder's), an ACK, FAIL or RESET for a
// root with no entry by its owner's orphans here. The shard tells up to
// Config.Owners senders apart (the producers of package acker, a netio
// connection each): the embedder names the owner of the messages it
// applies next with SetOwner, once per batch (one field store; the hot
// loops never read it). Each orphan entry keeps its owner in the top
// bits of its tag field (orphans.go), and the shard counts the live
// orphans of each owner: up when its message makes one, down wherever an
// orphan leaves (its INIT adopts it, it is evicted, it expires, StopAll).
//
// An owner with OrphanShare orphans live makes no more: its next ACK,
// FAIL or RESET that needs a new entry is refused, Refused{full}, counted
// in Stats.OrphansRefused and in its OwnerStats.Refused (not in
// RefusedFull, and a refused FAIL is neither reserved nor filtered). Such
// a root, if its INIT comes later, misses that message's ack val (or its
// FAIL) and times out: a replay, never a loss and never an early ack.
// And at the bound the orphan that gives way is the oldest of the owner
// holding the most (orphans.go, evictOrphan). So one sender's flood of
// messages for unknown roots cannot take the table from the others'
// orphans (an ACK that raced its INIT): it evicts its own. With no share
// (OrphanShare 0, the default) an owner's orphans are bounded by the
// table alone.
//
// Memory: 12 bytes per owner (a 32-bit count, a 64-bit refusal counter),
// each array on cache lines of its own (under 1 KiB for both with the
// padding; the allocator would otherwise pack a one-owner count beside
// some other goroutine's data, and every orphan's count would miss:
// layout.Own), nothing per root: the owner rides in bits the orphan
// entry had spare.

// MaxOwners is the most owners a shard tells apart (acker.MaxProducers).
const MaxOwners = 1 << 12

// OwnerStats are one owner's orphan counters.
type OwnerStats struct {
	Orphans int    // orphans its messages made that are in the table now
	Refused uint64 // its ACKs, FAILs and RESETs refused at its share (OrphansRefused)
}

// initOwners sizes the per-owner counters and splits the tag field
// between owner and tag (Config.Owners, validated).
func (s *Shard) initOwners(cfg Config) {
	owners := cfg.Owners // filled by validate
	ob := bits.Len(uint(owners - 1))
	s.ownerShift = uint8(tagShift + tagBits - ob)
	s.orphanQ.mask = (1<<(tagBits-ob) - 1) << tagShift
	s.ownerOrphans = layout.Own[int32](owners) // written with every orphan: on lines of its own
	s.ownerRefused = layout.Own[uint64](owners)
	s.SetOrphanShare(cfg.OrphanShare)
}

// ownerOf is the owner kept in an orphan entry's word.
func (s *Shard) ownerOf(w metaWord) int { return int(w.orphanBits() >> s.ownerShift) }

// SetOwner says that the messages applied next come from owner (in
// [0, Config.Owners)): their orphans are counted against it. The shard's
// owner is 0 until set.
func (s *Shard) SetOwner(owner int) {
	if uint(owner) >= uint(len(s.ownerOrphans)) {
		panic(fmt.Sprintf("ackcore: owner %d out of range [0, %d)", owner, len(s.ownerOrphans)))
	}
	s.owner = owner
}

// SetOrphanShare sets the most orphans one owner may have in the table
// (Config.OrphanShare); n <= 0 means no bound but the table's. Owners
// already past a lower share keep their orphans until they leave.
func (s *Shard) SetOrphanShare(n int) {
	if n <= 0 {
		n = math.MaxInt32 // the table holds fewer entries
	}
	s.orphanShare = n
}

// OrphanShare is the share SetOrphanShare set, 0 for none.
func (s *Shard) OrphanShare() int {
	if s.orphanShare == math.MaxInt32 {
		return 0
	}
	return s.orphanShare
}

// owners is the number of owners (Config.Owners, at least 1).
func (s *Shard) owners() int { return len(s.ownerOrphans) }

// OwnerStats returns owner's counters.
func (s *Shard) OwnerStats(owner int) OwnerStats {
	return OwnerStats{Orphans: int(s.ownerOrphans[owner]), Refused: s.ownerRefused[owner]}
}

// ownerFull reports whether the current owner is at its share: a new
// orphan of its is refused.
func (s *Shard) ownerFull() bool { return int(s.ownerOrphans[s.owner]) >= s.orphanShare }

// refuseOrphan answers m, an ACK, FAIL or RESET whose owner is at its
// share, Refused{full}.
func (s *Shard) refuseOrphan(m *Msg, out []Outcome) []Outcome {
	s.stats.OrphansRefused++
	s.ownerRefused[s.owner]++
	return append(out, Outcome{Root: m.Root, Task: NoTask, Kind: Refused, Reason: ReasonFull})
}

// ownerBytes is what the per-owner counters take for owners owners.
func ownerBytes(owners int) int64 {
	owners = max(owners, 1)
	return int64(layout.OwnBytes[int32](owners) + layout.OwnBytes[uint64](owners))
}
