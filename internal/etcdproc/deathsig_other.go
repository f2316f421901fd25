//go:build !linux

package etcdproc

import "os/exec"

// setDeathSignal does nothing where the kernel cannot kill a child with
// its parent; Start's cleanup kills the members.
func setDeathSignal(*exec.Cmd) {}
