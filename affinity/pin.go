package affinity

// Pin locks the calling goroutine to its OS thread and restricts that thread
// to the one CPU cpu, which must be in the thread's current affinity mask.
//
// unpin restores the thread's previous mask and undoes the lock; call it on
// the same goroutine, once (later calls do nothing). If the previous mask
// cannot be restored, unpin leaves the goroutine locked, so that the narrowed
// thread is discarded when the goroutine exits instead of returning to the
// Go scheduler's pool.
//
// unpin is never nil: on error it does nothing, and the goroutine is left as
// it was found. Only Linux pins: elsewhere Pin returns an error wrapping
// errors.ErrUnsupported.
func Pin(cpu int) (unpin func(), err error) { return pinOS(cpu) }

// CurrentCPU returns the CPU the calling thread is running on. Unless the
// thread is pinned the answer may be stale by the time it is used. It makes
// the getcpu system call (x/sys has no portable wrapper for it), about a
// hundred nanoseconds. Only Linux answers: elsewhere CurrentCPU returns an
// error wrapping errors.ErrUnsupported.
func CurrentCPU() (int, error) { return currentCPUOS() }
