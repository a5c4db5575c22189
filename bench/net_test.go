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
	rep := runOK(t, Config{Levels: []Level{LevelNet}, Pending: []int{2000}, Conns: []int{1, 2}, NetBatch: []int{16, 64},
		Duration: 40 * time.Millisecond, Reps: 1, NoPin: true})
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
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "Config.NetBatch") {
			t.Errorf("batch %d: %v", b, err)
		}
	}
}

// TestNetSummary: a net group with all three impls gets one line, its
// ratios computed from the rows; a group missing an impl gets none.
func TestNetSummary(t *testing.T) {
	cpu := func(x float64) map[string]*float64 { return map[string]*float64{"task-clock-ns": &x} }
	rows := []Row{
		{Level: LevelNet, Impl: "netio", Conns: 1, Batch: 256, Pending: 10000, MsgsPerSec: 30e6, CountersPerMsg: cpu(50)},
		{Level: LevelNet, Impl: "grpc", Conns: 1, Batch: 256, Pending: 10000, MsgsPerSec: 20e6, CountersPerMsg: cpu(80)},
		{Level: LevelNet, Impl: "inproc", Conns: 1, Batch: 256, Pending: 10000, MsgsPerSec: 70e6, CountersPerMsg: cpu(25)},
		{Level: LevelNet, Impl: "netio", Conns: 4, Batch: 256, Pending: 10000, MsgsPerSec: 30e6, CountersPerMsg: cpu(50)},
	}
	got := netSummary(rows)
	want := "net P=10000 conns=1 batch=256: netio/gRPC 1.50x msgs/s; cpu-ns/msg netio 50.0, gRPC 80.0, in process 25.0 (netio 2.00x in process)"
	if len(got) != 1 || got[0] != want {
		t.Fatalf("got %q, want [%q]", got, want)
	}
}
