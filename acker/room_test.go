package acker_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/xorack/xorack/ackcore"
	"github.com/xorack/xorack/acker"
	"github.com/xorack/xorack/internal/invariants"
)

// TestRoom: messages written into what Room returns and Staged are
// applied as SendBatch's are (each tree completes once, with its INIT's
// task), across spans and the ring's wrap, with Room refusing what it
// cannot offer in one span; Room says why it cannot before Start and once
// the acker stops.
func TestRoom(t *testing.T) {
	cfg := acker.Config{Spec: acker.Spec{Producers: 1, Tasks: 2, Receivers: 1}, RingSize: 64, Batch: 16, Shard: ackcore.Config{MaxPending: 4096}}
	a, err := acker.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	p := a.Sender(0).(*acker.Producer)
	if _, err := p.Room(4); !errors.Is(err, acker.ErrNotStarted) {
		t.Fatalf("Room before Start: %v, want ErrNotStarted", err)
	}
	if err := a.Start(); err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{0, 65} {
		if span, err := p.Room(n); span != nil || err != nil {
			t.Fatalf("Room(%d) on a ring of 64: %d places, %v; want nil, nil", n, len(span), err)
		}
	}
	in := a.Inbox(0)
	var outs []ackcore.Outcome
	got := map[uint64]ackcore.Outcome{}
	take := func(want int) {
		deadline := time.Now().Add(30 * time.Second)
		for len(got) < want {
			if time.Now().After(deadline) {
				t.Fatalf("%d of %d outcomes arrived", len(got), want)
			}
			outs, _ = in.WaitUntil(outs[:0], time.After(10*time.Millisecond))
			for _, o := range outs {
				if _, dup := got[o.Root]; dup {
					t.Fatalf("root %#x: a second outcome %v", o.Root, o)
				}
				got[o.Root] = o
			}
		}
	}
	// Frames of 1 to 40 messages (trees of an INIT and an ACK), so that
	// spans start anywhere in the ring and some requests wrap past its end.
	root, direct, refused := uint64(0), 0, 0
	for n := 2; n <= 40; n += 2 {
		for range 8 {
			span, err := p.Room(n)
			if err != nil {
				t.Fatal(err)
			}
			msgs := make([]ackcore.Msg, 0, n)
			for range n / 2 {
				root++
				msgs = append(msgs, ackcore.Msg{Root: root, Kind: ackcore.Init, Task: uint32(root % 2), Val: root}, ackcore.Msg{Root: root, Kind: ackcore.Ack, Val: root})
			}
			if span == nil {
				refused++
				if err := p.SendBatch(msgs); err != nil {
					t.Fatal(err)
				}
			} else {
				if len(span) < n {
					t.Fatalf("Room(%d) gave %d places", n, len(span))
				}
				direct++
				copy(span, msgs)
				p.Staged(n)
			}
			if err := p.Flush(); err != nil {
				t.Fatal(err)
			}
			take(int(root))
		}
	}
	if direct == 0 {
		t.Fatal("Room never offered a span")
	}
	t.Logf("%d frames staged in place, %d refused (wrap)", direct, refused)
	for r := uint64(1); r <= root; r++ {
		o, ok := got[r]
		if !ok || o.Kind != ackcore.Completed || o.Task != uint32(r%2) {
			t.Fatalf("root %#x: %v (present %v), want Completed for task %d", r, o, ok, r%2)
		}
	}
	a.Stop()
	if _, err := p.Room(4); !errors.Is(err, acker.ErrClosed) {
		t.Fatalf("Room after Stop: %v, want ErrClosed", err)
	}
}

// TestRoomSharded: with several shards Room offers nothing (each message
// goes to its root's shard): the caller uses SendBatch.
func TestRoomSharded(t *testing.T) {
	a := started(t, acker.Config{Shards: 2, Spec: acker.Spec{Producers: 1, Tasks: 1}, Shard: ackcore.Config{MaxPending: 1024}})
	defer a.Stop()
	if span, err := a.Sender(0).(*acker.Producer).Room(4); span != nil || err != nil {
		t.Fatalf("Room with 2 shards: %d places, %v; want nil, nil", len(span), err)
	}
}

// TestStagedChecksUnderInvariants: the invariant build refuses an invalid
// message staged in place (root 0), as SendBatch would, with a panic
// naming it; the release build trusts the caller.
func TestStagedChecksUnderInvariants(t *testing.T) {
	if !invariants.Enabled {
		t.Skip("Staged checks its messages only in the invariant build")
	}
	a := started(t, acker.Config{Spec: acker.Spec{Producers: 1, Tasks: 1}, Shard: ackcore.Config{MaxPending: 1024}})
	defer a.Stop()
	p := a.Sender(0).(*acker.Producer)
	span, err := p.Room(1)
	if err != nil || len(span) < 1 {
		t.Fatalf("Room(1): %d places, %v", len(span), err)
	}
	span[0] = ackcore.Msg{Kind: ackcore.Ack, Val: 1}
	defer func() {
		if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "Staged message 0") {
			t.Fatalf("Staged of a root 0: panic %v, want one naming message 0", r)
		}
	}()
	p.Staged(1)
}
