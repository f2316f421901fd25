//go:build !linux

package kubeapiserver

import "os/exec"

// setDeathSignal does nothing where the kernel cannot kill a child with
// its parent; Cluster.Close kills the processes.
func setDeathSignal(*exec.Cmd) {}
