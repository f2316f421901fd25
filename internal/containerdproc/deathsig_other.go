//go:build !linux

package containerdproc

import "os/exec"

// setDeathSignal does nothing where the kernel cannot kill a child with
// its parent; Stop ends containerd.
func setDeathSignal(*exec.Cmd) {}
