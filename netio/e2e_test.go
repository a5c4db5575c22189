package netio

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/xorack/xorack/ackcore"
	"github.com/xorack/xorack/acker"
)

// TestRoundTrip: trees sent over one connection complete, failed ones
// fail, each exactly once, with the client's local task.
func TestRoundTrip(t *testing.T) {
	s := startServer(t, nil)
	cfg := clientCfg(s.addr)
	cfg.TaskBase = 10
	c, err := Dial(cfg, acker.Spec{Producers: 1, Tasks: 2})
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	p := c.Sender(0)
	const n = 5000
	for i := 1; i <= n; i++ {
		msgs := tree(rng, uint64(i), uint32(i%2), 4)
		if i%10 == 0 {
			msgs[2] = ackcore.Msg{Root: uint64(i), Kind: ackcore.Fail}
		}
		if err := p.SendBatch(msgs); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Flush(); err != nil {
		t.Fatal(err)
	}
	got0 := collect(t, c.Inbox(0), n/2, 10*time.Second)
	got1 := collect(t, c.Inbox(1), n/2, 10*time.Second)
	for task, got := range []map[uint64][]ackcore.Outcome{got0, got1} {
		for root, os := range got {
			if len(os) != 1 {
				t.Fatalf("root %d: %d outcomes", root, len(os))
			}
			o := os[0]
			if int(root%2) != task || o.Task != uint32(task) {
				t.Fatalf("root %d in inbox %d with task %d", root, task, o.Task)
			}
			want := ackcore.Completed
			if root%10 == 0 {
				want = ackcore.Failed
			}
			if o.Kind != want {
				t.Fatalf("root %d: %v %v, want %v", root, o.Kind, o.Reason, want)
			}
		}
	}
	st := c.Stop()
	if st.Completed != n-n/10 || st.FailedExplicit != n/10 {
		t.Fatalf("client stats %+v", st)
	}
	if ss := s.Stats(); ss.Msgs != n*5 {
		t.Fatalf("server took %d messages, want %d", ss.Msgs, n*5)
	}
}
