package etcdproc

import (
	"os/exec"
	"syscall"
)

// setDeathSignal has the kernel kill cmd when the test process dies, so
// that a test binary killed by its timeout leaves no etcd behind.
func setDeathSignal(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
