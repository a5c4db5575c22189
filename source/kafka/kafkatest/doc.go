// Package kafkatest starts a Kafka cluster inside the process, on
// loopback, for tests and for the examples that run with an embedded
// broker by default: franz-go's kfake, which speaks the Kafka protocol,
// consumer groups and offset commits included. Clients reach it over TCP
// on 127.0.0.1 exactly as they reach a remote cluster: nothing is mocked,
// and a program that runs against it runs unchanged against a real
// cluster given its brokers' addresses.
//
// It is a test helper in the sense of net/http/httptest: production code
// never imports it, and it pulls in kfake only for the packages that do.
// It lives under source/kafka so that kfake is a dependency of the Kafka
// source's tree alone (package source/jetstream/jstest is the NATS
// counterpart).
//
// # Layout
//
// A Cluster is a kfake.Cluster with its brokers listening on 127.0.0.1 at
// ports the system picks; Addrs lists them, and Cluster returns the
// kfake.Cluster for request hooks and fault injection.
//
// # Concurrency
//
// Start returns once the brokers accept connections (they run on their
// own goroutines). Addrs and Cluster may be called from any goroutine;
// Close may be called once, from any goroutine, after the clients are done
// with the cluster (in a test, with t.Cleanup), and waits until it has
// stopped.
//
// # Invariants
//
//   - Every listener is on 127.0.0.1; the tests check the addresses.
//   - A configuration out of range is refused with an error that names the
//     package and the value, before anything starts.
package kafkatest
