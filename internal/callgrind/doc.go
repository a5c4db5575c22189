// Package callgrind lets a benchmark switch valgrind's callgrind
// instruction counting on and off around exactly the code it measures, so
// that a CI job can count instructions per message deterministically
// (.ci/callgrind): repeated runs agree within 0.1%, where timings on a
// shared VM move by tens of percent. Counting must start switched off
// (--collect-atstart=no); --toggle-collect=FUNC undercounts Go code at
// random (goroutine stack switches), and Go's preemption signal and
// RDTSCP need GODEBUG=asyncpreemptoff=1,cpu.rdtscp=off under valgrind.
//
// Toggle issues valgrind's CALLGRIND_TOGGLE_COLLECT client request: the
// magic no-op instruction sequence of valgrind.h (four rotates of RDI by
// 3, 13, 61 and 51 bits, 128 in all, then XCHG RBX,RBX) with RAX pointing
// at {request, 0, 0, 0, 0, 0}. Run natively it changes nothing and costs a
// few cycles; under callgrind started with --collect-atstart=no it flips
// collection. Other architectures get a no-op.
package callgrind
