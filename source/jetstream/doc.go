// Package jetstream is a topology spout that reads a NATS JetStream
// durable pull consumer, at least once. JetStream acknowledges each
// message on its own and redelivers what is not acknowledged, so there is
// no offset to commit: the spout turns each root's outcome into the
// message's reply.
//
//	outcome of the root                 reply to the server
//	Completed                           Ack
//	Failed, attempt k < MaxAttempts     Nak with RetryPolicy.Delay(k) (exponential, jittered; never a bare Nak)
//	Failed, attempt k = MaxAttempts     Config.DeadLetter, then Term
//	pending (RESET or not)              InProgress before a third of AckWait passes untouched
//	Failed, Reason Stopped (shutdown)   Nak, at once
//	delivered past MaxAttempts          Config.DeadLetter, then Term, not processed
//
// The attempt is the server's delivery count (the message's NumDelivered):
// a failed attempt goes back to the server with the retry policy's delay
// and comes back as the next delivery, so a failure, a crash, an expired
// AckWait and a hand-back at shutdown all count towards the policy's
// MaxAttempts. The spout is a
// topology.Redeliverer: the engine makes one attempt per delivery (bolts
// see the delivery count as Tuple.Attempt), reports every failed attempt
// to Fail, and neither replays nor calls topology.Config.DeadLetter for
// it; the retry policy (topology.Config.Retry) is applied by the spout,
// with the server doing the waiting.
//
//	b.Spout("sentences", func() topology.Spout {
//		return jetstream.New(jetstream.Config{JetStream: js, Stream: "SENTENCES", Consumer: "wordcount"})
//	}).Tasks(2).Output("pos", "data")
//
// # Layout
//
// A spout holds each message it received and has not answered yet as an
// inflight record: the message, its Position (stream, sequence) and
// delivery count, parsed once on arrival, and the last time the spout
// touched it. The record itself is the root's message id. Held records
// sit on one doubly linked list in the order they were last touched (on
// arrival, and at each InProgress), so keeping them alive walks only the
// ones due. Records fetched and not yet emitted also sit in a hand-off
// queue; the executor takes the whole queue at once, swapping two slices.
//
// The spout holds at most Capacity messages: the topology's
// MaxSpoutPending, or the consumer's MaxAckPending if lower. It asks the
// server for messages only when no request is open, and for at most the
// room left, capacity - held (at most 1024 per request, and at most the
// consumer's MaxRequestBatch), so nothing the server sends waits for room:
// every message received is emitted in the next calls to Next (unless an
// adaptive pending bound, topology.Config.Adaptive, is below Capacity: the
// message then waits, kept alive), and the server never has more than
// Capacity messages of this spout pending. The
// server's MaxAckPending bounds all the spouts of a consumer together;
// give it at least tasks x MaxSpoutPending for each task to fill its own
// bound.
//
// AckWait stays short (DefaultAckWait, 5 s): it is the time a crashed
// pipeline's messages wait before another is given them. A message that
// takes longer, because its tree is long (a bolt RESETs it, or the
// engine's MessageTimeout is longer than AckWait) or because it waits in
// the queue, is kept alive by InProgress: the spout sends one for every
// held message untouched for AckWait/3, checking every AckWait/6, so a
// held message is touched at most AckWait/2 apart. A message the engine
// gives up on (its MessageTimeout, RESETs capped by ResetCap) gets its
// reply at once, and so no message is kept alive past its tree. One held
// for ResetCap + AckWait since it was emitted (or arrived, if not emitted
// yet) is older than any tree can be: the executor has stopped answering
// (stuck in Decode or the dead-letter hook). The spout lets it go
// (Stats.LetGo) and the server redelivers it after AckWait, so a hung
// pipeline does not hold messages forever.
//
// spout.go (about 680 lines) keeps the pull loop, the in-progress
// heartbeats and the ack/nak/term decisions together: they share the
// table of messages in flight.
//
// # Concurrency
//
// Three parties touch a spout.
//
//   - The spout executor's goroutine calls Open, Next, Ack, Fail and
//     Close, one at a time (package topology). It owns local (the queue
//     taken), it sends every final reply (Ack, Nak, Term), and it calls the
//     dead-letter hook and Decode.
//   - The pump, one goroutine per spout started by the first Next and
//     stopped by Close, sends the pull requests, receives their messages
//     from nats.go's channel, parses their metadata, appends them to the
//     queue and the list, and sends InProgress. It is the only writer of
//     the held count's increments and of HeldHigh.
//   - nats.go's goroutines deliver a request's messages into its channel
//     and publish the replies; the spout runs no code on them (no
//     callbacks).
//
// Spout.mu guards the queue, the list and each record's touched time and
// links. The pump sends InProgress while it holds mu; the executor
// unlinks a record under mu before it sends the final reply, so no
// InProgress follows a message's final reply on the connection. The held
// count is atomic: the pump adds a message when it arrives, the executor
// subtracts it when it replies, then pokes the pump (a channel of
// capacity one, never blocking) to ask for more. Stats are atomics, read
// by any goroutine.
//
// # Invariants
//
//   - Every message the spout receives gets exactly one final reply from
//     it: Ack, Nak (with a delay for a failed attempt, without one at
//     shutdown) or Term, unless the connection is lost first (counted in
//     ReplyErrors; the server then redelivers the message after AckWait).
//   - A failed attempt's Nak always carries a delay of at least a
//     millisecond; a bare Nak is sent only at shutdown.
//   - The dead-letter hook runs before the Term, once per message given
//     up, and a message delivered past MaxAttempts is never emitted.
//   - Held messages never exceed Capacity.
//   - While a message is held, it is touched (received, or InProgress
//     sent) at most about AckWait/2 apart, so the server does not
//     redeliver a message whose tree is pending; and for at most
//     ResetCap plus AckWait since it was emitted (or arrived).
//
// A crash (no Close, the connection gone) leaves the messages held
// unanswered; the server redelivers them after AckWait, to this consumer's
// next reader, with their delivery count one higher. So no message is
// lost: each is processed at least once, and a sink that keys its writes
// by Position makes the effect exactly once (docs/semantics.md, "Sources").
package jetstream
