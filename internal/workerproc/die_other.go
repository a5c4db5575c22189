//go:build !linux

package workerproc

import "os/exec"

// dieWithParent has no kernel help outside linux; Start's cleanup still
// kills the worker on every exit path of the test.
func dieWithParent(*exec.Cmd) {}
