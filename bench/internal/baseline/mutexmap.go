package baseline

import (
	"sync"

	"github.com/xorack/xorack/ackcore"
)

// MutexMap is GoMap behind one sync.Mutex: the "mutex-guarded map shared by
// producers" design, where every producer goroutine calls Apply itself
// instead of handing messages to an acker goroutine. Apply, Expire, Stats
// and Verify each take the lock for the whole call, so any number of
// goroutines may call them at once; per-message cost is GoMap's plus one
// lock round trip per batch (and the contention the benchmarks measure).
// Its semantics are GoMap's, drains (rule 3 of docs/semantics.md) included.
type MutexMap struct {
	mu sync.Mutex
	g  GoMap // guarded by mu
}

var _ ackcore.Interface = (*MutexMap)(nil)

// NewMutexMap makes a MutexMap; see NewGoMap.
func NewMutexMap(cfg Config) (*MutexMap, error) {
	mm := new(MutexMap)
	if err := mm.g.init(cfg); err != nil {
		return nil, err
	}
	return mm, nil
}

// Apply applies msgs in order under the lock. Safe for concurrent use.
func (mm *MutexMap) Apply(msgs []ackcore.Msg, out []ackcore.Outcome) []ackcore.Outcome {
	mm.mu.Lock()
	out = mm.g.Apply(msgs, out)
	mm.mu.Unlock()
	return out
}

// Expire is GoMap.Expire under the lock. Safe for concurrent use.
func (mm *MutexMap) Expire(out []ackcore.Outcome) (_ []ackcore.Outcome, more bool) {
	mm.mu.Lock()
	out, more = mm.g.Expire(out)
	mm.mu.Unlock()
	return out, more
}

// Stats returns exact counters. Safe for concurrent use.
func (mm *MutexMap) Stats() ackcore.Stats {
	mm.mu.Lock()
	defer mm.mu.Unlock()
	return mm.g.Stats()
}

// Verify is GoMap.Verify under the lock.
func (mm *MutexMap) Verify() error {
	mm.mu.Lock()
	defer mm.mu.Unlock()
	return mm.g.Verify()
}

// FailBudget is GoMap's (acktest.Evicter).
func (m *MutexMap) FailBudget() int { return 0 }
