package ackcore

import (
	"sync/atomic"
	"time"
)

// Clock is the shard's time source: a monotonic reading since an arbitrary
// epoch. A shard reads it once per Apply or Expire call, never per message.
type Clock interface {
	Now() time.Duration
}

// NewMonotonicClock returns a clock that reads Go's monotonic clock, whose
// epoch is now: the default Clock.
func NewMonotonicClock() Clock { return &monotonicClock{base: time.Now()} }

// monotonicClock is NewMonotonicClock's clock.
type monotonicClock struct{ base time.Time }

// Now returns the time since the clock was made.
func (c *monotonicClock) Now() time.Duration { return time.Since(c.base) }

// FakeClock is a clock tests move by hand. Safe for concurrent use: Set and
// Add may be called while shards read it.
type FakeClock struct{ t atomic.Int64 }

// Now returns the clock's current reading.
func (c *FakeClock) Now() time.Duration { return time.Duration(c.t.Load()) }

// Set moves the clock to d. Moving it backwards is allowed and means the
// shard sees no time pass until the clock catches up.
func (c *FakeClock) Set(d time.Duration) { c.t.Store(int64(d)) }

// Add moves the clock forward by d.
func (c *FakeClock) Add(d time.Duration) { c.t.Add(int64(d)) }
