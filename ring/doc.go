// Package ring moves elements between goroutines through bounded
// single-producer single-consumer rings, and fans several such rings into
// one consumer.
//
// The acker's shards are pinned executors; every core that produces acks
// owns one SPSC ring per shard, and each shard drains its rings with a
// FanIn. A ring costs its producer one compare-and-swap per publish (of
// tail, so that a publish racing Close is either in or refused) and its
// consumer one atomic store per release, and nothing per element, so the
// batch calls (Reserve and Commit, Peek and Release, PushBatch, and
// FanIn's Drain) move a batch for the price of one element. On amd64 both are
// locked instructions (LOCK CMPXCHG, and XCHG for Go's atomic store), tens
// of cycles, which is why a ring publishes once per batch and not once per
// element (BenchmarkRing measures both, batch=64 and batch=1).
//
// # Terms
//
// Elements are numbered from 0 in the order they are pushed; the number of
// an element is its sequence. tail is the count of elements ever published
// and head the count ever released; both only grow (2^64 elements at 10^9
// a second last 584 years, so they do not wrap). The element with sequence
// s lives in slot s & mask of buf. The ring holds tail-head elements.
//
// # Layout
//
// An SPSC is four 64-byte lines (layout.CacheLine; 64 is the coherence unit of
// the amd64 and arm64 cores this project targets). The struct is 256 bytes,
// a multiple of 64, so the allocator places it on a line boundary; a test
// checks that too. Offsets are for 64-bit platforms; TestLayout asserts
// every one of them.
//
//	    0                8               16               24
//	  0 +----------------+----------------+----------------+
//	    | buf: ptr        len              cap             |  line 0: immutable
//	 24 +----------------+----------------+----------------+  after New, read
//	    | mask           | idle.Spins     | idle.Yields    |  by both sides
//	 48 +----------------+-+--------------+----------------+
//	    | cons *parker   |z| pad                           |  z = zeroSlots
//	 64 +================+=+==============+================+
//	    | tail (atomic)  | headCache      | reserved       |  line 1: the
//	 88 +----------------+----------------+----------------+  producer's
//	    | pad to 128                                       |
//	128 +================+================+================+
//	    | head (atomic)  | tailCache      | peeked         |  line 2: the
//	152 +----------------+----------------+----------------+  consumer's
//	    | pad to 192                                       |
//	192 +================+================+================+
//	    | prodPark: flag | ch             | consPark: flag |  line 3: cold,
//	216 +----------------+----------------+----------------+  written on park,
//	    | consPark: ch   | closed | pad to 256             |  wake and Close
//	256 +================+========+=======================+
//
// A parker's flag is 4 bytes followed by 4 bytes of alignment padding;
// closed is 4 bytes. buf points at a separate array of len(buf) elements.
//
// A FanIn is two lines: rings (24 bytes), batch, idle (16) and next at 0,
// which only the consumer touches, and at 64 the shared parker, closed
// and interrupt, which every producer reads after each publish (interrupt
// is written only by Interrupt, and cleared by the consumer that sees it). Its rings point their cons
// field at that parker instead of their own consPark.
//
// # Concurrency
//
// Who writes each field:
//
//   - buf (the slice header), mask, idle, cons, zeroSlots: immutable after
//     New, read by both sides without atomics.
//   - tail: written by the producer only (a compare-and-swap per publish),
//     except for the one atomic OR by which Close seals it (bit 63); read
//     atomically by the consumer when its cached copy runs out, the seal
//     bit masked off. headCache and reserved are producer-private.
//   - head: written by the consumer only; read atomically by the producer
//     when its cached copy runs out. tailCache and peeked are
//     consumer-private.
//   - prodPark.flag: set by the producer when it parks; cleared by the
//     producer or by whichever waker (the consumer after a release, or
//     Close) swaps it first. consPark.flag, or the FanIn's park.flag, the
//     same way round.
//   - closed: set by Close, from any goroutine; read atomically by the
//     blocking calls.
//   - the slots of buf: plain memory, owned by one side at a time, below.
//
// Slot ownership. The slot of sequence s belongs to the producer from the
// moment the consumer's atomic store makes head exceed s-len(buf) (for the
// first lap, from New) until the producer's compare-and-swap makes tail
// exceed s; then it belongs to the consumer until its atomic store makes
// head exceed s; then back to the producer for sequence s+len(buf). The
// writes that pass ownership are: tail in tryPush, Commit and PushBatch
// (compare-and-swap); head in tryPop, Release and popBatch (store). A span from Reserve is a view of
// producer-owned slots and one from Peek of consumer-owned slots; each is
// dead once the matching Commit or Release has run, because the other side
// may use those slots at once.
//
// Memory ordering. All of sync/atomic is sequentially consistent in the Go
// memory model, and an atomic load that observes a store is synchronized
// after it. The producer writes slots with plain stores and then swaps
// tail; a consumer load of tail that sees the new value therefore happens
// after those slot writes, so the consumer's plain reads of them are not
// racy. Symmetrically, the consumer's reads (and clearing) of slots happen
// before its store to head, and the producer writes a slot again only after
// a load of head that sees that store. Each side reloads the other's index
// only when its cached copy (headCache, tailCache) cannot satisfy the
// request, so in steady state a side touches the peer's line once per
// refresh, not once per element. Loads compile to plain moves on amd64;
// the locked writes are the expensive part, so every call publishes at
// most once.
//
// Parking. A side that must wait re-checks the ring Idle.Spins times, then
// Idle.Yields times with runtime.Gosched, then parks: it sets its parker's
// flag, re-checks the ring and closed, and only if both still say wait does
// it receive from the parker's one-slot channel. The peer, after every
// publish or release, loads that flag and, only if it is set, swaps it to 0
// and sends a token if its swap was the one that cleared it. Because the
// flag store precedes the re-check and the index write precedes the flag
// load, and all four are sequentially consistent, either the re-check sees
// the new index or the peer sees the flag: no wake-up is lost. When the
// re-check succeeds the sleeper clears the flag itself; if a waker beat it
// to that, the sleeper takes the token the waker is sending, so the channel
// is empty whenever the flag is set and a send never blocks. The cost to a
// peer that finds nobody parked is one load of a line that is written only
// when somebody parks.
//
// Close seals tail, sets closed, then wakes both parkers the same way, so
// a parked or spinning blocking call sees it. A publish is a
// compare-and-swap of tail, so a producer racing Close either publishes
// before the seal or is told it did not (tryPush and Commit false,
// PushBatch 0): once the consumer has seen closed, what the ring holds is
// all it will ever hold, and no element is left unread without a word to
// its producer. The blocking consumer calls (Pop, peekWait, and the
// FanIn's waits) return false only when the ring is closed and empty,
// after one more look at tail. Producer calls return false as soon as the
// ring is closed. tryPop and the consumer's span calls ignore closed. A
// FanIn seals every ring before it sets its own closed flag.
//
// Clearing slots. If T holds pointers (found with reflect once, in New), the
// consumer clears each slot it releases, so that the ring does not keep the
// targets of up to len(buf) stale pointers alive for the garbage collector.
// If T is pointer-free, as the acker's 32-byte messages are, nothing is
// cleared: a stale value harms no one, and clearing would add a store per
// element to a line the producer is about to write.
//
// # FanIn
//
// A pass visits every ring once, starting at next, taking at most batch
// elements from each, and leaves next at the ring after the last one it
// visited (a pass stops early only when dst is full). So an element that
// reaches the head of its ring is taken within len(rings) passes even if
// every other ring is always full, and with a dst of at least
// len(rings)*batch, within the next pass. TestFanInNoStarvation and
// TestFanInNoStarvationConcurrent check both bounds.
//
// # Invariants
//
//   - len(buf) is a power of two, mask == len(buf)-1, and both never change.
//   - head <= tail <= head+len(buf), with head and tail as loaded by either
//     side at any time.
//   - Producer side: headCache <= head, so tail-headCache <= len(buf) and the
//     free space it computes is never more than the truth. Consumer side:
//     tailCache <= tail, so head <= tailCache and the count it computes is
//     never more than the truth.
//   - A Reserve span lies within [tail, head+len(buf)) and a Peek span within
//     [head, tail), both contiguous in buf (never across its end).
//   - Commit(k) publishes at most what the last Reserve returned; Release(k)
//     releases at most what the last Peek returned.
//   - A parker's channel holds at most one token, and none while its flag is
//     set.
//   - If zeroSlots, a slot the consumer has released holds the zero value
//     until the producer writes it again.
//
// Builds with -tags invariants check the Commit and Release bounds and the
// head/tail distance, and panic on a breach; release builds compile the
// checks away.
//
// # Public surface
//
// The package is public because its Idle is: acker.Config and topology's
// Config take a ring.Idle (DefaultIdle, DefaultSpins, DefaultYields) to
// tune how their goroutines wait. SPSC and FanIn export one call per way
// of moving items, so a program can use a ring alone, as the examples do:
// a producer pushes one (Push), a batch (PushBatch) or a span it fills in
// place (Reserve, ReserveWait, Commit); an SPSC's consumer pops one (Pop)
// or reads a span in place (Peek, Release); a FanIn's drains a pass over
// its rings (Drain, DrainWait, DrainWaitUntil, PopBatchWait) or pops one
// (Pop). The non-blocking one-item twins and the copying batch pop stay
// unexported, kept for the tests' model of the ring. The acker and the
// engine build their rings with NewFanIn, passing the Idle their configs
// tune.
package ring
