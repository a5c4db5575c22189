//go:build !linux

package jetstream

import "os/exec"

// dieWithTest has no kernel help outside linux; reapWorker's cleanup
// still kills the worker on every exit path of the test.
func dieWithTest(*exec.Cmd) {}
