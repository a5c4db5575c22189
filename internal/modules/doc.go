// Package modules holds, in its tests, what the repository's modules
// promise a project that requires them.
//
// The library module's dependency list: what an embedder of ackcore,
// acker, netio or topology gets in its own module graph. The harness
// (bench, cmd/ackbench), the broker kits (source/kafka, source/jetstream)
// and the examples are modules of their own in the repository's workspace
// (go.work), so their weight — gRPC, plotting, a NATS server, a Kafka
// fake, a progress bar — never reaches the library's go.mod.
//
// Requirable: no go.mod has a replace directive (a dependent ignores
// them). Each submodule requires the library, and the siblings it uses,
// at a pseudo-version of a commit of the repository, which a dependent
// resolves from the published repository; go.work replaces exactly those
// versions by the local directories, so the workspace builds what is
// checked out. A submodule that needs a package the required commit lacks
// requires a later commit of main (`go run ./internal/modproxy -pseudo
// main` prints its version), in its go.mod and in go.work's replace. CI
// builds a module outside the repository against a proxy of the
// repository's own commits (internal/modproxy), with no workspace and no
// network.
//
// go mod tidy ignores the workspace: in a submodule it reads the library
// and the siblings at the versions the submodule requires, from that
// proxy (go run ./internal/modproxy -out DIR, then GOPROXY=file://DIR,...
// and GONOSUMDB=github.com/xorack), as CI's tidy check does. What the
// checkout's sibling needs beyond its required version (cmd/ackbench and
// a dependency bench gained since) is the sibling's to list, not the
// submodule's: the workspace builds with every module's requirements.
//
// # What is public
//
//   - perf and perf/perfbench: public, in the library: hardware counters
//     per operation are as useful in an embedder's benchmarks as in ours,
//     and they cost the library only x/sys and a small perf-event module.
//   - topology/promexport: public, in the library: its one dependency,
//     the Prometheus client, is already the library's for cmd/ackerd's
//     /metrics, so a module of its own would lighten nothing (franz-go
//     splits kprom off because its client has no such dependency).
//   - source/kafka/kafkatest and source/jetstream/jstest: public, in their
//     broker's module: an embedder tests its topology against the same
//     in-process broker our tests and examples use. They are not modules of
//     their own (as franz-go's kfake is) because each broker module already
//     requires the fake for its own tests, and the module graph's pruning
//     keeps the fake out of a dependent's build unless it imports the kit.
//   - internal/...: the repository's own: build information, the README
//     test, this test, the test kits every acker in the repository is held
//     to and the benchmarks' workloads (internal/acktest), the shard's
//     timing wheel (internal/timerwheel), the outcome queue netio's client
//     and the harness share (internal/outq), what the broker sources'
//     process tests share with their worker commands (internal/workerproc),
//     the small helpers the packages' and modules' tests share
//     (internal/testkit, internal/race, internal/invariants), the pieces
//     several packages share below their APIs (the keyed root hash,
//     internal/roothash; the mixing functions, internal/splitmix; the
//     cache-line layout, internal/layout; the heap adapter,
//     internal/sliceheap; byte counts in errors, internal/bytesize; counter
//     structs summed, internal/numfield; callgrind's toggle,
//     internal/callgrind), and the proxy builder, which
//     is a module of its own so that golang.org/x/mod never enters the
//     library's requirements.
//
// # Layout
//
// No code: the package is its tests.
//
// # Concurrency
//
// None.
//
// # Invariants
//
// The library's go.mod requires, directly, only the modules in the test's
// list, and none of the modules that the workspace's other modules exist
// to keep out. No go.mod replaces; every requirement of the repository's
// own modules is a pseudo-version that go.work replaces by its directory.
// Every Go file groups its imports as goimports -local does: the standard
// library, then other modules, then the repository's own packages.
package modules
