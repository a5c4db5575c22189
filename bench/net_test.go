package bench

import (
	"strings"
	"testing"
	"time"
)

// TestNetLevel: a short net run gives a verified row per impl,
// connection count and batch size, in that nesting, with latency, the
// conns and batch fields and the ratio to the netio row of its group.
func TestNetLevel(t *testing.T) {
	rep, err := Run(Config{Levels: []Level{LevelNet}, Pending: []int{2000}, Conns: []int{1, 2}, NetBatch: []int{16, 64},
		Duration: 40 * time.Millisecond, Reps: 1, NoPin: true})
	if err != nil {
		t.Fatal(err)
	}
	impls := []string{"netio", "grpc", "inproc"}
	if len(rep.Rows) != 2*2*len(impls) {
		t.Fatalf("%d rows", len(rep.Rows))
	}
	for i, r := range rep.Rows {
		wantImpl := impls[i%3]
		wantBatch := []int{16, 64}[i/3%2]
		wantConns := 1 + i/6
		if r.Level != LevelNet || r.Impl != wantImpl || r.Conns != wantConns || r.Batch != wantBatch || !r.Verified {
			t.Fatalf("row %d: %s conns %d batch %d verified %v (%s)", i, r.Name(), r.Conns, r.Batch, r.Verified, r.VerifyError)
		}
		if r.MsgsPerSec <= 0 || r.P50Ns == nil || r.P99Ns == nil || r.RatioToXorack == nil {
			t.Fatalf("row %d %s: msgs/s %v p50 %v p99 %v ratio %v", i, r.Name(), r.MsgsPerSec, r.P50Ns, r.P99Ns, r.RatioToXorack)
		}
		if r.Impl == "netio" && *r.RatioToXorack != 1 {
			t.Fatalf("row %d %s: ratio %v to its own group's netio row", i, r.Name(), *r.RatioToXorack)
		}
	}
}

// TestNetBatchBounds: a batch size out of range is refused, naming it.
func TestNetBatchBounds(t *testing.T) {
	for _, b := range []int{0, -1, maxNetBatch + 1} {
		c := Config{Levels: []Level{LevelNet}, NetBatch: []int{16, b}}
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "net batch") {
			t.Errorf("batch %d: %v", b, err)
		}
	}
}
