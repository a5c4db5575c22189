package baseline

import (
	"fmt"
	"time"

	"github.com/xorack/xorack/ackcore"
)

// Storm is a Go port of the algorithm of Apache Storm 2.x's acker bolt
// (org.apache.storm.daemon.Acker over org.apache.storm.utils.RotatingMap),
// the reference every user knows, behind the ackcore.Interface interface. It
// keeps Storm's structure and costs: a rotating map of Go maps searched
// newest first, a put that deletes the key from every older bucket, and
// expiry by dropping the oldest bucket whole. It does NOT meet our
// contract; it is measured, not trusted. Where it differs (docs/semantics.md):
//
//   - Timeouts (rule 5). There are no deadlines. Storm's acker rotates its
//     3 buckets on a tick tuple sent every message timeout T; here Expire
//     rotates whenever the clock has passed the next rotation time. An
//     entry is dropped at the third rotation after it was last put (made,
//     FAILed or RESET): between 2T and 3T later, silently. ACKs do not
//     refresh it, so a tree that takes longer than 2T..3T dies even while
//     acks flow. The spout times out on its own clock (2 buckets, so
//     between T and 2T); this acker reports nothing for dropped entries,
//     and Stats.FailedTimeout stays 0: every dropped entry is counted in
//     Stats.Orphans, and DroppedInit counts those that had seen INIT (the
//     roots a spout must time out itself).
//   - Per-root timeouts do not exist: Msg.TimeoutMs is ignored. RESET
//     refreshes the entry (re-put into the newest bucket); Storm also
//     forwards it to the spout, which is not this interface's business.
//   - FAIL vs ack (rule 3): when an entry with a known task has val 0 and
//     failed set (FAIL before INIT, then every ack), Storm checks val first
//     and reports Completed; we report Failed.
//   - Drains (rule 3): a FAIL removes its root's entry whatever its val,
//     as Storm's does; the failed tree's late ACKs then make new entries
//     that live until they are dropped.
//   - Latency runs from the entry's creation (Storm's AckObject start
//     time), which may be an ACK or FAIL that came before the INIT.
//   - Bound (rule 10): Storm has none. This port adds MaxPending so that it
//     runs under the same memory bound as the others: a new entry past it
//     is refused like the shard's (Failed{Full} for INIT, Refused{Full}
//     otherwise). Malformed messages are Refused{Invalid}.
//
// Java's map values are mutable objects; here entries are values in Go
// maps, so an in-place update is a write back into the bucket where get
// found the entry (one map write that Java does not do), and rotation
// clears the dropped map and reuses it as the new head instead of
// allocating a new one. A warmed-up Storm allocates nothing.
// Not safe for concurrent use (Storm's acker is one executor thread).
type Storm struct {
	pending    rotatingMap
	clock      ackcore.Clock
	rotation   int64 // ns between rotations (Storm: the tick tuple period)
	next       int64 // clock reading at which the next rotation is due
	nowNs      int64 // this call's clock reading
	maxPending int

	stats       ackcore.Stats
	droppedInit uint64
}

var _ ackcore.Interface = (*Storm)(nil)

// StormOptions shape Storm's rotating map. The zero value is Storm 2.x's
// acker: 3 buckets (Acker.TIMEOUT_BUCKET_NUM) rotated once per message
// timeout (the acker's TOPOLOGY_TICK_TUPLE_FREQ_SECS is set to
// TOPOLOGY_MESSAGE_TIMEOUT_SECS).
type StormOptions struct {
	// Buckets is the number of buckets, in [2, maxStormBuckets]; 0 means 3.
	Buckets int
	// Rotation is the time between rotations; 0 means Config.Timeout.
	// Timeout/(Buckets-1) makes the acker drop an entry between the
	// timeout and Timeout*Buckets/(Buckets-1), RotatingMap's documented
	// guarantee when used as a time cache.
	Rotation time.Duration
}

// maxStormBuckets bounds StormOptions.Buckets: get and put touch every
// bucket, so more than a handful is a mistake, not a configuration.
const maxStormBuckets = 64

// NewStorm makes a Storm acker. cfg.Tick is ignored: Storm has no timer
// wheel, and its latencies have the clock's resolution.
func NewStorm(cfg Config, opt StormOptions) (*Storm, error) {
	cfg, err := cfg.validate()
	if err != nil {
		return nil, err
	}
	if opt.Buckets == 0 {
		opt.Buckets = 3
	}
	if opt.Rotation == 0 {
		opt.Rotation = cfg.Timeout
	}
	if opt.Buckets < 2 || opt.Buckets > maxStormBuckets {
		return nil, fmt.Errorf("baseline: Storm buckets %d out of range [2, %d]", opt.Buckets, maxStormBuckets)
	}
	if opt.Rotation < 0 {
		return nil, fmt.Errorf("baseline: Storm rotation %v is negative", opt.Rotation)
	}
	s := &Storm{
		pending:    newRotatingMap(opt.Buckets),
		clock:      cfg.Clock,
		rotation:   int64(opt.Rotation),
		maxPending: cfg.MaxPending,
	}
	s.setNow()
	s.next = s.nowNs + s.rotation
	return s, nil
}

func (s *Storm) setNow() { s.nowNs = max(int64(s.clock.Now()), s.nowNs, 0) }

// stormEntry is Storm's AckObject: 24 bytes.
type stormEntry struct {
	val    uint64 // ack val
	start  int64  // clock reading when the entry was made, ns
	task   int32  // spout task; -1 until an INIT names it
	failed bool
}

// Stats returns the counters (see the type's doc for what they mean here).
func (s *Storm) Stats() ackcore.Stats {
	st := s.stats
	st.Pending = s.pending.size()
	return st
}

// DroppedInit is the number of entries dropped by rotation that had seen
// their INIT: roots whose spout gets no outcome from this acker.
func (s *Storm) DroppedInit() uint64 { return s.droppedInit }

// Apply applies msgs in order, appending their outcomes to out.
func (s *Storm) Apply(msgs []ackcore.Msg, out []ackcore.Outcome) []ackcore.Outcome {
	s.setNow()
	return applyEach(msgs, out, &s.stats, s.apply)
}

// apply is Acker.execute for one valid message.
func (s *Storm) apply(m *ackcore.Msg, out []ackcore.Outcome) []ackcore.Outcome {
	s.count(m.Kind)
	root := m.Root
	e, bucket, ok := s.pending.get(root)
	if !ok {
		if s.pending.size() >= s.maxPending { // our addition: Storm has no bound
			if m.Kind == ackcore.Init {
				s.stats.FailedFull++
				return append(out, ackcore.Outcome{Root: root, Task: m.Task, Kind: ackcore.Failed, Reason: ackcore.ReasonFull})
			}
			s.stats.RefusedFull++
			return append(out, refuseFull(root))
		}
		e = stormEntry{start: s.nowNs, task: -1}
	}
	// put: the entry (re)enters the newest bucket and leaves the others,
	// which refreshes it; otherwise it is updated where it lives.
	put := !ok || m.Kind == ackcore.Fail || m.Kind == ackcore.Reset
	switch m.Kind {
	case ackcore.Init:
		e.val ^= m.Val
		e.task = int32(m.Task)
	case ackcore.Ack:
		e.val ^= m.Val
	case ackcore.Fail:
		e.failed = true
	}
	if e.task >= 0 && (e.val == 0 || e.failed) {
		// Storm puts a new entry before this check and removes it here;
		// an entry that ends in the message that made it is never stored.
		if ok {
			s.pending.remove(root)
		}
		o := ackcore.Outcome{Root: root, Task: uint32(e.task), Latency: time.Duration(s.nowNs - e.start)}
		if e.val == 0 { // checked first: Storm acks a failed root whose val reached 0
			o.Kind = ackcore.Completed
			s.stats.Completed++
		} else {
			o.Kind, o.Reason = ackcore.Failed, ackcore.ReasonExplicit
			s.stats.FailedExplicit++
		}
		return append(out, o)
	}
	if put {
		s.pending.put(root, e)
	} else {
		s.pending.buckets[bucket][root] = e
	}
	return out
}

func (s *Storm) count(k ackcore.Kind) {
	switch k {
	case ackcore.Init:
		s.stats.Inits++
	case ackcore.Ack:
		s.stats.Acks++
	case ackcore.Fail:
		s.stats.Fails++
	default:
		s.stats.Resets++
	}
}

// Expire rotates the buckets once for every rotation time the clock has
// passed (Storm's tick tuples, which a busy acker may receive late; after
// as many rotations as there are buckets everything is gone, so a long
// idle gap costs at most that many). Dropped entries are counted, never
// reported: it appends nothing to out, and more is always false.
func (s *Storm) Expire(out []ackcore.Outcome) (_ []ackcore.Outcome, more bool) {
	s.setNow()
	if s.nowNs < s.next {
		return out, false
	}
	n := (s.nowNs-s.next)/s.rotation + 1
	for range min(n, int64(len(s.pending.buckets))) {
		dropped, withInit := s.pending.rotate()
		s.stats.Orphans += uint64(dropped)
		s.droppedInit += uint64(withInit)
	}
	s.next += n * s.rotation
	return out, false
}

// rotatingMap is Storm's RotatingMap for this acker: buckets[0] is the
// newest. get, put and remove cost one map operation per bucket at worst,
// rotate one pass over the oldest bucket.
type rotatingMap struct {
	buckets []map[uint64]stormEntry
}

func newRotatingMap(n int) rotatingMap {
	r := rotatingMap{buckets: make([]map[uint64]stormEntry, n)}
	for i := range r.buckets {
		r.buckets[i] = make(map[uint64]stormEntry)
	}
	return r
}

// get finds k, newest bucket first, and says which bucket holds it.
func (r *rotatingMap) get(k uint64) (stormEntry, int, bool) {
	for i, b := range r.buckets {
		if e, ok := b[k]; ok {
			return e, i, true
		}
	}
	return stormEntry{}, 0, false
}

// put stores k in the newest bucket and deletes it from all the others.
func (r *rotatingMap) put(k uint64, e stormEntry) {
	r.buckets[0][k] = e
	for _, b := range r.buckets[1:] {
		delete(b, k)
	}
}

// remove deletes k from the first bucket, newest first, that holds it.
func (r *rotatingMap) remove(k uint64) {
	for _, b := range r.buckets {
		if _, ok := b[k]; ok {
			delete(b, k)
			return
		}
	}
}

func (r *rotatingMap) size() int {
	n := 0
	for _, b := range r.buckets {
		n += len(b)
	}
	return n
}

// rotate drops the oldest bucket and makes it, emptied, the newest. It
// returns how many entries were dropped and how many of them had an INIT.
func (r *rotatingMap) rotate() (dropped, withInit int) {
	last := len(r.buckets) - 1
	dead := r.buckets[last]
	dropped = len(dead)
	for _, e := range dead {
		if e.task >= 0 {
			withInit++
		}
	}
	clear(dead)
	copy(r.buckets[1:], r.buckets[:last])
	r.buckets[0] = dead
	return dropped, withInit
}
