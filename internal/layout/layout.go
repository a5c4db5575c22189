// Package layout holds the cache-line size the project pads to, a check
// for the tests that hold padded structs to it, and arrays on lines of
// their own.
//
// # Layout
//
// One constant and three functions: Apart, Own and OwnBytes.
//
// # Concurrency
//
// Padding exists for concurrency: two fields written by different threads
// on one 64-byte line make every write of one a miss for the other (false
// sharing). A struct padded for it keeps each group of fields that one
// thread writes on lines of its own; Apart checks that the compiler laid
// it out so. A small heap array is padded by allocating it so (Own).
//
// # Invariants
//
// CacheLine is 64: the coherence unit of x86-64 and of most arm64 cores
// (some arm64 parts fetch 128-byte pairs; the padding is then half as
// effective, never wrong).
package layout

import (
	"fmt"
	"unsafe"
)

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

// Own returns n zeroed Ts on cache lines of their own: the slice starts a
// line (when the size of T lets some element of a fresh array start one,
// as every size dividing CacheLine, or a multiple of 8, does), and the
// rest of its last line is unused, so that no other allocation, written
// by another thread, shares a line with it. A small array of counters one
// goroutine writes in its hot loop needs this: the allocator packs tiny
// objects together.
func Own[T any](n int) []T {
	buf := make([]T, ownLen[T](n))
	pad := len(buf) - CacheLine - n
	for k := 0; k < CacheLine; k++ {
		if uintptr(unsafe.Pointer(&buf[k]))%CacheLine == 0 {
			return buf[k : k+n : k+n]
		}
	}
	return buf[pad : pad+n : pad+n]
}

// OwnBytes is the memory Own[T](n) allocates.
func OwnBytes[T any](n int) int {
	var z T
	return ownLen[T](n) * int(unsafe.Sizeof(z))
}

// ownLen is the length of Own's array: room to reach a line's start, n,
// and a line's worth after.
func ownLen[T any](n int) int {
	var z T
	size := max(int(unsafe.Sizeof(z)), 1)
	return CacheLine + n + (CacheLine+size-1)/size
}
