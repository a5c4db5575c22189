package kit

import (
	"errors"
	"math/rand/v2"

	"github.com/xorack/xorack/topology"
)

// Failer picks the inputs a bolt task fails on purpose: a fraction of
// them, drawn from a generator seeded by the run's seed and the task, so
// that a run with the same seed fails the same draws.
type Failer struct {
	fraction float64
	rng      *rand.Rand
}

// NewFailer returns the Failer of one task.
func NewFailer(fraction float64, seed uint64, task int) *Failer {
	return &Failer{fraction: fraction, rng: rand.New(rand.NewPCG(seed, uint64(task)))}
}

// Fail reports whether to fail the next input.
func (f *Failer) Fail() bool { return f.rng.Float64() < f.fraction }

var errInjected = errors.New("injected failure after the write")

// CountInto returns the factory of the word counts' count bolt: it writes
// each input's (position, word, count), as put reads them from the tuple,
// to sink, then fails a fraction of its inputs on purpose, drawn as
// NewFailer draws them: the write happened, the tree fails, the message is
// replayed and written again, which the sink absorbs.
func CountInto[P comparable](sink *Sink[P], fail float64, seed uint64, put func(*topology.Tuple) (pos P, word string, n int)) func() topology.Bolt {
	return func() topology.Bolt {
		return topology.Basic(&countBolt[P]{sink: sink, fail: fail, seed: seed, put: put})
	}
}

type countBolt[P comparable] struct {
	sink *Sink[P]
	fail float64
	seed uint64
	put  func(*topology.Tuple) (P, string, int)
	f    *Failer
}

func (b *countBolt[P]) Open(ctx topology.TaskContext) error {
	b.f = NewFailer(b.fail, b.seed, ctx.Task)
	return nil
}

func (b *countBolt[P]) Execute(t *topology.Tuple, _ *topology.BasicCollector) error {
	if _, err := b.sink.Put(b.put(t)); err != nil {
		return err
	}
	if b.f.Fail() {
		return errInjected
	}
	return nil
}
