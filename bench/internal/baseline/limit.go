package baseline

import (
	"fmt"
	"math/bits"

	"github.com/xorack/xorack/ackcore"
	"github.com/xorack/xorack/internal/splitmix"
)

// limitSlot is one slot of Limit's table: 24 bytes, so that a slot holds
// what the acker must (root 8 B, ack val 8 B, spout task 4 B) and nothing
// else; the 4 pad bytes keep the 8-byte fields aligned.
type limitSlot struct {
	key  uint64 // root id; 0 marks an empty slot (root ids are never 0)
	val  uint64 // ack val
	task uint32 // spout task, ackcore.NoTask until an INIT names it
	_    uint32
}

// fibMul is 2^64 divided by the golden ratio: multiplying by it and keeping
// the top bits (Fibonacci hashing) spreads any root ids, sequential ones
// included, over the table with one multiply.
const fibMul = splitmix.Golden

// Limit is NOT an acker. It is the "how close to the memory system" row of
// the comparison: the least work any acker must do per message, a flat
// open-addressed table doing insert-if-missing / XOR / delete-on-zero,
// linear probing over 24-byte slots at load at most 1/2, the probe loop
// written inline in Apply (measured on the 2-vCPU machine: a probe in a call costs up to 2x at
// large P). It has no timeouts, no FAIL or RESET handling, no
// order-independent completion rule and no latency:
//
//   - every message XORs its Val into its root's slot, inserting the slot
//     if missing; an INIT also records the task;
//   - when a slot's val reaches 0 the slot is deleted (backward shift, no
//     tombstones) and Completed{root, task} is appended, whether or not an
//     INIT was seen (with random edge ids that is practically never before
//     the INIT);
//   - a message with Val 0 for a missing root inserts nothing; an INIT of
//     that kind (no recipients) is reported Completed;
//   - an insert past MaxPending is Refused{Full}, root 0 Refused{Invalid};
//     no other validation.
//
// Expire does nothing. Stats counts Completed, RefusedFull, RefusedInvalid
// and Pending only. Not safe for concurrent use.
type Limit struct {
	slots      []limitSlot // len is a power of two, >= 2*MaxPending
	mask       uint64      // len(slots)-1
	shift      uint        // 64 - log2(len(slots)): the hash keeps the top bits
	count      int         // occupied slots
	maxPending int

	completed, refusedFull, refusedInvalid uint64
}

var _ ackcore.Interface = (*Limit)(nil)

// NewLimit makes a Limit with room for cfg.MaxPending roots; Timeout, Tick
// and Clock are checked like the others' and otherwise unused.
func NewLimit(cfg Config) (*Limit, error) {
	cfg, err := cfg.validate()
	if err != nil {
		return nil, err
	}
	logN := bits.Len(uint(2*cfg.MaxPending - 1)) // 2^logN >= 2*MaxPending: load <= 1/2
	n := 1 << logN
	return &Limit{
		slots:      make([]limitSlot, n),
		mask:       uint64(n - 1),
		shift:      uint(64 - logN),
		maxPending: cfg.MaxPending,
	}, nil
}

// Apply XORs each message into its root's slot; see the type's doc.
func (l *Limit) Apply(msgs []ackcore.Msg, out []ackcore.Outcome) []ackcore.Outcome {
	slots, mask, shift := l.slots, l.mask, l.shift
	for i := range msgs {
		m := &msgs[i]
		k := m.Root
		if k == 0 {
			l.refusedInvalid++
			out = append(out, refuseInvalid(m))
			continue
		}
		for j := k * fibMul >> shift; ; j = (j + 1) & mask {
			s := &slots[j&mask]
			if s.key == k {
				if m.Kind == ackcore.Init {
					s.task = m.Task
				}
				if s.val ^= m.Val; s.val == 0 {
					l.completed++
					out = append(out, ackcore.Outcome{Root: k, Task: s.task, Kind: ackcore.Completed})
					l.delete(j & mask)
				}
				break
			}
			if s.key == 0 {
				switch {
				case m.Val == 0:
					if m.Kind == ackcore.Init {
						l.completed++
						out = append(out, ackcore.Outcome{Root: k, Task: m.Task, Kind: ackcore.Completed})
					}
				case l.count >= l.maxPending:
					l.refusedFull++
					out = append(out, refuseFull(k))
				default:
					task := ackcore.NoTask
					if m.Kind == ackcore.Init {
						task = m.Task
					}
					*s = limitSlot{key: k, val: m.Val, task: task}
					l.count++
				}
				break
			}
		}
	}
	return out
}

// delete empties slot i and shifts back the entries after it that probed
// past it, so that no tombstone is left (Knuth's Algorithm R).
func (l *Limit) delete(i uint64) {
	slots, mask := l.slots, l.mask
	l.count--
	for {
		slots[i] = limitSlot{}
		j := i
		for {
			j = (j + 1) & mask
			k := slots[j].key
			if k == 0 {
				return
			}
			// The entry at j may fill the hole at i unless its home lies
			// cyclically in (i, j].
			if home := k * fibMul >> l.shift; (j-home)&mask >= (j-i)&mask {
				slots[i] = slots[j]
				i = j
				break
			}
		}
	}
}

// Expire does nothing: Limit has no timeouts.
func (l *Limit) Expire(out []ackcore.Outcome) (_ []ackcore.Outcome, more bool) { return out, false }

// Stats returns Completed, RefusedFull, RefusedInvalid and Pending; the
// other counters stay 0 (counting messages by kind is acker work).
func (l *Limit) Stats() ackcore.Stats {
	return ackcore.Stats{Completed: l.completed, RefusedFull: l.refusedFull, RefusedInvalid: l.refusedInvalid, Pending: l.count}
}

// Verify checks the probe invariant (every key is reachable from its home
// slot without crossing an empty slot), that no key appears twice, and the
// count. O(slots).
func (l *Limit) Verify() error {
	n := 0
	seen := make(map[uint64]bool, l.count)
	for i, s := range l.slots {
		if s.key == 0 {
			continue
		}
		n++
		if seen[s.key] {
			return fmt.Errorf("baseline: Limit: root %#x twice", s.key)
		}
		seen[s.key] = true
		for j := s.key * fibMul >> l.shift; j != uint64(i); j = (j + 1) & l.mask {
			if l.slots[j].key == 0 {
				return fmt.Errorf("baseline: Limit: root %#x in slot %d unreachable: slot %d empty", s.key, i, j)
			}
		}
	}
	if n != l.count || n > l.maxPending {
		return fmt.Errorf("baseline: Limit: %d occupied slots, count %d, MaxPending %d", n, l.count, l.maxPending)
	}
	return nil
}
