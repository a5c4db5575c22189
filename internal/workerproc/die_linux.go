package workerproc

import (
	"os/exec"
	"syscall"
)

// dieWithParent asks the kernel to kill the worker when the test process
// exits.
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
