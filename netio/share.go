package netio

import (
	"math"
	"time"

	"github.com/xorack/xorack/ackcore"
)

// Fair shares of the acker's table (docs/semantics.md, netio rules 9 and
// 10): a connection's INITs against the room it was allocated, its
// RESETs against its RESET share within MaxRootTimeout.
//
// The table's room for INITs (Shards x MaxPending, less the shards'
// spread) is split three ways: the allocations of the live connections
// that own a task, the roots of connections gone (until their outcomes
// leave the acker), and the pool, the room no one is allocated. A
// connection draws from the pool as its INITs need room (admitInits),
// up to its base share whatever the pool has, past it only what the
// others' bases leave (see admitInits), and gives
// back, once per read batch, what it is allocated past a few chunks over
// what it holds (giveBack); when it goes, its allocation returns to the
// pool and its held roots do as their outcomes come. The pool is the one
// reserve every connection's slack comes out of: with n connections
// each at its base (Share), it holds the reserve (ShareSlack) and
// nothing more, so the allocations, and the roots held within them,
// never sum past the table however many connections flood it.
//
// Who writes what: c.alloc by c's reader only (forget after it ended); c.held raised by the reader, lowered by the router;
// s.pool by any of them, atomically. Every root the server hands the
// acker is counted in its connection's held count until its outcome
// comes (routed: the owner's held count; unrouted: the pool), so
//
//	pool + sum(alloc) + (held roots of connections gone) = table room
//
// holds exactly (the router's count may dip below zero for a live
// connection, see unheld, and the sum stays exact), and a connection's
// held count never passes its allocation.

// Share is a connection's base share of the acker's table now: the
// table's room for INITs less the reserve (ShareSlack), over the
// authenticated connections that own a task. A connection draws up to
// it from the pool whatever the pool has, and past it only what the pool
// has beyond the others' bases not yet drawn (ServerStats.Unallocated is
// the pool). A connection with more roots in the acker (ConnStats.Held)
// than its allocation (ConnStats.Alloc) and the pool can cover has the
// INITs past it answered Failed{full}. With the shares off (ShareSlack at least the
// table), no bound but the acker's.
func (s *Server) Share() int64 { return s.share.Load() }

// addOwners changes the count of connections owning a task, and the
// share with it (under s.mu).
func (s *Server) addOwners(d int64) {
	s.share.Store(s.shareOf(s.owners.Add(d)))
}

// shareOf is the base share with n connections owning a task.
func (s *Server) shareOf(n int64) int64 {
	if s.sharesOff {
		return math.MaxInt64 / 2
	}
	return (s.room - s.reserve) / max(n, 1)
}

// initShares sets the reserve, the room and the pool (NewServer).
func (s *Server) initShares() {
	r := int64(s.cfg.ShareSlack) // filled by validate
	s.sharesOff = r >= s.total
	s.reserve = min(r, s.total/4)
	s.room = s.total - s.spread()
	s.chunk = max(min(int64(s.cfg.Shards)*int64(s.cfg.RingSize), s.reserve/8), 1)
	s.pool.Store(s.room)
	s.share.Store(s.shareOf(0))
}

// defaultSlackRings is the default reserve (ServerConfig.ShareSlack,
// filled by validate) in rings' worth per shard: a
// connection's held count runs ahead of its entries in the table by its
// INITs in its rings into the shards and its outcomes on their way to
// the router (RingSize each, per shard) and held by the executors while
// the router catches up. With two rings' worth of slack per connection,
// the net level's four connections, each keeping a quarter of a table
// sized 1.05x the stream, had INITs refused (outcomes waiting for the
// router); with eight, none on an idle machine. That is now the one
// reserve all connections draw on.
const defaultSlackRings = 8

// spread is the room kept off the shares for the shards' uneven fill:
// roots hash to the shards at random, so with the table's room all held
// one shard would fill first, and an INIT within its connection's share
// find it full. Four standard deviations of a shard's count per shard
// (its count is about binomial: sqrt(MaxPending)); none with one shard.
func (s *Server) spread() int64 {
	if s.cfg.Shards == 1 {
		return 0
	}
	return int64(s.cfg.Shards) * 4 * int64(math.Sqrt(float64(s.cfg.Shard.MaxPending)))
}

// ownsTasks marks c, which owns a task, as drawing on the table (claim, on
// c's reader goroutine): it starts with nothing allocated, and draws as
// its INITs come; with the shares off, its allocation binds nothing.
func (c *sconn) ownsTasks() {
	if c.s.sharesOff {
		c.alloc.Store(math.MaxInt64 / 2)
	}
}

// draw takes up to want from the pool, keeping keep there, and returns
// what it took.
func (s *Server) draw(want, keep int64) int64 {
	for {
		p := s.pool.Load()
		take := min(want, p-keep)
		if take <= 0 {
			return 0
		}
		if s.pool.CompareAndSwap(p, p-take) {
			return take
		}
	}
}

// unmet is what the connections owning a task other than c are short of
// their base share g: the room the pool keeps for them when c draws past
// its own (under s.mu).
func (s *Server) unmet(c *sconn, g int64) int64 {
	var u int64
	for o := range s.conns {
		if o != c && o.owner {
			u += max(g-o.alloc.Load(), 0)
		}
	}
	return u
}

// admitInits keeps the first INITs of c.msgs that c's allocation, with
// what it can draw from the pool, has room for, and refuses the others
// (refuse); it returns the INITs kept. c.held is exact (the reader
// published what it took). Up to its base share c draws whatever the
// pool has; past it, only what the pool has beyond the other
// connections' bases not yet drawn (unmet), and after a draw that fell
// short not again for drawPause. So while the connections stay the
// same, the pool keeps what they are short of their bases, and one below
// its base always finds room (docs/semantics.md, netio rule 10).
func (c *sconn) admitInits(inits int64) int64 {
	s := c.s
	if s.sharesOff {
		return inits
	}
	h, a := c.held.Load(), c.alloc.Load()
	if need := h + inits - a; need > 0 {
		want := max(need, s.chunk)
		g := s.share.Load()
		took := s.draw(min(want, max(g-a, 0)), 0)
		if over := want - took; over > 0 && time.Now().After(c.drawAfter) {
			s.mu.Lock()
			took += s.draw(over, s.unmet(c, g))
			s.mu.Unlock()
			if took < need {
				c.drawAfter = time.Now().Add(drawPause)
			}
		}
		a += took
		c.alloc.Add(took)
	}
	if h+inits > a {
		return c.refuse(max(a-h, 0))
	}
	return inits
}

// drawPause is how long a connection whose draw past its base share fell
// short waits before it tries again: a flooder at its bound takes the
// server's lock and looks at every connection at most this often.
const drawPause = time.Millisecond

// giveBack returns to the pool what c is allocated past a few chunks over
// what it holds (the reader, once per read batch, with c.held exact).
func (c *sconn) giveBack() {
	s := c.s
	if s.sharesOff {
		return
	}
	h, a := c.held.Load(), c.alloc.Load()
	if a > max(h, 0)+4*s.chunk {
		keep := max(h, 0) + 2*s.chunk
		c.alloc.Store(keep)
		s.pool.Add(a - keep)
	}
}

// releaseShare returns a connection's allocation to the pool when it is
// gone (forget, its reader ended): all but the roots it still holds in
// the acker, which return as their outcomes come (unheld). Its held
// count is left at goneHeld, so that the router, which may still route
// an outcome to it, sees it gone.
func (s *Server) releaseShare(c *sconn) {
	if s.sharesOff || !c.owner {
		return
	}
	a, h := c.alloc.Swap(0), c.held.Swap(goneHeld)
	s.pool.Add(a - h)
}

// goneHeld marks the held count of a connection gone: far below any
// count a live one reaches (at most its MaxConnPending above zero, or
// the outcomes of the roots an earlier connection of its tasks held
// below it).
const goneHeld = math.MinInt64 / 2

// unheld lowers c's held count by the n outcomes the router routed to
// it; those of a connection gone return to the pool. A live connection's
// count may dip below zero: outcomes of roots an earlier connection of
// its tasks held (taken over), or of roots whose INITs its reader has
// not counted yet; the sum above stays exact all the same.
func (s *Server) unheld(c *sconn, n int64) {
	if c.held.Add(-n) < goneHeld/2 && !s.sharesOff {
		s.pool.Add(n)
	}
}

// OrphanShare is the most orphans a connection's messages may have in
// each shard now (netio rule 9): entries its ACKs, FAILs and RESETs made
// for roots with no entry (an early ACK, racing its INIT, or a stray one).
// It is a shard's MaxPending over the authenticated connections, at least
// 1; with one connection, 0: no bound but the acker's. The acker refuses
// a connection's messages that would make more (counted per connection,
// ConnStats.OrphansRefused, and in ackcore.Stats.OrphansRefused); their
// roots, if their INITs come later, time out and are replayed. The
// shards count orphans per producer slot, exactly, so no slack is needed;
// a slot's orphans stay counted after its connection closes until they
// leave the table (at most a default timeout; RESET-made ones at most
// MaxRootTimeout), and a connection that takes the slot meanwhile starts
// with them.
func (s *Server) OrphanShare() int { return s.orphanShareOf(s.authed.Load()) }

func (s *Server) orphanShareOf(n int64) int {
	if n <= 1 {
		return 0
	}
	return max(s.cfg.Shard.MaxPending/int(n), 1)
}

// setOrphanShare hands the share for the authenticated connections now to
// the acker's shards, which take it at their next tick (under s.mu).
func (s *Server) setOrphanShare() { s.ak.SetOrphanShare(s.OrphanShare()) }

// ResetShare is the most RESETs a connection may send within
// MaxRootTimeout now: half the table over the authenticated
// connections; the server as a whole takes at most half the table's worth
// within that time. A RESET for an unknown root makes an entry that lives
// at most MaxRootTimeout, so RESETs, whoever sends them, hold at most
// half the table, and one connection its share of that half. The RESETs
// past it are dropped and counted.
func (s *Server) ResetShare() int64 { return s.total / (2 * max(s.authed.Load(), 1)) }

// refuse keeps the first room INITs of c.msgs and takes the others out,
// answering each Failed{full} on c (counted there and in the server); it
// returns the INITs kept.
func (c *sconn) refuse(room int64) int64 {
	kept, j := int64(0), 0
	if cap(c.refused) < len(c.msgs) {
		c.refused = make([]ackcore.Outcome, 0, len(c.msgs)) // at most a frame's: see ConnBytes
	}
	c.refused = c.refused[:0]
	for _, m := range c.msgs {
		if m.Kind == ackcore.Init {
			if kept >= room {
				c.refused = append(c.refused, ackcore.Outcome{Root: m.Root, Task: m.Task, Kind: ackcore.Failed, Reason: ackcore.ReasonFull})
				continue
			}
			kept++
		}
		c.msgs[j] = m
		j++
	}
	c.msgs = c.msgs[:j]
	k := uint64(len(c.refused))
	c.initsRefused.Add(k)
	c.s.initsRefused.Add(k)
	// An outcome to write, like the acker's: the writer lowers pending
	// when it has written it.
	c.pending.Add(int64(k))
	c.queueOutcomes(c.refused)
	return kept
}

// chargeResets charges the n RESETs of c.msgs against c's RESET share and
// the server's (ResetShare) and drops, counted, those past either: the
// last ones of the frame.
func (c *sconn) chargeResets(n int) {
	s := c.s
	now := time.Now()
	c.resets.advance(now)
	room := max(s.ResetShare()-c.resets.sum, 0)
	s.resetMu.Lock()
	s.resets.advance(now)
	room = min(room, max(s.total/2-s.resets.sum, 0))
	take := min(int64(n), room)
	s.resets.add(take)
	s.resetMu.Unlock()
	c.resets.add(take)
	if take == int64(n) {
		return
	}
	kept, j := int64(0), 0
	for _, m := range c.msgs {
		if m.Kind == ackcore.Reset {
			if kept >= take {
				continue
			}
			kept++
		}
		c.msgs[j] = m
		j++
	}
	c.msgs = c.msgs[:j]
	d := uint64(int64(n) - take)
	c.resetsDropped.Add(d)
	s.resetsDropped.Add(d)
}

// charges counts what was charged within a span: nine buckets of an
// eighth of it, so that a charge is forgotten between one span and nine
// eighths of it after it was made, never sooner.
type charges struct {
	width int64 // a bucket's span, ns
	at    int64 // the current bucket: time / width
	b     [9]int64
	sum   int64 // of b
}

func (w *charges) init(span time.Duration) { w.width = max(int64(span/8), 1) }

// advance forgets the buckets older than the span at now.
func (w *charges) advance(now time.Time) {
	i := now.UnixNano() / w.width
	if i-w.at >= int64(len(w.b)) {
		*w = charges{width: w.width, at: i}
		return
	}
	for w.at < i {
		w.at++
		k := w.at % int64(len(w.b))
		w.sum -= w.b[k]
		w.b[k] = 0
	}
}

func (w *charges) add(n int64) {
	w.b[w.at%int64(len(w.b))] += n
	w.sum += n
}
