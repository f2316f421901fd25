//go:build !unix

package doctest

import "os/exec"

// setProcessGroup leaves the command as it is where there are no process
// groups: background jobs outlive the block.
func setProcessGroup(*exec.Cmd) func(pid int) { return func(int) {} }
