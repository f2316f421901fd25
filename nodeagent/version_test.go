package nodeagent

import (
	"bytes"
	"io"
	"testing"

	"github.com/kubevents/kubevents/internal/buildinfo"
)

// TestVersionFlag: nodeagent --version prints its name and this build's
// version (internal/buildinfo), and runs nothing.
func TestVersionFlag(t *testing.T) {
	var out bytes.Buffer
	cmd := NewCommand(io.Discard)
	cmd.SetOut(&out)
	cmd.SetArgs([]string{"--version"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	if want := "nodeagent " + buildinfo.String(buildinfo.Get()) + "\n"; out.String() != want {
		t.Errorf("nodeagent --version printed %q, want %q", out.String(), want)
	}
}
