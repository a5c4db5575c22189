package jetstream

import (
	"context"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/xorack/xorack/topology"
)

// A spout whose server does not answer fails to start within OpenTimeout,
// with the connection's reason (here: connection refused on a closed port
// of 127.0.0.1, the client retrying in the background).
func TestUnreachableServerFailsStart(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	_, js := dial(t, "nats://"+addr, nats.RetryOnFailedConnect(true), nats.MaxReconnects(-1), nats.ReconnectWait(20*time.Millisecond))
	start := time.Now()
	_, err = build(t, testTopology(), Config{JetStream: js, Stream: "S", Consumer: "c", OpenTimeout: 500 * time.Millisecond}, 1,
		func(b *topology.Builder) { b.Bolt("sink", newSink).Input("js", topology.Shuffle()) })
	took := time.Since(start)
	if err == nil || !strings.Contains(err.Error(), "refused") || !strings.Contains(err.Error(), "Config.OpenTimeout") {
		t.Fatalf("Start: %v: want the connection's reason (connection refused)", err)
	}
	if took > 5*time.Second {
		t.Fatalf("Start took %v, OpenTimeout 500ms", took)
	}
	t.Logf("Start failed after %v: %v", took, err)
}

func newSink() topology.Bolt {
	return topology.Basic(topology.BasicFunc(func(*topology.Tuple, *topology.BasicCollector) error { return nil }))
}

// A connection lost after Open is visible in Stats (not connected, the
// failed pull requests and their error) and logged once per interval.
func TestLostServerIsLoudAndCounted(t *testing.T) {
	e, _ := newStream(t, 10, time.Second, 0)
	logs := &warnings{}
	p := start(t, testTopology(), Config{JetStream: e.js, Stream: "S", Consumer: "c", FetchWait: 20 * time.Millisecond, Logger: slog.New(logs)}, 1,
		func(b *topology.Builder) { b.Bolt("sink", newSink).Input("js", topology.Shuffle()) })
	waitFor(t, "every message acked", func() bool { return p.stats().Acked == 10 }, func() string { return "" })
	e.srv.Close()
	waitFor(t, "the loss counted", func() bool {
		st := p.spouts[0].Stats()
		return st.FetchErrors >= 3 && !st.Connected && st.LastFetchError != ""
	}, func() string { return "" })
	if n := logs.count("jetstream: pull request failed"); n != 1 {
		t.Fatalf("%d warnings for %d failed pull requests, want 1 per 10 s", n, p.spouts[0].Stats().FetchErrors)
	}
	p.stopNow(t)
}

// warnings is a slog handler that keeps the messages it is given.
type warnings struct {
	mu   sync.Mutex
	msgs []string
}

func (h *warnings) Enabled(context.Context, slog.Level) bool { return true }
func (h *warnings) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	h.msgs = append(h.msgs, r.Message)
	h.mu.Unlock()
	return nil
}
func (h *warnings) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *warnings) WithGroup(string) slog.Handler      { return h }

func (h *warnings) count(prefix string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, m := range h.msgs {
		if strings.HasPrefix(m, prefix) {
			n++
		}
	}
	return n
}
