package containerdproc

import (
	"os/exec"
	"syscall"
)

// setDeathSignal has the kernel kill cmd when the test process dies, so
// that a test binary killed by its timeout leaves no containerd behind (its shims, in their own sessions, are Stop's to end).
func setDeathSignal(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
