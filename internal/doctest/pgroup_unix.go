//go:build unix

package doctest

import (
	"os/exec"
	"syscall"
)

// setProcessGroup puts the block's bash in a process group of its own,
// killed whole when the context ends, and returns how to kill the group
// after bash exits (its background jobs).
func setProcessGroup(cmd *exec.Cmd) func(pid int) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	return func(pid int) { _ = syscall.Kill(-pid, syscall.SIGKILL) }
}
