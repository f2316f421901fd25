//go:build !unix

package doctest

import (
	"os"
	"os/exec"
)

// setProcessGroup leaves the command as it is where there are no process
// groups: background jobs outlive the block.
func setProcessGroup(*exec.Cmd) func(pid int) { return func(int) {} }

// terminate kills the process where there are no process groups.
func terminate(pid int) {
	if p, err := os.FindProcess(pid); err == nil {
		_ = p.Kill()
	}
}
