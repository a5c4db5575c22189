// Package jstest starts a NATS server with JetStream inside the process,
// on loopback, for tests and for the examples that run with an embedded
// server by default: nats-server itself, embedded. Clients reach it over
// TCP on 127.0.0.1 exactly as they reach a remote server: nothing is
// mocked, and a program that runs against it runs unchanged against a real
// server given its URL.
//
// It is a test helper in the sense of net/http/httptest: production code
// never imports it, and it pulls in nats-server only for the packages
// that do. It lives under source/jetstream so that nats-server is a
// dependency of the JetStream source's tree alone (package
// source/kafka/kafkatest is the Kafka counterpart).
//
// # Layout
//
// A Server is a nats-server listening on 127.0.0.1 at a port the system
// picks, with JetStream's file store in the directory the caller gives (a
// test's t.TempDir()); URL is its client URL, and Connect connects a
// client to it and returns a JetStream handle. It listens on no other
// address: the monitoring port, clustering, routes and signal handlers
// stay off.
//
// # Concurrency
//
// Start returns once the server accepts connections (it runs on its own
// goroutines). URL, Connect and Server may be called from any goroutine;
// Close may be called once, from any goroutine, after the clients are done
// with the server (in a test, with t.Cleanup), and waits until it has
// stopped.
//
// # Invariants
//
//   - The listener is on 127.0.0.1; the tests check the address.
//   - A configuration out of range is refused with an error that names the
//     package and the value, before anything starts.
package jstest
