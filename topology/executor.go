package topology

import (
	"fmt"
	"hash/maphash"
	"io"
	"math"
	"math/bits"
	"sync"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"

	"github.com/xorack/xorack/acker"
	"github.com/xorack/xorack/internal/splitmix"
	"github.com/xorack/xorack/ring"
)

// executor is what spout and bolt executors share: identity, the output
// rings and routing, the id generator, the acker sender and the counters.
// Everything in it belongs to the executor's goroutine, except pub
// (guarded by its mutex) and what says otherwise.
type executor struct {
	top   *Topology
	comp  *component
	index int   // within its component
	id    int   // global executor index; also its acker sender's index
	tasks []int // the global task ids it runs, ascending
	gen   idGen

	outs    []outLink
	linkOf  []int32   // by global task: index into outs, -1 if not downstream
	routes  [][]route // by the component's stream index
	targets []int32   // scratch for route

	sender  acker.Sender // nil at most once
	batch   int
	now     int64 // the engine clock, ns, sampled once per pass
	lastPub int64

	m   counters // the executor's own, published to pub
	pub *pubBox
	// Bolts: the sampled execute latencies since the last publish, and
	// those published (guarded by pub's mutex); nil for spouts.
	execHist, pubExecHist *hdrhistogram.Histogram
}

// pubBox is an executor's published counters, read by Metrics.
type pubBox struct {
	sync.Mutex
	m counters
}

// outLink is one output ring into a downstream executor, with the tuples
// staged for it (buf[off:]).
type outLink struct {
	ring *ring.SPSC[*Tuple]
	buf  []*Tuple
	off  int
}

// route is one subscription as one emitter sees it.
type route struct {
	kind   groupKind
	tasks  []int32 // the candidates (for local-or-shuffle, the paired executor's tasks)
	fields []int
	rr     int
}

// route appends to e.targets the tasks that get a tuple of values on st
// (direct >= 0: EmitDirect to that task).
func (e *executor) route(st *stream, values []any, direct int) ([]int32, error) {
	if len(values) != len(st.fields) {
		return nil, fmt.Errorf("topology: %s %q emits %d values on stream %q, which declares %d fields %q",
			e.comp.kind(), e.comp.name, len(values), st.name, len(st.fields), st.fields)
	}
	if st.direct != (direct >= 0) {
		if st.direct {
			return nil, fmt.Errorf("topology: %s %q: stream %q is direct: use EmitDirect", e.comp.kind(), e.comp.name, st.name)
		}
		return nil, fmt.Errorf("topology: %s %q: EmitDirect on stream %q, which is not declared direct", e.comp.kind(), e.comp.name, st.name)
	}
	tg := e.targets[:0]
	rs := e.routes[st.index]
	for i := range rs {
		r := &rs[i]
		switch r.kind {
		case groupShuffle, groupLocal:
			if r.rr++; r.rr >= len(r.tasks) {
				r.rr = 0
			}
			tg = append(tg, r.tasks[r.rr])
		case groupFields:
			h, err := e.top.fieldHash(values, r.fields)
			if err != nil {
				return nil, fmt.Errorf("topology: %s %q stream %q: %w", e.comp.kind(), e.comp.name, st.name, err)
			}
			n, _ := bits.Mul64(h, uint64(len(r.tasks)))
			tg = append(tg, r.tasks[n])
		case groupAll:
			tg = append(tg, r.tasks...)
		case groupGlobal:
			tg = append(tg, r.tasks[0])
		case groupDirect:
			for _, t := range r.tasks {
				if int(t) == direct {
					tg = append(tg, t)
					break
				}
			}
		}
	}
	if direct >= 0 && len(tg) == 0 {
		return nil, fmt.Errorf("topology: %s %q: EmitDirect to task %d, which does not subscribe to stream %q", e.comp.kind(), e.comp.name, direct, st.name)
	}
	e.targets = tg
	return tg, nil
}

// fieldHash hashes the values at idx. Strings, byte slices and integers
// take a fast path; any other comparable value is hashed by maphash
// (a value that is not comparable is an error, not a panic).
func (top *Topology) fieldHash(values []any, idx []int) (h uint64, err error) {
	for _, i := range idx {
		var x uint64
		switch v := values[i].(type) {
		case string:
			x = maphash.String(top.hashSeed, v)
		case []byte:
			x = maphash.Bytes(top.hashSeed, v)
		case int:
			x = splitmix.Mix64(uint64(v) ^ top.seed)
		case int64:
			x = splitmix.Mix64(uint64(v) ^ top.seed)
		case uint64:
			x = splitmix.Mix64(v ^ top.seed)
		case int32:
			x = splitmix.Mix64(uint64(v) ^ top.seed)
		case uint32:
			x = splitmix.Mix64(uint64(v) ^ top.seed)
		case float64:
			if v == 0 {
				v = 0 // -0 == 0
			}
			x = splitmix.Mix64(math.Float64bits(v) ^ top.seed)
		default:
			x, err = comparableHash(top.hashSeed, v)
			if err != nil {
				return 0, fmt.Errorf("fields grouping on %q: %w", values[i], err)
			}
		}
		h = splitmix.Mix64(h ^ x)
	}
	return h, nil
}

func comparableHash(seed maphash.Seed, v any) (h uint64, err error) {
	defer func() {
		if recover() != nil {
			err = fmt.Errorf("value of type %T is not comparable", v)
		}
	}()
	return maphash.Comparable(seed, v), nil
}

// push stages t for its task's executor, publishing the link when a batch
// is staged (waiting for room if wait).
func (e *executor) push(t *Tuple, wait bool) {
	e.m.Transferred++
	l := &e.outs[e.linkOf[t.dstTask]]
	l.buf = append(l.buf, t)
	if len(l.buf)-l.off >= e.batch {
		e.flushLink(l, wait)
	}
}

// flushLink publishes l's staged tuples; without wait it publishes what
// fits and reports whether the link is empty now.
func (e *executor) flushLink(l *outLink, wait bool) bool {
	for l.off < len(l.buf) {
		n := l.ring.PushBatch(l.buf[l.off:])
		if n == 0 {
			if !wait {
				return false
			}
			if !l.ring.Push(l.buf[l.off]) {
				e.m.Dropped += uint64(len(l.buf) - l.off) // closed at shutdown
				break
			}
			n = 1
		}
		l.off += n
	}
	clear(l.buf)
	l.buf, l.off = l.buf[:0], 0
	return true
}

// flushOuts publishes every link; it reports whether all are empty.
func (e *executor) flushOuts(wait bool) bool {
	empty := true
	for i := range e.outs {
		if l := &e.outs[i]; l.off < len(l.buf) {
			empty = e.flushLink(l, wait) && empty
		}
	}
	return empty
}

// staged reports whether tuples wait in the output links.
func (e *executor) staged() bool {
	for i := range e.outs {
		if e.outs[i].off < len(e.outs[i].buf) {
			return true
		}
	}
	return false
}

// dropStaged discards what waits in the output links (at shutdown).
func (e *executor) dropStaged() {
	for i := range e.outs {
		l := &e.outs[i]
		e.m.Dropped += uint64(len(l.buf) - l.off)
		clear(l.buf)
		l.buf, l.off = l.buf[:0], 0
	}
}

// newTuple makes the tuple for one target task.
func (e *executor) newTuple(st *stream, values []any, src int, dst int32) *Tuple {
	return &Tuple{values: values, stream: st, srcTask: int32(src), dstTask: dst}
}

// publish copies the executor's counters to pub, for Metrics.
func (e *executor) publish() {
	e.lastPub = e.now
	e.pub.Lock()
	e.pub.m = e.m
	if e.execHist != nil {
		e.pubExecHist.Merge(e.execHist)
	}
	e.pub.Unlock()
	if e.execHist != nil {
		e.execHist.Reset()
	}
}

// publishEvery is how often a busy executor publishes its counters.
const publishEvery = 1_000_000 // 1 ms, in ns

func (e *executor) maybePublish() {
	if e.now-e.lastPub >= publishEvery || e.now < e.lastPub {
		e.publish()
	}
}

// closeTasks closes the executor's spouts or bolts that are io.Closers,
// noting their errors for Stop.
func closeTasks[T any](e *executor, insts []T) {
	for i, inst := range insts {
		if c, ok := any(inst).(io.Closer); ok {
			if err := closeTask(e.comp, e.tasks[i], c); err != nil {
				if _, ok := err.(*PanicError); ok {
					e.m.Panics++
				}
				e.top.noteErr(err)
			}
		}
	}
}

// closeTask closes one task, naming it in the error (a panic in Close is
// recovered and returned).
func closeTask(comp *component, task int, c io.Closer) error {
	if err := callSafe(comp, task, "Close", c.Close); err != nil {
		if _, ok := err.(*PanicError); ok {
			return err
		}
		return fmt.Errorf("topology: %s %q task %d: Close: %w", comp.kind(), comp.name, task, err)
	}
	return nil
}

func (e *executor) clock() int64 {
	e.now = int64(e.top.cfg.Clock.Now())
	return e.now
}
