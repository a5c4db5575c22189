// Package netio is xorack's acker over the network: a wire protocol, a
// server that puts a sharded acker.Acker behind TCP (cmd/ackerd runs it),
// and a client that is an acker.Port, so an engine uses a remote acker
// exactly as it uses the in-process one.
//
//	srv, _ := netio.NewServer(netio.ServerConfig{Secret: secret, Shards: 2,
//		Shard: ackcore.Config{MaxPending: 1 << 20}})
//	ln, _ := net.Listen("tcp", "127.0.0.1:7070")
//	go srv.Serve(ln)
//
//	cfg := netio.ClientConfig{Hosts: []string{"10.0.0.1:7070", "10.0.0.2:7070"}, Secret: secret}
//	port, _ := cfg.Port(acker.Spec{Producers: 4, Tasks: 8}) // an acker.Port
//	port.Sender(0).Send(msg); port.Sender(0).Flush()
//	outs = port.Inbox(3).Poll(outs[:0])
//	port.Stop()
//
// # What is public, and why
//
// An embedder needs two things from this package: a server to put an
// acker behind TCP, and a client that is an acker.Port. So the public
// surface is ServerConfig and Server (NewServer, Serve, Shutdown, Close,
// and what an operator reads: Stats, Conns, Shards, ShardStats, Backlog,
// OldestPending, TaskOwner, Accepting, and the fairness figures Share,
// OrphanShare and ResetShare with the memory bound ConnBytes, which
// docs/semantics.md states its rules in), ClientConfig and Client (Dial
// or ClientConfig.Port; Sender and Inbox, the acker.Port's handles, with
// no concrete twins; Stats, Hosts, OldestPending, Stop), the errors a
// caller tells apart (ErrServerClosed, ConnectError, HostError), the
// stats types those return, each config's Validate, and the Default*
// constants every zero field of a config takes (DefaultIdle for the
// server's executors). The wire format is documented below for a peer
// written in another language; its codec is not public: a Go program
// speaks it through Client and Server.
//
// # Wire format
//
// Everything is little-endian. A connection carries frames: an 8-byte
// header, then a body whose size the header's length fixes.
//
//	0          4         5        6          8
//	+----------+---------+--------+----------+------------ ... ---+
//	| length   | version | type   | reserved | body               |
//	| u32      | u8 = 1  | u8     | u16 = 0  | length-8 bytes     |
//	+----------+---------+--------+----------+------------ ... ---+
//
// offLength, offVersion, offType, offReserved and headerSize name these
// offsets. length counts the whole frame. A reader checks it against its
// limit (handshakeMaxFrame before authentication, MaxFrame after) as soon
// as the first 4 bytes are in, before it allocates or reads further: an
// oversized prefix is refused with "netio: frame length 9437184 exceeds
// limit 1048576" and the connection closed. Every frame carries the
// version; a peer speaking another one is refused at its first frame.
//
// Types: challenge (1), hello (2), welcome (3), msgs (4), outcomes (5),
// heartbeat (6), close (7).
//
// msgs (client to server): a batch of 24-byte message records, as many as
// the body holds (it must hold a whole number):
//
//	0        8        16             20           24
//	+--------+--------+--------------+------------+
//	| root   | val    | kind<<24 |   | timeout ms |
//	| u64    | u64    | task (u32)   | u32        |
//	+--------+--------+--------------+------------+
//
// (offMsgRoot, offMsgVal, offMsgKind, offMsgTimeout, msgSize.) kind is
// ackcore.Kind (INIT 1, ACK 2, FAIL 3, RESET 4), task the topology-wide
// spout task of an INIT (0 on other kinds), timeout the root's own
// timeout (0: the server's default). A FAIL's val, when not 0, is the
// failed tuple's ack val: the tree's late ACKs then empty a drain
// (docs/semantics.md, rule 3), which counts against the sending
// connection's orphan share like any orphan it makes. A record that is not a valid
// message (root 0, unknown kind, task past ackcore.MaxTask, a task on a
// non-INIT, a timeout past ackcore.MaxTimeout) is a protocol error.
//
// outcomes (server to client): 24-byte outcome records.
//
//	0        8             16       20     21       22      24
//	+--------+-------------+--------+------+--------+-------+
//	| root   | latency ns  | task   | kind | reason | 0     |
//	| u64    | i64         | u32    | u8   | u8     | u16   |
//	+--------+-------------+--------+------+--------+-------+
//
// (offOutRoot, offOutLatency, offOutTask, offOutKind, offOutReason,
// offOutPad, outcomeSize.) kind is ackcore.OutcomeKind, reason
// ackcore.Reason; the pad must be zero.
//
// Handshake. The server speaks first with a challenge (body 40 bytes:
// nonce [32] | max frame u32 | tasks u32); the client answers with a
// hello:
//
//	0          32          40          44          48
//	+----------+-----------+-----------+-----------+--------------------+
//	| mac [32] | client id | max frame | ranges n  | n x (first, count) |
//	|          | u64       | u32       | u32       | u32, u32           |
//	+----------+-----------+-----------+-----------+--------------------+
//
// where mac = HMAC-SHA256(secret, "xorack-netio-v1" || nonce || hello body
// after the mac). The secret never crosses the wire, a hello is good for
// one connection only, and the task ranges it claims are authenticated.
// The server compares MACs in constant time (hmac.Equal). It answers with
// a welcome (body 24 bytes: server id u64 | heartbeat ms u32 | idle ms u32
// | 0 u64) or with a close frame and closes. The server id is random per
// process, so a client can tell a restart.
//
// heartbeat: an empty body, sent by either side when it has written
// nothing for a heartbeat interval (a third of the idle timeout). Each
// side gives a connection up when nothing at all arrived within the idle
// timeout.
//
// close (either way): code u16 | reason length u16 | reason (at most
// maxReason bytes), then the sender closes. Codes: closeNormal,
// closeShutdown, closeAuth, closeProtocol, closeTaskOwned, closeSlow,
// closeReplaced, closeIdle, closeOverloaded.
//
// testdata/ holds a golden vector of every frame type (hex, the header on
// the first line, then a record a line); TestGolden checks both
// directions.
//
// # Layout
//
// Server. Each accepted connection joins the handshake budget (a list of
// at most MaxHandshakes connections, oldest first; a new one that finds
// it full drops the oldest, which says closeOverloaded) and its goroutine
// runs the handshake with HandshakeTimeout. Only an authenticated
// connection takes one of MaxConns producer slots (claim; none free:
// closeOverloaded); a slot is one acker producer (SPSC rings into every
// shard). The goroutine then reads the socket into one reused buffer (frameReader: reads of
// 256 KiB, or MaxFrame + 64 KiB where that is less; 64 KiB in the handshake) and parses frames in place; it decodes each msgs frame (one
// pass, fields straight to their slots) and checks that every INIT names
// a task this connection owns: straight into its acker producer's span of
// the ring when the acker has one shard and the span has room for the
// whole frame (acker.Producer.Room), the frame then staged where it lies
// (Staged) unless it holds RESETs or INITs near a bound below, which take
// it, as every other frame, through a reused []ackcore.Msg and the
// producer's SendBatch; it flushes the producer when the next
// frame is not wholly buffered, before a read may block (one publish per
// shard per read batch), and counts the INITs it took against
// MaxConnPending and the connection's fair share once per read batch,
// counting exactly only near either: past MaxConnPending it waits for
// room (backpressure, looking at the socket's state every 100 ms: a
// peer gone is seen though nothing is read), past the connection's
// allocation of the table (share.go: its base share, Share, with what it
// draws from the one pool of room no connection is allocated, which
// holds the reserve ShareSlack; the allocations never sum past the
// table), against the connection's held count, which the router lowers
// per batch, it answers the INITs past it Failed{full} itself. A frame with RESETs charges them to the connection's and the
// server's RESET windows (charges: nine buckets of an eighth of
// MaxRootTimeout) and drops those past ResetShare; the decoder refuses a
// timeout past MaxRootTimeout. The acker's outcomes come to one
// router goroutine, which looks each task's owner up (a flat array of
// atomic pointers indexed by task), encodes the outcomes straight into
// that connection's outbound buffer, one lock per connection per batch,
// and wakes its writer goroutine if it waits; the writer swaps the buffer
// out and writes it with one write, having first yielded its processor
// (up to outcomeYields times, 8) while the buffer held less than
// coalesceBytes (32 KiB), so that the router adds what it has to the
// same write. The router grows a connection's
// buffer itself, to at most outBound bytes, past which the connection is
// closed as slow. A close for cause (replaced, slow, overloaded) has a
// short write deadline (closeWriteTimeout); a write that timed out is
// followed by the rest of the frame it stopped in and the close frame;
// the writer then ends its side (CloseWrite) and the reader discards what
// still comes for as long (linger), so that closing does not reset the
// connection and take the close frame with it.
//
// Client. A Sender stages messages per host, encoding each straight into
// the frame it builds for that host: each root goes to the host its keyed
// rendezvous hash picks among the hosts up (the highest
// mix(mix(root^key)^hash(address)) wins), so a lost host's roots, and
// only they, move to the others. With one host up, SendBatch stages runs
// of messages at once (one check of the client's state and one take of
// root slots per run). At FrameMsgs messages or on Flush, the staged
// frame is copied into the host's outbound buffer and its INITs appended
// to the host's queue, in one step under the host's lock, and the writer
// woken if it waits. One writer goroutine per connection takes the whole
// buffer and queue at once, registers the queued INITs in the host's
// pending table (root -> local task, INIT count, send time: a flat
// open-addressed table, pendTable, its probes for a turn's roots issued
// together), and only then writes the bytes, with one write (yielding
// first, as the server's writer does, up to coalesceYields times, 3,
// while there are less than coalesceBytes: woken per frame, it wrote one
// frame a write). One
// reader goroutine parses outcome frames in place, takes each root out of the
// pending table (one lock per frame) and delivers what it resolved to
// the inboxes when the next frame is not wholly buffered: one inbox lock
// per read batch, and a wake-up only for a consumer that waits. A host
// manager goroutine dials, handshakes, serves, and when the connection
// ends marks the host down, fails every root queued or pending on it
// with ReasonLost at once, and reconnects with exponential backoff and
// jitter.
//
// # Files
//
// The package's files, one idea each:
//
//   - wire.go: the wire format's layout in one place: frame types, the
//     header, every record's and body's sizes and offsets, close codes,
//     limits; parseFrame and the header encoders.
//   - wirerecords.go: the records codec: msgs and outcomes frames, each
//     encoder beside its decoder.
//   - wirecontrol.go: the control frames' codecs: heartbeat, close and
//     the handshake's bodies (challenge, hello, welcome).
//   - framereader.go: frameReader, frames read in place from a stream.
//   - handshake.go: the server's handshake (challenge, hello, slot,
//     tasks claimed) and the hello's HMAC.
//   - serverconfig.go: ServerConfig, its defaults and checks, and the
//     checks of the fields it shares with ClientConfig (validateLink).
//   - server.go: Server, accept, admission, shutdown, the router.
//   - conn.go: a server connection's life: its state, serve, its slot.
//   - connread.go: a connection's reader: frames to the acker,
//     backpressure, the share applied to INITs.
//   - connwrite.go: a connection's writer: outcomes queued (bounded),
//     the close frame, the writer goroutine.
//   - share.go, closing.go, peer_*.go: the fair shares, a connection's
//     close (code, reason, linger), the peer credential check.
//   - client.go: ClientConfig, Client, Dial, Stats, Stop, the errors.
//   - sender.go: producer, the send handle (Client.Sender).
//   - inbox.go: receiver, the outcome inbox (Client.Inbox), and delivery to it.
//   - host.go: host, one server as the client sees it: its outbound
//     buffer and queue of INITs (enqueue), its pending table (register),
//     and losing it (lose, hangUp).
//   - dial.go: a host's connection manager: dial, TLS, the client's
//     handshake, backoff and reconnection, its rate-limited warnings.
//   - hostio.go: one connection of a host: its reader (read, resolve:
//     outcomes matched with the pending table) and its writer.
//   - route.go: rendezvous routing and the live host list.
//   - pend.go: the pending table of a host's roots in flight.
//   - budget.go: the client's memory budget (ClientConfig.MaxBytes).
//   - clientstats.go, observe.go: counters, their logging and export.
//
// # Concurrency
//
// Server: the connection goroutine owns its frameReader, its decode
// buffer, its refused-INIT buffer, its RESET window and its acker
// producer; the server's mu guards the handshake list and each
// connection's place in it, its dropped flag and its slot (set once, by
// claim), and the owner count, whose share the readers load atomically;
// resetMu guards the server's RESET window; the router owns each connection's
// routing batch; a connection's mu guards its outbound buffer, its
// finished flag and its writer's idle flag; its writer owns the spare
// buffer. pending (roots whose outcome is not yet written) is an atomic
// the reader raises and the writer lowers; a reader waiting for room
// sets roomWait before re-checking it, and the writer signals room only
// when it sees roomWait after lowering pending (a Dekker pair on
// sequentially consistent atomics: no lost wake-up). owner[] is written
// under the server's mu (handshake, release) and read atomically by the
// router and the readers. A connection's slot returns to the pool only
// when both its reader and its writer have exited.
//
// Client: a producer belongs to one goroutine; a receiver has one consumer
// and many putters (the hosts' readers) and guards its queue with a
// mutex, its length also kept in an atomic that Poll reads to skip the
// lock when empty. A host's mu guards its outbound buffer, its queue of
// INITs not yet registered, its up flag, connection generation and the
// writer's idle flag; its pendMu guards the pending table and the
// generation the table belongs to (genP). The writer takes a turn's
// buffer and INITs under mu, registers them under pendMu, and fails them
// itself (Failed{acker lost}) if genP has changed meanwhile: the host was
// lost between the two steps and lose swept the table without them. The
// live host list is an atomic pointer to an immutable slice, replaced
// under the client's liveMu. The roots-in-flight counter is an atomic
// (taken once per staged run); senders waiting for a slot sleep on a
// condition variable. Counters are per sender and per host, on cache
// lines of their own, and summed by Stats.
//
// # Invariants
//
//   - Every root whose INIT a client Send accepted gets exactly one
//     outcome in its inbox: from the server (removed from the pending
//     table by the reader), or Failed{acker lost} when its host is lost,
//     or Failed{stopped} from Stop. lose marks the host down and takes
//     the queue of unregistered INITs under mu, then the table under
//     pendMu: a hand-over either precedes the first step (its INITs are
//     in the queue, the table, or the writer's hands, which fails them)
//     or sees the host down and fails at once. An outcome for a root not
//     in the table (already failed as lost) is dropped and counted as
//     stale; an outcome's root is always registered before its INIT's
//     bytes are written.
//   - Memory is bounded: the client by MaxPending roots in flight (and as
//     many outcomes per inbox, more only for a batch that came at once or
//     for INITs its writer failed, at most MaxPending), QueueBytes per
//     host (twice: the buffer senders fill and the one the writer
//     writes), which Dial adds up with the pending tables, read buffers
//     and staged frames and checks against ClientConfig.MaxBytes before
//     it allocates (budget.go); the server by MaxConns x Server.ConnBytes (a read buffer
//     of MaxFrame and a read chunk, a decoded frame, a frame's refused
//     INITs, the router's batch, two outbound buffers of at most
//     outBound bytes: 11.8 MiB at the defaults; 5.0-5.1 MiB measured for
//     a connection that never reads, against the 7.3 MiB of MaxConnPending
//     16,384) and MaxHandshakes x (a challenge and
//     handshakeMaxFrame read), a connection that exceeds its outcome
//     bound or stalls its socket past WriteTimeout being closed; nothing
//     keeps a closed connection reachable (the router clears its batch
//     of touched connections, not only its length: TestMemoryComesBack).
//   - The table is shared fairly: a connection owning a task has at most
//     Share roots in the acker, and its RESETs within MaxRootTimeout are at
//     most ResetShare (half the table over the connections), the
//     server's at most half the table; no root outlives MaxRootTimeout.
//   - Nothing from a connection reaches the acker before its handshake
//     succeeded; frames after a failed handshake are never read.
//   - The decoders never panic and check every length against what is
//     there before they allocate for it (FuzzDecode); the pending table
//     matches a Go map under any sequence of adds and takes
//     (TestPendTable, FuzzPendTable).
package netio
