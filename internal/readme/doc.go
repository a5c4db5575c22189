// Package readme holds the tests that keep the repository's README.md
// (and ackerd's, cmd/ackerd/README.md) true: TestCommands extracts the
// commands that start something (each `go run` in a sh block or an inline
// code span, with the flag variants the same paragraph names) and runs
// each, failing if one errors; TestFront holds the README's front: its
// first command runs the main job (ackbench), its second is the test
// command CI runs, and it fits in 120 lines. The package has no code of its own; it is a
// test with a home.
package readme
