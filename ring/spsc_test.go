package ring

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/xorack/xorack/internal/invariants"
	"github.com/xorack/xorack/internal/layout"
	"github.com/xorack/xorack/internal/splitmix"
)

// item has the shape of the project's messages: 32 bytes, no pointers.
type item struct {
	seq uint64 // position in its producer's stream
	src uint64 // producer
	xor uint64 // derived from seq, so a torn or stale copy is caught
	_   uint64
}

func mkItem(src, seq uint64) item {
	return item{seq: seq, src: src, xor: seq*splitmix.Golden ^ src}
}

func (it item) valid() bool { return it.xor == it.seq*splitmix.Golden^it.src }

// watchdog fails the test if done is not closed within d. A lost wake-up
// shows up as a hang; this turns it into a failure with a name.
func watchdog(t *testing.T, d time.Duration, what string) (done func()) {
	t.Helper()
	ch := make(chan struct{})
	go func() {
		select {
		case <-ch:
		case <-time.After(d):
			buf := make([]byte, 1<<16)
			buf = buf[:runtime.Stack(buf, true)]
			panic(fmt.Sprintf("%s: no progress in %v (lost wake-up?)\n%s", what, d, buf))
		}
	}()
	return func() { close(ch) }
}

// scale returns n, or n/div under -short.
func scale(n, div int) int {
	if testing.Short() {
		return max(n/div, 1)
	}
	return n
}

func TestLayout(t *testing.T) {
	var r SPSC[item]
	if got := unsafe.Sizeof(r); got%layout.CacheLine != 0 {
		t.Errorf("Sizeof(SPSC) = %d, not a multiple of layout.CacheLine %d", got, layout.CacheLine)
	}
	lines := []struct {
		name string
		off  uintptr
	}{
		{"buf", unsafe.Offsetof(r.buf)},
		{"tail", unsafe.Offsetof(r.tail)},
		{"head", unsafe.Offsetof(r.head)},
		{"prodPark", unsafe.Offsetof(r.prodPark)},
	}
	for i, l := range lines {
		if l.off != uintptr(i)*layout.CacheLine {
			t.Errorf("%s at offset %d, want %d", l.name, l.off, i*layout.CacheLine)
		}
	}
	// The offsets drawn in the doc.go box.
	for _, f := range []struct {
		name      string
		got, want uintptr
	}{
		{"mask", unsafe.Offsetof(r.mask), 24},
		{"idle", unsafe.Offsetof(r.idle), 32},
		{"cons", unsafe.Offsetof(r.cons), 48},
		{"zeroSlots", unsafe.Offsetof(r.zeroSlots), 56},
		{"headCache", unsafe.Offsetof(r.headCache), 72},
		{"reserved", unsafe.Offsetof(r.reserved), 80},
		{"tailCache", unsafe.Offsetof(r.tailCache), 136},
		{"peeked", unsafe.Offsetof(r.peeked), 144},
		{"consPark", unsafe.Offsetof(r.consPark), 208},
		{"closed", unsafe.Offsetof(r.closed), 224},
		{"Sizeof", unsafe.Sizeof(r), 256},
	} {
		if layout.CacheLine == 64 && f.got != f.want {
			t.Errorf("%s at %d, doc.go draws it at %d", f.name, f.got, f.want)
		}
	}
	// Everything the producer writes lies on line 1, everything the
	// consumer writes on line 2.
	for _, f := range []struct {
		name string
		off  uintptr
		size uintptr
		line uintptr
	}{
		{"zeroSlots", unsafe.Offsetof(r.zeroSlots), unsafe.Sizeof(r.zeroSlots), 0},
		{"headCache", unsafe.Offsetof(r.headCache), unsafe.Sizeof(r.headCache), 1},
		{"reserved", unsafe.Offsetof(r.reserved), unsafe.Sizeof(r.reserved), 1},
		{"tailCache", unsafe.Offsetof(r.tailCache), unsafe.Sizeof(r.tailCache), 2},
		{"peeked", unsafe.Offsetof(r.peeked), unsafe.Sizeof(r.peeked), 2},
		{"consPark", unsafe.Offsetof(r.consPark), unsafe.Sizeof(r.consPark), 3},
		{"closed", unsafe.Offsetof(r.closed), unsafe.Sizeof(r.closed), 3},
	} {
		if f.off/layout.CacheLine != f.line || (f.off+f.size-1)/layout.CacheLine != f.line {
			t.Errorf("%s at [%d,%d) is not on line %d", f.name, f.off, f.off+f.size, f.line)
		}
	}
	// The allocator places objects whose size is a multiple of 64 at
	// 64-byte boundaries; the padding relies on that.
	for range 8 {
		p := New[item](4)
		if a := uintptr(unsafe.Pointer(p)) % layout.CacheLine; a != 0 {
			t.Fatalf("New returned %p, %d bytes past a cache line", p, a)
		}
	}

	var f FanIn[item]
	if got := unsafe.Sizeof(f); got%layout.CacheLine != 0 {
		t.Errorf("Sizeof(FanIn) = %d, not a multiple of layout.CacheLine", got)
	}
	if off := unsafe.Offsetof(f.park); off != layout.CacheLine {
		t.Errorf("FanIn.park at offset %d, want %d", off, layout.CacheLine)
	}
	if off := unsafe.Offsetof(f.closed); off/layout.CacheLine != 1 {
		t.Errorf("FanIn.closed at offset %d, not on the parker's line", off)
	}
	if off := unsafe.Offsetof(f.interrupt); off/layout.CacheLine != 1 {
		t.Errorf("FanIn.interrupt at offset %d, not on the parker's line", off)
	}
	if off := unsafe.Offsetof(f.next); off/layout.CacheLine != 0 {
		t.Errorf("FanIn.next at offset %d, shares a line with park", off)
	}
	if unsafe.Sizeof(item{}) != 32 {
		t.Errorf("test item is %d bytes, want 32", unsafe.Sizeof(item{}))
	}
}

func TestNewRejectsBadCapacity(t *testing.T) {
	for _, c := range []int{-4, -1, 0, 3, 5, 6, 7, 12, 100, 1<<20 + 1} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("New(%d) did not panic", c)
				}
			}()
			New[item](c)
		}()
	}
	for _, c := range []int{1, 2, 4, 64, 1 << 16} {
		if got := New[item](c).Cap(); got != c {
			t.Errorf("New(%d).Cap() = %d", c, got)
		}
	}
}

func TestHasPointers(t *testing.T) {
	//lint:ignore U1000 the fields are the types' shape, read only by hasPointers
	type flat struct {
		a, b uint64
		c    [4]int32
	}
	//lint:ignore U1000 as above
	type nested struct {
		f flat
		p *int
	}
	for _, tc := range []struct {
		got, want bool
		name      string
	}{
		{hasPointers[item](), false, "item"},
		{hasPointers[flat](), false, "flat"},
		{hasPointers[[0]*int](), false, "[0]*int"},
		{hasPointers[[3]flat](), false, "[3]flat"},
		{hasPointers[nested](), true, "nested"},
		{hasPointers[string](), true, "string"},
		{hasPointers[[]byte](), true, "[]byte"},
		{hasPointers[any](), true, "any"},
		{hasPointers[[2]nested](), true, "[2]nested"},
		{hasPointers[func()](), true, "func"},
		{hasPointers[map[int]int](), true, "map"},
		{hasPointers[unsafe.Pointer](), true, "unsafe.Pointer"},
	} {
		if tc.got != tc.want {
			t.Errorf("hasPointers[%s] = %v, want %v", tc.name, tc.got, tc.want)
		}
	}
}

func TestEdgesCapacityOne(t *testing.T) {
	r := New[item](1)
	if _, ok := r.tryPop(); ok {
		t.Fatal("tryPop on a new ring succeeded")
	}
	if s := r.Peek(4); len(s) != 0 {
		t.Fatalf("Peek on empty ring = %d elements", len(s))
	}
	for round := range uint64(5) {
		if !r.tryPush(mkItem(0, round)) {
			t.Fatalf("round %d: tryPush into empty cap-1 ring failed", round)
		}
		if r.tryPush(mkItem(0, 99)) {
			t.Fatal("tryPush into full ring succeeded")
		}
		if s := r.Reserve(3); len(s) != 0 {
			t.Fatalf("Reserve on full ring = %d slots", len(s))
		}
		if n := r.PushBatch([]item{{}}); n != 0 {
			t.Fatalf("PushBatch on full ring = %d", n)
		}
		if r.Len() != 1 {
			t.Fatalf("Len = %d, want 1", r.Len())
		}
		v, ok := r.tryPop()
		if !ok || v != mkItem(0, round) {
			t.Fatalf("round %d: tryPop = %v %v", round, v, ok)
		}
		if _, ok := r.tryPop(); ok {
			t.Fatal("tryPop on empty ring succeeded")
		}
	}
}

func TestEdgesCapacityTwo(t *testing.T) {
	r := New[item](2)
	// Walk the indices round the buffer so every span wraps at some point.
	for round := range uint64(7) {
		s := r.Reserve(5)
		if len(s) == 0 || len(s) > 2 {
			t.Fatalf("round %d: Reserve(5) = %d slots", round, len(s))
		}
		if cap(s) != len(s) {
			t.Fatalf("Reserve span has spare capacity %d > %d", cap(s), len(s))
		}
		for i := range s {
			s[i] = mkItem(1, round*10+uint64(i))
		}
		r.Commit(len(s))
		p := r.Peek(5)
		if len(p) != len(s) {
			t.Fatalf("round %d: Peek = %d, committed %d", round, len(p), len(s))
		}
		for i := range p {
			if p[i] != mkItem(1, round*10+uint64(i)) {
				t.Fatalf("round %d: Peek[%d] = %v", round, i, p[i])
			}
		}
		r.Release(1) // leave one behind to shift the indices
		if v, ok := r.tryPop(); len(p) == 2 && (!ok || v != p[1]) {
			t.Fatalf("round %d: tryPop after partial release = %v %v", round, v, ok)
		}
	}
}

// TestModel feeds random operation streams to a ring and to a plain slice
// queue and compares every result.
func TestModel(t *testing.T) {
	for _, capacity := range []int{1, 2, 4, 8, 64} {
		for seed := range uint64(scale(20, 4)) {
			rng := rand.New(rand.NewPCG(seed, uint64(capacity)))
			ops := make([]byte, scale(4000, 4))
			for i := range ops {
				ops[i] = byte(rng.Uint32())
			}
			if err := runModel(capacity, ops); err != nil {
				t.Fatalf("cap %d seed %d: %v", capacity, seed, err)
			}
		}
	}
}

func FuzzModel(f *testing.F) {
	f.Add(uint8(0), []byte{0, 1, 2, 3, 4, 5, 6, 7})
	f.Add(uint8(3), []byte{0x40, 0x41, 0x82, 0xc3, 0x14, 0x25, 0x36, 0xf7})
	f.Fuzz(func(t *testing.T, logCap uint8, ops []byte) {
		if err := runModel(1<<(logCap%8), ops); err != nil {
			t.Fatal(err)
		}
	})
}

// runModel interprets each byte as an operation: the low 3 bits pick it,
// the rest give a size.
func runModel(capacity int, ops []byte) error {
	r := New[item](capacity)
	var model []item
	var next uint64
	gen := func() item { next++; return mkItem(7, next) }
	for step, op := range ops {
		size := int(op >> 3) // 0..31
		switch op & 7 {
		case 0: // tryPush
			v := gen()
			ok := r.tryPush(v)
			if ok != (len(model) < capacity) {
				return fmt.Errorf("step %d: tryPush = %v with %d/%d queued", step, ok, len(model), capacity)
			}
			if ok {
				model = append(model, v)
			}
		case 1: // tryPop
			v, ok := r.tryPop()
			if ok != (len(model) > 0) {
				return fmt.Errorf("step %d: tryPop = %v with %d queued", step, ok, len(model))
			}
			if ok {
				if v != model[0] {
					return fmt.Errorf("step %d: tryPop = %v, want %v", step, v, model[0])
				}
				model = model[1:]
			}
		case 2, 3: // Reserve, fill, Commit a prefix
			s := r.Reserve(size)
			free := capacity - len(model)
			tailSlot := int(r.tail.Load()) % capacity
			want := min(size, free, capacity-tailSlot)
			if len(s) != want {
				return fmt.Errorf("step %d: Reserve(%d) = %d slots, want %d", step, size, len(s), want)
			}
			for i := range s {
				s[i] = gen()
			}
			k := len(s)
			if op&1 == 1 {
				k = k * int(op>>6) / 3 // sometimes commit less than reserved
			}
			r.Commit(k)
			model = append(model, s[:k]...)
		case 4, 5: // Peek, check, Release a prefix
			s := r.Peek(size)
			headSlot := int(r.head.Load()) % capacity
			want := min(size, len(model), capacity-headSlot)
			if len(s) != want {
				return fmt.Errorf("step %d: Peek(%d) = %d, want %d", step, size, len(s), want)
			}
			for i := range s {
				if s[i] != model[i] {
					return fmt.Errorf("step %d: Peek[%d] = %v, want %v", step, i, s[i], model[i])
				}
			}
			k := len(s)
			if op&1 == 1 {
				k = k * int(op>>6) / 3
			}
			r.Release(k)
			model = model[k:]
		case 6: // PushBatch
			src := make([]item, size)
			for i := range src {
				src[i] = gen()
			}
			n := r.PushBatch(src)
			if want := min(size, capacity-len(model)); n != want {
				return fmt.Errorf("step %d: PushBatch(%d) = %d, want %d", step, size, n, want)
			}
			model = append(model, src[:n]...)
		case 7: // popBatch
			dst := make([]item, size)
			n := r.popBatch(dst)
			if want := min(size, len(model)); n != want {
				return fmt.Errorf("step %d: popBatch(%d) = %d, want %d", step, size, n, want)
			}
			for i := range n {
				if dst[i] != model[i] {
					return fmt.Errorf("step %d: popBatch[%d] = %v, want %v", step, i, dst[i], model[i])
				}
			}
			model = model[n:]
		}
		if r.Len() != len(model) {
			return fmt.Errorf("step %d: Len = %d, model has %d", step, r.Len(), len(model))
		}
	}
	return nil
}

// TestWrapOddBatches pushes and pops with sizes prime to the capacity, so
// every offset of the buffer is a span boundary at some point, and checks
// spans never run past the end of the buffer.
func TestWrapOddBatches(t *testing.T) {
	const capacity = 16
	r := New[item](capacity)
	sizes := []int{3, 5, 7, 1, 11, 13, 9}
	var pushed, popped uint64
	total := uint64(scale(50_000, 10))
	for step := 0; popped < total; step++ {
		for pushed < total {
			s := r.Reserve(sizes[step%len(sizes)])
			if len(s) == 0 {
				break
			}
			if start := int(pushed % capacity); start+len(s) > capacity {
				t.Fatalf("span [%d,%d) runs past the buffer", start, start+len(s))
			}
			for i := range s {
				s[i] = mkItem(0, pushed+uint64(i))
			}
			r.Commit(len(s))
			pushed += uint64(len(s))
			if step%3 == 0 {
				break
			}
		}
		s := r.Peek(sizes[(step+3)%len(sizes)])
		for i := range s {
			if want := mkItem(0, popped+uint64(i)); s[i] != want {
				t.Fatalf("element %d = %v, want %v", popped+uint64(i), s[i], want)
			}
		}
		r.Release(len(s))
		popped += uint64(len(s))
		if len(s) == 0 && pushed == popped && pushed < total && r.Len() != 0 {
			t.Fatal("ring empty by count but Len != 0")
		}
	}
}

func TestZeroSlots(t *testing.T) {
	type ptrItem struct {
		p *int
		n int
	}
	x := 1
	r := New[ptrItem](4)
	if !r.zeroSlots {
		t.Fatal("ring of pointer-holding elements does not clear slots")
	}
	assertClear := func(op string) {
		t.Helper()
		live := map[uint64]bool{}
		for s := r.head.Load(); s != r.tail.Load(); s++ {
			live[s&r.mask] = true
		}
		for i, v := range r.buf {
			if !live[uint64(i)] && v.p != nil {
				t.Fatalf("after %s slot %d still holds a pointer", op, i)
			}
		}
	}
	for range 3 {
		r.tryPush(ptrItem{&x, 1})
		r.tryPush(ptrItem{&x, 2})
		r.tryPush(ptrItem{&x, 3})
		r.tryPop()
		assertClear("tryPop")
		r.Release(len(r.Peek(1)))
		assertClear("Release")
		r.popBatch(make([]ptrItem, 4))
		assertClear("popBatch")
	}
	if New[item](4).zeroSlots {
		t.Fatal("ring of pointer-free elements clears slots")
	}
}

func TestZeroAllocs(t *testing.T) {
	r := New[item](64)
	v := mkItem(0, 1)
	batch := make([]item, 16)
	for _, tc := range []struct {
		name string
		fn   func()
	}{
		{"tryPush+tryPop", func() { r.tryPush(v); r.tryPop() }},
		{"Reserve+Commit+Peek+Release", func() {
			s := r.Reserve(8)
			s[0] = v
			r.Commit(len(s))
			r.Release(len(r.Peek(8)))
		}},
		{"PushBatch+popBatch", func() { r.PushBatch(batch); r.popBatch(batch) }},
		{"Push+Pop", func() { r.Push(v); r.Pop() }},
		{"ReserveWait+peekWait", func() {
			r.Commit(len(r.ReserveWait(4)))
			r.Release(len(r.peekWait(4)))
		}},
	} {
		if n := testing.AllocsPerRun(1000, tc.fn); n != 0 {
			t.Errorf("%s: %v allocs per run", tc.name, n)
		}
	}
}

// hammer runs one producer and one consumer goroutine, both spinning, and
// checks every element arrives once, intact and in order.
func hammer(t *testing.T, capacity int, total uint64, push func(r *SPSC[item], next, left uint64) uint64, pop func(*SPSC[item], func(item)) int) {
	t.Helper()
	r := New[item](capacity)
	done := watchdog(t, 30*time.Second, "hammer")
	defer done()
	var wantSum uint64
	for i := range total {
		wantSum += mkItem(3, i).xor
	}
	go func() {
		for next := uint64(0); next < total; {
			n := push(r, next, total-next)
			next += n
			if n == 0 {
				runtime.Gosched()
			}
		}
	}()
	var got, sum uint64
	var bad error
	for got < total {
		n := pop(r, func(v item) {
			if bad == nil && (v != mkItem(3, got) || !v.valid()) {
				bad = fmt.Errorf("element %d = %+v", got, v)
			}
			sum += v.xor
			got++
		})
		if n == 0 {
			runtime.Gosched()
		}
	}
	if bad != nil {
		t.Fatal(bad)
	}
	if sum != wantSum {
		t.Fatalf("checksum %x, want %x", sum, wantSum)
	}
	if _, ok := r.tryPop(); ok {
		t.Fatal("ring not empty after all elements")
	}
}

// TestHammer moves elements through rings of 1 to 1024 slots with each
// pair of producer and consumer calls, both sides spinning. 100,000
// elements a case (20,000 under -short): nearly all the time goes to the
// rings of 1 and 2 slots, which hand each element over between the two
// spinning goroutines. At this size a consumer that releases its slot
// before reading it (the producer overwriting it) still fails several
// cases a run.
func TestHammer(t *testing.T) {
	total := uint64(scale(100_000, 5))
	pushOne := func(r *SPSC[item], next, _ uint64) uint64 {
		if r.tryPush(mkItem(3, next)) {
			return 1
		}
		return 0
	}
	popOne := func(r *SPSC[item], f func(item)) int {
		v, ok := r.tryPop()
		if !ok {
			return 0
		}
		f(v)
		return 1
	}
	reserve := func(r *SPSC[item], next, left uint64) uint64 {
		s := r.Reserve(int(min(next%13+1, left)))
		for i := range s {
			s[i] = mkItem(3, next+uint64(i))
		}
		r.Commit(len(s))
		return uint64(len(s))
	}
	peek := func(r *SPSC[item], f func(item)) int {
		s := r.Peek(7)
		for _, v := range s {
			f(v)
		}
		r.Release(len(s))
		return len(s)
	}
	var pushBuf [11]item
	pushBatch := func(r *SPSC[item], next, left uint64) uint64 {
		src := pushBuf[:min(next%11+1, left)]
		for i := range src {
			src[i] = mkItem(3, next+uint64(i))
		}
		return uint64(r.PushBatch(src))
	}
	var popBuf [5]item
	popBatch := func(r *SPSC[item], f func(item)) int {
		n := r.popBatch(popBuf[:])
		for _, v := range popBuf[:n] {
			f(v)
		}
		return n
	}
	for _, capacity := range []int{1, 2, 8, 1024} {
		for _, mode := range []struct {
			name string
			push func(r *SPSC[item], next, left uint64) uint64
			pop  func(*SPSC[item], func(item)) int
		}{
			{"one", pushOne, popOne},
			{"span", reserve, peek},
			{"batch", pushBatch, popBatch},
			{"mixed", reserve, popOne},
		} {
			t.Run(fmt.Sprintf("cap=%d/mode=%s", capacity, mode.name), func(t *testing.T) {
				hammer(t, capacity, total, mode.push, mode.pop)
			})
		}
	}
}

// TestBlockingHammer moves elements with the blocking calls through small
// rings, so both sides park and wake over and over, and closes the ring
// from the producer at the end: the consumer must see every element, then
// false.
func TestBlockingHammer(t *testing.T) {
	total := uint64(scale(200_000, 20))
	for _, idle := range []Idle{{}, {Spins: 4}, {Spins: 0, Yields: 2}, DefaultIdle()} {
		for _, capacity := range []int{1, 4, 256} {
			for _, spans := range []bool{false, true} {
				name := fmt.Sprintf("idle=%d,%d/cap=%d/spans=%v", idle.Spins, idle.Yields, capacity, spans)
				t.Run(name, func(t *testing.T) {
					done := watchdog(t, 30*time.Second, name)
					defer done()
					r := newWithIdle[item](capacity, idle)
					go func() {
						defer r.Close()
						for next := uint64(0); next < total; {
							if !spans {
								if !r.Push(mkItem(3, next)) {
									panic("Push on an open ring returned false")
								}
								next++
								continue
							}
							s := r.ReserveWait(int(min(next%5+1, total-next)))
							for i := range s {
								s[i] = mkItem(3, next+uint64(i))
							}
							r.Commit(len(s))
							next += uint64(len(s))
						}
					}()
					var got uint64
					for {
						if !spans {
							v, ok := r.Pop()
							if !ok {
								break
							}
							if v != mkItem(3, got) {
								t.Fatalf("element %d = %+v", got, v)
							}
							got++
							continue
						}
						s := r.peekWait(3)
						if len(s) == 0 {
							break
						}
						for i, v := range s {
							if v != mkItem(3, got+uint64(i)) {
								t.Fatalf("element %d = %+v", got+uint64(i), v)
							}
						}
						got += uint64(len(s))
						r.Release(len(s))
					}
					if got != total {
						t.Fatalf("consumer saw %d elements before false, want %d", got, total)
					}
				})
			}
		}
	}
}

// wantUnblocked waits for the result of call, blocked before a Close:
// it must come, and say the call did not succeed.
func wantUnblocked(t *testing.T, res <-chan bool, call string) {
	t.Helper()
	select {
	case ok := <-res:
		if ok {
			t.Fatal(call + " succeeded after Close")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not unblock " + call)
	}
}

// awaitParked waits, without sleeping, until p's owner has announced that it
// parks.
func awaitParked(t *testing.T, p *parker) {
	t.Helper()
	done := watchdog(t, 10*time.Second, "awaitParked")
	defer done()
	for p.flag.Load() == 0 {
		runtime.Gosched()
	}
}

// TestParkWake parks the consumer, then publishes with each producer call:
// each must wake it.
func TestParkWake(t *testing.T) {
	for _, how := range []string{"tryPush", "Push", "Commit", "PushBatch"} {
		t.Run(how, func(t *testing.T) {
			r := newWithIdle[item](8, Idle{})
			got := make(chan item)
			go func() {
				v, _ := r.Pop()
				got <- v
			}()
			awaitParked(t, r.cons)
			want := mkItem(1, 42)
			switch how {
			case "tryPush":
				r.tryPush(want)
			case "Push":
				r.Push(want)
			case "Commit":
				s := r.Reserve(1)
				s[0] = want
				r.Commit(1)
			case "PushBatch":
				r.PushBatch([]item{want})
			}
			select {
			case v := <-got:
				if v != want {
					t.Fatalf("Pop = %v, want %v", v, want)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("parked consumer was not woken by " + how)
			}
		})
	}
	for _, how := range []string{"tryPop", "Pop", "Release", "popBatch"} {
		t.Run(how, func(t *testing.T) {
			r := newWithIdle[item](2, Idle{})
			r.tryPush(mkItem(1, 1))
			r.tryPush(mkItem(1, 2))
			pushed := make(chan bool)
			go func() { pushed <- r.Push(mkItem(1, 3)) }()
			awaitParked(t, &r.prodPark)
			switch how {
			case "tryPop":
				r.tryPop()
			case "Pop":
				r.Pop()
			case "Release":
				r.Release(len(r.Peek(1)))
			case "popBatch":
				r.popBatch(make([]item, 1))
			}
			select {
			case ok := <-pushed:
				if !ok {
					t.Fatal("Push returned false on an open ring")
				}
			case <-time.After(10 * time.Second):
				t.Fatal("parked producer was not woken by " + how)
			}
			if v, _ := r.tryPop(); v != mkItem(1, 2) {
				t.Fatalf("tryPop = %v", v)
			}
			if v, _ := r.tryPop(); v != mkItem(1, 3) {
				t.Fatalf("tryPop = %v", v)
			}
		})
	}
}

// TestPingPong bounces one element between two goroutines through two
// rings that park at once, so every round trip races a park against a
// publish on both sides. A lost wake-up stops the game and the watchdog
// fails the test.
func TestPingPong(t *testing.T) {
	rounds := scale(20_000, 10)
	done := watchdog(t, 30*time.Second, "ping-pong")
	defer done()
	ping := newWithIdle[item](1, Idle{})
	pong := newWithIdle[item](1, Idle{})
	go func() {
		for {
			v, ok := ping.Pop()
			if !ok {
				pong.Close()
				return
			}
			v.seq++
			pong.Push(v)
		}
	}()
	v := item{}
	for i := range rounds {
		ping.Push(v)
		var ok bool
		if v, ok = pong.Pop(); !ok || v.seq != uint64(i+1) {
			t.Fatalf("round %d: got %+v %v", i, v, ok)
		}
	}
	ping.Close()
	if _, ok := pong.Pop(); ok {
		t.Fatal("Pop on closed empty ring returned true")
	}
}

func TestCloseUnblocks(t *testing.T) {
	for _, idle := range []Idle{{}, DefaultIdle()} {
		name := fmt.Sprintf("spins=%d", idle.Spins)
		for _, call := range []string{"Pop", "peekWait"} {
			t.Run(name+"/"+call, func(t *testing.T) {
				r := newWithIdle[item](4, idle)
				res := make(chan bool)
				go func() {
					if call == "Pop" {
						_, ok := r.Pop()
						res <- ok
					} else {
						res <- len(r.peekWait(4)) > 0
					}
				}()
				if idle.Spins == 0 {
					awaitParked(t, r.cons)
				}
				r.Close()
				wantUnblocked(t, res, call)
			})
		}
		for _, call := range []string{"Push", "ReserveWait"} {
			t.Run(name+"/"+call, func(t *testing.T) {
				r := newWithIdle[item](1, idle)
				r.tryPush(item{})
				res := make(chan bool)
				go func() {
					if call == "Push" {
						res <- r.Push(item{})
					} else {
						res <- len(r.ReserveWait(1)) > 0
					}
				}()
				if idle.Spins == 0 {
					awaitParked(t, &r.prodPark)
				}
				r.Close()
				wantUnblocked(t, res, call)
				if len(r.ReserveWait(1)) != 0 || r.Push(item{}) {
					t.Fatal("producer blocking call succeeded on a closed ring")
				}
				if r.Len() != 1 {
					t.Fatalf("Len = %d after failed %s, want 1", r.Len(), call)
				}
			})
		}
	}
	t.Run("drain", func(t *testing.T) {
		r := New[item](4)
		r.tryPush(mkItem(0, 1))
		r.tryPush(mkItem(0, 2))
		r.Close()
		r.Close()
		for i := uint64(1); i <= 2; i++ {
			if v, ok := r.Pop(); !ok || v != mkItem(0, i) {
				t.Fatalf("Pop after Close = %v %v, want element %d", v, ok, i)
			}
		}
		if _, ok := r.Pop(); ok {
			t.Fatal("Pop on closed empty ring returned true")
		}
		if !r.Closed() {
			t.Fatal("Closed() = false")
		}
	})
}

// TestCloseRace closes a ring while both sides are busy and checks both
// stop.
func TestCloseRace(t *testing.T) {
	for i := range scale(200, 10) {
		idle := Idle{Spins: i % 3, Yields: i % 2}
		r := newWithIdle[item](2, idle)
		var wg sync.WaitGroup
		wg.Add(2)
		go func() {
			defer wg.Done()
			for r.Push(item{}) {
			}
		}()
		go func() {
			defer wg.Done()
			for {
				if _, ok := r.Pop(); !ok {
					return
				}
			}
		}()
		for range i % 7 {
			runtime.Gosched()
		}
		r.Close()
		done := watchdog(t, 10*time.Second, "close race")
		wg.Wait()
		done()
	}
}

// TestInvariantsCatchOverrun checks that builds with -tags invariants catch
// a Commit or Release beyond the last span.
func TestInvariantsCatchOverrun(t *testing.T) {
	if !invariants.Enabled {
		t.Skip("needs -tags invariants")
	}
	mustPanic := func(what string, fn func()) {
		t.Helper()
		defer func() {
			if recover() == nil {
				t.Errorf("%s did not panic", what)
			}
		}()
		fn()
	}
	r := New[item](4)
	mustPanic("Commit(3) after Reserve(2)", func() { r.Reserve(2); r.Commit(3) })
	r.Commit(len(r.Reserve(2)))
	mustPanic("Release(3) after Peek of 2", func() { r.Peek(4); r.Release(3) })
	mustPanic("Commit(-1)", func() { r.Reserve(1); r.Commit(-1) })
}
