package main

import (
	"os"
	"testing"
	"time"

	"github.com/kubevents/kubevents/internal/buildinfo/buildinfotest"
)

// TestVersionFlag: plegbench --version prints its name and this build's
// version (internal/buildinfo), and runs nothing.
func TestVersionFlag(t *testing.T) {
	buildinfotest.CheckVersionFlag(t, newCommand(), "plegbench")
}

// TestProcCPU: a process's CPU from /proc grows with the work it does,
// agrees with getrusage's for this process within /proc's resolution,
// and is 0 for no process.
func TestProcCPU(t *testing.T) {
	if procCPU(0) != 0 {
		t.Error("procCPU(0) is not 0")
	}
	pid := os.Getpid()
	before := procCPU(pid)
	for start := cpu(); cpu()-start < 300*time.Millisecond; {
	}
	after := procCPU(pid)
	if d := after - before; d < 200*time.Millisecond {
		t.Errorf("300 ms of CPU read as %v in /proc", d)
	}
	if d := cpu() - procCPU(pid); d < -50*time.Millisecond || d > 50*time.Millisecond {
		t.Errorf("/proc says %v, getrusage %v", procCPU(pid), cpu())
	}
}
