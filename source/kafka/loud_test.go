package kafka

import (
	"errors"
	"log/slog"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/xorack/xorack/internal/testkit"
	"github.com/xorack/xorack/topology"
)

// A spout whose brokers do not answer fails to start within OpenTimeout,
// with the brokers' reason, and counts the failed connections.
func TestUnreachableBrokerFailsStart(t *testing.T) {
	addr := testkit.ClosedAddr(t)
	sp, err := New(Config{Brokers: []string{addr}, Topics: []string{"t"}, Group: "g",
		OpenTimeout: 500 * time.Millisecond, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	top := sinkTopology(t, sp, topology.Config{})
	start := time.Now()
	err = top.Start()
	took := time.Since(start)
	if err == nil {
		t.Fatal("Start succeeded with no broker")
	}
	if !strings.Contains(err.Error(), "refused") || !strings.Contains(err.Error(), addr) || !strings.Contains(err.Error(), "Config.OpenTimeout") {
		t.Fatalf("Start: %v: want the broker's reason (connection refused) and its address %s", err, addr)
	}
	if took > 5*time.Second {
		t.Fatalf("Start took %v, OpenTimeout 500ms", took)
	}
	if st := sp.Stats(); st.ConnectErrors == 0 || !strings.Contains(st.LastBrokerError, "refused") {
		t.Fatalf("stats: connect errors %d, last %q", st.ConnectErrors, st.LastBrokerError)
	}
	t.Logf("Start failed after %v: %v (ECONNREFUSED in chain: %v)", took, err, errors.Is(err, syscall.ECONNREFUSED))

	// A broker that accepts and never answers: Open gives up at
	// OpenTimeout.
	silent := testkit.Serve(t, nil) // each connection held open, never answered
	sp, err = New(Config{Brokers: []string{silent}, Topics: []string{"t"}, Group: "g",
		OpenTimeout: 300 * time.Millisecond, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	err = sp.Open(topology.TaskContext{})
	took = time.Since(start)
	if err == nil || took > 5*time.Second || !strings.Contains(err.Error(), "Config.OpenTimeout") {
		t.Fatalf("Open against a silent broker: %v after %v", err, took)
	}
	t.Logf("silent broker: Open failed after %v: %v", took, err)
}

// A broker lost after Open is visible in Stats and logged, once per
// interval however often the client retries.
func TestLostBrokerIsLoudAndCounted(t *testing.T) {
	const topic, group, parts = "t", "g", 1
	c := startFilled(t, topic, parts, 10)
	logs := &testkit.Logs{}
	l := newLedger()
	pl := startPipeline(t, c, l, pipeOpts{cfg: Config{Topics: []string{topic}, Group: group, Logger: slog.New(logs)}})
	defer pl.stopNow(t)
	c.waitCaughtUp(t, group, topic)
	c.k.Close()
	waitFor(t, "connection errors counted", func() bool { return pl.spout.Stats().ConnectErrors >= 3 })
	st := pl.spout.Stats()
	ws := find(logs, slog.LevelWarn, "kafka: broker connection failed")
	if len(ws) != 1 || st.Disconnects == 0 || st.LastBrokerError == "" {
		t.Fatalf("%d warnings for %d connect errors (want 1 per 10 s), %d disconnects, last error %q",
			len(ws), st.ConnectErrors, st.Disconnects, st.LastBrokerError)
	}
}
