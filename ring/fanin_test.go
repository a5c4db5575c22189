package ring

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestNewFanInRejects(t *testing.T) {
	for _, tc := range []struct{ producers, capacity, batch int }{
		{0, 8, 1}, {-1, 8, 1}, {2, 8, 0}, {2, 3, 1}, {2, 0, 4},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("NewFanIn(%d, %d, %d, DefaultIdle()) did not panic", tc.producers, tc.capacity, tc.batch)
				}
			}()
			NewFanIn[item](tc.producers, tc.capacity, tc.batch, DefaultIdle())
		}()
	}
}

func TestFanInRoundRobin(t *testing.T) {
	f := NewFanIn[item](3, 8, 2, DefaultIdle())
	for p := range 3 {
		for s := range 3 {
			f.Producer(p).tryPush(mkItem(uint64(p), uint64(s)))
		}
	}
	// tryPop moves one ring per element.
	for i := range 6 {
		v, ok := f.tryPop()
		if want := mkItem(uint64(i%3), uint64(i/3)); !ok || v != want {
			t.Fatalf("tryPop %d = %v %v, want %v", i, v, ok, want)
		}
	}
	// The next pass starts at ring 0 and takes what is left, one each.
	dst := make([]item, 10)
	if n := f.popBatch(dst); n != 3 || dst[0].src != 0 || dst[1].src != 1 || dst[2].src != 2 {
		t.Fatalf("popBatch = %d %v", n, dst[:n])
	}
	if n := f.popBatch(dst); n != 0 {
		t.Fatalf("popBatch on empty FanIn = %d", n)
	}
	if _, ok := f.tryPop(); ok {
		t.Fatal("tryPop on empty FanIn succeeded")
	}
}

// TestFanInBatchLimit checks a pass takes at most batch elements per ring
// and resumes after the last ring it visited when dst fills.
func TestFanInBatchLimit(t *testing.T) {
	f := NewFanIn[item](3, 16, 4, DefaultIdle())
	for p := range 3 {
		for s := range 10 {
			f.Producer(p).tryPush(mkItem(uint64(p), uint64(s)))
		}
	}
	dst := make([]item, 12)
	if n := f.popBatch(dst); n != 12 {
		t.Fatalf("popBatch = %d, want 12", n)
	}
	for i, v := range dst {
		if want := mkItem(uint64(i/4), uint64(i%4)); v != want {
			t.Fatalf("dst[%d] = %v, want %v", i, v, want)
		}
	}
	// dst of 6 fills inside ring 1 (4 from ring 0, 2 from ring 1); the next
	// pass starts at ring 2.
	if n := f.popBatch(dst[:6]); n != 6 || dst[5] != mkItem(1, 5) {
		t.Fatalf("popBatch = %d, last %v", n, dst[5])
	}
	if n := f.popBatch(dst[:1]); n != 1 || dst[0] != mkItem(2, 4) {
		t.Fatalf("pass after a full dst took %v, want ring 2's next", dst[0])
	}
	var seen []int
	got := f.Drain(func(p int, items []item) {
		if len(items) > 4 {
			t.Fatalf("Drain passed %d items of ring %d, limit 4", len(items), p)
		}
		seen = append(seen, p)
	})
	// Drain starts at ring 0, after ring 2. Left: ring 0 has 10-4-4 = 2,
	// ring 1 has 10-4-2 = 4, ring 2 has 10-4-1 = 5, of which it takes 4.
	if got != 2+4+4 || fmt.Sprint(seen) != "[0 1 2]" {
		t.Fatalf("Drain = %d over rings %v", got, seen)
	}
}

// TestFanInNoStarvation keeps ring 0 full at every pass and drip-feeds one
// element at a time into a randomly chosen other ring. With a dst that
// holds batch elements per ring, the drip must come out in the first pass,
// and no ring may give more than batch; with a dst smaller than batch, so
// that ring 0 alone could fill every pass, within Producers() passes.
func TestFanInNoStarvation(t *testing.T) {
	const producers, batch = 4, 4
	for _, small := range []bool{false, true} {
		f := NewFanIn[item](producers, 64, batch, DefaultIdle())
		rng := rand.New(rand.NewPCG(1, 2))
		var flood uint64
		dst := make([]item, producers*batch)
		for drip := range uint64(scale(2000, 10)) {
			ring := 1 + rng.IntN(producers-1)
			f.Producer(ring).tryPush(mkItem(uint64(ring), drip))
			limit, size := 1, len(dst)
			if small {
				limit, size = producers, 1+rng.IntN(batch)
			}
			for passes := 1; ; passes++ {
				for f.Producer(0).tryPush(mkItem(0, flood)) {
					flood++
				}
				n := f.popBatch(dst[:size])
				var per [producers]int
				for _, v := range dst[:n] {
					per[v.src]++
				}
				if per[0] > batch {
					t.Fatalf("one pass took %d elements from ring 0, batch is %d", per[0], batch)
				}
				if per[ring] == 1 {
					break
				}
				if passes == limit {
					t.Fatalf("small=%v: drip %d into ring %d not consumed after %d passes", small, drip, ring, passes)
				}
			}
		}
	}
}

// TestFanInNoStarvationConcurrent runs a flooding producer that never
// stops against a trickling one. After each publish the trickler reads how
// many passes the consumer has finished; the publish happened before that
// read, so the element must be taken within two more passes (the one in
// flight may have passed its ring already; the next may not). No pass may
// take more than batch elements from the flood, so the trickle waits behind
// at most 2*batch of them.
func TestFanInNoStarvationConcurrent(t *testing.T) {
	const batch = 8
	f := NewFanIn[item](2, 1024, batch, DefaultIdle())
	trickles := uint64(scale(2000, 10))
	done := watchdog(t, 30*time.Second, "starvation")
	defer done()
	var passes, consumed, takenIn atomic.Uint64
	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { // flood
		defer wg.Done()
		for i := uint64(0); !stop.Load(); i++ {
			for !f.Producer(0).tryPush(mkItem(0, i)) && !stop.Load() {
			}
		}
	}()
	// worst is written by the trickler and read after wg.Wait.
	var worst uint64
	go func() { // trickle
		defer wg.Done()
		for i := range trickles {
			f.Producer(1).Push(mkItem(1, i))
			after := passes.Load()
			for consumed.Load() == i && !stop.Load() {
				runtime.Gosched()
			}
			if p := takenIn.Load(); p > after {
				worst = max(worst, p-after)
			}
		}
	}()
	dst := make([]item, 4*batch)
	for consumed.Load() < trickles {
		n := f.popBatch(dst)
		pass := passes.Load() + 1
		flood := 0
		for _, v := range dst[:n] {
			if v.src == 0 {
				flood++
				continue
			}
			if v != mkItem(1, consumed.Load()) {
				stop.Store(true)
				t.Fatalf("trickle element %d arrived as %+v", consumed.Load(), v)
			}
			takenIn.Store(pass)
			consumed.Add(1)
		}
		if flood > batch {
			stop.Store(true)
			t.Fatalf("pass %d took %d flood elements, batch is %d", pass, flood, batch)
		}
		passes.Store(pass)
		if n == 0 {
			runtime.Gosched()
		}
	}
	stop.Store(true)
	wg.Wait()
	if worst > 2 {
		t.Fatalf("a trickle element was taken %d passes after it was published, want at most 2", worst)
	}
}

// TestFanInHammer runs producers with different calls into one consumer
// using each of the consumer's blocking calls, then closes the FanIn; every
// element must arrive once, in its producer's order.
func TestFanInHammer(t *testing.T) {
	const producers = 3
	per := uint64(scale(100_000, 20))
	for _, idle := range []Idle{{}, DefaultIdle()} {
		for _, how := range []string{"Pop", "PopBatchWait", "DrainWait"} {
			name := fmt.Sprintf("spins=%d/%s", idle.Spins, how)
			t.Run(name, func(t *testing.T) {
				done := watchdog(t, 30*time.Second, name)
				defer done()
				f := NewFanIn[item](producers, 16, 5, idle)
				var wg sync.WaitGroup
				for p := range producers {
					wg.Go(func() {
						r := f.Producer(p)
						for next := uint64(0); next < per; {
							switch p {
							case 0:
								if !r.Push(mkItem(0, next)) {
									panic("Push on open FanIn failed")
								}
								next++
							case 1:
								s := r.ReserveWait(int(min(per-next, 7)))
								for i := range s {
									s[i] = mkItem(1, next+uint64(i))
								}
								r.Commit(len(s))
								next += uint64(len(s))
							default:
								var buf [3]item
								src := buf[:min(per-next, 3)]
								for i := range src {
									src[i] = mkItem(2, next+uint64(i))
								}
								n := uint64(r.PushBatch(src))
								next += n
								if n == 0 {
									runtime.Gosched()
								}
							}
						}
					})
				}
				go func() { wg.Wait(); f.Close() }()

				var got [producers]uint64
				var bad error
				check := func(v item) {
					if bad == nil && (v.src >= producers || v != mkItem(v.src, got[v.src])) {
						bad = fmt.Errorf("got %+v, want element %d of producer %d", v, got[v.src%producers], v.src)
					}
					got[v.src%producers]++
				}
				dst := make([]item, 8)
				for {
					switch how {
					case "Pop":
						v, ok := f.Pop()
						if !ok {
							goto end
						}
						check(v)
					case "PopBatchWait":
						n := f.PopBatchWait(dst)
						if n == 0 {
							goto end
						}
						for _, v := range dst[:n] {
							check(v)
						}
					default:
						n := f.DrainWait(func(p int, items []item) {
							for _, v := range items {
								if int(v.src) != p {
									bad = fmt.Errorf("ring %d delivered %+v", p, v)
								}
								check(v)
							}
						})
						if n == 0 {
							goto end
						}
					}
				}
			end:
				if bad != nil {
					t.Fatal(bad)
				}
				for p, n := range got {
					if n != per {
						t.Fatalf("producer %d: %d elements arrived, want %d", p, n, per)
					}
				}
			})
		}
	}
}

// TestFanInWake parks the consumer and publishes on each ring in turn; any
// producer must wake it.
func TestFanInWake(t *testing.T) {
	if NewFanIn[item](1, 4, 4, Idle{}).Producer(0).ConsumerParked() {
		t.Fatal("ConsumerParked with no consumer waiting")
	}
	f := NewFanIn[item](3, 4, 4, Idle{})
	got := make(chan item)
	go func() {
		for {
			v, ok := f.Pop()
			if !ok {
				close(got)
				return
			}
			got <- v
		}
	}()
	for round := range 3 {
		for p := range 3 {
			awaitParked(t, &f.park)
			if !f.Producer(p).ConsumerParked() {
				t.Fatalf("producer %d: consumer parked, ConsumerParked says no", p)
			}
			want := mkItem(uint64(p), uint64(round))
			f.Producer(p).tryPush(want)
			select {
			case v := <-got:
				if v != want {
					t.Fatalf("Pop = %v, want %v", v, want)
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("producer %d did not wake the parked consumer", p)
			}
		}
	}
	awaitParked(t, &f.park)
	f.Close()
	select {
	case _, ok := <-got:
		if ok {
			t.Fatal("Pop returned an element after Close on empty rings")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not unblock Pop")
	}
}

func TestFanInCloseUnblocks(t *testing.T) {
	for _, how := range []string{"Pop", "PopBatchWait", "DrainWait"} {
		t.Run(how, func(t *testing.T) {
			f := NewFanIn[item](2, 1, 1, Idle{})
			consumer := make(chan bool)
			go func() {
				switch how {
				case "Pop":
					_, ok := f.Pop()
					consumer <- ok
				case "PopBatchWait":
					consumer <- f.PopBatchWait(make([]item, 4)) > 0
				default:
					consumer <- f.DrainWait(func(int, []item) {}) > 0
				}
			}()
			awaitParked(t, &f.park)
			f.Close()
			wantUnblocked(t, consumer, how)
		})
	}
	t.Run("Push", func(t *testing.T) {
		f := NewFanIn[item](2, 1, 1, Idle{})
		r := f.Producer(1)
		r.tryPush(mkItem(1, 0)) // ring 1 is full now
		producer := make(chan bool)
		go func() { producer <- r.Push(mkItem(1, 1)) }()
		awaitParked(t, &r.prodPark)
		f.Close()
		wantUnblocked(t, producer, "Push")
		// What was published before Close still comes out, then false.
		if v, ok := f.Pop(); !ok || v != mkItem(1, 0) {
			t.Fatalf("Pop after Close = %v %v", v, ok)
		}
		if _, ok := f.Pop(); ok {
			t.Fatal("Pop on closed empty FanIn returned true")
		}
	})
}

func TestFanInZeroAllocs(t *testing.T) {
	f := NewFanIn[item](4, 64, 8, DefaultIdle())
	dst := make([]item, 32)
	var sum uint64
	fn := func(_ int, items []item) {
		for _, v := range items {
			sum += v.seq
		}
	}
	fill := func() {
		for p := range 4 {
			f.Producer(p).tryPush(mkItem(uint64(p), 1))
		}
	}
	for _, tc := range []struct {
		name string
		fn   func()
	}{
		{"tryPop", func() { fill(); f.tryPop() }},
		{"popBatch", func() { fill(); f.popBatch(dst) }},
		{"Drain", func() { fill(); f.Drain(fn) }},
		{"PopBatchWait", func() { fill(); f.PopBatchWait(dst) }},
	} {
		if n := testing.AllocsPerRun(1000, tc.fn); n != 0 {
			t.Errorf("%s: %v allocs per run", tc.name, n)
		}
	}
}

// TestDrainWaitUntil: a parked consumer returns when its wake channel fires
// with no items, and is woken by a producer before the wake otherwise.
func TestDrainWaitUntil(t *testing.T) {
	f := NewFanIn[int](2, 8, 4, Idle{})
	wake := make(chan time.Time)
	type res struct {
		n     int
		fired bool
	}
	done := make(chan res)
	wait := func(fn func(int, []int)) {
		n, fired := f.DrainWaitUntil(fn, wake)
		done <- res{n, fired}
	}
	go wait(func(int, []int) {})
	wake <- time.Time{}
	if r := <-done; r.n != 0 || !r.fired || f.Closed() {
		t.Fatalf("after wake: %+v, closed %v", r, f.Closed())
	}
	var seen []int
	go wait(func(_ int, items []int) { seen = append(seen, items...) })
	f.Producer(1).Push(42)
	if r := <-done; r.n != 1 || r.fired || len(seen) != 1 || seen[0] != 42 {
		t.Fatalf("after push: %+v, seen %v", r, seen)
	}
	// The wake channel was never read by the second call: a later wait
	// still parks and still returns on the next wake.
	go wait(func(int, []int) {})
	wake <- time.Time{}
	if r := <-done; r.n != 0 || !r.fired {
		t.Fatalf("third wait: %+v", r)
	}
	// A wake and an item together: the caller learns both.
	buffered := make(chan time.Time, 1)
	buffered <- time.Time{}
	f.Producer(0).Push(7)
	if n, fired := f.DrainWaitUntil(func(int, []int) {}, buffered); n != 1 || fired {
		t.Fatalf("item first: n=%d fired=%v", n, fired)
	}
	if n, fired := f.DrainWaitUntil(func(int, []int) {}, buffered); n != 0 || !fired {
		t.Fatalf("then the wake: n=%d fired=%v", n, fired)
	}
	f.Close()
	if n, _ := f.DrainWaitUntil(func(int, []int) {}, wake); n != 0 || !f.Closed() {
		t.Fatalf("closed: got %d", n)
	}
}

// TestDrainWaitUntilSpinning: a consumer that spins without end (it never
// parks, so only its spin loop's looks at wake can see it) still returns
// when wake fires, and an unbuffered wake (a goroutine's send, as a
// go1.23+ timer channel behaves) is taken within the spin phase.
func TestDrainWaitUntilSpinning(t *testing.T) {
	f := NewFanIn[int](1, 8, 4, Idle{Spins: math.MaxInt})
	wake := make(chan time.Time)
	done := make(chan bool)
	go func() {
		n, fired := f.DrainWaitUntil(func(int, []int) {}, wake)
		done <- n == 0 && fired
	}()
	wake <- time.Time{} // blocks until the spinning consumer receives it
	if !<-done {
		t.Fatal("a spinning consumer returned without reporting its wake")
	}
	// Items still end the spin at once.
	go func() {
		n, fired := f.DrainWaitUntil(func(int, []int) {}, wake)
		done <- n == 1 && !fired
	}()
	f.Producer(0).Push(1)
	if !<-done {
		t.Fatal("a spinning consumer missed an item")
	}
}

// TestFanInInterrupt: Interrupt makes a DrainWaitUntil that waits (parked
// or about to be) return (0, false); one called before the wait ends the
// next wait at once; and the wait goes on as before afterwards.
func TestFanInInterrupt(t *testing.T) {
	f := NewFanIn[item](2, 8, 8, Idle{Spins: 4, Yields: 2})
	f.Interrupt()
	if n, fired := f.DrainWaitUntil(func(int, []item) {}, nil); n != 0 || fired {
		t.Fatalf("after an early Interrupt: %d, %v", n, fired)
	}
	done := make(chan int)
	go func() {
		n, _ := f.DrainWaitUntil(func(int, []item) {}, nil)
		done <- n
	}()
	// Interrupt until the waiter returns: an Interrupt that lands between
	// two waits is taken by the next (there is only one here).
	deadline := time.After(30 * time.Second)
	for {
		f.Interrupt()
		select {
		case n := <-done:
			if n != 0 {
				t.Fatalf("interrupted wait passed %d elements", n)
			}
			f.rings[1].tryPush(item{})
			if n, _ := f.DrainWaitUntil(func(int, []item) {}, nil); n != 1 {
				t.Fatalf("after Interrupt: drained %d, want 1", n)
			}
			return
		case <-deadline:
			t.Fatal("Interrupt did not end the wait")
		default:
			runtime.Gosched()
		}
	}
}
