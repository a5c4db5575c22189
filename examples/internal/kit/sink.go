package kit

import (
	"fmt"
	"maps"
	"sync"
)

// Sink is an idempotent word-count store, the pattern that turns at least
// once into an exactly-once effect: each message's contribution (how
// often each of its words occurs) is written under the message's position
// in its source and the word, and a write whose key is already there is a
// no-op. A replayed message (after a crash, a rebalance or a failed
// attempt) writes the same keys again and changes nothing; the totals are
// those of each message counted once. Beside them the sink keeps plain
// running totals, which count every replay again: what a counter without
// the key would hold.
//
// A real sink stores the key with the effect in one atomic write (a
// primary key, a conditional put); a map under a mutex is that, in one
// process. P is the position's type, printed with %v.
type Sink[P comparable] struct {
	mu      sync.Mutex
	byPos   map[P]map[string]int
	totals  map[string]int
	naive   map[string]int
	applied int // writes applied
	noops   int // writes of keys already there
}

// NewSink returns an empty sink.
func NewSink[P comparable]() *Sink[P] {
	return &Sink[P]{byPos: map[P]map[string]int{}, totals: map[string]int{}, naive: map[string]int{}}
}

// Put records that the message at p contains word n times. It returns
// false when the key was there already (a replay), and an error when the
// value differs from the one there: processing that is not deterministic
// per message cannot be made exactly once this way.
func (s *Sink[P]) Put(p P, word string, n int) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.naive[word] += n
	words := s.byPos[p]
	if words == nil {
		words = map[string]int{}
		s.byPos[p] = words
	}
	if old, ok := words[word]; ok {
		s.noops++
		if old != n {
			return false, fmt.Errorf("sink: %v word %q written as %d, then %d", p, word, old, n)
		}
		return false, nil
	}
	words[word] = n
	s.totals[word] += n
	s.applied++
	return true, nil
}

// Totals returns a copy of the idempotent totals and of the plain running
// ones.
func (s *Sink[P]) Totals() (idempotent, naive map[string]int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.totals), maps.Clone(s.naive)
}

// Records returns the number of messages with at least one word written.
func (s *Sink[P]) Records() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.byPos)
}

// Has reports whether the message at p has been written.
func (s *Sink[P]) Has(p P) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.byPos[p]) > 0
}

// Writes returns the writes applied and the no-op writes (replays).
func (s *Sink[P]) Writes() (applied, noops int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.applied, s.noops
}
