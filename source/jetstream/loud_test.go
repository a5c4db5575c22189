package jetstream

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/xorack/xorack/internal/testkit"
	"github.com/xorack/xorack/topology"
)

// A spout whose server does not answer fails to start within OpenTimeout,
// with the connection's reason (here: connection refused on a closed port
// of 127.0.0.1, the client retrying in the background).
func TestUnreachableServerFailsStart(t *testing.T) {
	_, js := dial(t, "nats://"+testkit.ClosedAddr(t), nats.RetryOnFailedConnect(true), nats.MaxReconnects(-1), nats.ReconnectWait(20*time.Millisecond))
	start := time.Now()
	_, err := build(t, testTopology(), Config{JetStream: js, Stream: "S", Consumer: "c", OpenTimeout: 500 * time.Millisecond}, 1,
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
	logs := &testkit.Logs{}
	p := start(t, testTopology(), Config{JetStream: e.js, Stream: "S", Consumer: "c", FetchWait: 20 * time.Millisecond, Logger: slog.New(logs)}, 1,
		func(b *topology.Builder) { b.Bolt("sink", newSink).Input("js", topology.Shuffle()) })
	waitFor(t, "every message acked", func() bool { return p.stats().Acked == 10 }, func() string { return "" })
	e.srv.Close()
	waitFor(t, "the loss counted", func() bool {
		st := p.spouts[0].Stats()
		return st.FetchErrors >= 3 && !st.Connected && st.LastFetchError != ""
	}, func() string { return "" })
	n := 0
	for _, r := range logs.Records() {
		if strings.HasPrefix(r.Message, "jetstream: pull request failed") {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%d warnings for %d failed pull requests, want 1 per 10 s", n, p.spouts[0].Stats().FetchErrors)
	}
	p.stopNow(t)
}
