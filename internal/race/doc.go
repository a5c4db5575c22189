// Package race reports whether the race detector is compiled in, for the
// tests that measure what it changes: allocation counts (the detector
// allocates behind the code) and heap sizes (it shadows memory).
//
// # Layout
//
// One constant, set by the race build tag.
//
// # Concurrency
//
// None.
//
// # Invariants
//
// Enabled is true exactly when the binary was built with -race.
package race
