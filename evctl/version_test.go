package evctl

import (
	"io"
	"testing"

	"github.com/kubevents/kubevents/internal/buildinfo/buildinfotest"
)

// TestVersionFlag: evctl --version prints its name and this build's
// version (internal/buildinfo), and runs nothing.
func TestVersionFlag(t *testing.T) {
	buildinfotest.CheckVersionFlag(t, NewCommand(io.Discard, io.Discard), "evctl")
}
