// Package modules holds, in its test, the library module's dependency
// list: what an embedder of ackcore, acker, netio or topology gets in its
// own module graph. The harness (bench, cmd/ackbench), the broker kits
// (source/kafka, source/jetstream) and the examples are modules of their
// own in the repository's workspace (go.work), so their weight — gRPC,
// plotting, a NATS server, a Kafka fake, a progress bar — never reaches
// the library's go.mod.
//
// # Layout
//
// No code: the package is its test.
//
// # Concurrency
//
// None.
//
// # Invariants
//
// The library's go.mod requires, directly, only the modules in the test's
// list, and none of the modules that the workspace's other modules exist
// to keep out.
package modules
