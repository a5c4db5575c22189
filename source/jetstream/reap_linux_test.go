package jetstream

import (
	"os/exec"
	"syscall"
)

// dieWithTest asks the kernel to kill the worker when the test process
// exits, however it exits (a panic, a timeout, a kill): the cleanup in
// reapWorker does not run then.
func dieWithTest(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
