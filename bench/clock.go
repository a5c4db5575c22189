package bench

import (
	"sync/atomic"
	"time"

	"github.com/xorack/xorack/ackcore"
)

// benchClock is an acker clock the runners drive: ackcore.Clock, plus
// what a runner tells it.
type benchClock interface {
	ackcore.Clock
	advance(n int)        // n more messages were emitted
	Skip(d time.Duration) // jump forward by d, to expire everything at the end
	pause()               // the acker stops running (another impl's turn)
	resume()              // the acker runs again
	kind() string         // for Row.Clock
}

// streamNsPerMsg is the stream clock's pace: 100 ns of acker time per
// message emitted, 10 M messages a second, about the speed of the fastest
// acker here at large windows, so stream-time timeouts and latencies read
// like real ones.
const streamNsPerMsg = 100

// streamClock is the acker clock of runs with fails or drops: it advances
// by streamNsPerMsg for every message the workload emits, never with the
// wall. A root then lives for a fixed number of messages, whatever the
// acker's speed, so a timeout chosen from the stream length holds for
// every impl and the entries that faults leave behind stay bounded. Safe
// for concurrent use: producers advance it while shards read it.
type streamClock struct {
	msgs atomic.Int64 // messages emitted; added to by the producers
	skip atomic.Int64 // ns added by Skip
}

func (c *streamClock) Now() time.Duration {
	return time.Duration(c.msgs.Load()*streamNsPerMsg + c.skip.Load())
}

func (c *streamClock) advance(n int)        { c.msgs.Add(int64(n)) }
func (c *streamClock) Skip(d time.Duration) { c.skip.Add(int64(d)) }
func (c *streamClock) pause()               {}
func (c *streamClock) resume()              {}
func (c *streamClock) kind() string         { return "stream" }

// activeClock is a core-level acker's clock in runs without faults: the
// wall clock, stopped while the acker is paused (other impls take their
// turn in the interleaved runs), so that a root's latency and its timeout
// count only time its own acker was running, as if it ran alone. Owned by
// the core runner's goroutine.
type activeClock struct {
	off   time.Duration // running time accumulated before since
	since time.Time     // when it last resumed
	on    bool
}

func (c *activeClock) Now() time.Duration {
	if !c.on {
		return c.off
	}
	return c.off + time.Since(c.since)
}

func (c *activeClock) resume() {
	if !c.on {
		c.on, c.since = true, time.Now()
	}
}

func (c *activeClock) pause() {
	if c.on {
		c.off += time.Since(c.since)
		c.on = false
	}
}

func (c *activeClock) advance(int)          {}
func (c *activeClock) Skip(d time.Duration) { c.off += d }
func (c *activeClock) kind() string         { return "active" }

// wallClock is the pipeline's acker clock in runs without faults: the
// monotonic clock. Safe for concurrent use.
type wallClock struct {
	base time.Time
	skip atomic.Int64
}

func newWallClock() *wallClock { return &wallClock{base: time.Now()} }

func (c *wallClock) Now() time.Duration {
	return time.Since(c.base) + time.Duration(c.skip.Load())
}

func (c *wallClock) advance(int)          {}
func (c *wallClock) Skip(d time.Duration) { c.skip.Add(int64(d)) }
func (c *wallClock) pause()               {}
func (c *wallClock) resume()              {}
func (c *wallClock) kind() string         { return "wall" }
