package netio

import (
	"math"
	"time"

	"github.com/xorack/xorack/ackcore"
)

// Fair shares of the acker's table (docs/semantics.md, netio rules 9 and
// 10): a connection's INITs against its share of the table, its RESETs
// against its RESET share within MaxRootTimeout.

// Share is a connection's fair share of the acker's table now: its
// shards' MaxPending over the authenticated connections that own a task,
// and the rings' worth of slack (shareSlack); with one such connection,
// no bound but the acker's. A connection with more roots than this in
// the acker (ConnStats.Held) has the INITs past it answered
// Failed{full}.
func (s *Server) Share() int64 { return s.share.Load() }

// addOwners changes the count of connections owning a task, and the
// share with it (under s.mu).
func (s *Server) addOwners(d int64) {
	s.share.Store(s.shareOf(s.owners.Add(d)))
}

// shareOf is the share with n connections owning a task: no bound but
// the acker's for a lone one (no one else wants room).
func (s *Server) shareOf(n int64) int64 {
	if n <= 1 {
		return math.MaxInt64 / 2
	}
	return s.total/n + s.shareSlack()
}

// shareSlack is what a connection's held count may run ahead of its
// entries in the table: its INITs in its rings into the shards, on their
// way in, and outcomes on their way out, in the shards' rings to the
// router (RingSize each, per shard) and held by the executors while the
// router catches up. Eight rings' worth: with two, the net level's four
// connections, each keeping a quarter of a table sized 1.05x the stream,
// had INITs refused (outcomes waiting for the router); with eight, none
// on an idle machine (ServerConfig.ShareSlack sets it).
func (s *Server) shareSlack() int64 {
	if s.cfg.ShareSlack > 0 {
		return int64(s.cfg.ShareSlack)
	}
	return 8 * int64(s.cfg.Shards) * int64(s.cfg.RingSize)
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
