package topology_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/xorack/xorack/ackcore"
	"github.com/xorack/xorack/topology"
)

// sentences emits each sentence once, tracked by its index, then is done.
type sentences struct {
	lines []string
	next  int
	acked int
}

func (s *sentences) Next(c *topology.SpoutCollector) {
	if s.next == len(s.lines) {
		c.Done()
		return
	}
	_ = c.Emit(s.next, s.lines[s.next])
	s.next++
}

func (s *sentences) Ack(msgID any)                       { s.acked++ }
func (s *sentences) Fail(msgID any, f *topology.Failure) { fmt.Println("failed:", msgID, f) }

// counter counts words; one per task, each owning the words hashed to it.
type counter struct {
	mu     *sync.Mutex
	counts map[string]int
}

func (c *counter) Execute(t *topology.Tuple, col *topology.BoltCollector) {
	c.mu.Lock()
	c.counts[t.String(0)]++
	c.mu.Unlock()
	col.Ack(t)
}

// A word count: sentences are split into words, which a fields grouping
// sends to the counter task that owns them. Every sentence is acked once
// all its words are counted.
func Example() {
	spout := &sentences{lines: []string{"the cow jumped over the moon", "the man went to the store"}}
	var mu sync.Mutex
	counts := map[string]int{}

	b := topology.NewBuilder()
	b.Spout("sentences", func() topology.Spout { return spout }).Output("sentence")
	b.Bolt("split", func() topology.Bolt {
		return topology.Basic(topology.BasicFunc(func(t *topology.Tuple, c *topology.BasicCollector) error {
			for _, w := range strings.Fields(t.String(0)) {
				if err := c.Emit(w); err != nil {
					return err
				}
			}
			return nil
		}))
	}).Tasks(2).Input("sentences", topology.Shuffle()).Output("word")
	b.Bolt("count", func() topology.Bolt { return &counter{mu: &mu, counts: counts} }).Tasks(2).
		Input("split", topology.Fields("word"))

	top, err := b.Build(topology.Config{})
	if err != nil {
		panic(err)
	}
	if err := top.Start(); err != nil {
		panic(err)
	}
	<-top.Done() // every sentence completed
	if err := top.Stop(context.Background()); err != nil {
		panic(err)
	}
	m := top.Metrics()
	fmt.Println("the:", counts["the"], "acked sentences:", spout.acked, "words:", m.Component("count").Executed)
	// Output: the: 4 acked sentences: 2 words: 12
}

// poisonSpout emits three messages.
type poisonSpout struct{ next int }

func (s *poisonSpout) Next(c *topology.SpoutCollector) {
	if s.next == 3 {
		c.Done()
		return
	}
	_ = c.Emit(s.next, s.next)
	s.next++
}
func (s *poisonSpout) Ack(msgID any)                       { fmt.Println("completed", msgID) }
func (s *poisonSpout) Fail(msgID any, f *topology.Failure) {}

// runToDone builds and starts the topology, waits until its spouts are
// done and every root ended, and stops it: the lifecycle Example spells
// out.
func runToDone(b *topology.Builder, cfg topology.Config) *topology.Topology {
	top, err := b.Build(cfg)
	if err != nil {
		panic(err)
	}
	if err := top.Start(); err != nil {
		panic(err)
	}
	<-top.Done()
	if err := top.Stop(context.Background()); err != nil {
		panic(err)
	}
	return top
}

// A message that always fails is replayed by the engine (with the values
// it kept) up to the retry policy's attempts, then handed to the
// dead-letter hook; bolts see each replay's attempt number.
func ExampleConfig_deadLetter() {
	var mu sync.Mutex
	var seen []int
	b := topology.NewBuilder()
	b.Spout("numbers", func() topology.Spout { return &poisonSpout{} }).Output("n")
	b.Bolt("check", func() topology.Bolt {
		return topology.Basic(topology.BasicFunc(func(t *topology.Tuple, c *topology.BasicCollector) error {
			if t.Int(0) == 1 {
				mu.Lock()
				seen = append(seen, t.Attempt())
				mu.Unlock()
				return errors.New("poison")
			}
			return nil
		}))
	}).Input("numbers", topology.Shuffle())

	cfg := topology.Config{}
	cfg.Retry = topology.RetryPolicy{MaxAttempts: 3}
	cfg.DeadLetter = func(d topology.DeadLetter) {
		fmt.Printf("dead letter: %v values %v: %v\n", d.MsgID, d.Values, &d.Failure)
	}
	runToDone(b, cfg)
	slices.Sort(seen)
	fmt.Println("attempts seen by the bolt:", seen)
	// Unordered output:
	// completed 0
	// completed 2
	// dead letter: 1 values [1]: topology: message failed (explicit) after 3 attempts: poison
	// attempts seen by the bolt: [1 2 3]
}

// A panic in a bolt is recovered: the tuple fails with ackcore.ReasonPanic, its
// Failure carrying the panic's value (and stack), and the message goes
// the way of any failure (here, one attempt, to the dead-letter hook);
// the topology runs on.
func ExamplePanicError() {
	b := topology.NewBuilder()
	b.Spout("numbers", func() topology.Spout { return &poisonSpout{} }).Output("n")
	b.Bolt("check", func() topology.Bolt {
		return topology.Basic(topology.BasicFunc(func(t *topology.Tuple, c *topology.BasicCollector) error {
			if t.Int(0) == 1 {
				var m map[string]int
				//lint:ignore SA5000 the panic is the example
				m["boom"]++ // a bug: assignment to a nil map
			}
			return nil
		}))
	}).Input("numbers", topology.Shuffle())

	cfg := topology.Config{}
	cfg.Retry = topology.RetryPolicy{MaxAttempts: 1}
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil)) // one line per component per 10 s
	cfg.DeadLetter = func(d topology.DeadLetter) {
		var pe *topology.PanicError
		if errors.As(d.Failure.Err, &pe) {
			fmt.Printf("dead letter %v (%v): %s %q panicked in %s: %v\n", d.MsgID, d.Failure.Reason, "bolt", pe.Component, pe.Method, pe.Value)
		}
	}
	top := runToDone(b, cfg)
	fmt.Println("panics:", top.Metrics().Component("check").Panics)
	// Unordered output:
	// completed 0
	// completed 2
	// dead letter 1 (panic): bolt "check" panicked in Execute: assignment to entry in nil map
	// panics: 1
}

// A root that timed out says where its tuples were, for the roots traced
// (one in Config.TraceEvery): here, a count task that never acked one.
func ExampleHeld() {
	f := &topology.Failure{Reason: ackcore.ReasonTimeout, Attempts: 1, Traced: true, Held: []topology.Held{
		{Component: "count", Task: 4, Tuples: 1, Delivered: true, For: 29800 * time.Millisecond},
		{Component: "count", Task: 4, Tuples: 2, For: 29700 * time.Millisecond},
	}}
	fmt.Println(f)
	// Output: topology: message failed (timeout) after 1 attempt: held by count[4]: 1 tuple delivered 29.8 s ago, not acked; in ring to count[4]: 2 tuples for 29.7 s
}

// The status page, served here by httptest; mount it on an admin server
// and open it in a browser.
func ExampleTopology_StatusHandler() {
	spout := &sentences{lines: []string{"the cow jumped over the moon", "the man went to the store"}}
	var mu sync.Mutex
	b := topology.NewBuilder()
	b.Spout("sentences", func() topology.Spout { return spout }).Output("sentence")
	b.Bolt("count", func() topology.Bolt { return &counter{mu: &mu, counts: map[string]int{}} }).
		Input("sentences", topology.Shuffle())
	top, err := b.Build(topology.Config{})
	if err != nil {
		panic(err)
	}
	srv := httptest.NewServer(http.StripPrefix("/topology", top.StatusHandler()))
	defer srv.Close()
	if err := top.Start(); err != nil {
		panic(err)
	}
	<-top.Done()
	if err := top.Stop(context.Background()); err != nil {
		panic(err)
	}
	resp, err := http.Get(srv.URL + "/topology/")
	if err != nil {
		panic(err)
	}
	defer resp.Body.Close()
	page, _ := io.ReadAll(resp.Body)
	fmt.Println(resp.Header.Get("Content-Type"))
	fmt.Println(strings.Contains(string(page), `<td data-k="count:acked">2</td>`))
	// Output:
	// text/html; charset=utf-8
	// true
}
