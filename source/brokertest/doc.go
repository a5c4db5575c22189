// Package brokertest starts real message brokers inside the process, on
// loopback, for tests and for the examples that run with an embedded broker
// by default: a Kafka cluster (franz-go's kfake, which speaks the Kafka
// protocol, consumer groups and offset commits included) and a NATS server
// with JetStream (nats-server itself, embedded). Clients reach them over
// TCP on 127.0.0.1 exactly as they reach a remote broker: nothing is
// mocked, and a program that runs against them runs unchanged against a
// real broker given its address.
//
// It is a test helper in the sense of net/http/httptest: production code
// never imports it, and it pulls in the brokers' code only for the
// packages that do.
//
// # Layout
//
// A Kafka is a kfake.Cluster with its brokers listening on 127.0.0.1 at
// ports the system picks; Addrs lists them. A NATS is a nats-server
// listening on 127.0.0.1 at a port the system picks, with JetStream's file
// store in the directory the caller gives (a test's t.TempDir()); URL is
// its client URL. Neither listens on any other address, and nats-server's
// monitoring port, clustering, routes and signal handlers stay off.
//
// # Concurrency
//
// Each Start function returns once the broker accepts connections (it runs
// on its own goroutines). Addrs, URL and the accessors may be called from
// any goroutine; Close may be called once, from any goroutine, after the
// clients are done with the broker (in a test, with t.Cleanup), and waits
// until the broker has stopped.
//
// # Invariants
//
//   - Every listener is on 127.0.0.1; the tests check the addresses.
//   - A configuration out of range is refused with an error that names the
//     package and the value, before anything starts.
package brokertest
