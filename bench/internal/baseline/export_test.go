package baseline

import "unsafe"

// Sizes of the unexported per-root types, for TestEntrySizes.
const (
	SizeofEntry      = unsafe.Sizeof(entry{})
	SizeofXentry     = unsafe.Sizeof(xentry{})
	SizeofStormEntry = unsafe.Sizeof(stormEntry{})
	SizeofLimitSlot  = unsafe.Sizeof(limitSlot{})
)
