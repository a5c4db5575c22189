package bench

import (
	"testing"
	"time"
)

// TestNetLevel: a short net run gives a verified row per impl and
// connection count, with latency, the conns field and the netio/grpc
// ratio.
func TestNetLevel(t *testing.T) {
	rep, err := Run(Config{Levels: []Level{LevelNet}, Pending: []int{2000}, Conns: []int{1, 2},
		Duration: 60 * time.Millisecond, Reps: 1, NoPin: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Rows) != 4 {
		t.Fatalf("%d rows", len(rep.Rows))
	}
	for i, r := range rep.Rows {
		wantImpl := []string{"netio", "grpc"}[i%2]
		wantConns := 1 + i/2
		if r.Level != LevelNet || r.Impl != wantImpl || r.Conns != wantConns || !r.Verified {
			t.Fatalf("row %d: %s conns %d verified %v (%s)", i, r.Name(), r.Conns, r.Verified, r.VerifyError)
		}
		if r.MsgsPerSec <= 0 || r.P50Ns == nil || r.P99Ns == nil || r.RatioToXorack == nil {
			t.Fatalf("row %d %s: msgs/s %v p50 %v p99 %v ratio %v", i, r.Name(), r.MsgsPerSec, r.P50Ns, r.P99Ns, r.RatioToXorack)
		}
	}
}
