package netio

import (
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/xorack/xorack/ackcore"
	"github.com/xorack/xorack/acker"
)

// TestClientBudgetRefused: a configuration that could hold more than
// MaxBytes is refused before anything connects, the error naming the
// bytes, the budget and the values that make them; within the budget the
// same configuration dials.
func TestClientBudgetRefused(t *testing.T) {
	s := startServer(t, nil)
	cfg := clientCfg(s.addr)
	cfg.MaxPending = 1 << 16
	spec := acker.Spec{Producers: 2, Tasks: 8}
	f, err := cfg.validate()
	if err != nil {
		t.Fatal(err)
	}
	checked, _, err := spec.Check()
	if err != nil {
		t.Fatal(err)
	}
	need := f.footprint(checked).total()
	cfg.MaxBytes = need - 1
	_, err = Dial(cfg, spec)
	if err == nil {
		t.Fatalf("Dial with MaxBytes %d, below the footprint %d: no error", need-1, need)
	}
	for _, want := range []string{"netio: ", "MaxPending 65536", "8 inboxes", "over MaxBytes " + strconv.FormatInt(need-1, 10) + " bytes", "may hold " + strconv.FormatInt(need, 10) + " bytes"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if st := s.Stats(); st.Accepted != 0 {
		t.Errorf("a refused configuration connected: %d connections accepted", st.Accepted)
	}
	cfg.MaxBytes = need
	c, err := Dial(cfg, spec)
	if err != nil {
		t.Fatalf("Dial with MaxBytes at the footprint: %v", err)
	}
	c.Stop()
	cfg.MaxBytes = -1
	if _, err := Dial(cfg, spec); err == nil || !strings.Contains(err.Error(), "MaxBytes -1") {
		t.Errorf("negative MaxBytes: %v", err)
	}
}

// TestClientBudgetHolds drives a client to two of its bounds (MaxPending
// roots in flight, then as many outcomes left unpolled in its inbox) and
// checks what its pending table, staged frame and inbox hold against the
// parts of the footprint Dial checked.
func TestClientBudgetHolds(t *testing.T) {
	s := startServer(t, nil)
	cfg := clientCfg(s.addr)
	cfg.MaxPending = 5000
	spec := acker.Spec{Producers: 1, Tasks: 1}
	c := mustDial(t, cfg, spec)
	defer c.Stop()
	p := c.send[0]
	root := uint64(1)
	// Roots that never complete (an INIT with a val): the pending table
	// fills to MaxPending.
	batch := make([]ackcore.Msg, 0, 100)
	for range cfg.MaxPending / 100 {
		batch = batch[:0]
		for range 100 {
			batch = append(batch, ackcore.Msg{Kind: ackcore.Init, Root: root, Val: root})
			root++
		}
		if err := p.SendBatch(batch); err != nil {
			t.Fatal(err)
		}
		if err := p.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	h := c.hosts[0]
	waitFor(t, 10*time.Second, "every root registered", func() bool {
		h.pendMu.Lock()
		defer h.pendMu.Unlock()
		return h.pend.n == cfg.MaxPending
	})
	// Complete them all; the outcomes pile up in the inbox, unpolled.
	for r := uint64(1); r < root; r += 100 {
		batch = batch[:0]
		for k := r; k < r+100; k++ {
			batch = append(batch, ackcore.Msg{Kind: ackcore.Ack, Root: k, Val: k})
		}
		if err := p.SendBatch(batch); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Flush(); err != nil {
		t.Fatal(err)
	}
	ib := c.inbox[0]
	waitFor(t, 10*time.Second, "every outcome in the inbox", func() bool { return ib.q.Len() == cfg.MaxPending })
	f := c.cfg.footprint(c.spec)
	h.pendMu.Lock()
	table := int64(cap(h.pend.slots)) * int64(unsafe.Sizeof(pendSlot{}))
	h.pendMu.Unlock()
	if table == 0 || table > f.pending {
		t.Errorf("pending table holds %d bytes, footprint's pending part %d", table, f.pending)
	}
	st := &p.stage[0]
	if staged := int64(cap(st.buf)) + int64(cap(st.inits))*int64(unsafe.Sizeof(initRec{})); staged > f.stages {
		t.Errorf("staged frame holds %d bytes, footprint's stages part %d", staged, f.stages)
	}
	held := int64(ib.q.Len()) * int64(unsafe.Sizeof(ackcore.Outcome{}))
	if held > f.inboxes {
		t.Errorf("inbox holds %d bytes of outcomes, footprint's inboxes part %d", held, f.inboxes)
	}
	if got := ib.Poll(nil); len(got) != cfg.MaxPending {
		t.Fatalf("polled %d outcomes, want %d", len(got), cfg.MaxPending)
	}
}
