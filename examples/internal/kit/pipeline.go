package kit

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"strings"
	"time"

	"github.com/xorack/xorack/topology"
)

// Pipeline is the pipelines' topology, source to sink: a spout, a split
// bolt (SplitIDs, two executors, shuffle grouping) and a sink bolt (four
// executors, fields grouping on the word), replayed up to 10 times with a
// short backoff.
type Pipeline struct {
	Spout  func() topology.Spout
	Fields []string // the spout's output fields
	// Message gives an input's message id and sentence; Fail is the
	// fraction of messages whose first attempt fails (SplitIDs).
	Message func(*topology.Tuple) (id, sentence string)
	Fail    float64
	Seed    uint64
	Sink    func() topology.Bolt // takes (id, word) tuples
}

// Run builds and starts the topology, calls settled (which returns when
// the source has recorded every message processed, or ctx ended) and
// stops the topology.
func (p Pipeline) Run(ctx context.Context, settled func() error) error {
	b := topology.NewBuilder()
	b.Spout("sentences", p.Spout).Output(p.Fields...)
	b.Bolt("split", SplitIDs(p.Message, p.Fail, p.Seed)).Executors(2).Input("sentences", topology.Shuffle()).Output("id", "word")
	b.Bolt("words", p.Sink).Executors(4).Input("split", topology.Fields("word"))
	cfg := topology.Config{}
	cfg.Retry = topology.RetryPolicy{MaxAttempts: 10, Backoff: time.Millisecond, MaxBackoff: 10 * time.Millisecond}
	top, err := b.Build(cfg)
	if err != nil {
		return err
	}
	if err := top.Start(); err != nil {
		return err
	}
	waitErr := settled()
	return errors.Join(waitErr, top.Stop(ctx))
}

// SplitIDs returns the factory of the pipelines' split bolt. For each
// input, message gives the message's id and its sentence; the bolt emits
// each word with its own id ("message id/index of the word"), then, on the
// first attempt of a fraction fail of the messages (chosen by a hash of
// the id and seed), fails the input after emitting: the engine replays the message,
// and the replay emits the same ids again, which the sink downstream must
// absorb.
func SplitIDs(message func(*topology.Tuple) (id, sentence string), fail float64, seed uint64) func() topology.Bolt {
	return func() topology.Bolt {
		return topology.Basic(topology.BasicFunc(func(t *topology.Tuple, c *topology.BasicCollector) error {
			id, sentence := message(t)
			for i, w := range strings.Fields(sentence) {
				if err := c.Emit(fmt.Sprintf("%s/%d", id, i), w); err != nil {
					return err
				}
			}
			if t.Attempt() == 1 && failFirst(id, seed, fail) {
				return errLostAfterEmit // the engine replays the message
			}
			return nil
		}))
	}
}

// failFirst reports whether message id's first attempt fails: the FNV-1a
// hash of seed and id falls in the fraction fail of its range.
func failFirst(id string, seed uint64, fail float64) bool {
	h := fnv.New64a()
	h.Write(binary.LittleEndian.AppendUint64(nil, seed))
	h.Write([]byte(id))
	return float64(h.Sum64()%1_000_000) < fail*1_000_000
}

var errLostAfterEmit = errors.New("lost after the words were emitted")
