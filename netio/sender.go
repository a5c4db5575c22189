package netio

import (
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/xorack/xorack/ackcore"
	"github.com/xorack/xorack/acker"
)

// initRec is a staged or queued INIT: root, local task, and, once the
// writer took it, its send time (ms since the client's epoch; 0 before).
type initRec struct {
	root uint64
	task uint32
	ms   uint32
}

// stage is one sender's frame under construction for one host. Its
// buffer stays with the sender: a hand-over copies the frame into the
// host's outbound buffer.
type stage struct {
	buf   []byte // a msgs frame header, then n records
	n     int
	inits []initRec
}

// producer is one send handle (acker.Sender): it stages messages per host
// and hands a host's frame to its connection when it holds FrameMsgs
// messages or on Flush. One goroutine uses it.
type producer struct {
	c     *Client
	stage []stage
	// messages staged since the last Flush by kind, index Kind&3 (INIT
	// 1, ACK 2, FAIL 3, RESET 0), added to the client's counters at Flush
	kinds [4]uint64
	cnt   sendCounts
}

// Send stages m for its root's host, handing the frame over when full.
// An INIT waits while MaxPending roots are in flight. With no host up,
// an INIT is reported Failed{acker lost} at once and other messages are
// dropped (counted). A malformed message returns an error naming the
// value, and acker.ErrClosed once the client is stopped.
func (s *producer) Send(m ackcore.Msg) error {
	_, err := s.send(m, true)
	return err
}

// TrySend is Send without waiting: false when MaxPending roots are in
// flight or m's host's queue is full.
func (s *producer) TrySend(m ackcore.Msg) (bool, error) { return s.send(m, false) }

// SendBatch is Send for each of msgs in order. With one host up it
// stages runs of messages at once: one check of the client's state, one
// take of root slots for a run's INITs, and an encoding loop per run; a
// run that would pass MaxPending, and every message with several hosts
// up (each routed by its root), go through Send one at a time.
func (s *producer) SendBatch(msgs []ackcore.Msg) error {
	c := s.c
	for len(msgs) > 0 {
		live := *c.live.Load()
		if len(live) != 1 || c.closed.Load() {
			if _, err := s.send(msgs[0], true); err != nil {
				return err
			}
			msgs = msgs[1:]
			continue
		}
		h := live[0]
		st := &s.stage[h.idx]
		run := msgs[:min(len(msgs), c.frame-st.n)]
		n, k := s.putRun(st, run)
		if inits := k[ackcore.Init&3]; n == 0 || inits > 0 && !c.tryAcquire(int(inits)) {
			// A malformed message (send names it), or no room for the
			// run's roots (send waits for it): the run is not staged.
			st.inits = st.inits[:len(st.inits)-int(inits)]
			if _, err := s.send(msgs[0], true); err != nil {
				return err
			}
			msgs = msgs[1:]
			continue
		}
		s.stageRun(st, n, &k)
		msgs = msgs[n:]
		if st.n >= c.frame {
			s.handOver(h)
		}
	}
	return nil
}

// valid reports whether m may be sent: a well-formed message whose INIT
// names one of the client's tasks (invalid says why not).
func (s *producer) valid(m *ackcore.Msg) bool {
	return m.Valid() && (m.Kind != ackcore.Init || m.Task < uint32(s.c.spec.Tasks))
}

func (s *producer) invalid(m *ackcore.Msg) error {
	if err := m.Validate(); err != nil {
		return fmt.Errorf("netio: %w", err)
	}
	return fmt.Errorf("netio: INIT root %#x names task %d, the client has %d tasks", m.Root, m.Task, s.c.spec.Tasks)
}

func (s *producer) send(m ackcore.Msg, wait bool) (bool, error) {
	c := s.c
	if c.closed.Load() {
		s.abandon()
		return false, acker.ErrClosed
	}
	if !s.valid(&m) {
		return false, s.invalid(&m)
	}
	live := *c.live.Load()
	h := pick(live, c.cfg.HashKey, m.Root)
	if h != nil && !wait && s.stage[h.idx].n+1 >= c.frame && h.full() {
		return false, nil
	}
	if m.Kind == ackcore.Init {
		if !c.acquire(s, wait) {
			if c.closed.Load() {
				return false, acker.ErrClosed
			}
			return false, nil
		}
	}
	if h == nil {
		if m.Kind == ackcore.Init {
			c.failLocal([]initRec{{root: m.Root, task: m.Task}}, ackcore.ReasonLost)
		} else {
			c.dropped.Add(1)
		}
		return true, nil
	}
	st := &s.stage[h.idx]
	s.put(st, &m)
	if st.n >= c.frame {
		s.handOver(h)
	}
	return true, nil
}

// put appends m's record to st (m valid, its root's slot taken if an
// INIT). The stage's buffer holds a whole frame from its first use on, so
// the append never reallocates.
func (s *producer) put(st *stage, m *ackcore.Msg) {
	if st.n == 0 {
		if cap(st.buf) < headerSize+s.c.frame*msgSize {
			st.buf = make([]byte, 0, headerSize+s.c.frame*msgSize)
		}
		st.buf = appendHeader(st.buf[:0], typeMsgs, 0)
	}
	task := uint32(0)
	if m.Kind == ackcore.Init {
		task = m.Task + s.c.cfg.TaskBase
		st.inits = append(st.inits, initRec{root: m.Root, task: m.Task})
	}
	s.kinds[m.Kind&3]++
	off := len(st.buf)
	st.buf = st.buf[:off+msgSize]
	putMsg(st.buf[off:], m, task)
	st.n++
}

// putRun encodes the longest valid prefix of run (see valid) into st's
// frame after its staged records, in one pass that checks and encodes
// each message, and appends its INITs to st.inits; run fits in the
// frame. It returns how many it encoded and their count by kind (index
// Kind&3, as producer.kinds), and stages nothing: stageRun does, once
// their roots have slots; a caller that does not stage them truncates
// st.inits by their INITs.
func (s *producer) putRun(st *stage, run []ackcore.Msg) (n int, kinds [4]uint64) {
	if st.n == 0 {
		if cap(st.buf) < headerSize+s.c.frame*msgSize {
			st.buf = make([]byte, 0, headerSize+s.c.frame*msgSize)
		}
		st.buf = appendHeader(st.buf[:0], typeMsgs, 0)
	}
	off := len(st.buf)
	k := len(st.inits)
	st.inits = slices.Grow(st.inits, len(run))
	var c runCount
	n, c = encodeRun(st.buf[off:off+len(run)*msgSize], st.inits[k:k+len(run)], run, s.c.cfg.TaskBase, uint32(s.c.spec.Tasks))
	st.inits = st.inits[:k+int(c.inits)]
	kinds[ackcore.Init&3], kinds[ackcore.Fail&3], kinds[ackcore.Reset&3] = c.inits, c.fails, c.resets
	kinds[ackcore.Ack&3] = uint64(n) - c.inits - c.fails - c.resets
	return n, kinds
}

// runCount is a run's INITs, FAILs and RESETs.
type runCount struct{ inits, fails, resets uint64 }

// encodeRun is putRun's loop, a leaf of its own so that its few live
// values stay in registers: it encodes the longest valid prefix of run
// into buf (room for all of run) with base added to each INIT's task,
// records each INIT in ins (room for all of run) in order, and returns
// how many it encoded and their count by kind. It walks buf by
// reslicing it, a record at a time (an index made the compiler compute
// and check each record's offset, and spill the loop's state), and an
// ACK, most of a stream, skips the kind's switch.
func encodeRun(buf []byte, ins []initRec, run []ackcore.Msg, base, tasks uint32) (n int, c runCount) {
	buf = buf[:len(run)*msgSize]
	ins = ins[:len(run)]
	for i := range run {
		m := &run[i]
		b := (*[msgSize]byte)(buf)
		buf = buf[msgSize:]
		// valid, on the fields at hand: the rule's ackcore part
		// (Msg.Valid) and an INIT's task within the client's.
		root, kind, to := m.Root, m.Kind, m.TimeoutMs
		if root == 0 || to > ackcore.MaxTimeoutMs {
			return i, c
		}
		task := uint32(0)
		if kind != ackcore.Ack {
			switch kind {
			case ackcore.Init:
				if m.Task >= tasks {
					return i, c
				}
				task = m.Task + base
				ins[c.inits] = initRec{root: root, task: m.Task}
				c.inits++
			case ackcore.Fail:
				c.fails++
			case ackcore.Reset:
				c.resets++
			default:
				return i, c
			}
		}
		putMsg(b[:], m, task)
	}
	return len(run), c
}

// stageRun stages the n records putRun encoded, counted by kind in k.
func (s *producer) stageRun(st *stage, n int, k *[4]uint64) {
	for i, x := range k {
		s.kinds[i] += x
	}
	st.buf = st.buf[:len(st.buf)+n*msgSize]
	st.n += n
}

// abandon fails the INITs staged when the client stopped.
func (s *producer) abandon() {
	for i := range s.stage {
		st := &s.stage[i]
		s.c.failLocal(st.inits, ackcore.ReasonStopped)
		st.inits, st.n, st.buf = st.inits[:0], 0, st.buf[:0]
	}
}

// Flush hands every staged frame to its host's connection. Once the
// client is stopped it returns acker.ErrClosed when it had messages to
// hand over (their INITs are reported Failed{stopped}), and nil when it
// had none, as the in-process acker's Producer does.
func (s *producer) Flush() error {
	c := s.c
	if c.closed.Load() {
		staged := false
		for i := range s.stage {
			staged = staged || s.stage[i].n > 0
		}
		if !staged {
			return nil
		}
		s.abandon()
		return acker.ErrClosed
	}
	for i := range s.stage {
		if s.stage[i].n > 0 {
			s.handOver(c.hosts[i])
		}
	}
	if k := &s.kinds; k[0]|k[1]|k[2]|k[3] != 0 {
		for i, n := range k {
			if n > 0 {
				s.cnt.kinds[i].Add(n)
			}
		}
		*k = [4]uint64{}
	}
	if c.closed.Load() {
		return acker.ErrClosed
	}
	return nil
}

// handOver queues the stage's frame and its INITs on h (waiting for
// room), in one step under h's lock: a host lost before that fails them
// here, one lost after fails them from its queue or its pending table.
func (s *producer) handOver(h *host) {
	st := &s.stage[h.idx]
	binary.LittleEndian.PutUint32(st.buf[offLength:], uint32(len(st.buf)))
	n := st.n
	if !h.enqueue(st.buf, st.inits) {
		reason := ackcore.ReasonLost
		if s.c.closed.Load() {
			reason = ackcore.ReasonStopped
		}
		s.c.failLocal(st.inits, reason)
		s.c.dropped.Add(uint64(n - len(st.inits)))
	} else {
		s.cnt.sent.Add(uint64(n))
	}
	st.buf, st.n, st.inits = st.buf[:0], 0, st.inits[:0]
}
