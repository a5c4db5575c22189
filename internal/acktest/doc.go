// Package acktest is the differential test harness every ackcore.Interface is
// held to: it feeds one generated message stream, in random batches and
// under one fake clock, to the acker under test and to the reference model
// (internal/acktest/model), and fails on the first difference in outcomes,
// counters or (where the acker has a checker) invariants.
//
// The harness knows ackers only through a Factory, so the fast shard and
// the baselines run the very same scenarios:
//
//	acktest.Run(t, sc, func(cfg ackcore.Config) (ackcore.Interface, error) {
//		return ackcore.NewShard(cfg)
//	})
//
// It is test support: it imports package testing and belongs in _test.go
// files only. It is internal, with model, treegen and workload beside it:
// the ackers it holds to the model are the repository's own (the shard,
// the harness's baselines), and an embedder tests the acker it embeds,
// not an implementation of ackcore.Interface; the contract they check is
// public in docs/semantics.md.
//
// # Layout
//
// Scenario and Case describe runs (a generated stream, delivery faults,
// batch sizes, clock jumps); Cases are the standard ones; Run executes one,
// RunCases all of them over many seeds as subtests. Beside the harness, the
// message builders (InitMsg, AckMsg, ...) and Tally, the count of a
// stream of outcomes that may only complete or fail for one reason, serve
// the hand-written tests.
//
// # Concurrency
//
// Run drives its acker from the calling goroutine only: it tests the
// single-writer contract of ackcore.Interface. Concurrent ackers need their
// own hammer tests.
//
// # Invariants
//
// What Run holds an acker to, after every Apply and Expire call: the same
// outcomes as the model (as a set per call; latency within one tick) and
// equal counters (an orphan expired or not shows there at once); every 16
// steps and at the end, a passing Verify (when the acker implements
// Verifier); at the end, nothing pending. An acker that keeps FAILs at the
// bound says how many (FailReserver) and the model follows the same rule.
package acktest
