package kubeapiserver

import (
	"os/exec"
	"syscall"
)

// setDeathSignal has the kernel kill cmd when the test process dies, so
// that a test binary killed by its timeout (or a killed command) leaves no
// etcd or kube-apiserver behind.
func setDeathSignal(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
