// Package layout holds the cache-line size the project pads to, and a
// check for the tests that hold padded structs to it.
//
// # Layout
//
// One constant and one function.
//
// # Concurrency
//
// Padding exists for concurrency: two fields written by different threads
// on one 64-byte line make every write of one a miss for the other (false
// sharing). A struct padded for it keeps each group of fields that one
// thread writes on lines of its own; Apart checks that the compiler laid
// it out so.
//
// # Invariants
//
// CacheLine is 64: the coherence unit of x86-64 and of most arm64 cores
// (some arm64 parts fetch 128-byte pairs; the padding is then half as
// effective, never wrong).
package layout

import "fmt"

// CacheLine is the size, in bytes, the project pads hot structs to.
const CacheLine = 64

// Apart returns an error unless the byte offsets offs, in increasing
// order, are each in a different cache line from the one before, counting
// from a struct that starts on a line (every padded struct is allocated
// line-aligned or only ever read through its own line). Use it with
// unsafe.Offsetof of the first field of each group that one thread
// writes, and unsafe.Sizeof of the struct as the last offset.
func Apart(name string, offs ...uintptr) error {
	for i := 1; i < len(offs); i++ {
		if offs[i]/CacheLine <= offs[i-1]/CacheLine || offs[i]%CacheLine != 0 {
			return fmt.Errorf("%s: offset %d (group %d) does not start a cache line after offset %d; the padding no longer keeps the groups apart", name, offs[i], i, offs[i-1])
		}
	}
	return nil
}
