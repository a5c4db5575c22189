package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/xorack/xorack/acker"
	"github.com/xorack/xorack/internal/testkit"
	"github.com/xorack/xorack/netio"
	"github.com/xorack/xorack/topology"
)

// wcSpout emits n sentences, each tracked by its index.
type wcSpout struct {
	n, next       int
	acked, failed *atomic.Int64
}

func (s *wcSpout) Next(c *topology.SpoutCollector) {
	if s.next == s.n {
		c.Done()
		return
	}
	_ = c.Emit(s.next, fmt.Sprintf("sentence %d has the same six words", s.next%7))
	s.next++
}

func (s *wcSpout) Ack(_ any)                       { s.acked.Add(1) }
func (s *wcSpout) Fail(_ any, _ *topology.Failure) { s.failed.Add(1) }

// wcSplit emits each word of a sentence, anchored to it, and acks it.
type wcSplit struct{}

func (wcSplit) Execute(t *topology.Tuple, c *topology.BoltCollector) {
	for _, w := range strings.Fields(t.String(0)) {
		_ = c.Emit(t, w)
	}
	c.Ack(t)
}

// wcCount is one count task's counts: the words the fields grouping
// sends it.
type wcCount map[string]int

func (m wcCount) Execute(t *topology.Tuple, c *topology.BoltCollector) {
	m[t.String(0)]++
	c.Ack(t)
}

// TestWordCountTwoDaemons: the reference engine's word count, its acker
// two ackerd processes reached through netio's client (Config.Port):
// every sentence completes, and every word is counted once, by the one
// count task the fields grouping sends it to.
func TestWordCountTwoDaemons(t *testing.T) {
	d1 := startDaemon(t, nil, "127.0.0.1:0")
	d2 := startDaemon(t, nil, "127.0.0.1:0")
	n := testkit.Size(5000, 1000)
	var acked, failed atomic.Int64
	var mu sync.Mutex
	var tasks []wcCount // one per count task, read after the stop
	b := topology.NewBuilder()
	b.Spout("sentences", func() topology.Spout { return &wcSpout{n: n, acked: &acked, failed: &failed} }).Output("sentence")
	b.Bolt("split", func() topology.Bolt { return wcSplit{} }).Tasks(2).Input("sentences", topology.Shuffle()).Output("word")
	b.Bolt("count", func() topology.Bolt {
		mu.Lock()
		defer mu.Unlock()
		tasks = append(tasks, wcCount{})
		return tasks[len(tasks)-1]
	}).Tasks(2).Input("split", topology.Fields("word"))
	cfg := topology.Config{}
	var client *netio.Client
	cfg.Port = func(spec acker.Spec) (acker.Port, error) {
		c, err := netio.Dial(netio.ClientConfig{Hosts: []string{d1.addr, d2.addr}, Secret: []byte(secret)}, spec)
		client = c
		return c, err
	}
	top := start(t, b, cfg)
	select {
	case <-top.Done():
	case <-time.After(60 * time.Second):
		t.Fatalf("word count not done: %d acked, %d failed of %d", acked.Load(), failed.Load(), n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := top.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if acked.Load() != int64(n) || failed.Load() != 0 {
		t.Fatalf("%d sentences acked, %d failed, want %d acked", acked.Load(), failed.Load(), n)
	}
	// The roots went through both daemons: the client counted them.
	st, cs := client.Stats()
	if st.Inits != uint64(n) || st.Completed != uint64(n) || cs.Connections != 2 || cs.Lost != 0 {
		t.Fatalf("client: %+v %+v", st, cs)
	}
	// The fields grouping sent each word to one count task.
	counts := map[string]int{}
	for _, task := range tasks {
		for w, k := range task {
			if counts[w] != 0 {
				t.Fatalf("word %q counted by two tasks", w)
			}
			counts[w] = k
		}
	}
	if len(tasks) != 2 || counts["sentence"] != n || counts["words"] != n || len(counts) != 6+7 {
		t.Fatalf("word counts %v from %d tasks", counts, len(tasks))
	}
	// A clean stop is no acker error: the spout flushes its sender on
	// every pass, after the client stopped too.
	if e := top.Metrics().Component("sentences").AckerErrors; e != 0 {
		t.Fatalf("AckerErrors %d after a clean stop", e)
	}
}

// TestStopWithPendingNoAckerError: a topology over ackerd stopped with
// roots still pending (its bolt never acks) reports them failed, stopped,
// and counts no acker error: the spout's flush after the client stopped,
// with nothing staged, is none.
func TestStopWithPendingNoAckerError(t *testing.T) {
	d := startDaemon(t, nil, "127.0.0.1:0")
	const n = 100
	var acked, failed atomic.Int64
	b := topology.NewBuilder()
	b.Spout("sentences", func() topology.Spout { return &wcSpout{n: n, acked: &acked, failed: &failed} }).Output("sentence")
	b.Bolt("hold", func() topology.Bolt { return holdBolt{} }).Input("sentences", topology.Shuffle())
	cfg := topology.Config{}
	var client atomic.Pointer[netio.Client]
	cfg.Port = func(spec acker.Spec) (acker.Port, error) {
		c, err := netio.Dial(netio.ClientConfig{Hosts: []string{d.addr}, Secret: []byte(secret)}, spec)
		client.Store(c)
		return c, err
	}
	top := start(t, b, cfg)
	poll(t, 10*time.Second, "every root pending on the daemon", func() bool {
		c := client.Load()
		return c != nil && len(c.Hosts()) == 1 && c.Hosts()[0].Pending == n
	})
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond) // the drain cannot finish
	defer cancel()
	_ = top.Stop(ctx)
	if failed.Load() != n || acked.Load() != 0 {
		t.Fatalf("%d failed, %d acked, want %d failed (stopped)", failed.Load(), acked.Load(), n)
	}
	if e := top.Metrics().Component("sentences").AckerErrors; e != 0 {
		t.Fatalf("AckerErrors %d after a stop with %d roots pending", e, n)
	}
}

// holdBolt takes every tuple and never acks it.
type holdBolt struct{}

func (holdBolt) Execute(*topology.Tuple, *topology.BoltCollector) {}

// start builds the topology and starts it, failing the test if either
// refuses.
func start(t *testing.T, b *topology.Builder, cfg topology.Config) *topology.Topology {
	t.Helper()
	top, err := b.Build(cfg)
	return testkit.Started(t, top, err)
}
