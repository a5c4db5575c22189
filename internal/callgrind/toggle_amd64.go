package callgrind

// Toggle flips callgrind's instruction collection (a no-op natively).
func Toggle()
