package ackcore

import (
	"cmp"
	"fmt"
	"time"

	"github.com/xorack/xorack/internal/bytesize"
	"github.com/xorack/xorack/internal/timerwheel"
)

// Defaults: the timeout as in Apache Storm (TOPOLOGY_MESSAGE_TIMEOUT_SECS
// = 30), the wheel's design tick, and one owner (every message from one
// sender).
const (
	DefaultTimeout = 30 * time.Second
	DefaultTick    = time.Millisecond
	DefaultOwners  = 1
)

// Config configures a Shard.
type Config struct {
	// MaxPending bounds the entries pending at once, with or without INIT
	// (rule 10 of docs/semantics.md). Required. The table is allocated for
	// it up front.
	MaxPending int
	// Timeout is the default per-root timeout; 0 means DefaultTimeout.
	Timeout time.Duration
	// Tick is the timer resolution; 0 means DefaultTick.
	Tick time.Duration
	// Clock is the time source; nil means NewMonotonicClock().
	Clock Clock
	// MaxBytes is the memory budget: NewShard refuses a configuration whose
	// worst case (Bytes) exceeds it, before allocating anything. 0 means
	// DefaultMaxBytes.
	MaxBytes int64
	// ProgressTimeout makes a root's timeout count from its last progress
	// (its INIT or any ACK of it) instead of from its INIT, so that a tree
	// that is making progress behind a slow bolt does not time out, while
	// one with a tuple stuck still times out one timeout after its last
	// ACK. Progress keeps a root alive for at most ProgressCap after its
	// INIT. It costs one 32-bit store per ACK and 4 bytes a slot (see
	// progress.go); off by default.
	ProgressTimeout bool
	// ProgressCap is the longest progress keeps a root alive after its
	// INIT; 0 means DefaultProgressCap times Timeout (Storm's and the
	// engine's RESET cap), at most MaxTimeout, rounded down to a whole
	// tick. Only with ProgressTimeout.
	ProgressCap time.Duration
	// Owners is the number of senders the shard tells apart (owners.go):
	// the embedder's producers, named per batch by SetOwner. 0 means
	// DefaultOwners; at most MaxOwners.
	Owners int
	// OrphanShare is the most orphans (entries made by an ACK, FAIL or
	// RESET for a root with no entry) one owner may have in the table; the
	// owner's next such message is refused (Stats.OrphansRefused). 0, the
	// default, means no bound but the table's (SetOrphanShare changes it).
	OrphanShare int
	// Seed fixes the table's hash keys, for reproducible tests and
	// benchmarks. 0, the default, draws secret keys from crypto/rand: keep
	// it so wherever root ids may come from outside, since roots chosen
	// with the keys known can all share one home slot (see hash.go).
	Seed uint64
}

// MaxPendingLimit is the largest MaxPending a shard accepts: near-wheel
// timer handles (at most one per entry) are 32-bit. The memory budget
// (Config.MaxBytes) is usually the tighter limit.
const MaxPendingLimit = timerwheel.MaxCapacity / maxLoadDen * maxLoadNum

// MinTick is the finest Tick a shard accepts: the longest timeout,
// MaxTimeout, must stay within the timer wheel's reach (MaxDelay ticks),
// and a deadline stored as a 32-bit tick must be recovered exactly.
const MinTick = 100 * time.Microsecond

// DefaultMaxBytes is the memory budget of a shard whose Config.MaxBytes is
// 0: 1 GiB, enough for MaxPending 6.37 million at the worst case
// Config.Bytes counts (168.5 bytes a root; acker's TestDefaultMaxBytesDoc
// recomputes both figures); on the common paths, about 34 bytes a root
// (Bytes), such a shard holds some 220 MB.
const DefaultMaxBytes = 1 << 30

// Validate checks c as NewShard does, with an error naming the bad field
// and value. An embedder that builds shards later (the sharded acker)
// calls it first. It allocates nothing: a configuration whose memory
// bound (Bytes) exceeds its budget (MaxBytes) is refused with both
// figures before anything is allocated.
func (c Config) Validate() error {
	_, err := c.validate()
	return err
}

// validate is the one check of a Config: it fills every zero field that
// has a default (Timeout, Tick, MaxBytes, Owners, ProgressCap with
// ProgressTimeout, Clock), checks every field, and returns the filled
// copy (which validates to itself) or an error naming the field and the
// value. Seed 0 and OrphanShare 0 keep their meaning (keys drawn by
// NewShard; no share).
func (c Config) validate() (Config, error) {
	if c.MaxPending <= 0 || c.MaxPending > MaxPendingLimit {
		return c, fmt.Errorf("ackcore: Config.MaxPending %d out of range [1, %d]", c.MaxPending, MaxPendingLimit)
	}
	if c.Timeout < 0 || c.Timeout > MaxTimeout {
		return c, fmt.Errorf("ackcore: Config.Timeout %v out of range [0, %v] (0: DefaultTimeout %v)", c.Timeout, MaxTimeout, DefaultTimeout)
	}
	if c.Tick < 0 || c.Tick > time.Second {
		return c, fmt.Errorf("ackcore: Config.Tick %v out of range [0, 1s] (0: DefaultTick %v)", c.Tick, DefaultTick)
	}
	if c.Tick > 0 && c.Tick < MinTick {
		return c, fmt.Errorf("ackcore: Config.Tick %v below MinTick %v", c.Tick, MinTick)
	}
	tickNote := ""
	if c.Tick == 0 {
		c.Tick, tickNote = DefaultTick, ", the default"
	}
	c.Timeout = cmp.Or(c.Timeout, DefaultTimeout)
	if c.Timeout%c.Tick != 0 {
		return c, fmt.Errorf("ackcore: Config.Timeout %v is not a whole number of ticks (Tick %v%s)", c.Timeout, c.Tick, tickNote)
	}
	if c.Owners < 0 || c.Owners > MaxOwners {
		return c, fmt.Errorf("ackcore: Config.Owners %d out of range [0, %d] (0: DefaultOwners %d)", c.Owners, MaxOwners, DefaultOwners)
	}
	c.Owners = cmp.Or(c.Owners, DefaultOwners)
	if c.OrphanShare < 0 {
		return c, fmt.Errorf("ackcore: Config.OrphanShare %d is negative (0: no share)", c.OrphanShare)
	}
	if c.MaxBytes < 0 {
		return c, fmt.Errorf("ackcore: Config.MaxBytes %d is negative (0: DefaultMaxBytes %d)", c.MaxBytes, DefaultMaxBytes)
	}
	c.MaxBytes = cmp.Or(c.MaxBytes, DefaultMaxBytes)
	if c.ProgressCap != 0 && !c.ProgressTimeout {
		return c, fmt.Errorf("ackcore: Config.ProgressCap %v without ProgressTimeout", c.ProgressCap)
	}
	if c.ProgressCap < 0 || c.ProgressCap > MaxTimeout {
		return c, fmt.Errorf("ackcore: Config.ProgressCap %v out of range [0, %v]", c.ProgressCap, MaxTimeout)
	}
	if c.ProgressTimeout && c.ProgressCap == 0 {
		c.ProgressCap = min(DefaultProgressCap*c.Timeout, MaxTimeout) / c.Tick * c.Tick
	}
	if c.ProgressCap%c.Tick != 0 {
		return c, fmt.Errorf("ackcore: Config.ProgressCap %v is not a whole number of ticks (Tick %v)", c.ProgressCap, c.Tick)
	}
	if b := c.Bytes(); b > c.MaxBytes {
		return c, fmt.Errorf("ackcore: Config.MaxPending %d needs up to %s, %s of it for the table (allocated up front), over the memory budget MaxBytes %s", c.MaxPending, bytesize.Of(b), bytesize.Of(c.tableBytes()), bytesize.Of(c.MaxBytes))
	}
	if c.Clock == nil {
		c.Clock = NewMonotonicClock()
	}
	return c, nil
}

// tableBytes is the slots and control words NewShard allocates up front
// for c.
func (c *Config) tableBytes() int64 {
	return int64(tableSlots(c.MaxPending)+padSlots)*entryBytes + int64(tableGroups(c.MaxPending)+1)*groupBytes
}

// Bytes is the most memory a shard with configuration c can hold, checked
// against MaxBytes before anything is allocated: the table (24 bytes a
// slot and 16 a group of fifteen, 4/3 slots per pending root, 10/7 up
// to 16,384 roots, allocated up front) and the ext
// array (2 bytes a slot); for every entry it may hold (MaxPending and the
// FAIL reserve), at worst, a near-wheel timer (24 bytes), two due-list
// records (8 bytes each, 9 with their chunk), a side-table record (24
// bytes, 72 at the table's lowest load) and two places in the orphan FIFO
// (8 bytes each, orphans.go); the FAIL filter; 12 bytes per owner, on
// lines of their own (owners.go); and 64 KiB for
// the fixed parts (wheel sentinels, due-list buckets, spare chunks,
// ackRun's look-ahead). On
// the common paths (default or in-slot timing, deadlines far away) a shard
// holds about 34 bytes per pending root, 37 with per-root timeouts or
// RESETs; TableBytes says what it holds.
func (c *Config) Bytes() int64 {
	entries := int64(c.MaxPending + failReserveFor(c.MaxPending))
	slots := int64(tableSlots(c.MaxPending))
	const perEntry = timerwheel.NodeBytes + 8 + 4 + 2*9 + 3*sideRecBytes + 2*8
	const fixed = 64 << 10
	b := c.tableBytes() + slots*2 + entries*perEntry + int64(filterBits(c.MaxPending))/4 + ownerBytes(c.Owners) + fixed
	if c.ProgressTimeout {
		b += slots * 4 // progress.go
	}
	return b
}
