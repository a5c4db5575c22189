package pipeline_test

import (
	"fmt"
	"sync"
	"testing"

	"github.com/xorack/xorack/ackcore"
	"github.com/xorack/xorack/bench/internal/pipeline"
)

// TestPipes: every pipe, with producers sending the INIT and ACKs of their
// roots and each inbox read by its own goroutine (Wait) or polled by the
// producers between batches, delivers each root's Completed exactly once,
// to the inbox of its task, and its counters agree.
func TestPipes(t *testing.T) {
	roots := 60_000
	if testing.Short() {
		roots = 6_000
	}
	for _, impl := range pipeline.Impls {
		for _, polled := range []bool{false, true} {
			t.Run(fmt.Sprintf("impl=%s/polled=%v", impl, polled), func(t *testing.T) {
				runPipe(t, impl, polled, roots)
			})
		}
	}
	if _, err := pipeline.New("nope", pipeline.Config{Producers: 1, Tasks: 1, Shards: 1, MaxPending: 1}); err == nil {
		t.Fatal("unknown impl accepted")
	}
}

func runPipe(t *testing.T, impl string, polled bool, roots int) {
	const producers, tasks = 3, 6
	cfg := pipeline.Config{Producers: producers, Tasks: tasks, Shards: 2, MaxPending: roots, Batch: 64}
	if polled {
		cfg.Receivers = producers // producer p polls inbox p: tasks p and p+3
	}
	p, err := pipeline.New(impl, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	receivers := tasks
	if polled {
		receivers = producers
	}
	got := make([][]ackcore.Outcome, receivers)
	var readers sync.WaitGroup
	if !polled {
		for r := range receivers {
			readers.Add(1)
			go func() {
				defer readers.Done()
				in := p.Inbox(r)
				for {
					var ok bool
					if got[r], ok = in.Wait(got[r]); !ok {
						return
					}
				}
			}()
		}
	}
	var prods sync.WaitGroup
	errs := make([]error, producers)
	for pr := range producers {
		prods.Add(1)
		go func() {
			defer prods.Done()
			s := p.Sender(pr)
			for r := pr; r < roots; r += producers {
				root := uint64(r + 1)
				msgs := []ackcore.Msg{
					{Root: root, Kind: ackcore.Init, Task: uint32(r % tasks), Val: root ^ 1<<63},
					{Root: root, Kind: ackcore.Ack, Val: root},
					{Root: root, Kind: ackcore.Ack, Val: 1 << 63},
				}
				if errs[pr] = s.SendBatch(msgs); errs[pr] != nil {
					return
				}
				if polled && r%64 == pr {
					got[pr] = p.Inbox(pr).Poll(got[pr])
				}
			}
			errs[pr] = s.Flush()
		}()
	}
	prods.Wait()
	for pr, err := range errs {
		if err != nil {
			t.Fatalf("producer %d: %v", pr, err)
		}
	}
	if polled {
		// Each producer polls its inbox until its share is in.
		for r := range receivers {
			want := 0
			for root := 0; root < roots; root++ {
				if root%tasks%receivers == r {
					want++
				}
			}
			for len(got[r]) < want {
				var ok bool
				if got[r], ok = p.Inbox(r).Wait(got[r]); !ok {
					break
				}
			}
		}
	}
	st := p.Stop()
	readers.Wait()
	seen := make([]int, roots+1)
	for r, os := range got {
		for _, o := range os {
			if o.Kind != ackcore.Completed || o.Root == 0 || o.Root > uint64(roots) {
				t.Fatalf("inbox %d: outcome %+v", r, o)
			}
			if want := int((o.Root-1)%tasks) % receivers; want != r {
				t.Fatalf("root %d (task %d) reached inbox %d, want %d", o.Root, o.Task, r, want)
			}
			seen[o.Root]++
		}
	}
	for root := 1; root <= roots; root++ {
		if seen[root] != 1 {
			t.Fatalf("root %d: %d outcomes", root, seen[root])
		}
	}
	if st.Completed != uint64(roots) || st.Inits != uint64(roots) || st.Pending != 0 {
		t.Fatalf("stats %+v", st)
	}
}
