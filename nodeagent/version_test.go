package nodeagent

import (
	"io"
	"testing"

	"github.com/kubevents/kubevents/internal/buildinfo/buildinfotest"
)

// TestVersionFlag: nodeagent --version prints its name and this build's
// version (internal/buildinfo), and runs nothing.
func TestVersionFlag(t *testing.T) {
	buildinfotest.CheckVersionFlag(t, NewCommand(io.Discard), "nodeagent")
}
