package jstest

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// testTimeout bounds each server test; a hung server fails it rather than
// the whole run.
const testTimeout = 60 * time.Second

func checkLoopback(t *testing.T, url string) {
	t.Helper()
	host, _, err := net.SplitHostPort(strings.TrimPrefix(url, "nats://"))
	if err != nil || host != "127.0.0.1" {
		t.Fatalf("server address %q is not on 127.0.0.1 (%v)", url, err)
	}
}

func startServer(t *testing.T) *Server {
	t.Helper()
	n, err := Start(Config{StoreDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.Close)
	checkLoopback(t, n.URL())
	return n
}

func connectJetStream(t *testing.T, n *Server) jetstream.JetStream {
	t.Helper()
	js, err := n.Connect(nats.Name("jstest"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(js.Conn().Close)
	return js
}

func metadata(t *testing.T, m jetstream.Msg) *jetstream.MsgMetadata {
	t.Helper()
	md, err := m.Metadata()
	if err != nil {
		t.Fatal(err)
	}
	return md
}

// TestJetStreamAckKinds runs a pull consumer with explicit acks against
// the embedded server and checks each kind of reply a spout gives: Ack
// (the record is done), Nak with a delay (redelivered no sooner than the
// delay, delivery count 2), InProgress (the ack deadline is pushed back,
// so a record kept alive for three AckWaits is not redelivered) and Term
// (never redelivered).
func TestJetStreamAckKinds(t *testing.T) {
	const (
		ackWait  = 500 * time.Millisecond
		nakDelay = 400 * time.Millisecond
		// keepAlive is how long the InProgress record is kept pending:
		// three AckWaits, with an InProgress every fifth of one.
		keepAlive = 3 * ackWait
		tick      = ackWait / 5
	)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	js := connectJetStream(t, startServer(t))
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{
		Name: "WORDS", Subjects: []string{"words.>"}, Storage: jetstream.FileStorage,
	}); err != nil {
		t.Fatal(err)
	}
	for i, s := range []string{"ack", "nak", "progress", "term"} {
		ack, err := js.Publish(ctx, "words."+s, []byte(s))
		if err != nil {
			t.Fatal(err)
		}
		if ack.Sequence != uint64(i+1) {
			t.Fatalf("published %q at stream sequence %d, want %d", s, ack.Sequence, i+1)
		}
	}
	cons, err := js.CreateOrUpdateConsumer(ctx, "WORDS", jetstream.ConsumerConfig{
		Durable: "wordcount", AckPolicy: jetstream.AckExplicitPolicy,
		AckWait: ackWait, MaxDeliver: 5, MaxAckPending: 16,
	})
	if err != nil {
		t.Fatal(err)
	}
	fetch := func(n int, wait time.Duration) []jetstream.Msg {
		t.Helper()
		b, err := cons.Fetch(n, jetstream.FetchMaxWait(wait))
		if err != nil {
			t.Fatal(err)
		}
		var msgs []jetstream.Msg
		for m := range b.Messages() {
			msgs = append(msgs, m)
		}
		if err := b.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) {
			t.Fatal(err)
		}
		return msgs
	}

	first := map[string]jetstream.Msg{}
	for _, m := range fetch(4, 5*time.Second) {
		if md := metadata(t, m); md.NumDelivered != 1 {
			t.Fatalf("%q delivered %d times on first fetch", m.Data(), md.NumDelivered)
		}
		first[string(m.Data())] = m
	}
	if len(first) != 4 {
		t.Fatalf("first fetch got %d messages, want 4", len(first))
	}
	if err := first["ack"].DoubleAck(ctx); err != nil {
		t.Fatal(err)
	}
	if err := first["term"].Term(); err != nil {
		t.Fatal(err)
	}
	nakAt := time.Now()
	if err := first["nak"].NakWithDelay(nakDelay); err != nil {
		t.Fatal(err)
	}
	// Keep "progress" alive while waiting for redeliveries: only "nak"
	// may come back.
	var redelivered jetstream.Msg
	for deadline := time.Now().Add(keepAlive); time.Now().Before(deadline); {
		if err := first["progress"].InProgress(); err != nil {
			t.Fatal(err)
		}
		for _, m := range fetch(4, tick) {
			md := metadata(t, m)
			if string(m.Data()) != "nak" || redelivered != nil {
				t.Fatalf("%q redelivered (delivery %d) after %v", m.Data(), md.NumDelivered, time.Since(nakAt))
			}
			if since := time.Since(nakAt); since < nakDelay || md.NumDelivered != 2 {
				t.Fatalf("nak'd message back after %v (delay %v), delivery %d", since, nakDelay, md.NumDelivered)
			}
			redelivered = m
			if err := m.DoubleAck(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	if redelivered == nil {
		t.Fatalf("nak'd message not redelivered within %v", keepAlive)
	}
	if md := metadata(t, first["progress"]); md.NumDelivered != 1 {
		t.Fatalf("kept-alive message shows %d deliveries", md.NumDelivered)
	}
	if err := first["progress"].DoubleAck(ctx); err != nil {
		t.Fatal(err)
	}
	info, err := cons.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.NumAckPending != 0 || info.NumPending != 0 || info.Delivered.Stream != 4 || info.AckFloor.Stream != 4 {
		t.Fatalf("consumer after all replies: %d ack pending, %d pending, delivered up to %d, ack floor %d; want 0, 0, 4, 4",
			info.NumAckPending, info.NumPending, info.Delivered.Stream, info.AckFloor.Stream)
	}
}

func TestConfigErrors(t *testing.T) {
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{}, "StoreDir is empty"},
		{Config{StoreDir: t.TempDir(), MaxStore: -1}, "MaxStore -1"},
	} {
		n, err := Start(c.cfg)
		if err == nil {
			n.Close()
			t.Errorf("Start(%+v) started", c.cfg)
			continue
		}
		if !strings.Contains(err.Error(), c.want) {
			t.Errorf("Start(%+v): %v, want %q", c.cfg, err, c.want)
		}
	}
}
