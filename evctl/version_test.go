package evctl

import (
	"bytes"
	"io"
	"testing"

	"github.com/kubevents/kubevents/internal/buildinfo"
)

// TestVersionFlag: evctl --version prints its name and this build's
// version (internal/buildinfo), and runs nothing.
func TestVersionFlag(t *testing.T) {
	var out bytes.Buffer
	cmd := NewCommand(io.Discard, io.Discard)
	cmd.SetOut(&out)
	cmd.SetArgs([]string{"--version"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	if want := "evctl " + buildinfo.String(buildinfo.Get()) + "\n"; out.String() != want {
		t.Errorf("evctl --version printed %q, want %q", out.String(), want)
	}
}
