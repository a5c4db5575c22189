// Package invariants says whether expensive debug checks are compiled in.
//
// Build or test with `-tags invariants` to turn them on. Code guards its
// checks with `if invariants.Enabled { ... }`; with the tag off Enabled is a
// false constant and the compiler removes the guarded block, so release
// builds pay nothing and their hot paths are unchanged.
package invariants
