//go:build unix

package doctest

import (
	"os/exec"
	"syscall"
)

// setProcessGroup puts the block's bash in a process group of its own
// and returns how to kill the whole group (bash and its background jobs).
func setProcessGroup(cmd *exec.Cmd) func(pid int) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return func(pid int) { _ = syscall.Kill(-pid, syscall.SIGKILL) }
}

// terminate sends SIGTERM to the process group of pid.
func terminate(pid int) { _ = syscall.Kill(-pid, syscall.SIGTERM) }
