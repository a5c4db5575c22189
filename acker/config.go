package acker

import (
	"cmp"
	"fmt"
	"log/slog"
	"math/bits"
	"runtime"
	"time"
	"unsafe"

	"github.com/xorack/xorack/ackcore"
	"github.com/xorack/xorack/affinity"
	"github.com/xorack/xorack/internal/bytesize"
	"github.com/xorack/xorack/ring"
)

// Config configures a sharded acker. Every size and count is checked by
// New before anything is allocated; see Footprint for what a configuration
// may hold at most.
type Config struct {
	// Shards is the number of shards, each run by one executor goroutine
	// (pinned to a CPU when Pin is set). Default DefaultShards, at most
	// MaxShards.
	Shards int
	// Spec is the port's shape: Producers (required, at most
	// MaxProducers: each producer handle is used by one goroutine, a
	// spout or bolt executor of the embedding engine, and has one SPSC
	// ring into every shard), Tasks (the spout tasks; required; INITs must
	// name a task below it, and task t's outcomes arrive at
	// Inbox(ReceiverOf(t))), Receivers (default Tasks: one receiver per task;
	// each has one ring from every shard and is polled by one goroutine;
	// an engine whose executors each run several spout tasks, as Storm's
	// do, gives each executor one receiver: the shards then publish one
	// span per executor per pass, not one per task) and ReceiverOf (task
	// to receiver; nil: task mod Receivers; called once per task by New).
	// Spec.InboxTable validates it, here as for a remote acker.
	Spec
	// Shard configures each shard; MaxPending is per shard. Its Clock is
	// the source the executors sample once per pass (nil: monotonic). Its
	// Owners is set to Producers: each producer is an owner of the
	// orphans its messages make, and Shard.OrphanShare (per shard; 0, the
	// default, none but the table's bound: one producer, or several that
	// trust each other, keep the shard's behaviour) bounds each
	// producer's; Acker.SetOrphanShare changes it while running.
	Shard ackcore.Config
	// RingSize is each producer->shard ring's capacity (a power of two);
	// default DefaultRingSize.
	RingSize int
	// OutcomeRingSize is each shard->receiver ring's capacity (a power of
	// two); default DefaultRingSize.
	OutcomeRingSize int
	// Backlog is how many outcomes a shard holds for one receiver beyond
	// that receiver's full ring before it holds back new INITs of the
	// receiver's tasks (Send waits for them, TrySend says no) until the
	// receiver has taken half of them; the other receivers keep flowing.
	// Default DefaultBacklog. See the package doc, "Bounded delivery".
	Backlog int
	// Batch is the most messages a shard takes from one producer ring per
	// pass, for fairness between producers, and the span a producer
	// reserves at once; at most RingSize; default DefaultBatch (or
	// RingSize if smaller).
	Batch int
	// Seed keys the hash that routes each root to its shard; 0 draws one
	// from crypto/rand in New. Keep it secret where root ids come from
	// outside: with a known seed, ids can be chosen to land on one shard.
	Seed uint64
	// MaxBytes bounds what the configuration may hold at most (Footprint:
	// tables, rings, held outcomes); New refuses a configuration over it,
	// naming the bytes. 0 means DefaultMaxBytes; raise it deliberately.
	MaxBytes int64
	// Pin pins each executor to a CPU chosen by affinity.Plan, or by
	// Planner when it is set, each to a CPU of its own: where the plan
	// would share a CPU (more shards than allowed CPUs, or than the
	// Planner has left), nothing is pinned, and Plan's note says so.
	Pin bool
	// Planner, with Pin, hands the executors their CPUs: New takes
	// Shards CPUs from it (Planner.Take), so an engine that plans its own
	// threads from the same Planner, before or after, gets CPUs disjoint
	// from the shards' while allowed CPUs remain. nil: New detects the
	// machine and plans the shards alone (affinity.Plan), from the first
	// CPU of the spread order, whatever else runs there.
	Planner *affinity.Planner
	// Idle is how executors, blocked producers and waiting receivers
	// wait; nil means DefaultIdle(Shards) for the executors and
	// ring.DefaultIdle() for producers and receivers. An engine whose own goroutines
	// outnumber the processors passes a shorter one (ring.DefaultIdle):
	// a spinning executor takes their CPU.
	Idle *ring.Idle
	// StopTimeout is how long Stop waits for the receivers to take the
	// outcomes of the roots it reports before it drops the rest and logs
	// which receivers lost how many (StopContext takes its deadline from
	// its context instead). 0 means DefaultStopTimeout.
	StopTimeout time.Duration
	// Logger gets Stop's lines: the receivers it waits for, every second,
	// and its error. nil means slog.Default().
	Logger *slog.Logger
}

// defaultSpins is DefaultIdle's spin count. A look at the rings costs
// a nanosecond or two, and a park costs the waker a wake-up of tens of
// microseconds when the OS thread sleeps, so an executor that has a
// processor to itself keeps looking for about as long as one wake-up
// costs before it yields and parks: 16,384 looks, some 16-30 us. With
// ring.DefaultSpins (512, under a microsecond) the executor parked
// between a producer's batches: the pipeline level at P=100k (go run
// ./cmd/ackbench -level pipeline -impl xorack -pending 100k) ran 22-24M
// msgs/s with a p50 latency of 33-38 us, against 53-56M and 3.5 us with
// 16,384 (commit f9d1704 against its parent, when the spin was chosen).
const defaultSpins = 16384

// DefaultIdle is how the executors of an acker of shards executors wait
// by default: 16,384 looks, then ring.DefaultYields yields, then a
// park, when the executors leave a processor to the producers (shards
// below GOMAXPROCS); ring.DefaultIdle() otherwise, as the executors
// then take turns with the producers and a long spin only delays them.
func DefaultIdle(shards int) ring.Idle {
	if shards >= runtime.GOMAXPROCS(0) {
		return ring.DefaultIdle()
	}
	return ring.Idle{Spins: defaultSpins, Yields: ring.DefaultYields}
}

// Limits and defaults of a Config.
const (
	// DefaultShards is Shards' default: one executor.
	DefaultShards = 1
	MaxShards     = 1024
	MaxProducers  = 4096
	// MaxRing is the largest RingSize and OutcomeRingSize (32 MiB a ring
	// of 32-byte elements).
	MaxRing = 1 << 20
	// MaxBacklog is the largest Backlog.
	MaxBacklog = 1 << 24
	// DefaultMaxBytes is MaxBytes' default: 4 GiB.
	DefaultMaxBytes = 4 << 30
	// DefaultRingSize, DefaultBacklog and DefaultBatch are the defaults
	// of RingSize and OutcomeRingSize, Backlog and Batch.
	DefaultRingSize = 4096
	DefaultBacklog  = 4096
	DefaultBatch    = 256
)

// Sizes the footprint is computed from.
const (
	msgBytes = int64(unsafe.Sizeof(ackcore.Msg{}))     // 32
	outBytes = int64(unsafe.Sizeof(ackcore.Outcome{})) // 32
	// ringOverhead is an SPSC's header (four 64-byte lines) plus the slice
	// and the acker's pointer to it.
	ringOverhead = 4*64 + 64
	// pairBytes is what each (shard, receiver) pair costs beyond its ring:
	// the held queue's header, its held-count and hold-back flag, the
	// route scratch (see executor).
	pairBytes = 64
)

// Footprint is what a configuration may hold at most, in bytes, as New
// computes it before allocating: the budget checked against MaxBytes.
type Footprint struct {
	// Tables is the shards' tables and timers: Shards × the most one
	// shard may hold (ackcore.Config.Bytes).
	Tables int64
	// Rings is the producer->shard rings, Shards × Producers × RingSize
	// messages, allocated by New.
	Rings int64
	// OutcomeRings is the shard->receiver rings, Shards × Receivers ×
	// OutcomeRingSize outcomes, allocated by New.
	OutcomeRings int64
	// Held is the most the shards can hold for receivers beyond their
	// rings (allocated as needed, in chunks, and given back): per shard,
	// Receivers × (Backlog + a route chunk + Batch + two queue chunks)
	// and a routing pair each, the chunks kept free for reuse, plus
	// MaxPending (the outcomes of the roots a held-back receiver's tasks
	// had pending), plus Producers × (RingSize+1) (INITs staged before
	// their producer saw the hold-back), plus MaxPending again while Stop
	// reports every pending root. See the package doc.
	Held int64
	// Receivers is the receivers' own buffers (Run's batch).
	Receivers int64
}

// Total is the sum of the parts.
func (f Footprint) Total() int64 {
	return sat(sat(sat(f.Tables, f.Rings), sat(f.OutcomeRings, f.Held)), f.Receivers)
}

// Validate checks c as New does, allocating none of the acker's tables,
// rings or receivers (Spec.InboxTable's task table, 4 bytes a task, is
// built and checked): every size and count, the Shard configuration
// (ackcore.Config.Validate, with Owners set to Producers), then the
// Footprint against MaxBytes. The error names
// the first problem found; Acker.Footprint says what an acker New built
// holds at most.
func (c Config) Validate() error {
	_, err := c.validate()
	return err
}

// validate is the one check of a Config: it fills the zero fields that
// have a default (Shards, RingSize, OutcomeRingSize, Backlog, Batch,
// Receivers, MaxBytes, StopTimeout; Shard.Owners is Producers), checks
// every value, then the footprint against MaxBytes, and returns the
// filled copy or an error naming the field and the value. Shard's own
// defaults are its (NewShard fills them); Idle and Logger nil keep their
// meaning (DefaultIdle, slog.Default()).
func (c Config) validate() (Config, error) {
	c.Shards = cmp.Or(c.Shards, DefaultShards)
	c.RingSize = cmp.Or(c.RingSize, DefaultRingSize)
	c.OutcomeRingSize = cmp.Or(c.OutcomeRingSize, DefaultRingSize)
	c.Backlog = cmp.Or(c.Backlog, DefaultBacklog)
	if c.Batch == 0 {
		c.Batch = max(min(DefaultBatch, c.RingSize), 1)
	}
	c.MaxBytes = cmp.Or(c.MaxBytes, DefaultMaxBytes)
	c.StopTimeout = cmp.Or(c.StopTimeout, DefaultStopTimeout)
	spec, _, err := c.Spec.InboxTable()
	if err != nil {
		return c, err
	}
	c.Spec = spec
	switch {
	case c.Shards < 1 || c.Shards > MaxShards:
		return c, fmt.Errorf("acker: Config.Shards %d out of range [1, %d]", c.Shards, MaxShards)
	case c.RingSize < 2 || c.RingSize&(c.RingSize-1) != 0 || c.RingSize > MaxRing:
		return c, fmt.Errorf("acker: Config.RingSize %d is not a power of two in [2, %d] (%s a ring, %s for %d shards × %d producers)",
			c.RingSize, MaxRing, bytesize.Of(sat(mul(int64(c.RingSize), msgBytes), ringOverhead)),
			bytesize.Of(ringBytes(c.Shards, c.Producers, c.RingSize, msgBytes)), c.Shards, c.Producers)
	case c.OutcomeRingSize < 2 || c.OutcomeRingSize&(c.OutcomeRingSize-1) != 0 || c.OutcomeRingSize > MaxRing:
		return c, fmt.Errorf("acker: Config.OutcomeRingSize %d is not a power of two in [2, %d] (%s a ring, %s for %d shards × %d receivers)",
			c.OutcomeRingSize, MaxRing, bytesize.Of(sat(mul(int64(c.OutcomeRingSize), outBytes), ringOverhead)),
			bytesize.Of(ringBytes(c.Shards, c.Receivers, c.OutcomeRingSize, outBytes)), c.Shards, c.Receivers)
	case c.Backlog < 1:
		return c, fmt.Errorf("acker: Config.Backlog %d out of range [1, %d] (0: DefaultBacklog %d)", c.Backlog, MaxBacklog, DefaultBacklog)
	case c.Backlog > MaxBacklog:
		return c, fmt.Errorf("acker: Config.Backlog %d out of range [1, %d] (%s per shard and receiver)",
			c.Backlog, MaxBacklog, bytesize.Of(mul(int64(c.Backlog), outBytes)))
	case c.Batch < 1 || c.Batch > c.RingSize:
		return c, fmt.Errorf("acker: Config.Batch %d out of range [1, RingSize %d]", c.Batch, c.RingSize)
	case c.MaxBytes < 0:
		return c, fmt.Errorf("acker: Config.MaxBytes %d is negative (0: DefaultMaxBytes %d)", c.MaxBytes, int64(DefaultMaxBytes))
	case c.StopTimeout < 0:
		return c, fmt.Errorf("acker: Config.StopTimeout %v is negative (0: DefaultStopTimeout %v)", c.StopTimeout, DefaultStopTimeout)
	}
	c.Shard.Owners = c.Producers // each producer owns its orphans (Shard, ackcore.Config.Owners)
	if err := c.Shard.Validate(); err != nil {
		return c, fmt.Errorf("acker: Config.Shard: %w", err)
	}
	if f := c.footprint(); f.Total() > c.MaxBytes {
		return c, fmt.Errorf("acker: %d shards × MaxPending %d, %d producers × RingSize %d, %d receivers × OutcomeRingSize %d and Backlog %d "+
			"may hold %s (tables %s, rings %s, outcome rings %s, held outcomes %s), over MaxBytes %s",
			c.Shards, c.Shard.MaxPending, c.Producers, c.RingSize, c.Receivers, c.OutcomeRingSize, c.Backlog,
			bytesize.Of(f.Total()), bytesize.Of(f.Tables), bytesize.Of(f.Rings), bytesize.Of(f.OutcomeRings), bytesize.Of(f.Held), bytesize.Of(c.MaxBytes))
	}
	return c, nil
}

// footprint computes the budget of a checked configuration (saturating:
// no product overflows).
func (c *Config) footprint() Footprint {
	s, p, r := int64(c.Shards), int64(c.Producers), int64(c.Receivers)
	mp := int64(c.Shard.MaxPending)
	perShardHeld := sat(sat(
		mul(r, int64(c.Backlog)+routeChunk+int64(c.Batch)+2*chunkLen), // per receiver: Backlog, one route's worth, partial chunks
		2*mp), // the roots a held-back receiver's tasks had pending; Stop's report of all pending
		mul(p, int64(c.RingSize)+1)) // INITs staged before their producer saw the hold-back
	return Footprint{
		Tables:       mul(s, sat(c.Shard.Bytes(), 8*p)), // and the per-producer refusals each executor publishes
		Rings:        ringBytes(c.Shards, c.Producers, c.RingSize, msgBytes),
		OutcomeRings: ringBytes(c.Shards, c.Receivers, c.OutcomeRingSize, outBytes),
		Held: sat(mul(s, sat(mul(perShardHeld, outBytes), mul(r, pairBytes))),
			mul(s, mul(freeChunks*chunkLen, outBytes))),
		Receivers: mul(r, runBatch*outBytes+ringOverhead),
	}
}

// ringBytes is what n × m rings of size elements of elem bytes take.
func ringBytes(n, m, size int, elem int64) int64 {
	return mul(mul(int64(n), int64(m)), sat(mul(int64(size), elem), ringOverhead))
}

// mul is a*b for non-negative a, b, saturating at MaxInt64.
func mul(a, b int64) int64 {
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	if hi != 0 || lo > 1<<63-1 {
		return 1<<63 - 1
	}
	return int64(lo)
}

// sat is a+b for non-negative a, b, saturating at MaxInt64.
func sat(a, b int64) int64 {
	if s := a + b; s >= a {
		return s
	}
	return 1<<63 - 1
}
