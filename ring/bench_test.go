package ring

import (
	"runtime"
	"strconv"
	"testing"

	"github.com/puzpuzpuz/xsync/v3"
)

// benchCapacity is the capacity of the buffered channel this benchmark
// compares against (4096, a common choice), and is given to every
// implementation.
const benchCapacity = 4096

// BenchmarkRing moves b.N 32-byte items from a producer goroutine to the
// benchmark goroutine. ns/op is per item. batch=64 means 64 items per
// publish for impl=ring and impl=chanarr; for impl=chan and impl=xsync,
// which have no batch operation, it means 64 single operations per loop
// iteration, so those stay honest per-item baselines.
func BenchmarkRing(b *testing.B) {
	for _, impl := range []struct {
		name string
		run  func(b *testing.B, batch int) uint64
	}{
		{"ring", benchRing},
		{"chan", benchChan},
		{"chanarr", benchChanArr},
		{"xsync", benchXsync},
	} {
		b.Run("impl="+impl.name, func(b *testing.B) {
			for _, batch := range []int{1, 64} {
				if impl.name == "chanarr" && batch == 1 {
					continue
				}
				b.Run("batch="+strconv.Itoa(batch), func(b *testing.B) {
					b.ReportAllocs()
					sum := impl.run(b, batch)
					b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "items/s")
					if want := uint64(b.N) * uint64(b.N-1) / 2; sum != want {
						b.Fatalf("consumer summed %d, want %d", sum, want)
					}
				})
			}
		})
	}
}

func benchItem(i int) item { return item{seq: uint64(i)} }

func benchRing(b *testing.B, batch int) (sum uint64) {
	r := New[item](benchCapacity)
	n := b.N
	done := make(chan struct{})
	b.ResetTimer()
	go func() {
		defer close(done)
		if batch == 1 {
			for i := range n {
				r.Push(benchItem(i))
			}
			return
		}
		for i := 0; i < n; {
			s := r.ReserveWait(min(batch, n-i))
			for j := range s {
				s[j] = benchItem(i + j)
			}
			r.Commit(len(s))
			i += len(s)
		}
	}()
	if batch == 1 {
		for range n {
			v, _ := r.Pop()
			sum += v.seq
		}
	} else {
		for got := 0; got < n; {
			s := r.peekWait(batch)
			for _, v := range s {
				sum += v.seq
			}
			r.Release(len(s))
			got += len(s)
		}
	}
	<-done
	return sum
}

func benchChan(b *testing.B, batch int) (sum uint64) {
	ch := make(chan item, benchCapacity)
	n := b.N
	b.ResetTimer()
	go func() {
		for i := 0; i < n; {
			for end := min(i+batch, n); i < end; i++ {
				ch <- benchItem(i)
			}
		}
	}()
	for got := 0; got < n; {
		for end := min(got+batch, n); got < end; got++ {
			sum += (<-ch).seq
		}
	}
	return sum
}

func benchChanArr(b *testing.B, batch int) (sum uint64) {
	const width = 64
	ch := make(chan [width]item, benchCapacity/width)
	n := b.N
	b.ResetTimer()
	go func() {
		var a [width]item
		for i := 0; i < n; i += width {
			for j := range min(width, n-i) {
				a[j] = benchItem(i + j)
			}
			ch <- a
		}
	}()
	for got := 0; got < n; got += width {
		a := <-ch
		for _, v := range a[:min(width, n-got)] {
			sum += v.seq
		}
	}
	return sum
}

func benchXsync(b *testing.B, batch int) (sum uint64) {
	q := xsync.NewSPSCQueueOf[item](benchCapacity)
	n := b.N
	done := make(chan struct{})
	b.ResetTimer()
	go func() {
		defer close(done)
		for i := 0; i < n; {
			for end := min(i+batch, n); i < end; i++ {
				for !q.TryEnqueue(benchItem(i)) {
					runtime.Gosched()
				}
			}
		}
	}()
	for got := 0; got < n; {
		for end := min(got+batch, n); got < end; got++ {
			v, ok := q.TryDequeue()
			for !ok {
				runtime.Gosched()
				v, ok = q.TryDequeue()
			}
			sum += v.seq
		}
	}
	<-done
	return sum
}

// BenchmarkTryPushPop is the single-goroutine cost of the calls themselves:
// no cache line moves between cores.
func BenchmarkTryPushPop(b *testing.B) {
	r := New[item](64)
	v := benchItem(1)
	var sum uint64
	b.ReportAllocs()
	for b.Loop() {
		r.tryPush(v)
		w, _ := r.tryPop()
		sum += w.seq
	}
	if sum != uint64(b.N) {
		b.Fatal("lost items")
	}
}

// BenchmarkPushPop is the single-goroutine cost of the blocking calls when
// they need not wait: Push, then Pop of an SPSC and of a one-ring FanIn.
func BenchmarkPushPop(b *testing.B) {
	f := NewFanIn[item](1, 64, 64, DefaultIdle())
	for _, c := range []struct {
		name  string
		r     *SPSC[item]
		fanIn bool // Pop from f, whose one ring r is
	}{
		{"spsc", New[item](64), false},
		{"fanin", f.Producer(0), true},
	} {
		b.Run("impl="+c.name, func(b *testing.B) {
			v := benchItem(1)
			var sum uint64
			b.ReportAllocs()
			for b.Loop() {
				c.r.Push(v)
				var w item
				if c.fanIn {
					w, _ = f.Pop()
				} else {
					w, _ = c.r.Pop()
				}
				sum += w.seq
			}
			if sum != uint64(b.N) {
				b.Fatal("lost items")
			}
		})
	}
}
