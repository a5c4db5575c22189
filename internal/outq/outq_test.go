package outq

import (
	"runtime"
	"testing"
	"time"
)

// TestQueue: items come out in order, a Put at the bound waits until
// the consumer takes or Stopping, and Wait returns false once the queue
// is closed and drained.
func TestQueue(t *testing.T) {
	q := New[int](2)
	if got := q.Poll(nil); len(got) != 0 {
		t.Fatalf("Poll of an empty queue: %v", got)
	}
	q.Put([]int{1, 2}, true)
	put := make(chan struct{})
	go func() { q.Put([]int{3}, true); close(put) }()
	awaitWaiters(t, q)
	select {
	case <-put:
		t.Fatal("a Put at the bound did not wait")
	default:
	}
	got, ok := q.Wait(nil)
	if !ok || len(got) != 2 || got[0] != 1 || got[1] != 2 {
		t.Fatalf("Wait: %v %v", got, ok)
	}
	<-put
	q.Put([]int{4, 5}, true)
	done := make(chan struct{})
	go func() { q.Put([]int{6}, true); close(done) }()
	awaitWaiters(t, q) // Stopping must release a Put already waiting
	q.Stopping()
	<-done
	q.Put([]int{7}, true) // never waits once stopping
	q.Close()
	if q.Len() != 5 {
		t.Fatalf("Len %d, want 5", q.Len())
	}
	got, ok = q.Wait(got[:0])
	if !ok || len(got) != 5 {
		t.Fatalf("Wait after Close: %v %v", got, ok)
	}
	if got, ok = q.Wait(got[:0]); ok || len(got) != 0 {
		t.Fatalf("Wait on a closed, drained queue: %v %v", got, ok)
	}
	tick := make(chan time.Time, 1)
	tick <- time.Now()
	if got, ok = New[int](0).WaitUntil(nil, tick); !ok || len(got) != 0 {
		t.Fatalf("WaitUntil on wake: %v %v", got, ok)
	}
}

// awaitWaiters waits until a Put waits for room in q (on its cond).
func awaitWaiters(t *testing.T, q *Queue[int]) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		q.mu.Lock()
		w := q.waits
		q.mu.Unlock()
		if w > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("no Put waited for room in 30 s")
		}
		runtime.Gosched()
	}
}
