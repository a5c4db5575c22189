package main

import (
	"fmt"
	"sync"
)

// Position is a record's place in its source: what makes a write
// idempotent.
type Position struct {
	Topic     string
	Partition int32
	Offset    int64
}

// Sink is an idempotent word-count store, the pattern that turns at least
// once into an exactly-once effect: each record's contribution (how often
// each of its words occurs) is written under the record's position and
// the word, and a write whose key is already there is a no-op. A replayed
// record (after a crash, a rebalance or a failed attempt) writes the same
// keys again and changes nothing; the totals are those of each record
// counted once. A real sink stores the key with the effect in one atomic
// write (a primary key, a conditional put); a map under a mutex is that,
// in one process.
type Sink struct {
	mu       sync.Mutex
	byRecord map[Position]map[string]int
	totals   map[string]int
	writes   int // writes applied
	noops    int // writes of keys already there
}

// NewSink returns an empty sink.
func NewSink() *Sink {
	return &Sink{byRecord: map[Position]map[string]int{}, totals: map[string]int{}}
}

// Put records that the record at p contains word n times. It returns
// false when the key was there already (a replay), and an error when the
// value differs from the one there: processing that is not deterministic
// per record cannot be made exactly once this way.
func (s *Sink) Put(p Position, word string, n int) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	words := s.byRecord[p]
	if words == nil {
		words = map[string]int{}
		s.byRecord[p] = words
	}
	if old, ok := words[word]; ok {
		s.noops++
		if old != n {
			return false, fmt.Errorf("sink: %s/%d@%d word %q written as %d, then %d", p.Topic, p.Partition, p.Offset, word, old, n)
		}
		return false, nil
	}
	words[word] = n
	s.totals[word] += n
	s.writes++
	return true, nil
}

// Totals returns a copy of the word totals.
func (s *Sink) Totals() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]int, len(s.totals))
	for w, n := range s.totals {
		out[w] = n
	}
	return out
}

// Records returns the number of records with at least one word written.
func (s *Sink) Records() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.byRecord)
}

// Has reports whether the record at p has been written.
func (s *Sink) Has(p Position) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.byRecord[p]) > 0
}

// Writes returns the writes applied and the no-op writes (replays).
func (s *Sink) Writes() (applied, noops int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.writes, s.noops
}
