package main

import (
	"testing"

	"github.com/kubevents/kubevents/internal/buildinfo/buildinfotest"
)

// TestVersionFlag: eventsd --version prints its name and this build's
// version (internal/buildinfo), and runs nothing.
func TestVersionFlag(t *testing.T) {
	buildinfotest.CheckVersionFlag(t, newCommand(), "eventsd")
}
